#!/usr/bin/env bash
# End-to-end checks of the `atoll` command under mpirun: a small 2-rank run succeeds and writes its
# metrics; each bad input (config, layout, data, checkpoint, launcher arguments) stops every rank with
# its one-line message and exit code 2 (no hang, no repeated message), and no bad input changes a
# byte of a committed checkpoint. Every case is catalogued in the README ("Errors you may meet").
# Usage: bad_input.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
cases=()  # the NAME of every expect_error / expect_cli_error case, checked against the README
readme=$(cd "$(dirname "$0")/../.." && pwd)/README.md

# expect_exit NAME CODE REGEX COMMAND...: COMMAND exits with CODE and prints REGEX exactly once (its
# output in $work/NAME.log); NAME joins the cases checked against the README's catalogue.
expect_exit() {
  local name=$1 code=$2 regex=$3
  shift 3
  cases+=("$name")
  timeout 120 "$@" >"$work/$name.log" 2>&1
  local status=$? count
  count=$(grep -cE -e "$regex" "$work/$name.log")
  if [[ $status -eq $code && $count -eq 1 ]]; then
    check ok "$name"
  else
    check fail "$name (exit $status, expected $code; message seen $count times)"
    sed 's/^/    /' "$work/$name.log" | head -20
  fi
}

# expect_error NAME REGEX NP ARGS...: `mpirun -np NP atoll ARGS... --set run.dir=$committed` exits
# with 2 (bad input), REGEX printed exactly once. Every case runs in the run directory of a committed
# checkpoint ($committed, set below), which must come out of all of them unchanged.
expect_error() {
  local name=$1 regex=$2 np=$3
  shift 3
  expect_exit "$name" "$EXIT_BAD_INPUT" "$regex" mpirun --oversubscribe -np "$np" "$atoll" "$@" --set run.dir="$committed"
}

# expect_cli_error NAME CODE REGEX ARGS...: `atoll ARGS...` run directly (no mpirun; SLURM_JOB_ID
# unset so that launcher choices do not depend on where the test runs) exits with CODE, REGEX printed
# exactly once.
expect_cli_error() {
  local name=$1 code=$2 regex=$3
  shift 3
  expect_exit "$name" "$code" "$regex" env -u SLURM_JOB_ID "$atoll" "$@"
}

make_corpus "$atoll" "$work/data"
cat >"$work/tiny.yaml" <<YAML
run:      { dir: $work/run, seed: 3, threads: 1 }
model:    { vocab: 256, dim: 32, layers: 1, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel: { dp: 2 }
train:    { steps: 6, global_batch: 4, log_every: 2, eval_every: 3, eval_sequences: 4 }
optim:    { lr: 1.0e-3, min_lr: 1.0e-4, warmup: 1 }
data:     { train: $work/data/train.bin, val: $work/data/val.bin }
YAML

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

# Two islands of one rank with DiLoCo (H = 3, int8 exchange): outer bytes in every step record,
# phi evaluated beside island 0's theta, a checkpoint whose tensors name their island, and
# `ckpt export` writing phi.
timeout 120 "$atoll" launch "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=diloco \
  --set outer.inner_steps=3 --set outer.compression=int8 --set checkpoint.every=6 --set run.dir="$work/islands" \
  >"$work/islands.log" 2>&1
if [[ $? -eq 0 && $(grep -c '"outer_bytes_total"' "$work/islands/metrics.jsonl") -eq 6 \
      && $(grep -c '"val_loss_outer"' "$work/islands/metrics.jsonl") -eq 2 && $(grep -c '| outer .* in all' "$work/islands.log") -ge 1 ]] &&
   "$atoll" ckpt inspect "$work/islands/checkpoints" >"$work/islands_inspect.log" 2>&1 &&
   grep -q 'outer_momentum@1' "$work/islands_inspect.log" &&
   "$atoll" ckpt export "$work/islands/checkpoints" --out "$work/islands_phi/model.safetensors" >/dev/null 2>&1; then
  check ok "launch: 2 islands with DiLoCo log outer bytes and phi's val loss; the checkpoint holds both islands"
else
  check fail "launch: 2 islands with DiLoCo"; sed 's/^/    /' "$work/islands.log" | tail -20
fi

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
losses_after_6() { grep -oE '"step":[7-9],"loss":[^,]*' "$1"; }
if [[ $resumed -eq 0 ]] && grep -q "resumed from $work/ckpt/checkpoints/step-6 at step 6" "$work/ckpt2.log" &&
   [[ -s "$work/ckpt/checkpoints/step-9/manifest.pb" && $(losses_after_6 "$work/ckpt/metrics.jsonl" | wc -l) -eq 3 ]] &&
   [[ "$(losses_after_6 "$work/ckpt/metrics.jsonl")" == "$(losses_after_6 "$work/straight/metrics.jsonl")" ]]; then
  check ok "resume: a relaunch continues from step 6 with the losses of an uninterrupted run, bit for bit"
else
  check fail "resume"; sed 's/^/    /' "$work/ckpt2.log" | tail -20
fi

# From here on $committed holds committed checkpoints (step-3, step-6, step-9): every bad-input case
# below runs against it, and none may change a byte of it (checked at the end).
committed="$work/ckpt"
ckpt_sums() { (cd "$committed/checkpoints" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
ckpt_sums >"$work/committed.before"

# A rank killed at each phase of a save (ATOLL_CHECKPOINT_FAULT) leaves the previous checkpoint
# committed and chosen: the relaunch resumes from step 2, removes the leftover .partial directory,
# and commits step 4 itself.
for fault in copy:4 write:4:1 manifest:4 latest:4; do
  phase=${fault%%:*}
  dir="$work/fault-$phase"
  ATOLL_CHECKPOINT_FAULT=$fault timeout 120 "$atoll" launch "$work/tiny.yaml" --set train.steps=4 \
    --set checkpoint.every=2 --set checkpoint.mode=async_lazy --set run.dir="$dir" >"$dir.log" 2>&1
  died=$?
  timeout 120 "$atoll" launch "$work/tiny.yaml" --set train.steps=4 --set checkpoint.every=2 --set run.dir="$dir" \
    >"$dir.resume.log" 2>&1
  resumed=$?
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
cp -r "$work/ckpt/checkpoints/step-9" "$work/damaged"
shard="$work/damaged/rank-00000.safetensors"  # dp rank 0 writes everything without ZeRO
printf '\xff' | dd of="$shard" bs=1 seek=$(($(stat -c %s "$shard") - 100)) conv=notrunc status=none
# `ckpt inspect` exits 1 on a damaged checkpoint (its help says so), not 2.
expect_cli_error ckpt_inspect_corrupt 1 \
  "checkpoint: checksum mismatch in $work/damaged/rank-00000.safetensors for .* at byte [0-9]+: the file is corrupt" \
  ckpt inspect "$work/damaged"
# A shard's safetensors header altered where the chunks' checksums cannot see it (the loader reads by
# the manifest's offsets): the 8-byte length set to 2^60, and one dtype changed from F32 to F16.
cp -r "$work/ckpt/checkpoints/step-9" "$work/header_length"
printf '\x00\x00\x00\x00\x00\x00\x00\x10' | dd of="$work/header_length/rank-00000.safetensors" bs=1 conv=notrunc status=none
expect_cli_error ckpt_inspect_header_length 1 \
  "shard $work/header_length/rank-00000.safetensors: its header length is 1152921504606846976 bytes but the manifest recorded [0-9]+" \
  ckpt inspect "$work/header_length"
cp -r "$work/ckpt/checkpoints/step-9" "$work/header_dtype"
python3 -c 'import sys; p = sys.argv[1]; b = open(p, "rb").read(); open(p, "wb").write(b.replace(b"\"F32\"", b"\"F16\"", 1))' \
  "$work/header_dtype/rank-00000.safetensors"
expect_cli_error ckpt_inspect_header_dtype 1 "shard $work/header_dtype/rank-00000.safetensors: its safetensors header fails the manifest's checksum" \
  ckpt inspect "$work/header_dtype"
# A torn checkpoint: every shard written, the manifest (written last, the commit) missing.
cp -r "$work/ckpt/checkpoints/step-9" "$work/torn"
rm "$work/torn/manifest.pb"

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
expect_error init_from_other_model "model.init_from: .*model.safetensors has no model.layers.1.input_layernorm.weight" 2 train \
  "$work/tiny.yaml" --set model.init_from="$work/export/model.safetensors" --set model.layers=3
# The same checkpoint exported as a Hugging Face directory: its config.json must describe the model.
"$atoll" ckpt export "$work/ckpt/checkpoints" --out "$work/export-dir" >/dev/null 2>&1
expect_error init_from_other_config "model.init_from: .*export-dir/config.json has hidden_size 32 but model.dim is 48; set model.dim: 32" \
  2 train "$work/tiny.yaml" --set model.init_from="$work/export-dir" --set model.dim=48
expect_error tokenizer_missing "data.tokenizer: $work/none.model cannot be read; pass a SentencePiece model" 2 train \
  "$work/tiny.yaml" --set data.tokenizer="$work/none.model"
expect_error sample_prompt_long "train.sample_prompt: 'xxxxxxxxxxxxxxxxxxxx' is 20 tokens; give it 1 to model.seq = 16" 2 train \
  "$work/tiny.yaml" --set train.sample_every=2 --set train.sample_prompt=xxxxxxxxxxxxxxxxxxxx
expect_cli_error sample_prompt_long_cli 2 "--prompt is 20 tokens, longer than model.seq = 16; shorten it" \
  sample "$work/export-dir" --prompt xxxxxxxxxxxxxxxxxxxx
expect_cli_error eval_not_a_model 2 "$work/data holds neither a checkpoint .manifest.pb or LATEST. nor a Hugging Face model" \
  eval "$work/data" --data "$work/data/val.bin"

expect_error resume_missing "$work/none/manifest.pb is missing" 2 train "$work/tiny.yaml" --set checkpoint.resume=$work/none
expect_error other_model "holds the model \{vocab=256 dim=32 .*\} but the config has \{vocab=256 dim=48" 2 train "$work/tiny.yaml" \
  --set run.dir="$work/ckpt" --set model.dim=48
expect_error checkpoint_mode "checkpoint.mode = 'later' is not one of sync, async, async_lazy" 2 train "$work/tiny.yaml" --set checkpoint.mode=later
expect_error unknown_key "unknown key 'model.dimm' \(did you mean 'model.dim'\?\)" 2 train "$work/tiny.yaml" --set model.dimm=3
expect_error bad_type "model.dim = 'abc' is not an integer" 2 train "$work/tiny.yaml" --set model.dim=abc
expect_error rank_mismatch "islands\*pp\*dp\*tp = 2 but 3 ranks were launched" 3 train "$work/tiny.yaml"
expect_error batch_split "train.global_batch = 5 is not divisible by parallel.islands\*parallel.dp\*parallel.microbatches = 2" 2 train "$work/tiny.yaml" --set train.global_batch=5
expect_error missing_data "does not exist; run .atoll data prepare." 2 train "$work/tiny.yaml" --set data.train=$work/none.bin
head -c 1500 "$work/data/train.bin" >"$work/truncated.bin"
expect_error truncated "truncated.bin is truncated" 2 train "$work/tiny.yaml" --set data.train=$work/truncated.bin
printf 'not a shard at all' >"$work/garbage.bin"; head -c 2000 /dev/zero >>"$work/garbage.bin"
expect_error wrong_magic "expected 20240520 \(uint16\) or 20240801 \(uint32\)" 2 train "$work/tiny.yaml" --set data.train=$work/garbage.bin
expect_error vocab "contains token id 122 but model.vocab = 100; set model.vocab to at least 123" 2 train "$work/tiny.yaml" --set model.vocab=100 2>/dev/null
expect_error outer_delayed "outer.delayed = true applies to outer.algorithm = diloco, not 'none'" 4 train "$work/tiny.yaml" --set parallel.islands=2 --set outer.delayed=true
expect_error outer_codec "outer.compression = 'int3' is not one of none, fp16, bf16, int8, int4" 4 train "$work/tiny.yaml" --set parallel.islands=2 --set outer.algorithm=diloco --set outer.compression=int3
expect_error layer_split "model.layers = 1 does not split evenly over pp\*virtual_stages = 2 virtual stages" 4 train "$work/tiny.yaml" --set parallel.pp=2
expect_error stage_layers "parallel.stage_layers sums to 3 but model.layers = 1" 2 train "$work/tiny.yaml" --set parallel.pp=2 --set parallel.dp=1 --set "parallel.stage_layers=[1, 2]"
expect_error interleaved_microbatches "parallel.microbatches = 1 is fewer than parallel.pp = 2" 2 train "$work/tiny.yaml" --set parallel.pp=2 --set parallel.dp=1 --set parallel.schedule=interleaved
CUDA_VISIBLE_DEVICES="" expect_error device_cuda_without_gpu "run.device = cuda but (no CUDA device is visible to this rank|this atoll was built without the CUDA path)" \
  2 train "$work/tiny.yaml" --set run.device=cuda
expect_error precision "train.precision = 'fp16' is not one of fp32, bf16" 2 train "$work/tiny.yaml" --set train.precision=fp16
expect_error tp_split "model.heads = 2 is not divisible by parallel.tp = 4" 4 train "$work/tiny.yaml" --set parallel.tp=4 --set parallel.dp=1

# Config, data and checkpoint mistakes added with the operations work (exit codes, on_nonfinite,
# watchdog settings, fault hooks), and checkpoints that cannot be resumed from.
expect_error nonfinite_policy "train.on_nonfinite = 'maybe' is not one of skip, stop; set train.on_nonfinite" 2 train \
  "$work/tiny.yaml" --set train.on_nonfinite=maybe
expect_error comm_timeout "comm.timeout_s = 0 must be > 0; set comm.timeout_s to a positive number" 2 train \
  "$work/tiny.yaml" --set comm.timeout_s=0
ATOLL_FAULT=bogus expect_error fault_hook "ATOLL_FAULT: unknown hook 'bogus'; use nan_gradient@STEP\[:RANK\], skip_collective@RANK:STEP, corrupt_chunk@EXCHANGE:ISLAND, sigkill@STEP or sigkill_in_exchange@EXCHANGE" \
  2 train "$work/tiny.yaml"
expect_error missing_config "config: cannot read $work/none.yaml: No such file or directory; check the path" 2 train "$work/none.yaml"
expect_error resume_torn "checkpoint: $work/torn/manifest.pb is missing: the checkpoint was never committed" 2 train \
  "$work/tiny.yaml" --set checkpoint.resume="$work/torn"
expect_error resume_corrupt "checkpoint: checksum mismatch in $work/damaged/rank-00000.safetensors .*the file is corrupt" 2 train \
  "$work/tiny.yaml" --set checkpoint.resume="$work/damaged"
expect_error resume_header "shard $work/header_dtype/rank-00000.safetensors: its safetensors header fails the manifest's checksum" 2 train \
  "$work/tiny.yaml" --set checkpoint.resume="$work/header_dtype"

# Commands that need no MPI: launcher arguments, plan, ckpt, report, data prepare. Launch cases name
# the committed run directory too, so that a launch that got as far as starting ranks would meet it.
at_committed=(--set run.dir="$committed")
printf 'localhost slots=2\n' >"$work/hostfile"
expect_cli_error launch_np_abc 2 "--np abc is not a non-negative integer; e.g. --np 2" launch "$work/tiny.yaml" --np abc "${at_committed[@]}"
expect_cli_error launch_np_zero 2 "--np 0: a job needs at least one rank" launch "$work/tiny.yaml" --np 0 "${at_committed[@]}"
expect_cli_error launch_np_no_value 2 "--np needs a value; usage: atoll launch" launch "$work/tiny.yaml" "${at_committed[@]}" --np
expect_cli_error launch_hostfile_missing 2 "--hostfile $work/none.hosts does not exist; give a file of 'host slots=N' lines" \
  launch "$work/tiny.yaml" --hostfile "$work/none.hosts" "${at_committed[@]}"
expect_cli_error launch_slurm_outside 2 "--slurm needs a Slurm allocation \(SLURM_JOB_ID is not set\); run inside salloc or sbatch" \
  launch "$work/tiny.yaml" --slurm "${at_committed[@]}"
expect_cli_error launch_two_launchers 2 "--hostfile, --slurm and --mpirun each pick the launcher; give at most one" \
  launch "$work/tiny.yaml" --hostfile "$work/hostfile" --slurm "${at_committed[@]}"
expect_cli_error launch_restarts_negative 2 "--max-restarts -1 is not a non-negative integer; e.g. --max-restarts 2" \
  launch "$work/tiny.yaml" --max-restarts -1 "${at_committed[@]}"
expect_cli_error launch_restarts_abc 2 "--max-restarts abc is not a non-negative integer" \
  launch "$work/tiny.yaml" --max-restarts abc "${at_committed[@]}"
expect_cli_error launch_unknown_option 2 "unknown option '--bogus'; usage: atoll launch" launch "$work/tiny.yaml" --bogus "${at_committed[@]}"
expect_cli_error launch_missing_config 2 "config: cannot read $work/none.yaml: No such file or directory" \
  launch "$work/none.yaml" "${at_committed[@]}"
expect_cli_error launch_bad_key 2 "config: --set model.dimm=3: unknown key 'model.dimm' \(did you mean 'model.dim'\?\)" \
  launch "$work/tiny.yaml" --set model.dimm=3 "${at_committed[@]}"
# Bad input found by the ranks (missing data): reported once, and --max-restarts does not relaunch.
expect_cli_error launch_no_restart 2 "data: $work/none.bin does not exist; run .atoll data prepare." \
  launch "$work/tiny.yaml" --max-restarts 2 --set data.train="$work/none.bin" "${at_committed[@]}"
expect_cli_error flight_records 2 "comm.flight_records = 0 must be >= 1; set comm.flight_records to a positive integer" \
  plan "$work/tiny.yaml" --set comm.flight_records=0
expect_cli_error plan_np 2 "islands\*pp\*dp\*tp = 2 but 3 ranks were launched; launch 2 ranks" plan "$work/tiny.yaml" --np 3
# `ckpt inspect` and `report` exit 1 (a runtime error) on a missing directory, not 2.
expect_cli_error ckpt_inspect_missing 1 "checkpoint: $work/none/manifest.pb is missing: the checkpoint was never committed" \
  ckpt inspect "$work/none"
expect_cli_error ckpt_inspect_torn 1 "checkpoint: $work/torn/manifest.pb is missing: the checkpoint was never committed" \
  ckpt inspect "$work/torn"
expect_cli_error ckpt_export_no_out 2 "expected .atoll ckpt inspect DIR \| atoll ckpt export DIR --out OUT_DIR\|FILE.safetensors." \
  ckpt export "$committed/checkpoints"
mkdir -p "$work/not-a-run"
expect_cli_error report_missing_dir 1 "report: run directory $work/none does not exist; pass the run.dir of the run's config" \
  report "$work/none"
expect_cli_error report_no_metrics 1 "report: $work/not-a-run has no metrics.jsonl; is it a run directory" report "$work/not-a-run"
expect_cli_error prepare_no_out 2 "missing --out DIR; usage: atoll data prepare" data prepare "$work/text.txt"
expect_cli_error prepare_missing_input 1 "data prepare: input $work/none.txt does not exist; check the path" \
  data prepare --out "$work/data2" "$work/none.txt"
expect_cli_error outer_rendezvous 2 "config: outer.rendezvous = 'nohost' is not HOST:PORT; give outer.rendezvous as HOST:PORT" \
  plan "$work/tiny.yaml" --set outer.rendezvous=nohost --set outer.island=0
expect_cli_error outer_island 2 "config: outer.island = -1 must name this job's island, 0 to 0 \(parallel.islands is the number of islands\); pass --set outer.island=I" \
  plan "$work/tiny.yaml" --set outer.rendezvous=127.0.0.1:29400
expect_cli_error outer_secret_required 2 "config: outer.secret_file is required: outer.rendezvous = '10.0.0.5:29400' is not a loopback address" \
  plan "$work/tiny.yaml" --set outer.rendezvous=10.0.0.5:29400 --set outer.island=0
printf '0123456789abcdef0123456789abcdef\n' >"$work/open-secret"
chmod 644 "$work/open-secret"
expect_cli_error outer_secret_open 2 "config: outer.secret_file $work/open-secret may be read by other users of this machine; chmod 600" \
  plan "$work/tiny.yaml" --set outer.rendezvous=127.0.0.1:29400 --set outer.island=0 --set outer.secret_file="$work/open-secret"
expect_cli_error outer_min_islands_too_many 2 "config: outer.min_islands = 3 exceeds parallel.islands = 2; a round cannot wait for more islands than there are" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=diloco \
  --set outer.rendezvous=127.0.0.1:29400 --set outer.island=0 --set outer.min_islands=3
expect_cli_error outer_min_islands_noloco 2 "config: outer.min_islands = 1 below parallel.islands \(a membership per round\) works with outer.algorithm: diloco \(not delayed\) for now" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=noloco \
  --set outer.rendezvous=127.0.0.1:29400 --set outer.island=0 --set outer.min_islands=1
expect_cli_error outer_norm_bound_noloco 2 "config: outer.max_pseudo_grad_norm = 5 applies to outer.algorithm = diloco or streaming_diloco \(an average of pseudo-gradients\), not 'noloco'; set outer.max_pseudo_grad_norm: 0" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=noloco \
  --set outer.max_pseudo_grad_norm=5
expect_cli_error outer_topk_noloco 2 "config: outer.topk = 8 applies to outer.algorithm = diloco or streaming_diloco \(a pseudo-gradient with error feedback\), not 'noloco'; set outer.algorithm: diloco or outer.topk: 0" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=noloco --set outer.topk=8
expect_cli_error outer_topk_range 2 "config: outer.topk = 300 must be in \[0, 256\]" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=diloco --set outer.topk=300
expect_cli_error rendezvous_bad_port 2 "--port 70000 is not a port number \(0-65535\); usage: atoll rendezvous" \
  rendezvous --port 70000
expect_cli_error unknown_command 2 "unknown command 'frobnicate'; run .atoll --help. for the list" frobnicate

# atoll plan: no MPI; the layout it prints, and a rank count that does not fit the layout.
if "$atoll" plan "$work/tiny.yaml" >"$work/plan.log" 2>&1 && grep -q "^plan: 2 ranks = islands 1 x pp 1 x dp 2 x tp 1" "$work/plan.log"; then
  check ok "plan: prints the layout's per-rank memory and traffic"
else
  check fail "plan"; sed 's/^/    /' "$work/plan.log" | head -20
fi

# No bad input above changed a byte of the committed checkpoints, and each still verifies.
ckpt_sums >"$work/committed.after"
intact=ok
for step in "$committed"/checkpoints/step-*; do
  "$atoll" ckpt inspect "$step" >"$work/inspect_after.log" 2>&1 || intact="fail ($step no longer verifies)"
done
if [[ $intact == ok && -s "$work/committed.before" ]] && cmp -s "$work/committed.before" "$work/committed.after"; then
  check ok "committed checkpoints byte-identical after ${#cases[@]} bad-input cases ($(wc -l <"$work/committed.after") files), each verifies"
else
  check fail "committed checkpoints: $intact"; diff "$work/committed.before" "$work/committed.after" | head -10 | sed 's/^/    /'
fi

# The README's catalogue of errors names every case above.
catalogue=$(awk '/^### Errors you may meet/{p=1} p&&/^## /{exit} p' "$readme" 2>/dev/null)
missing=()
for name in "${cases[@]}"; do grep -qF "\`$name\`" <<<"$catalogue" || missing+=("$name"); done
if [[ -n $catalogue && ${#missing[@]} -eq 0 ]]; then
  check ok "README 'Errors you may meet' lists all ${#cases[@]} cases"
else
  check fail "README 'Errors you may meet' ($readme) lacks: ${missing[*]:-the section}"
fi

finish
