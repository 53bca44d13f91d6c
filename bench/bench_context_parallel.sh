#!/usr/bin/env bash
# Context parallelism on the CPU (issue 62): the recomputation benchmark's model (bench/
# train_recompute.yaml: 8 layers of dim 256, one thread per rank) at sequence S over cp ranks
# against S/cp on one rank, measured in the same run: each rank's peak activation memory
# (metrics.jsonl's activation_bytes: every allocation of the step counted, runtime/metrics/
# allocation_peak.h) as a ratio to the short-sequence run's (the goal: within 1.10), atoll plan's
# estimate beside it, the median step time, the seconds a step spent waiting in communication
# (comm_wait_s, every group) and of those the exposed K/V wait (kv_wait_s: the seconds a rank blocked
# on the ring's K/V and dK/dV, what the ring did not hide; on one CPU core per rank the ring's
# transfers and the blocks' compute share the cores). Never fails for being slow.
# Usage: bash bench/bench_context_parallel.sh [STEPS=6] [SEQ=2048]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
warmup=2  # steps left out: the allocator's first pass, the optimizer state's allocation
bench_start bench_context_parallel 6 "$warmup" "${1:-}"
seq=${2:-2048}
python=${ATOLL_PYTHON_BIN:-.venv/bin/python}
config=bench/train_recompute.yaml
run_dir=runs/bench-context-parallel
rm -rf "$run_dir"
mkdir -p "$run_dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

run() {  # run NAME CP SEQ: the benchmark config on CP ranks at sequence SEQ, one sequence a step
  local name=$1 cp=$2 length=$3
  local set=(--set run.dir="$run_dir/$name" --set run.threads=1 --set train.steps="$steps" --set train.global_batch=1
    --set model.seq="$length" --set parallel.cp="$cp" --set run.mfu_peak_tflops=1)
  "$atoll" launch "$config" "${set[@]}" >"$run_dir/$name.log" 2>&1 ||
    { echo "bench_context_parallel: the $name run failed; see $run_dir/$name.log" >&2; exit 1; }
  "$atoll" plan "$config" "${set[@]}" | awk '$1 == "0" && NF == 12 { print $11, $12; exit }' >"$run_dir/$name.plan"
}
for cp in 2 4; do
  echo "== seq $seq at cp $cp, against seq $((seq / cp)) on one rank"
  run "cp$cp" "$cp" "$seq"
  run "short$cp" 1 $((seq / cp))
done

"$python" - "$run_dir" "$warmup" "$seq" <<'PY'
import json, os, statistics, sys
run_dir, warmup, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MiB = 2**20

def steady(name):
    path = os.path.join(run_dir, name, "metrics.jsonl")
    records = [json.loads(line) for line in open(path) if '"tokens_per_s"' in line]
    return records[warmup:] or records

def plan_mib(name):
    value, unit = open(os.path.join(run_dir, name + ".plan")).read().split()
    return float(value) * {"B": 1 / MiB, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]

print()
print(f"8 layers of dim 256, one sequence per step, one thread per rank (median of steps {warmup + 1}+):")
print(f"{'run':24s} {'activations':>12s} {'plan':>10s} {'step s':>7s} {'comm wait s':>11s} {'K/V wait s':>10s}")
for cp in (2, 4):
    rows = {}
    for name, label in ((f"cp{cp}", f"seq {seq}, cp {cp}"), (f"short{cp}", f"seq {seq // cp}, one rank")):
        r = steady(name)
        rows[name] = dict(peak=max(x["activation_bytes"] for x in r) / MiB,
                          step=statistics.median(x["step_s"] for x in r),
                          wait=statistics.median(x.get("comm_wait_s", 0.0) for x in r),
                          kv=statistics.median(x.get("kv_wait_s", 0.0) for x in r),
                          plan=plan_mib(name))
        row = rows[name]
        kv = f"{row['kv']:10.3f}" if name.startswith("cp") else f"{'-':>10s}"
        print(f"{label:24s} {row['peak']:8.1f} MiB {row['plan']:6.1f} MiB {row['step']:7.3f} {row['wait']:11.3f} {kv}")
    ratio = rows[f"cp{cp}"]["peak"] / rows[f"short{cp}"]["peak"]
    verdict = "met" if ratio <= 1.10 else "NOT MET"
    print(f"cp {cp}: {ratio:.2f}x the activations of seq {seq // cp} on one rank (goal <= 1.10): {verdict}")
PY
