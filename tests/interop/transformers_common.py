"""What the transformers interop checks share (transformers_models_check.py and
transformers_tokenizers_check.py, run by transformers.sh): the arguments, PASS/FAIL counting, running
atoll and mpirun, a run's config, loading an exported directory in LlamaForCausalLM, the bad-input
check and the closing tally.
"""
import argparse
import logging
import subprocess
import sys

import torch
import transformers

parser = argparse.ArgumentParser()
parser.add_argument("--atoll", required=True)
parser.add_argument("--logits", required=True)
parser.add_argument("--work", required=True)
args = parser.parse_args()
work = args.work
failures = []
PROMPT = "the quick brown"


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        failures.append(what)


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def mpirun(np_, *cmd):
    return run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(np_),
                "-x", "OMP_NUM_THREADS=1", *cmd])


def config(name, model, parallel, steps=20, data=None, train=""):
    path = f"{work}/{name}.yaml"
    with open(path, "w") as f:
        f.write(f"""run:        {{ dir: {work}/{name}, seed: 5, threads: 1, mfu_peak_tflops: 1 }}
model:      {{ {model} }}
parallel:   {{ {parallel} }}
train:      {{ steps: {steps}, global_batch: 4, log_every: 1, eval_every: 0{train} }}
optim:      {{ lr: 3.0e-3, min_lr: 3.0e-4, warmup: 2 }}
data:       {{ {data or f"train: {work}/data/train.bin, val: {work}/data/val.bin"} }}
checkpoint: {{ every: {steps} }}
""")
    return path


class Warnings(logging.Handler):
    """transformers' own warnings while loading (missing or unexpected keys are reported there too)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def load_exported(directory):
    catcher = Warnings()
    logger = transformers.logging.get_logger("transformers")
    logger.addHandler(catcher)
    model, info = transformers.LlamaForCausalLM.from_pretrained(directory, output_loading_info=True,
                                                                dtype=torch.float32)
    logger.removeHandler(catcher)
    keys = [k for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs") if info.get(k)]
    return model.eval(), keys, [w for w in catcher.lines if "key" in w.lower() or "initialized" in w.lower()]




def bad_input(what, cmd, expect):
    r = run(cmd) if cmd[0] != "mpirun" else mpirun(1, *cmd[1:])
    lines = [l for l in r.stderr.splitlines() if l.startswith("atoll:")]
    check(r.returncode == 2 and len(lines) == 1 and expect in lines[0], f"bad input: {what} -> exit 2, one line",
          lines[0] if len(lines) == 1 else f"exit {r.returncode}: {r.stderr.strip()[-300:]}")



def finish():
    print(f"{len(failures)} failed" if failures else "every transformers check passed")
    sys.exit(1 if failures else 0)
