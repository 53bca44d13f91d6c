#!/usr/bin/env bash
# End-to-end runs of the `atoll` command under mpirun, each a small 2-rank job through `atoll launch`:
# DP, islands with DiLoCo, PP and ZeRO-3 train and write their metrics; a relaunch resumes bit for
# bit; a rank killed at each phase of a save leaves the previous checkpoint committed; retention;
# `ckpt inspect`, `ckpt export` and a run started from the export; `atoll plan`. (The bad inputs are
# tests/cli/bad_input.sh.) RUNS_SCENARIOS picks the cases (default all; CTest runs them as three
# entries, tests/CMakeLists.txt):
#   launch       a DP run, what the console says of it, the same run profiled, PP=2, ZeRO-3, atoll plan
#   islands      two islands with DiLoCo, and `ckpt export` of phi mid-round
#   checkpoints  resume across a real exit, a relaunch of a finished run, retention, inspect, export
#   crash        a rank killed at each phase of a save
# Usage: runs.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
wants() { [[ " ${RUNS_SCENARIOS:-launch islands checkpoints crash} " == *" $1 "* ]]; }

make_corpus "$atoll" "$work/data"
tiny_config "$work/tiny.yaml"

if wants launch; then
# A good run through `atoll launch`: progress lines, validation, metrics.jsonl, and run.device auto
# saying once that it trains on the CPU (GPUs hidden, so the test means the same on a GPU machine).
# (DP = 2 here; the pipeline run below checks PP = 2.)
CUDA_VISIBLE_DEVICES="" timeout 120 "$atoll" launch "$work/tiny.yaml" >"$work/good.log" 2>&1
if [[ $? -eq 0 && $(grep -c '"val_loss"' "$work/run/metrics.jsonl") -eq 2 && $(grep -c '"tokens_per_s"' "$work/run/metrics.jsonl") -eq 6 \
      && -s "$work/run/config.yaml" && $(grep -c '^step ' "$work/good.log") -eq 5 \
      && $(grep -c '^device: run.device auto.*; training on the CPU$' "$work/good.log") -eq 1 ]]; then
  check ok "launch: 2-rank run writes 6 step records, 2 validations, config.yaml; auto falls back to the CPU in one line"
else
  check fail "launch: 2-rank run"; sed 's/^/    /' "$work/good.log" | tail -20
fi

# What the console says of that run: a short summary at start-up (the config's table goes to
# run.dir, and to the console only with --verbose) and one closing line.
if grep -q '^layout: 2 ranks = islands 1 x pp 1 x dp 2 x tp 1 ' "$work/good.log" \
    && grep -q "^config: every setting in $work/run/config.txt" "$work/good.log" \
    && ! grep -q '| setting ' "$work/good.log" && grep -q '| train.steps ' "$work/run/config.txt" \
    && grep -q '^rank  host' "$work/run/ranks.txt" \
    && grep -qE '^done: step 6 \| 6 steps, 384 tokens in .* \| loss [0-9.]+ \| val loss [0-9.]+ \| checkpoint none$' "$work/good.log"; then
  check ok "launch: a start-up summary (the config and rank tables in run.dir) and one closing line"
else
  check fail "launch: the console's summary and closing line" "$work/good.log"
fi

# The same run profiled at steps 3-4 (train.profile_start): both ranks write a Chrome trace holding
# the model's matrix products, rank 0 prints and saves its time by operator, and the losses are the
# unprofiled run's bit for bit. Its MFU is against a given peak (run.mfu_peak_tflops), not a probe.
CUDA_VISIBLE_DEVICES="" timeout 120 "$atoll" launch "$work/tiny.yaml" --set train.profile_start=3 --set train.profile_steps=2 \
  --set run.mfu_peak_tflops=0.001 --set run.dir="$work/profiled" >"$work/profiled.log" 2>&1
status=$?
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
traces_hold_mm() {
  python3 - "$work/profiled/profile" <<'PY'
import json, sys
for rank in (0, 1):
    events = json.load(open(f"{sys.argv[1]}/rank-{rank}.json"))["traceEvents"]
    if not any(e.get("name") == "aten::mm" for e in events):
        sys.exit(f"rank {rank}'s trace has no aten::mm")
PY
}
# The first condition that does not hold, named in the failure.
profiled_problem() {
  ((status == 0)) || { echo "exit $status"; return; }
  [[ $(grep -c '^profile: steps 3-4 ' "$work/profiled.log") -eq 1 ]] || { echo "no single 'profile: steps 3-4' line"; return; }
  traces_hold_mm 2>&1 || return
  grep -q '| peak 1.0 GFLOP/s per rank x 2 ranks$' "$work/profiled.log" || { echo "no 'peak 1.0 GFLOP/s' start-up line"; return; }
  # A matrix product among the heaviest rows: under load aten::mm itself can fall below the cut, its
  # caller aten::linear (which holds its time) cannot.
  grep -qE ' aten::(mm|linear|matmul)$' "$work/profiled/profile/summary.txt" ||
    { echo "summary.txt names no matrix product (aten::mm, linear or matmul)"; return; }
  [[ "$(losses "$work/run")" == "$(losses "$work/profiled")" ]] || echo "losses differ from the unprofiled run's"
}
problem=$(profiled_problem)
if [[ -z $problem ]]; then
  check ok "launch: train.profile_start writes both ranks' traces and rank 0's operator times; losses unchanged; MFU against run.mfu_peak_tflops"
else
  check fail "launch: profiled run: $problem" "$work/profiled.log"
fi
fi

if wants islands; then
# Two islands of one rank with DiLoCo (H = 3, int8 exchange): outer bytes in every step record,
# phi evaluated beside island 0's theta, a checkpoint whose tensors name their island, and
# `ckpt export` writing phi.
timeout 120 "$atoll" launch "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=diloco \
  --set outer.inner_steps=3 --set outer.compression=int8 --set checkpoint.every=2 --set train.eval_every=2 \
  --set run.dir="$work/islands" >"$work/islands.log" 2>&1
if [[ $? -eq 0 && $(grep -c '"outer_bytes_total"' "$work/islands/metrics.jsonl") -eq 6 \
      && $(grep -c '"val_loss_outer"' "$work/islands/metrics.jsonl") -eq 3 && $(grep -c '| outer .* in all' "$work/islands.log") -ge 1 ]] &&
   "$atoll" ckpt inspect "$work/islands/checkpoints" >"$work/islands_inspect.log" 2>&1 &&
   grep -q 'outer_momentum@1' "$work/islands_inspect.log" &&
   "$atoll" ckpt export "$work/islands/checkpoints" --out "$work/islands_phi/model.safetensors" >/dev/null 2>&1; then
  check ok "launch: 2 islands with DiLoCo log outer bytes and phi's val loss; the checkpoint holds both islands"
else
  check fail "launch: 2 islands with DiLoCo"; sed 's/^/    /' "$work/islands.log" | tail -20
fi
# Mid-round (step 4; the rounds end at steps 3 and 6) island 0's theta and phi differ: `ckpt export`
# of the step-4 checkpoint writes phi, and `atoll eval` of the export on the run's 4 validation
# sequences gives phi's val loss as the run logged it at step 4 (eval prints 4 decimals).
read -r _ theta4 phi4 < <(theta_and_phi "$work/islands/metrics.jsonl" | awk '$1 == 4')
"$atoll" ckpt export "$work/islands/checkpoints/step-4" --out "$work/islands_phi4" >"$work/export4.log" 2>&1 &&
  "$atoll" eval "$work/islands_phi4" --data "$work/data/val.bin" --max-sequences 4 >"$work/eval4.log" 2>&1
eval4=$(sed -n 's/^loss \([0-9.]*\) .*/\1/p' "$work/eval4.log")
if python3 -c 'import sys; t, p, e = map(float, sys.argv[1:]); sys.exit(not (abs(e - p) <= 1.5e-4 and abs(t - p) > 1e-3))' \
    "${theta4:-nan}" "${phi4:-nan}" "${eval4:-nan}"; then
  check ok "ckpt export mid-round writes phi: atoll eval of it gives phi's logged val loss $phi4 (eval $eval4; theta's $theta4)"
else
  check fail "ckpt export mid-round / atoll eval (theta $theta4, phi $phi4, eval of the export '$eval4')" "$work/eval4.log"
fi
fi

if wants launch; then
# A 2-stage pipeline (1F1B, 2 microbatches, one layer per stage) trains and reports its bubble.
timeout 120 "$atoll" launch "$work/tiny.yaml" --set model.layers=2 --set parallel.dp=1 --set parallel.pp=2 \
  --set parallel.microbatches=2 --set run.dir="$work/pp" >"$work/pp.log" 2>&1
if [[ $? -eq 0 && $(grep -c '"stage_idle":\[' "$work/pp/metrics.jsonl") -eq 6 ]]; then
  check ok "launch: PP=2 run records the idle fraction of both stages every step"
else
  check fail "launch: PP=2 run"; sed 's/^/    /' "$work/pp.log" | tail -20
fi

# ZeRO-3 at DP=2 trains and records this rank's model state: parameters sharded, so a rank holds
# about half of what the DP=2 run above holds.
param_bytes() { grep -o '"param_bytes":[0-9]*' "$1" | tail -1 | cut -d: -f2; }
timeout 120 "$atoll" launch "$work/tiny.yaml" --set parallel.zero=3 --set run.dir="$work/zero3" >"$work/zero3.log" 2>&1
if [[ $? -eq 0 && $(grep -c '"optimizer_bytes"' "$work/zero3/metrics.jsonl") -eq 6 ]] &&
   (($(param_bytes "$work/zero3/metrics.jsonl") * 10 < $(param_bytes "$work/run/metrics.jsonl") * 6)); then
  check ok "launch: ZeRO-3 run records sharded model state every step"
else
  check fail "launch: ZeRO-3 run"; sed 's/^/    /' "$work/zero3.log" | tail -20
fi
fi

if wants checkpoints; then
# Checkpoints across real process exits: 6 steps saving every 3, then a relaunch to 9 resumes from
# step 6 and logs the same losses as 9 steps straight (constant LR, so the first run's schedule is
# the second's).
ckpt_args=(--set optim.schedule=constant --set checkpoint.every=3)
# The first run saves lazily in the background: its exit waits for the last commit.
timeout 120 "$atoll" launch "$work/tiny.yaml" "${ckpt_args[@]}" --set run.dir="$work/ckpt" --set checkpoint.mode=async_lazy \
  >"$work/ckpt1.log" 2>&1
timeout 120 "$atoll" launch "$work/tiny.yaml" "${ckpt_args[@]}" --set run.dir="$work/ckpt" --set train.steps=9 \
  >"$work/ckpt2.log" 2>&1
resumed=$?
timeout 120 "$atoll" launch "$work/tiny.yaml" "${ckpt_args[@]}" --set run.dir="$work/straight" --set train.steps=9 \
  --set checkpoint.every=0 >"$work/straight.log" 2>&1
# A relaunch of the finished run says so and trains nothing; --verbose puts the config's and the
# rank table on the console too.
timeout 120 "$atoll" launch "$work/tiny.yaml" "${ckpt_args[@]}" --set run.dir="$work/ckpt" --set train.steps=9 \
  --verbose >"$work/ckpt3.log" 2>&1
complete=$?
losses_after_6() { grep -oE '"step":[7-9],"loss":[^,]*' "$1"; }
if [[ $resumed -eq 0 ]] && grep -q "resumed from $work/ckpt/checkpoints/step-6 at step 6" "$work/ckpt2.log" &&
   [[ -s "$work/ckpt/checkpoints/step-9/manifest.pb" && $(losses_after_6 "$work/ckpt/metrics.jsonl" | wc -l) -eq 3 ]] &&
   [[ "$(losses_after_6 "$work/ckpt/metrics.jsonl")" == "$(losses_after_6 "$work/straight/metrics.jsonl")" ]] &&
   grep -q '^optim: train.steps is 9 but was 6 when step 6 was saved' "$work/ckpt2.log" &&
   grep -qE '^checkpoints: 2 saved; training waited [0-9.]+ s for them, writing them took [0-9.]+ s in the background$' "$work/ckpt1.log" &&
   [[ $complete -eq 0 ]] && grep -q '^complete at step 9 (train.steps = 9); nothing to do' "$work/ckpt3.log" &&
   grep -q '^| train.steps  *| 9 ' "$work/ckpt3.log" && grep -q '^rank  host' "$work/ckpt3.log"; then
  check ok "resume: a relaunch continues from step 6 with the losses of an uninterrupted run, bit for bit, and names the longer schedule; the lazy saves' costs in one line; a relaunch when complete says so (--verbose: with the config and rank tables)"
else
  check fail "resume"; sed 's/^/    /' "$work/ckpt2.log" | tail -20
fi
fi


if wants crash; then
# A rank killed at each phase of a save (ATOLL_CHECKPOINT_FAULT) leaves the previous checkpoint
# committed and chosen: the relaunch resumes from step 2, removes the leftover .partial directory,
# and commits step 4 itself. The four phases run side by side (each in its own run directory).
crash_and_resume() {  # crash_and_resume FAULT: the two runs of one phase; their exit codes in $dir.status
  local fault=$1 dir="$work/fault-${1%%:*}" died resumed
  ATOLL_CHECKPOINT_FAULT=$fault timeout 120 "$atoll" launch "$work/tiny.yaml" --set train.steps=4 \
    --set checkpoint.every=2 --set checkpoint.mode=async_lazy --set run.dir="$dir" >"$dir.log" 2>&1
  died=$?
  timeout 120 "$atoll" launch "$work/tiny.yaml" --set train.steps=4 --set checkpoint.every=2 --set run.dir="$dir" \
    >"$dir.resume.log" 2>&1
  resumed=$?
  echo "$died $resumed" >"$dir.status"
}
faults=(copy:4 write:4:1 manifest:4 latest:4)
for fault in "${faults[@]}"; do crash_and_resume "$fault" & done
wait
for fault in "${faults[@]}"; do
  phase=${fault%%:*}
  dir="$work/fault-$phase"
  read -r died resumed <"$dir.status"
  if [[ $died -eq 86 && $resumed -eq 0 ]] && grep -q "dies saving step 4 ($phase)" "$dir.log" &&
     grep -q "resumed from $dir/checkpoints/step-2 at step 2" "$dir.resume.log" &&
     [[ -s "$dir/checkpoints/step-4/manifest.pb" && $(cat "$dir/checkpoints/LATEST") == step-4 ]] &&
     ! ls -d "$dir"/checkpoints/*.partial >/dev/null 2>&1; then
    check ok "crash at save phase '$phase': previous checkpoint kept and chosen, leftovers cleaned"
  else
    check fail "crash at save phase '$phase' (first run exit $died, resume exit $resumed)"
    sed 's/^/    /' "$dir.log" | grep -v '^    |' | tail -5
    sed 's/^/    /' "$dir.resume.log" | grep -v '^    |' | tail -5
  fi
done
fi

if wants checkpoints; then
# Retention: the newest 2, plus every multiple of 3.
timeout 120 "$atoll" launch "$work/tiny.yaml" --set checkpoint.every=1 --set checkpoint.keep=2 \
  --set checkpoint.keep_every=3 --set run.dir="$work/retention" >"$work/retention.log" 2>&1
if [[ "$(cd "$work/retention/checkpoints" && echo step-*)" == "step-3 step-5 step-6" ]]; then
  check ok "retention: keep 2 plus every 3rd"
else
  check fail "retention: $(ls "$work/retention/checkpoints" | tr '\n' ' ')"
fi

# atoll ckpt inspect: a good checkpoint verifies; a flipped byte is found and named.
if "$atoll" ckpt inspect "$work/ckpt/checkpoints" >"$work/inspect.log" 2>&1 &&
   grep -q "^step 9, 576 tokens, seed 3, saved by islands 1 x pp 1 x dp 2 x tp 1, ZeRO 0" "$work/inspect.log" &&
   grep -q "every checksum verified" "$work/inspect.log"; then
  check ok "ckpt inspect: layout, tensors and verified checksums"
else
  check fail "ckpt inspect"; sed 's/^/    /' "$work/inspect.log" | head -20
fi

# atoll ckpt export: consolidated weights and a config.json; a new run starts from them.
if "$atoll" ckpt export "$work/ckpt/checkpoints" --out "$work/export/model.safetensors" >"$work/export.log" 2>&1 &&
   python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(c["architectures"] != ["LlamaForCausalLM"] or c["num_hidden_layers"] != 1 or c["rms_norm_eps"] != 1e-5)' \
     "$work/export/config.json" &&
   timeout 120 "$atoll" launch "$work/tiny.yaml" --set model.init_from="$work/export/model.safetensors" \
     --set checkpoint.resume=none --set train.steps=2 --set run.dir="$work/from-export" >"$work/from_export.log" 2>&1; then
  check ok "ckpt export: consolidated safetensors + config.json; model.init_from trains from them"
else
  check fail "ckpt export / init_from"; sed 's/^/    /' "$work/export.log" "$work/from_export.log" | tail -10
fi
fi

if wants launch; then
# atoll plan: no MPI; the layout it prints, and a rank count that does not fit the layout.
if "$atoll" plan "$work/tiny.yaml" >"$work/plan.log" 2>&1 && grep -q "^plan: 2 ranks = islands 1 x pp 1 x dp 2 x tp 1" "$work/plan.log"; then
  check ok "plan: prints the layout's per-rank memory and traffic"
else
  check fail "plan"; sed 's/^/    /' "$work/plan.log" | head -20
fi
fi

finish
