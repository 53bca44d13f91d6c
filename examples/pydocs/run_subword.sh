#!/usr/bin/env bash
# The main job on subwords, compared with the byte-level one in bits per byte: install and build as
# run.sh does, train an 8,192-piece SentencePiece model on the corpus, encode it, train
# llama_dp4_subword.yaml on 4 ranks, then evaluate both this run and the byte-level run
# (runs/pydocs-dp4, trained first if absent) on the same validation text with `atoll eval`, and
# print a sample of each. Usage: bash examples/pydocs/run_subword.sh [--set key=value]...
source "$(dirname "$0")/../setup.sh"
atoll=build/bin/atoll
sp=data/pydocs-sp8k
if [[ ! -s $sp/train.bin ]]; then
  $atoll tokenizer train --vocab 8192 --out $sp/tokenizer.model data/pydocs/pydocs.txt
  $atoll data prepare --out $sp --tokenizer $sp/tokenizer.model data/pydocs/pydocs.txt
fi
$atoll launch examples/pydocs/llama_dp4_subword.yaml "$@"
[[ -f runs/pydocs-dp4/checkpoints/LATEST ]] || $atoll launch examples/pydocs/llama_dp4.yaml
echo "== bits per byte on the same validation text (the last 5% of the corpus)"
echo "-- byte-level (runs/pydocs-dp4):"
$atoll eval runs/pydocs-dp4/checkpoints --data data/pydocs/val.bin
echo "-- subword, 8,192 pieces (runs/pydocs-dp4-sp8k):"
$atoll eval runs/pydocs-dp4-sp8k/checkpoints --data $sp/val.bin
for run in pydocs-dp4 pydocs-dp4-sp8k; do
  echo "== atoll sample runs/$run/checkpoints --prompt 'The built-in function ' --temperature 0.8 --top-k 40 --max-tokens 60"
  $atoll sample runs/$run/checkpoints --prompt "The built-in function " --temperature 0.8 --top-k 40 --max-tokens 60 --seed 1
done
