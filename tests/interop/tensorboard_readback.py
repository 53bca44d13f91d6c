"""TensorBoard's own reader against Atoll's event files: every numeric scalar of RUN_DIR/metrics.jsonl
must be in RUN_DIR/tb under the tag Atoll writes for it (runtime/metrics/run_log.cpp), at the same
step and with the same value as float32 (what an Event's simple_value holds).

Usage: tensorboard_readback.py RUN_DIR. Exit 0 with a summary line, 1 naming the first mismatch.
"""
import collections
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator, io_wrapper
from tensorboard.version import VERSION

# metrics.jsonl key -> TensorBoard tag (run_log.cpp: step_scalars, checkpoint, validation).
TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "tokens_per_s": "perf/tokens_per_s",
    "mfu": "perf/mfu",
    "step_s": "perf/step_s",
    "comm_bytes": "comm/bytes",
    "tp_bytes": "comm/tp_bytes",
    "dp_bytes": "comm/dp_bytes",
    "pp_bytes": "comm/pp_bytes",
    "comm_wait_s": "comm/wait_s",
    "checkpoint_wait_s": "checkpoint/wait_s",
    "rss_bytes": "memory/rss_bytes",
    "param_bytes": "memory/param_bytes",
    "grad_bytes": "memory/grad_bytes",
    "optimizer_bytes": "memory/optimizer_bytes",
    "activation_bytes": "memory/activation_bytes",
    "skipped": "train/skipped",
    "outer_bytes": "outer/bytes",
    "outer_bytes_total": "outer/bytes_total",
    "outer_wait_s": "outer/wait_s",
    "outer_simulated_s": "outer/simulated_s",
    "outer_islands": "outer/islands",
    "gpu_allocated_bytes": "memory/gpu_allocated_bytes",
    "gpu_reserved_bytes": "memory/gpu_reserved_bytes",
    "gpu_peak_bytes": "memory/gpu_peak_bytes",
    "checkpoint_s": "checkpoint/seconds",
    "val_loss": "val/loss",
    "val_loss_outer": "val/loss_outer",
}

# Keys of metrics.jsonl with no TensorBoard scalar, and why. Any other key fails the check.
NOT_IN_TENSORBOARD = {
    "step": "the step of every scalar of its record, not a scalar",
    "stage_idle": "a list (one value per pipeline stage), not a scalar",
    "stage_activation_bytes": "a list (one value per pipeline stage), not a scalar",
    "val_loss_islands": "a list (one loss per island), not a scalar",
    # Event records (start, nonfinite, island_*, preempted; restart from atoll launch): events, not series.
    "event": "the event's name (a string)",
    "action": "a string (skip or stop)",
    "reason": "a string (why atoll launch restarted)",
    "world_size": "start event",
    "peak_flops_measured": "start event",
    "peak_flops_datasheet": "start event",
    "steps": "end event (the run's totals, once)",
    "tokens": "end event",
    "seconds": "end event",
    "last_loss": "end event (the last step's loss, already a series)",
    "last_val_loss": "end event (the last validation, already a series)",
    "island": "island event",
    "pseudo_grad_norm": "island_left_out event",
    "signal": "preempted event",
    "prompt": "sample event (train.sample_every): text",
    "text": "sample event (train.sample_every): text",
    "attempt": "restart event",
    "failed_rank": "restart event",
}


def fail(message):
    print(f"tensorboard_readback: FAIL: {message}")
    sys.exit(1)


def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def expected_scalars(path):
    """(tag, step) -> the values metrics.jsonl holds for it, in line order (a replayed step repeats)."""
    expected = collections.defaultdict(list)
    with open(path) as lines:
        for number, line in enumerate(lines, 1):
            record = json.loads(line)
            for key, value in record.items():
                if key in NOT_IN_TENSORBOARD:
                    continue
                if key not in TAGS:
                    fail(f"{path}:{number}: key '{key}' has no TensorBoard tag and is not listed in NOT_IN_TENSORBOARD")
                if "step" not in record:
                    fail(f"{path}:{number}: '{key}' in a record without a step")
                # NaN and infinities are written as null (JSON has no such numbers).
                expected[(TAGS[key], record["step"])].append(None if value is None else as_float32(value))
    return expected


def read_back(tb_dir):
    """(tag, step) -> the values TensorBoard reads, in file order, from every event file of tb_dir."""
    files = [f for f in sorted(os.listdir(tb_dir)) if io_wrapper.IsSummaryEventsFile(f)]
    if not files:
        fail(f"no event files in {tb_dir}")
    accumulator = event_accumulator.EventAccumulator(tb_dir, size_guidance={event_accumulator.SCALARS: 0})  # 0: keep all
    accumulator.Reload()
    actual = collections.defaultdict(list)
    for tag in accumulator.Tags()[event_accumulator.SCALARS]:
        for event in accumulator.Scalars(tag):
            actual[(tag, event.step)].append(event.value)
    return files, actual


def same(expected, actual):
    return (expected is None and not math.isfinite(actual)) or expected == actual


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tensorboard_readback.py RUN_DIR")
    run_dir = sys.argv[1]
    expected = expected_scalars(os.path.join(run_dir, "metrics.jsonl"))
    files, actual = read_back(os.path.join(run_dir, "tb"))
    if not expected:
        fail(f"no scalars in {run_dir}/metrics.jsonl")
    # Both directions: a scalar TensorBoard has and metrics.jsonl lacks is as wrong as the reverse.
    for tag, step in sorted(expected.keys() | actual.keys()):
        want, got = expected.get((tag, step), []), actual.get((tag, step), [])
        if len(want) != len(got) or not all(map(same, want, got)):
            fail(f"tag {tag} step {step}: metrics.jsonl has {want} (as float32), TensorBoard read {got}")
    scalars = sum(map(len, expected.values()))
    tags = {tag for tag, _ in expected}
    steps = {step for _, step in expected}
    print(f"tensorboard_readback: {scalars} scalars of metrics.jsonl ({len(tags)} tags, {len(steps)} steps) "
          f"read back by tensorboard {VERSION} from {len(files)} event file(s)")


if __name__ == "__main__":
    main()
