#!/usr/bin/env bash
# The outer-step sweep of issue 55 on the CPU, where the GPU experiment (examples/islands/gpu/run.sh)
# cannot run: issue 20's small model (quality.yaml, 0.13M parameters, bytes) on the Debian
# documentation corpus's text, at the GPU protocol's H = 30 for M = 2 and M = 4 islands: Nesterov
# momentum 0.9 with outer lr 0.4, 0.6 (the scaling-law paper's) and 0.8, momentum 0.5 with lr 0.6 and
# 1.0, and plain averaging (lr 1, no momentum: Atoll's default), against synchronous training; 630
# steps (20 tokens per parameter, a multiple of 30). About 12 minutes on 2 cores.
#
# The corpus: byte-level shards (vocab 256) of data/debdocs's text -- the first 128 KiB of every MiB
# of train.txt (whole lines; ~21 MB from every package in turn) and val.txt whole as validation --
# in data/debdocs-bytes. Needs data/debdocs (bash examples/debdocs/prepare.sh).
# Usage: bash examples/islands/sweep_debdocs.sh   (ATOLL_BIN: a built binary to use, see setup.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=data/debdocs-bytes
if [[ ! -s $corpus/train.bin ]]; then
  [[ -s data/debdocs/train.txt ]] || { echo "sweep_debdocs: no data/debdocs/train.txt; run: bash examples/debdocs/prepare.sh" >&2; exit 1; }
  mkdir -p "$corpus"
  python3 - data/debdocs/train.txt "$corpus/sample.txt" <<'EOF'
import sys
text = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as out:
    for start in range(0, len(text), 1 << 20):
        chunk = text[start:start + (128 << 10)]
        out.write(chunk[chunk.find(b"\n") + 1:chunk.rfind(b"\n") + 1])
EOF
  sample=$(stat -c %s "$corpus/sample.txt")
  val=$(stat -c %s data/debdocs/val.txt)
  # The last val/(sample + 1 + val) of the joined bytes are val.txt's.
  fraction=$(awk -v s="$sample" -v v="$val" 'BEGIN { printf "%.9f", (v + 0.5) / (s + 1 + v) }')
  "${ATOLL_BIN:-build/bin/atoll}" data prepare --out "$corpus" --val-fraction "$fraction" "$corpus/sample.txt" data/debdocs/val.txt
  rm "$corpus/sample.txt"
fi
SWEEP_OUT=runs/islands-sweep-debdocs SWEEP_STEPS=630 SWEEP_CELLS="2:30 4:30" SWEEP_NESTEROV_LRS="0.4 0.6 0.8" \
  SWEEP_NOLOCO=0 bash examples/islands/sweep.sh --set data.train="$corpus/train.bin" --set data.val="$corpus/val.bin" \
  --set train.eval_every=210
