#!/usr/bin/env bash
# Two sources in two formats, with Llama 3's tokenizer: Debian's package documentation as Parquet and
# C headers as JSONL.zst, both from files Debian installed on this machine
# (examples/mixture/sources.py), each prepared into its own shards by `atoll data prepare` (each file
# one document, <|begin_of_text|> before each, split by document). examples/mixture/train.yaml
# trains on the blend of the two. docs/data.md describes the formats. Idempotent: a directory that
# already holds its MANIFEST.txt and tokenizer.model is left as it is.
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
# prepare NAME INPUT: the shards of one source in OUT_DIR/NAME, unless they are there.
prepare() {
  if [[ -s $out_dir/$1/MANIFEST.txt && -s $out_dir/$1/tokenizer.model ]]; then
    echo "prepare: $out_dir/$1 is prepared; nothing to do"
    return
  fi
  "$atoll" data prepare --documents --tokenizer "$llama3" --val-fraction 0.02 --shard-tokens 20000000 \
    --out "$out_dir/$1" "$2"
}
prepare docs "$out_dir/sources/debian-docs.parquet"
prepare code "$out_dir/sources/headers.jsonl.zst"
grep -H "^tokens:" "$out_dir/docs/MANIFEST.txt" "$out_dir/code/MANIFEST.txt"
