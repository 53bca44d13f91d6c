#!/usr/bin/env bash
# Two sources in two formats, with Llama 3's tokenizer (issue 61's example): Debian's package
# documentation as Parquet and C headers as JSONL.zst, both from files Debian installed on this
# machine (examples/mixture/sources.py), each prepared into its own shards by `atoll data prepare`
# (each file one document, <|begin_of_text|> before each, split by document). Training on the blend
# of the two (data.train as a weighted list) is the next step of the issue; until then each directory
# trains on its own as data.train / data.val. docs/data.md describes the formats.
#
# Usage: bash examples/mixture/prepare.sh [OUT_DIR=data/mixture] [ATOLL_BIN=build/bin/atoll]
# Writes OUT_DIR/sources/ (the Parquet and JSONL.zst inputs), OUT_DIR/docs/ and OUT_DIR/code/ (shards,
# train.txt/val.txt, tokenizer.model, MANIFEST.txt). Needs .venv (pyarrow, zstandard, llama-models).
set -euo pipefail
out_dir=${1:-data/mixture}
atoll=${2:-build/bin/atoll}
root=$(cd "$(dirname "$0")/../.." && pwd)
python=$root/.venv/bin/python
llama3=$("$python" -c 'import llama_models.llama3, pathlib; print(pathlib.Path(llama_models.llama3.__file__).parent / "tokenizer.model")')

[[ -s $out_dir/sources/debian-docs.parquet && -s $out_dir/sources/headers.jsonl.zst ]] ||
  "$python" "$root/examples/mixture/sources.py" "$out_dir/sources"
"$atoll" data prepare --documents --tokenizer "$llama3" --val-fraction 0.02 --shard-tokens 20000000 \
  --out "$out_dir/docs" "$out_dir/sources/debian-docs.parquet"
"$atoll" data prepare --documents --tokenizer "$llama3" --val-fraction 0.02 --shard-tokens 20000000 \
  --out "$out_dir/code" "$out_dir/sources/headers.jsonl.zst"
grep -H "^tokens:" "$out_dir/docs/MANIFEST.txt" "$out_dir/code/MANIFEST.txt"
