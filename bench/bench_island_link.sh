#!/usr/bin/env bash
# Islands on a real shaped link: two island jobs (`atoll launch` each, one rank) in their own
# network namespaces, each joined to a hub (where `atoll rendezvous` serves) by a veth pair shaped
# with tc tbf to RATE Mbit/s in both directions (tests/cli/netns.sh). They train DiLoCo
# (H = inner steps) and the outer exchange's link rate is measured from metrics.jsonl: the bytes
# an island sent in a round's exchange (reduce-scatter and all-to-all, codec bytes and tags) over
# the seconds it waited for it. Baseline in the same run, on the same link: one bulk TCP stream
# (Python sockets) from island 0 to island 1. Prints both rates, the exchange's share of the link
# and its ratio to the bulk stream; the target is >= 80% of the link. Then the same with delayed
# DiLoCo, whose exchange runs behind the next round's inner steps, and Streaming DiLoCo (one
# fragment per layer, each exchange behind tau = 2 inner steps): their outer wait per round. The
# islands hold the job secret (required off loopback): the HMAC on every chunk is in the figures.
# Never fails for being slow. Needs root (namespaces) and tc.
# Usage: bash bench/bench_island_link.sh [RATE_MBIT=100] [ROUNDS=4] [H=12]   (ATOLL_BIN overrides build/bin/atoll)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-100}
rounds=${2:-4}
inner=${3:-12}  # long enough for the inner steps to cover a round's exchange at 100 Mbit/s
source bench/common.sh
bench_start bench_island_link $((rounds * inner)) 1 $((rounds * inner))
repo=$PWD
python=${ATOLL_PYTHON_BIN:-$repo/.venv/bin/python}
work=$(mktemp -d)
source tests/cli/netns.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
netns_up 2 "$rate" || { echo "bench_island_link: cannot make network namespaces with tc tbf here (root?)" >&2; exit 1; }

# Baseline: a bulk TCP stream of 40 MB island 0 -> island 1.
cat >"$work/stream.py" <<'PY'
import socket, sys, time
role, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "receive":
    server = socket.create_server((host, port))
    connection, _ = server.accept()
    received, start = 0, time.perf_counter()
    while chunk := connection.recv(1 << 20):
        received += len(chunk)
    print(f"{8 * received / (time.perf_counter() - start) / 1e6:.2f}")
else:
    deadline = time.time() + 10
    while True:
        try:
            connection = socket.create_connection((host, port))
            break
        except ConnectionRefusedError:
            if time.time() > deadline: raise
            time.sleep(0.05)
    block = b"\0" * (1 << 20)
    for _ in range(40):
        connection.sendall(block)
    connection.close()
PY
in_island 1 timeout 120 "$python" "$work/stream.py" receive "$(island_address 1)" 5301 >"$work/stream.out" &
receiver=$!
in_island 0 timeout 120 "$python" "$work/stream.py" send "$(island_address 1)" 5301
wait $receiver
stream_mbit=$(cat "$work/stream.out")
echo "== bulk TCP stream island 0 -> island 1: $stream_mbit Mbit/s on a $rate Mbit/s link"

# The model: dim 384, 4 layers: 7.6M parameters, a 30 MB fp32 pseudo-gradient per round.
cat >"$work/islands.yaml" <<YAML
run:        { dir: $work/run, seed: 1234, threads: 1 }
model:      { vocab: 256, dim: 384, layers: 4, heads: 6, kv_heads: 6, ffn: 1024, seq: 128 }
parallel:   { islands: 2, dp: 1 }
train:      { steps: $((rounds * inner)), global_batch: 4, log_every: 1, eval_every: 0, eval_sequences: 0 }
optim:      { lr: 3.0e-4, min_lr: 3.0e-5, warmup: 1 }
data:       { train: $repo/data/pydocs/train.bin, val: $repo/data/pydocs/val.bin }
checkpoint: { every: 0 }
outer:      { algorithm: diloco, inner_steps: $inner, timeout_s: 120, rendezvous: "$netns_hub_address:29400",
              secret_file: $work/secret }
YAML
# Off loopback the job secret is required: every chunk carries its HMAC, and the figures include it.
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/secret"
chmod 600 "$work/secret"
atoll=$(realpath "$atoll")
in_hub "$atoll" rendezvous --port 29400 --secret-file "$work/secret" >"$work/rendezvous.log" 2>&1 &
# run_islands NAME OVERRIDES...: the two island jobs, each in its namespace.
run_islands() {
  local name=$1 island jobs=()
  shift
  for island in 0 1; do
    in_island $island timeout 600 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/$name-$island" \
      --set outer.island=$island "$@" >"$work/$name-$island.log" 2>&1 &
    jobs+=($!)
  done
  for island in 0 1; do wait "${jobs[$island]}" || { grep -v "^[|+]" "$work/$name-$island.log" | grep -v "^ *$" | head -30 >&2; exit 1; }; done
}
echo "== DiLoCo, H = $inner, $rounds rounds"
run_islands diloco
echo "== delayed DiLoCo, H = $inner, $rounds rounds"
run_islands delayed --set outer.delayed=true
echo "== Streaming DiLoCo, H = $inner, 4 fragments, tau = 2, $rounds rounds"
run_islands streaming --set outer.algorithm=streaming_diloco --set outer.fragments=4 --set outer.delay=2 \
  --set outer.mix=0.5

"$python" - "$rate" "$stream_mbit" "$inner" "$work"/{diloco,delayed,streaming}-0/metrics.jsonl <<'PY'
import json, statistics, sys
rate, stream, inner = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])

def steps(path):
    return [json.loads(line) for line in open(path) if '"outer_bytes"' in line]

def boundaries(path):  # the round-ending steps; the first pays the group's connections
    return [s for s in steps(path) if s["step"] % inner == 0][1:]

def round_waits(path):  # the outer wait of each round (every step's), the first round's left out
    waits = {}
    for s in steps(path):
        round_index = (s["step"] - 1) // inner
        waits[round_index] = waits.get(round_index, 0.0) + s["outer_wait_s"]
    return [w for r, w in sorted(waits.items()) if r > 0]

def step_s(path):  # the median step, exchanges included
    return statistics.median(s["step_s"] for s in steps(path))

diloco = boundaries(sys.argv[4])
mbit = statistics.median(8 * r["outer_bytes"] / r["outer_wait_s"] / 1e6 for r in diloco)
sent = statistics.median(r["outer_bytes"] for r in diloco)
wait = statistics.median(round_waits(sys.argv[4]))
print(f"\nouter exchange (DiLoCo, 2 islands, {sent / 2**20:.1f} MiB sent per island per round):")
print(f"  {mbit:.1f} Mbit/s (median of {len(diloco)} rounds, {wait:.2f} s each) = {100 * mbit / rate:.0f}% of the "
      f"{rate:.0f} Mbit/s link; bulk TCP stream {stream:.1f} Mbit/s: ratio {mbit / stream:.2f}x")
print(f"  target >= 80% of the link: {'met' if mbit >= 0.8 * rate else 'NOT met'}")
for name, path in (("delayed DiLoCo", sys.argv[5]), ("Streaming DiLoCo", sys.argv[6])):
    waits = round_waits(path)
    print(f"{name}: outer wait {statistics.median(waits):.2f} s per round (median of {len(waits)}; max "
          f"{max(waits):.2f} s) against {wait:.2f} s for DiLoCo; median step {step_s(path):.2f} s")
PY
