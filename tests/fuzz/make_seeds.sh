#!/usr/bin/env bash
# Writes the seed corpora (tests/fuzz/corpus/NAME/) from real files Atoll writes: a tiny 2-rank
# training run (tp 2) with checkpoints, its metrics.jsonl, config.yaml, TensorBoard events and exit
# records, its export as a Hugging Face directory (and transformers' sharded save_pretrained of it),
# the byte-level and SentencePiece token shards of a small corpus, the SentencePiece model, and the
# example configs. Multi-file inputs are packed with fuzz_input.h's format (pack_files.py).
#   bash tests/fuzz/make_seeds.sh      (needs build/bin/atoll: bash scripts/build.sh atoll)
# Replaces every seed; commit the result. Run once per change of a file format.
set -euo pipefail
cd "$(dirname "$0")/../.."
atoll=$PWD/build/bin/atoll
python=$PWD/.venv/bin/python
corpus=tests/fuzz/corpus
pack="$python tests/fuzz/pack_files.py"
[[ -x $atoll ]] || { echo "make_seeds.sh: $atoll is missing; run: bash scripts/build.sh atoll" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
rm -rf "$corpus"
mkdir -p "$corpus"/{safetensors,checkpoint,hugging_face,token_shard,config,tensorboard,run_report,tokenizer,exit_record,flight_summary}

# Text, shards and a subword model.
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."; done >"$work/text.txt"
"$atoll" data prepare --out "$work/bytes" --val-fraction 0.1 "$work/text.txt" >/dev/null
"$atoll" tokenizer train --vocab 300 --out "$work/sp.model" "$work/text.txt" >/dev/null
"$atoll" data prepare --out "$work/subword" --tokenizer "$work/sp.model" --val-fraction 0.1 "$work/text.txt" >/dev/null
cp "$work/bytes/val.bin" "$corpus/token_shard/bytes_uint16.bin"
cp "$work/subword/val.bin" "$corpus/token_shard/subword_uint16.bin"
# llm.c's uint32 layout (magic 20240801, version 7) of the same tokens.
"$python" - "$work/bytes/val.bin" "$corpus/token_shard/bytes_uint32.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
header = list(struct.unpack("<256i", data[:1024]))
tokens = struct.unpack("<%dH" % header[2], data[1024:1024 + 2 * header[2]])
header[0], header[1] = 20240801, 7
open(sys.argv[2], "wb").write(struct.pack("<256i", *header) + struct.pack("<%dI" % len(tokens), *tokens))
PY
cp "$work/sp.model" "$corpus/tokenizer/bpe300.model"

# A tiny run on 2 ranks (tensor parallel: two shards per checkpoint), launched under `atoll-supervise`
# so that exit records are written, and a subword run whose manifest carries the tokenizer.
tiny() {  # tiny NAME DATA TP [--set ...]
  local name=$1 data=$2 tp=$3
  shift 3
  cat >"$work/$name.yaml" <<YAML
run:        { dir: $work/$name, seed: 1, threads: 1 }
model:      { vocab: 320, dim: 8, layers: 1, heads: 2, kv_heads: 2, ffn: 16, seq: 8 }
parallel:   { tp: $tp }
train:      { steps: 4, global_batch: 2, log_every: 1, eval_every: 2, eval_sequences: 2 }
data:       { train: $data/train.bin, val: $data/val.bin }
checkpoint: { every: 2, keep: 1 }
YAML
  timeout 300 "$atoll" launch "$work/$name.yaml" "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; exit 1; }
}
tiny bytes "$work/bytes" 2
tiny subword "$work/subword" 1 --set data.tokenizer="$work/sp.model" --set model.kv_heads=1 --set model.vocab=300

for name in bytes subword; do
  run=$work/$name
  step=$(cat "$run/checkpoints/LATEST")
  files=("LATEST=$run/checkpoints/LATEST")
  for f in "$run/checkpoints/$step"/*; do files+=("$step/$(basename "$f")=$f"); done
  $pack "$corpus/checkpoint/$name.pack" "${files[@]}"
  $pack "$corpus/run_report/$name.pack" "metrics.jsonl=$run/metrics.jsonl" "config.yaml=$run/config.yaml"
  cp "$(ls "$run"/tb/*tfevents* | head -1)" "$corpus/tensorboard/$name.tfevents"
  files=()
  for f in "$run"/logs/*.exit; do files+=("logs/$(basename "$f")=$f"); done
  $pack "$corpus/exit_record/$name.pack" "${files[@]}"
  cp "$run/config.yaml" "$corpus/config/run_$name.yaml"

  "$atoll" ckpt export "$run/checkpoints" --out "$work/hf_$name" >/dev/null
  files=()
  for f in "$work/hf_$name"/*; do files+=("$(basename "$f")=$f"); done
  $pack "$corpus/hugging_face/$name.pack" "${files[@]}"
  cp "$work/hf_$name/model.safetensors" "$corpus/safetensors/$name.safetensors"
done
# transformers' own sharded save (model.safetensors.index.json and two shards), in bf16.
"$python" - "$work/hf_bytes" "$work/hf_sharded" <<'PY' 2>/dev/null
import sys, torch, transformers
model = transformers.LlamaForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16)
model.save_pretrained(sys.argv[2], max_shard_size="6KB")
PY
files=()
for f in "$work/hf_sharded"/*; do files+=("$(basename "$f")=$f"); done
$pack "$corpus/hugging_face/sharded_bf16.pack" "${files[@]}"
cp "$(ls "$work"/hf_sharded/*.safetensors | head -1)" "$corpus/safetensors/transformers_bf16.safetensors"

# Configs: every example, and one with overrides after NUL bytes (fuzz_config.cpp's input).
for f in examples/pydocs/*.yaml examples/islands/*.yaml; do
  cp "$f" "$corpus/config/$(basename "$(dirname "$f")")_$(basename "$f")"
done
{ cat examples/pydocs/llama_dp4.yaml; printf '\0optim.betas=[0.9,0.99]\0parallel.dp=2\0train.steps=10'; } \
  >"$corpus/config/overrides.yaml"

# A hang report's text form (comm/hang_report.cpp's encode) as rank 0 receives it.
printf 'rank\t1\ngroup\tdp[0,1]\t7\t6\ngroup\ttp[0,2]\t12\t12\nwaiting\tdp[0,1]\tall_reduce\t7\t4096\t31.5\n' \
  >"$corpus/flight_summary/waiting.txt"
printf 'rank\t3\ngroup\tpp[1,3]\t4\t4\n' >"$corpus/flight_summary/idle.txt"
du -sh "$corpus"/* | sed 's/^/make_seeds.sh: /'
