#!/usr/bin/env bash
# End-to-end checks of the `atoll` command's bad input: each one (config, layout, data, checkpoint,
# launcher arguments) stops every rank with its one-line message and exit code 2 (no hang, no
# repeated message), and no bad input changes a byte of a committed checkpoint. Every case is
# catalogued in docs/errors.md. The good runs are tests/cli/runs.sh.
# The cases are dealt round-robin into PARTS parts (CTest entries of their own, each under a minute);
# PART runs its share, every part its own committed checkpoint and the catalogue check of all names.
# Usage: bad_input.sh ATOLL_BIN [PART PARTS]   (PART from 1; default: 1 1, every case)
set -uo pipefail
atoll=$1 part=${2:-1} parts=${3:-1}
source "$(dirname "$0")/lib.sh"
cases=()      # the NAME of every expect_error / expect_cli_error case, checked against docs/errors.md
run_cases=()  # the names of this part's share of them
errors_doc=$(cd "$(dirname "$0")/../.." && pwd)/docs/errors.md

# expect_exit NAME CODE REGEX COMMAND...: COMMAND exits with CODE and prints REGEX exactly once (its
# output in $work/NAME.log); NAME joins the cases checked against docs/errors.md. The cases
# run up to $case_jobs at a time in the background (each is mostly waiting: a start-up that stops at
# its check), their verdicts in $work/NAME.verdict; report_cases prints them in order. Each case has
# a TMPDIR of its own: Open MPI 4 keeps the session files of every job under one directory there that
# the last job to end removes, and a case starting in that instant fails orte_init ("mkdir ... File
# exists": seen in CI between two cases of this script).
case_jobs=3
expect_exit() {
  local name=$1
  cases+=("$name")
  in_this_part "${#cases[@]}" || return 0
  run_cases+=("$name")
  while (($(jobs -rp | wc -l) >= case_jobs)); do wait -n; done
  run_case "$@" &
}
run_case() {
  local name=$1 code=$2 regex=$3
  shift 3
  mkdir -p "$work/tmp/$name"
  TMPDIR=$work/tmp/$name timeout 120 "$@" >"$work/$name.log" 2>&1
  local status=$? count
  count=$(grep -cE -e "$regex" "$work/$name.log")
  if [[ $status -eq $code && $count -eq 1 ]]; then
    echo "ok" >"$work/$name.verdict"
  else
    echo "exit $status, expected $code; message seen $count times" >"$work/$name.verdict"
  fi
}
in_this_part() { (($1 % parts == part % parts)); }  # in_this_part N: whether the Nth case is this part's
report_cases() {  # waits for this part's cases still running; one PASS or FAIL line per case, in order
  wait
  local name verdict
  for name in "${run_cases[@]}"; do
    verdict=$(cat "$work/$name.verdict" 2>/dev/null || echo "no verdict written")
    if [[ $verdict == ok ]]; then
      check ok "$name"
    else
      check fail "$name ($verdict)"
      sed 's/^/    /' "$work/$name.log" | head -20
    fi
  done
}

# expect_error NAME REGEX NP ARGS...: `mpirun -np NP atoll ARGS... --set run.dir=$committed` exits
# with 2 (bad input), REGEX printed exactly once. Every case runs in the run directory of a committed
# checkpoint ($committed, set below), which must come out of all of them unchanged. Every rank ends
# by itself here, so mpirun need not give the others a second before it kills them
# (odls_base_sigkill_timeout, 1 s by default: the most of such a case's time).
expect_error() {
  local name=$1 regex=$2 np=$3
  shift 3
  expect_exit "$name" "$EXIT_BAD_INPUT" "$regex" mpirun --oversubscribe --mca odls_base_sigkill_timeout 0 -np "$np" \
    "$atoll" "$@" --set run.dir="$committed"
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
tiny_config "$work/tiny.yaml"

# $committed holds committed checkpoints (step-3, step-6, step-9): every bad-input case below runs
# against it, and none may change a byte of it (checked at the end).
committed="$work/ckpt"
timeout 120 "$atoll" launch "$work/tiny.yaml" --set optim.schedule=constant --set checkpoint.every=3 --set train.steps=9 \
  --set run.dir="$committed" >"$work/committed.log" 2>&1 &&
  [[ $(cat "$committed/checkpoints/LATEST" 2>/dev/null) == step-9 ]] &&
  check ok "a 2-rank run committed step-3, step-6 and step-9 for the cases to meet" ||
  check fail "the committed run" "$work/committed.log"
ckpt_sums() { (cd "$committed/checkpoints" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
ckpt_sums >"$work/committed.before"
# Its step-9 exported, as one file and as a Hugging Face directory, for the init_from cases.
"$atoll" ckpt export "$committed/checkpoints" --out "$work/export/model.safetensors" >/dev/null 2>&1
"$atoll" ckpt export "$committed/checkpoints" --out "$work/export-dir" >/dev/null 2>&1

cp -r "$work/ckpt/checkpoints/step-9" "$work/damaged"
shard="$work/damaged/rank-00000.safetensors"  # dp rank 0 writes everything without ZeRO
printf '\xff' | dd of="$shard" bs=1 seek=$(($(stat -c %s "$shard") - 100)) conv=notrunc status=none
# A damaged checkpoint is bad input to every command that reads it: exit 2.
expect_cli_error ckpt_inspect_corrupt 2 \
  "checkpoint: checksum mismatch in $work/damaged/rank-00000.safetensors for .* at byte [0-9]+: the file is corrupt" \
  ckpt inspect "$work/damaged"
# A shard's safetensors header altered where the chunks' checksums cannot see it (the loader reads by
# the manifest's offsets): the 8-byte length set to 2^60, and one dtype changed from F32 to F16.
cp -r "$work/ckpt/checkpoints/step-9" "$work/header_length"
printf '\x00\x00\x00\x00\x00\x00\x00\x10' | dd of="$work/header_length/rank-00000.safetensors" bs=1 conv=notrunc status=none
expect_cli_error ckpt_inspect_header_length 2 \
  "shard $work/header_length/rank-00000.safetensors: its header length is 1152921504606846976 bytes but the manifest recorded [0-9]+" \
  ckpt inspect "$work/header_length"
cp -r "$work/ckpt/checkpoints/step-9" "$work/header_dtype"
python3 -c 'import sys; p = sys.argv[1]; b = open(p, "rb").read(); open(p, "wb").write(b.replace(b"\"F32\"", b"\"F16\"", 1))' \
  "$work/header_dtype/rank-00000.safetensors"
expect_cli_error ckpt_inspect_header_dtype 2 "shard $work/header_dtype/rank-00000.safetensors: its safetensors header fails the manifest's checksum" \
  ckpt inspect "$work/header_dtype"
# sample and eval read the parameters only: a shard header they rely on, damaged, is bad input too.
expect_cli_error sample_corrupt 2 "shard $work/header_dtype/rank-00000.safetensors: its safetensors header fails the manifest's checksum" \
  sample "$work/header_dtype" --prompt "a" --max-tokens 2
expect_cli_error eval_corrupt 2 "shard $work/header_dtype/rank-00000.safetensors: its safetensors header fails the manifest's checksum" \
  eval "$work/header_dtype" --data "$work/data/val.bin" --max-sequences 2
# Given a checkpoints folder whose newest checkpoint is damaged, sample and eval take the newest that
# loads (as checkpoint.resume: auto does) and say which, and which they skipped.
cp -r "$committed/checkpoints" "$work/fallback"
cp "$work/header_dtype/rank-00000.safetensors" "$work/fallback/step-9/rank-00000.safetensors"
for command in sample eval; do
  in_this_part 1 || break  # two runs: the first part's
  if [[ $command == sample ]]; then extra=(--prompt "a" --max-tokens 2); else extra=(--data "$work/data/val.bin" --max-sequences 2); fi
  env -u SLURM_JOB_ID "$atoll" "$command" "$work/fallback" "${extra[@]}" >"$work/fallback-$command.log" 2>&1
  status=$?
  if [[ $status -eq 0 ]] && grep -q "checkpoint $work/fallback/step-6 (step 6); skipped step-9 (checkpoint: shard $work/fallback/step-9/rank-00000.safetensors: its safetensors header fails" "$work/fallback-$command.log"; then
    check ok "$command of a checkpoints folder whose newest is damaged loads step-6 and names both"
  else
    check fail "$command falls back past a damaged newest checkpoint (exit $status)" "$work/fallback-$command.log"
  fi
done
# Only damage is skipped: a newest checkpoint in a format this build does not read (format_version,
# the manifest's first field, set to 2) is an error of its own, not a reason to load step-6.
cp -r "$committed/checkpoints" "$work/newer_format"
printf '\x08\x02' | dd of="$work/newer_format/step-9/manifest.pb" bs=1 conv=notrunc status=none
expect_cli_error sample_newer_format 2 "checkpoint: $work/newer_format/step-9/manifest.pb has format version 2 but this build reads version 1; read it with the Atoll version that wrote it" \
  sample "$work/newer_format" --prompt "a" --max-tokens 2
# A torn checkpoint: every shard written, the manifest (written last, the commit) missing.
cp -r "$work/ckpt/checkpoints/step-9" "$work/torn"
rm "$work/torn/manifest.pb"


expect_error init_from_other_model "model.init_from: .*model.safetensors has no model.layers.1.input_layernorm.weight" 2 train \
  "$work/tiny.yaml" --set model.init_from="$work/export/model.safetensors" --set model.layers=3
# The checkpoint exported as a Hugging Face directory: its config.json must describe the model.
expect_error init_from_other_config "model.init_from: .*export-dir/config.json has hidden_size 32 but model.dim is 48; set model.dim: 32" \
  2 train "$work/tiny.yaml" --set model.init_from="$work/export-dir" --set model.dim=48
expect_error tokenizer_missing "data.tokenizer: $work/none.model cannot be read; pass a SentencePiece model" 2 train \
  "$work/tiny.yaml" --set data.tokenizer="$work/none.model"
expect_error sample_prompt_long "train.sample_prompt: 'xxxxxxxxxxxxxxxxxxxx' is 20 tokens; give it 1 to model.seq = 16" 2 train \
  "$work/tiny.yaml" --set train.sample_every=2 --set train.sample_prompt=xxxxxxxxxxxxxxxxxxxx
expect_error profile_after_end "train.profile_start = 5 with train.profile_steps = 3 ends after train.steps = 6; profile steps of the run" \
  2 train "$work/tiny.yaml" --set train.profile_start=5
expect_cli_error sample_prompt_long_cli 2 "--prompt is 20 tokens, longer than model.seq = 16; shorten it" \
  sample "$work/export-dir" --prompt xxxxxxxxxxxxxxxxxxxx
expect_cli_error eval_not_a_model 2 "$work/data holds neither a checkpoint .manifest.pb, or step-N folders. nor a Hugging Face model" \
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
# Dataset lists (docs/data.md): an entry without a path or with a weight <= 0 (the config's own check,
# through plan: no ranks), a glob matching nothing, a directory without shards.
expect_cli_error dataset_no_path 2 "config: data.train\[1\] = \{weight: 0.3\} has no path; write e.g. \{ path: data/web/, weight: 0.3 \}" \
  plan "$work/tiny.yaml" --set "data.train=[$work/data/train.bin, {weight: 0.3}]"
expect_cli_error dataset_weight 2 "config: data.val\[0\].weight = 0 must be > 0; set data.val\[0\].weight to a positive number" \
  plan "$work/tiny.yaml" --set "data.val=[{path: $work/data/val.bin, weight: 0}]"
expect_error glob_no_match "data: $work/web/\*.bin matches no file; check the pattern" 2 train "$work/tiny.yaml" \
  --set "data.train=[{path: $work/data/train.bin, weight: 0.7}, {path: '$work/web/*.bin', weight: 0.3}]"
mkdir -p "$work/no-shards" && printf 'text' >"$work/no-shards/notes.txt"
expect_error dir_no_shards "data: directory $work/no-shards holds no .bin shard; point data.train/data.val at one" 2 train "$work/tiny.yaml" \
  --set data.val="$work/no-shards"
# Megatron's .bin without its .idx, and with a corrupt one.
head -c 3000 /dev/urandom >"$work/megatron.bin"
expect_error megatron_no_idx "megatron.bin has magic .*; is it an llm.c token shard\? \(a Megatron .bin needs its .idx beside it: $work/megatron.idx\)" \
  2 train "$work/tiny.yaml" --set data.train="$work/megatron.bin"
cp "$work/megatron.bin" "$work/corrupt.bin" && { printf 'MMIDIDY\0\0'; head -c 60 /dev/zero; } >"$work/corrupt.idx"
expect_error megatron_bad_idx "data: $work/corrupt.idx does not start with MMIDIDX; is it a Megatron index \(.idx\)\?" \
  2 train "$work/tiny.yaml" --set data.train="$work/corrupt.bin"
# Document masks need documents: byte-tokenized llm.c shards record none and have no BOS/EOS to find.
expect_error document_mask_no_documents "model.document_mask: true but $work/data/train.bin records no document starts and data.tokenizer \(bytes\) has no BOS or EOS to find them by" \
  2 train "$work/tiny.yaml" --set model.document_mask=true
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
# A job that asked for a GPU and cannot give each rank one stops under run.device auto instead of
# training on the CPU (here: no GPU, or the two ranks on one GPU, or a CPU build).
CUDA_VISIBLE_DEVICES=0 expect_error device_auto_asked_for_gpu "run.device = auto and the job asked for GPUs \(CUDA_VISIBLE_DEVICES=0\), but (no CUDA device is visible to this rank|2 ranks on this node share 1 GPU|this atoll was built without the CUDA path)" \
  2 train "$work/tiny.yaml"
expect_error precision "train.precision = 'fp16' is not one of fp32, bf16" 2 train "$work/tiny.yaml" --set train.precision=fp16
expect_error tp_split "model.heads = 2 is not divisible by parallel.tp = 4" 4 train "$work/tiny.yaml" --set parallel.tp=4 --set parallel.dp=1
expect_error cp_seq_split "model.seq = 18 is not divisible by 2\*parallel.cp = 4" 2 train "$work/tiny.yaml" --set parallel.dp=1 --set parallel.cp=2 --set model.seq=18
expect_error cp_rank_mismatch "islands\*pp\*dp\*tp\*cp = 4 but 2 ranks were launched" 2 train "$work/tiny.yaml" --set parallel.cp=2
# A kernel lever set to true where it cannot apply: what the config rules out (the ZeRO stage), and
# what the CPU does (fused_clip over fused_adamw's auto, off here).
expect_error first_grad_copy_zero2 "kernels.first_grad_copy = true cannot apply at parallel.zero = 2 \(the first gradient copy lands in the ZeRO-0/1 flat buffer\); set it to auto or false, or parallel.zero to 0 or 1" \
  2 train "$work/tiny.yaml" --set parallel.zero=2 --set kernels.first_grad_copy=true
expect_error fused_clip_cpu "kernels.fused_clip = true cannot apply on the CPU with kernels.fused_adamw = auto \(off on the CPU; .*\); set kernels.fused_adamw: true, or kernels.fused_clip to auto or false" \
  2 train "$work/tiny.yaml" --set run.device=cpu --set kernels.fused_clip=true
# The model's own CUDA kernels forced on the CPU, and the fused loss forced where tensor parallelism
# splits the vocabulary: refused, never quietly the ATen ops instead.
expect_error fused_swiglu_cpu "kernels.fused_swiglu = true cannot apply on the CPU \(it is a CUDA kernel of Atoll's own\); set it to auto \(on a GPU, off on the CPU\) or false, or run.device: cuda" \
  2 train "$work/tiny.yaml" --set run.device=cpu --set kernels.fused_swiglu=true
expect_error fused_rope_cpu "kernels.fused_rope = true cannot apply on the CPU \(it is a CUDA kernel of Atoll's own\)" \
  2 train "$work/tiny.yaml" --set run.device=cpu --set kernels.fused_rope=true
expect_error fused_cross_entropy_cpu "kernels.fused_cross_entropy = true cannot apply on the CPU \(it is a CUDA kernel of Atoll's own\)" \
  2 train "$work/tiny.yaml" --set run.device=cpu --set kernels.fused_cross_entropy=true
expect_error fused_cross_entropy_tp "kernels.fused_cross_entropy = true cannot apply at parallel.tp = 2 \(the kernels take whole vocabulary rows; .*\); set it to auto or false, or parallel.tp to 1" \
  2 train "$work/tiny.yaml" --set parallel.tp=2 --set parallel.dp=1 --set kernels.fused_cross_entropy=true
# FP8 needs a GPU's FP8 tensor cores: on the CPU one line names the setting, the value and the fix.
expect_error fp8_cpu "train.precision = fp8 needs a GPU with FP8 tensor cores \(compute capability 8.9\+ tensorwise, 9.0\+ rowwise, through LibTorch's _scaled_mm\); this rank runs on the CPU; set train.precision: bf16" \
  2 train "$work/tiny.yaml" --set run.device=cpu --set train.precision=fp8

# Config, data and checkpoint mistakes added with the operations work (exit codes, on_nonfinite,
# watchdog settings, fault hooks), and checkpoints that cannot be resumed from.
expect_error nonfinite_policy "train.on_nonfinite = 'maybe' is not one of skip, stop; set train.on_nonfinite" 2 train \
  "$work/tiny.yaml" --set train.on_nonfinite=maybe
expect_error recompute_mode "train.recompute = 'some' is not one of none, selective, full; set train.recompute" 2 train \
  "$work/tiny.yaml" --set train.recompute=some
expect_error comm_timeout "comm.timeout_s = 0 must be > 0; set comm.timeout_s to a positive number" 2 train \
  "$work/tiny.yaml" --set comm.timeout_s=0
ATOLL_FAULT=bogus expect_error fault_hook "ATOLL_FAULT: unknown hook 'bogus'; use nan_gradient@STEP\[:RANK\], skip_collective@RANK:STEP, corrupt_chunk@EXCHANGE:ISLAND, sigkill@STEP, sigkill_in_exchange@EXCHANGE or ignore_sigterm" \
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
expect_cli_error launch_failure_grace_negative 2 "--failure-grace -5 is not a non-negative integer; e.g. --failure-grace 2" \
  launch "$work/tiny.yaml" --failure-grace -5 "${at_committed[@]}"
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
expect_cli_error plan_np 2 "the layout needs 2 ranks \(islands\*pp\*dp\*tp = 1\*1\*2\*1\); --np 3 was given; drop --np, or change parallel.\* to a layout of 3 ranks" \
  plan "$work/tiny.yaml" --np 3
expect_cli_error plan_memory 2 "--memory 0: a device's memory in GiB must be a positive number; e.g. --memory 80" \
  plan "$work/tiny.yaml" --memory 0
# atoll launch says so before it starts mpirun: no rank runs, nothing is written.
expect_cli_error launch_np_mismatch 2 "the layout needs 2 ranks \(islands\*pp\*dp\*tp = 1\*1\*2\*1\); --np 3 was given" \
  launch "$work/tiny.yaml" --np 3 "${at_committed[@]}"
# `ckpt inspect` and `ckpt export` of a path that is not a directory: bad input (2), as resume_missing;
# a directory without a committed checkpoint in it too.
expect_cli_error ckpt_inspect_missing 2 "ckpt: $work/none is not a directory; pass a checkpoint" \
  ckpt inspect "$work/none"
expect_cli_error ckpt_export_missing 2 "ckpt: $work/none is not a directory; pass a checkpoint" \
  ckpt export "$work/none" --out "$work/export-none"
expect_cli_error ckpt_inspect_torn 2 "checkpoint: $work/torn/manifest.pb is missing: the checkpoint was never committed" \
  ckpt inspect "$work/torn"
expect_cli_error ckpt_export_no_out 2 "expected .atoll ckpt inspect DIR \| atoll ckpt export DIR --out OUT_DIR\|FILE.safetensors." \
  ckpt export "$committed/checkpoints"
mkdir -p "$work/not-a-run"
expect_cli_error report_missing_dir 2 "report: run directory $work/none does not exist; pass the run.dir of the run's config" \
  report "$work/none"
expect_cli_error report_no_metrics 2 "report: $work/not-a-run has no metrics.jsonl; is it a run directory" report "$work/not-a-run"
expect_cli_error prepare_no_out 2 "missing --out DIR; usage: atoll data prepare" data prepare "$work/text.txt"
expect_cli_error prepare_missing_input 2 "data prepare: input $work/none.txt does not exist; check the path" \
  data prepare --out "$work/data2" "$work/none.txt"
# Inputs of `atoll data prepare` as corpora come (JSONL, compressed, Parquet) that it cannot use:
# one line naming the file and the line or row group, exit 2. venv's Python writes the Parquet file.
printf '{"text": "a"}\n{"text": "b",}\n' >"$work/bad.jsonl"
printf '{"content": "a"}\n' >"$work/field.jsonl"
printf '(\xb5/\xfd this is no zstd frame at all' >"$work/corrupt.jsonl.zst"
printf '\x1f\x8b\x08\x00garbage, not deflate data' >"$work/corrupt.jsonl.gz"
printf 'some text\n' | gzip -c >"$work/text.txt.gz"
printf 'PK\x03\x04 a zip archive' >"$work/archive.zip"
printf 'caf\xe9 in Latin-1\n' >"$work/latin1.txt"
printf '{"text": "a"}\n' >"$work/plain.jsonl.zst"
printf '{"text": "a"}\n' >"$work/text.parquet"
"$(dirname "$errors_doc")/../.venv/bin/python" -c 'import sys, pyarrow, pyarrow.parquet as pq
pq.write_table(pyarrow.table({"body": ["a"]}), sys.argv[1])
pq.write_table(pyarrow.table({"text": ["a", None]}), sys.argv[2])' "$work/nocolumn.parquet" "$work/null.parquet"
expect_cli_error prepare_bad_json 2 "data prepare: input $work/bad.jsonl line 2 is not JSON \(.*\); fix the line, or pass --skip-bad-records to skip such records" \
  data prepare --documents --out "$work/data3" "$work/bad.jsonl"
expect_cli_error prepare_missing_field 2 "data prepare: input $work/field.jsonl line 1 has no field \"text\" \(its fields: content\); pass --text-field NAME to read another field, or pass --skip-bad-records" \
  data prepare --documents --out "$work/data3" "$work/field.jsonl"
expect_cli_error prepare_parquet_column 2 "data prepare: input $work/nocolumn.parquet \(Parquet\) has no column \"text\" \(its columns: body\); pass --text-field NAME" \
  data prepare --documents --out "$work/data3" "$work/nocolumn.parquet"
expect_cli_error prepare_parquet_null 2 "data prepare: input $work/null.parquet row 1 of row group 0 has a null \"text\"; drop such rows, or pass --skip-bad-records" \
  data prepare --documents --out "$work/data3" "$work/null.parquet"
expect_cli_error prepare_not_parquet 2 "data prepare: input $work/text.parquet is named .parquet but does not start with Parquet's PAR1; re-download or rewrite it" \
  data prepare --documents --out "$work/data3" "$work/text.parquet"
expect_cli_error prepare_not_compressed 2 "data prepare: input $work/plain.jsonl.zst is named as compressed but its bytes are not gzip or Zstandard; re-download it" \
  data prepare --documents --out "$work/data3" "$work/plain.jsonl.zst"
expect_cli_error prepare_corrupt_zst 2 "data prepare: input $work/corrupt.jsonl.zst has a corrupt zstd frame \(.*\) near compressed byte [0-9]+; check it with .zstd -t. and re-download or recompress it" \
  data prepare --documents --out "$work/data3" "$work/corrupt.jsonl.zst"
expect_cli_error prepare_corrupt_gzip 2 "data prepare: input $work/corrupt.jsonl.gz is corrupt \(zlib: .*\) near compressed byte [0-9]+; check it with .gzip -t." \
  data prepare --documents --out "$work/data3" "$work/corrupt.jsonl.gz"
expect_cli_error prepare_gzip_text 2 "data prepare: input $work/text.txt.gz is gzip-compressed, which Atoll reads as JSONL only \(named .jsonl.gz\); decompress it" \
  data prepare --out "$work/data3" "$work/text.txt.gz"
expect_cli_error prepare_binary 2 "data prepare: input $work/archive.zip is a zip file, not a format Atoll reads; Atoll reads UTF-8 text, HTML, JSONL" \
  data prepare --out "$work/data3" "$work/archive.zip"
expect_cli_error prepare_not_utf8 2 "data prepare: input $work/latin1.txt is not UTF-8 text \(byte 0xe9 at offset 3\); Atoll reads UTF-8 text" \
  data prepare --out "$work/data3" "$work/latin1.txt"
expect_cli_error prepare_records_need_documents 2 "data prepare: input $work/field.jsonl is JSONL, whose records are documents; add --documents" \
  data prepare --out "$work/data3" "$work/field.jsonl"
expect_cli_error prepare_glob_none 2 "data prepare: $work/none-\*.jsonl matches no file; check the pattern" \
  data prepare --documents --out "$work/data3" "$work/none-*.jsonl"
expect_cli_error prepare_shard_tokens 2 "data prepare: --shard-tokens 0 is outside \[1, 2147483647\]" \
  data prepare --shard-tokens 0 --out "$work/data3" "$work/text.txt"
expect_cli_error prepare_threads 2 "data prepare: --threads -1 is outside \[0, 256\]; pass 0 \(the CPUs this process may use\)" \
  data prepare --threads -1 --out "$work/data3" "$work/text.txt"
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
expect_cli_error outer_min_islands_streaming 2 "config: outer.min_islands = 1 below parallel.islands \(a membership per round\) works with outer.algorithm: diloco \(delayed or not\) or noloco for now, not 'streaming_diloco'; set outer.min_islands: 2 or outer.algorithm: diloco" \
  plan "$work/tiny.yaml" --set parallel.islands=2 --set parallel.dp=1 --set outer.algorithm=streaming_diloco \
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
# A damaged --state file: refused, never taken for a new run (and left as it was).
printf 'atoll rendezvous state 1\n6c61746573745f726f756e64 35\nend 1 0000000000000000\n' >"$work/rendezvous.state"
expect_cli_error rendezvous_state_damaged 2 "atoll rendezvous --state $work/rendezvous.state: fails its checksum \(0000000000000000, the content gives [0-9a-f]{16}\); restore the file from a copy, or start a new run with a new --state file" \
  rendezvous --port 0 --state "$work/rendezvous.state"
expect_cli_error unknown_command 2 "unknown command 'frobnicate'; run .atoll --help. for the list" frobnicate

# No bad input above changed a byte of the committed checkpoints, and each still verifies.
report_cases
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

# The catalogue of errors (docs/errors.md) names every case above.
catalogue=$(cat "$errors_doc" 2>/dev/null)
missing=()
for name in "${cases[@]}"; do grep -qF "\`$name\`" <<<"$catalogue" || missing+=("$name"); done
if [[ -n $catalogue && ${#missing[@]} -eq 0 ]]; then
  check ok "docs/errors.md lists all ${#cases[@]} cases"
else
  check fail "docs/errors.md ($errors_doc) lacks: ${missing[*]:-the whole catalogue (missing or empty)}"
fi

finish
