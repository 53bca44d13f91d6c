"""transformers both ways, checked with the real package (issue 21).

Export: checkpoints trained under TP=2 x PP=2 (GQA) and with tied embeddings, exported by
`atoll ckpt export`, load in LlamaForCausalLM.from_pretrained with no missing, unexpected or
mismatched keys and give Atoll's logits (training forward and KV-cache decoding) within 1e-4;
greedy `atoll sample` equals `generate()`.
Import: save_pretrained directories (sharded, fp32 and bf16) start an Atoll run whose first loss
equals transformers' loss on the same batch within 1e-4.
Tokenizer: a SentencePiece model from `atoll tokenizer train`, carried by the checkpoint into the
export, loads in AutoTokenizer and encodes to Atoll's ids; greedy sampling agrees in ids and text.
Llama 3's tokenizer.model (tiktoken), carried by a checkpoint into the export as a tokenizer.json
that AutoTokenizer loads with Atoll's ids; the
exported tokenizer.json is the one transformers' TikTokenConverter writes, key for key, and the
exported directory samples in Atoll with it.
Bad input: another architecture, a missing tensor, a tokenizer of another vocabulary and a prompt
longer than model.seq each give one line and exit 2.
"""
import argparse
import json
import logging
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import torch
import transformers
from llama_models.llama3 import tokenizer as llama3_tokenizer
from safetensors.torch import load_file, save_file
from transformers.convert_slow_tokenizer import TikTokenConverter

parser = argparse.ArgumentParser()
parser.add_argument("--atoll", required=True)
parser.add_argument("--logits", required=True)
parser.add_argument("--work", required=True)
args = parser.parse_args()
work = args.work
failures = []
LLAMA3 = Path(llama3_tokenizer.__file__).parent / "tokenizer.model"  # Meta's, from the llama-models package


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


def atoll_logits(model_dir, ids):
    out = f"{work}/logits.safetensors"
    r = run([args.logits, model_dir, out, *map(str, ids)])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    t = load_file(out)
    return t["forward"], t["cached"]


def export_and_compare(name, model_fields, parallel, ranks):
    # train.sample_every at the last step: the text rank 0 prints from the sharded model must be what
    # `atoll sample` writes from the checkpoint of that step with the same settings.
    sampling = ", sample_every: 20, sample_prompt: 'the ', sample_tokens: 24"
    r = mpirun(ranks, args.atoll, "train", config(name, model_fields, parallel, train=sampling))
    check(r.returncode == 0, f"{name}: trains ({parallel})", r.stderr[-300:] if r.returncode else "")
    exported = f"{work}/{name}-hf"
    r = run([args.atoll, "ckpt", "export", f"{work}/{name}/checkpoints", "--out", exported])
    check(r.returncode == 0, f"{name}: atoll ckpt export", r.stderr[-300:])
    records = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
    printed = [r["text"] for r in records if r.get("event") == "sample" and r["step"] == 20]
    r = run([args.atoll, "sample", f"{work}/{name}/checkpoints", "--prompt", "the ", "--temperature", "1", "--top-k",
             "40", "--seed", str(5 + 20), "--max-tokens", "24"])
    check(len(printed) == 1 and r.stdout == "the " + printed[0] + "\n",
          f"{name}: train.sample_every's text ({parallel}) is atoll sample's from the step's checkpoint",
          f"{printed} vs {r.stdout!r}")
    model, bad_keys, warnings = load_exported(exported)
    check(not bad_keys and not warnings, f"{name}: from_pretrained without missing/unexpected keys",
          f"{bad_keys} {warnings}")
    ids = list(b"the quick brown fox 17 jumps over")
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0]
    forward, cached = atoll_logits(exported, ids)
    for what, ours in (("training forward", forward), ("KV-cache decoding", cached)):
        diff = (ours - theirs).abs().max().item()
        check(diff < 1e-4, f"{name}: logits of Atoll's {what} equal transformers' within 1e-4",
              f"max |diff| {diff:.2e}")
    print(f"figure: {name} max |logit diff| forward {(forward - theirs).abs().max().item():.3e}, "
          f"cached {(cached - theirs).abs().max().item():.3e}, logit scale {theirs.abs().max().item():.2f}")
    return exported, model


def greedy_agrees(name, exported, model, prompt_ids, max_new=16):
    r = run([args.atoll, "sample", exported, "--prompt", PROMPT, "--temperature", "0", "--max-tokens",
             str(max_new), "--ids", "yes"])
    ours = [int(t) for t in r.stdout.split()]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=max_new,
                             min_new_tokens=max_new, pad_token_id=0, eos_token_id=None)
    theirs = out[0, len(prompt_ids):].tolist()
    check(r.returncode == 0 and ours == theirs, f"{name}: greedy atoll sample equals generate()",
          f"atoll {ours} transformers {theirs} {r.stderr[-200:]}")


PROMPT = "the quick brown"

# ---- Export: TP=2 x PP=2 with GQA, and tied embeddings with GQA --------------------------------
gqa = "vocab: 256, dim: 32, layers: 2, heads: 4, kv_heads: 2, ffn: 64, seq: 48"
exported, model = export_and_compare("tp2pp2", gqa, "tp: 2, pp: 2", 4)
greedy_agrees("tp2pp2", exported, model, list(PROMPT.encode()))
exported_tied, model_tied = export_and_compare("tied", gqa + ", tie_embeddings: true", "tp: 2", 2)
greedy_agrees("tied", exported_tied, model_tied, list(PROMPT.encode()))

# ---- Import: save_pretrained directories start a run with transformers' first loss -----------------
SEQ, BATCH = 48, 4


def write_shard(path, tokens):  # llm.c's format: 256 int32 header (magic, version 1, count), uint16
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


text = open(f"{work}/text.txt", "rb").read()
batch_tokens = list(text[: BATCH * SEQ + 1])  # exactly BATCH sequences: step 1 sees them all
write_shard(f"{work}/one_batch.bin", batch_tokens)
torch.manual_seed(3)
hf_config = transformers.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                                     rms_norm_eps=1e-5, tie_word_embeddings=False)
created = transformers.LlamaForCausalLM(hf_config)
for dtype in (torch.float32, torch.bfloat16):
    name = f"import-{str(dtype).split('.')[-1]}"
    directory = f"{work}/{name}"
    created.to(dtype).save_pretrained(directory, max_shard_size="40KB")
    shards = [f for f in os.listdir(directory) if f.startswith("model-")]
    check(len(shards) > 1 and os.path.exists(f"{directory}/model.safetensors.index.json"),
          f"{name}: save_pretrained wrote a sharded directory", f"{len(shards)} shards")
    reference = transformers.LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    x = torch.tensor(batch_tokens[: BATCH * SEQ + 1])
    inputs = torch.stack([x[i * SEQ:(i + 1) * SEQ] for i in range(BATCH)])
    targets = torch.stack([x[i * SEQ + 1:(i + 1) * SEQ + 1] for i in range(BATCH)])
    with torch.no_grad():
        logits = reference(inputs).logits
        theirs = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1)).item()
    cfg = config(name, f"vocab: 256, dim: 32, layers: 2, heads: 4, kv_heads: 2, ffn: 64, seq: {SEQ}, "
                       f"norm_eps: 1.0e-5, init_from: {directory}", "tp: 2", steps=1)
    r = mpirun(2, args.atoll, "train", cfg, "--set", f"data.train={work}/one_batch.bin", "--set",
               "checkpoint.every=0")
    ours = None
    if r.returncode == 0:
        records = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
        ours = next(r["loss"] for r in records if r.get("step") == 1 and "loss" in r)
    check(ours is not None and abs(ours - theirs) < 1e-4,
          f"{name}: Atoll's first loss (tp 2) equals transformers' within 1e-4",
          f"atoll {ours} transformers {theirs:.6f}" + (r.stderr[-300:] if r.returncode else ""))
    print(f"figure: {name} first loss atoll {ours} transformers {theirs:.7f}")


# ---- Bad input: one line, exit 2 -----------------------------------------------------------------
def bad_input(what, cmd, expect):
    r = run(cmd) if cmd[0] != "mpirun" else mpirun(1, *cmd[1:])
    lines = [l for l in r.stderr.splitlines() if l.startswith("atoll:")]
    check(r.returncode == 2 and len(lines) == 1 and expect in lines[0], f"bad input: {what} -> exit 2, one line",
          lines[0] if len(lines) == 1 else f"exit {r.returncode}: {r.stderr.strip()[-300:]}")


gpt2 = f"{work}/gpt2"
transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=256)).save_pretrained(gpt2)
base = config("bad", "vocab: 256, dim: 32, layers: 2, heads: 4, kv_heads: 2, ffn: 64, seq: 48", "dp: 1", steps=1)
bad_input("init_from a GPT-2 directory", ["mpirun", args.atoll, "train", base, "--set", f"model.init_from={gpt2}"],
          "of type 'gpt2'; Atoll trains Llama")
missing = f"{work}/missing"
created.to(torch.float32).save_pretrained(missing)
weights = load_file(f"{missing}/model.safetensors")
del weights["model.layers.1.mlp.up_proj.weight"]
save_file(weights, f"{missing}/model.safetensors", metadata={"format": "pt"})
bad_input("init_from a directory missing a tensor",
          ["mpirun", args.atoll, "train", base, "--set", f"model.init_from={missing}", "--set", "model.norm_eps=1e-5"],
          "has no model.layers.1.mlp.up_proj.weight")
bad_input("a prompt longer than model.seq", [args.atoll, "sample", exported, "--prompt", "x" * 60],
          "longer than model.seq = 48")

# ---- SentencePiece: trained, carried by the checkpoint into the export, read by AutoTokenizer ------
VOCAB = 320
sp_model = f"{work}/sp/tokenizer.model"
r = run([args.atoll, "tokenizer", "train", "--vocab", str(VOCAB), "--out", sp_model, f"{work}/text.txt"])
check(r.returncode == 0, "tokenizer train", r.stderr[-300:])
r = run([args.atoll, "data", "prepare", "--out", f"{work}/sp", "--tokenizer", sp_model, "--val-fraction", "0.1",
         f"{work}/text.txt"])
check(r.returncode == 0, "data prepare --tokenizer", r.stdout.strip() + r.stderr[-300:])
sp_fields = f"vocab: {VOCAB}, dim: 32, layers: 2, heads: 4, kv_heads: 2, ffn: 64, seq: 48"
sp_cfg = config("subword", sp_fields, "dp: 1",
                data=f"train: {work}/sp/train.bin, val: {work}/sp/val.bin, tokenizer: {sp_model}")
r = mpirun(1, args.atoll, "train", sp_cfg)
check(r.returncode == 0, "subword: trains with data.tokenizer", r.stderr[-300:])
sp_export = f"{work}/subword-hf"
run([args.atoll, "ckpt", "export", f"{work}/subword/checkpoints", "--out", sp_export])
tokenizer = transformers.AutoTokenizer.from_pretrained(sp_export)
for sample in ("the quick brown fox 1234 jumps", "  Indented line\n\tand a tab: naïve café ☃ 日本", ""):
    ours = [int(t) for t in run([args.atoll, "tokenizer", "encode", sp_model, sample]).stdout.split()]
    theirs = tokenizer.encode(sample)
    check(ours == theirs, f"subword: AutoTokenizer encodes {sample[:20]!r} to Atoll's ids", f"{ours} vs {theirs}")
sp_model_hf, bad_keys, warnings = load_exported(sp_export)
check(not bad_keys and not warnings, "subword: from_pretrained without missing/unexpected keys", f"{bad_keys}")
prompt_ids = tokenizer.encode(PROMPT)
r = run([args.atoll, "sample", sp_export, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", "12", "--ids", "yes"])
ours = [int(t) for t in r.stdout.split()]
with torch.no_grad():
    out = sp_model_hf.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=12, min_new_tokens=12,
                               pad_token_id=0, eos_token_id=None)
theirs = out[0, len(prompt_ids):].tolist()
check(ours == theirs, "subword: greedy atoll sample equals generate()", f"{ours} vs {theirs}")
r = run([args.atoll, "sample", f"{work}/subword/checkpoints", "--prompt", PROMPT, "--temperature", "0",
         "--max-tokens", "12"])
check(r.stdout.rstrip("\n") == tokenizer.decode(prompt_ids + theirs),
      "subword: atoll sample from the checkpoint prints transformers' decoding of the same ids",
      f"{r.stdout!r} vs {tokenizer.decode(prompt_ids + theirs)!r}")
bad_input("data.tokenizer of another vocabulary",
          ["mpirun", args.atoll, "train", sp_cfg, "--set", "model.vocab=384"], "has 320 pieces but model.vocab is 384")

# ---- Llama 3's tokenizer (tiktoken) and a tokenizer.json: carried into the export as tokenizer.json --
meta = llama3_tokenizer.Tokenizer(LLAMA3)
specials = sorted(meta.special_tokens, key=meta.special_tokens.get)
converted = f"{work}/llama3-tokenizer.json"
TikTokenConverter(vocab_file=str(LLAMA3), pattern=meta.pat_str, extra_special_tokens=specials).converted().save(converted)
r = run([args.atoll, "data", "prepare", "--out", f"{work}/l3", "--tokenizer", str(LLAMA3), "--val-fraction", "0.1",
         f"{work}/text.txt"])
check(r.returncode == 0, "data prepare with Llama 3's tokenizer.model", r.stdout.strip() + r.stderr[-300:])
SAMPLES = ("the quick brown fox 1234567 jumps", "  Indented line\n\tand a tab: naïve café ☃ 日本 🦙", "it's WE'RE <|eot_id|>")
# One run, with the tiktoken file (a tokenizer.json is exported as itself; a second run of a 128256-entry
# vocabulary would double this section's minute).
for kind, model_file in (("tiktoken", str(LLAMA3)),):
    cfg = config(f"l3-{kind}", "vocab: 128256, dim: 32, layers: 1, heads: 2, kv_heads: 2, ffn: 64, seq: 48", "dp: 1",
                 steps=1, data=f"train: {work}/l3/train.bin, val: {work}/l3/val.bin, tokenizer: {model_file}")
    r = mpirun(1, args.atoll, "train", cfg)
    check(r.returncode == 0, f"{kind}: trains with data.tokenizer", r.stderr[-300:])
    out = f"{work}/l3-{kind}-hf"
    r = run([args.atoll, "ckpt", "export", f"{work}/l3-{kind}/checkpoints", "--out", out])
    check(r.returncode == 0 and sorted(os.listdir(out)) == ["config.json", "model.safetensors", "tokenizer.json",
                                                           "tokenizer_config.json"],
          f"{kind}: the export holds tokenizer.json and tokenizer_config.json", r.stderr[-300:])
    with open(out + "/tokenizer.json") as exported_json, open(converted) as reference_json:
        check(json.load(exported_json) == json.load(reference_json),
              f"{kind}: the exported tokenizer.json is TikTokenConverter's, key for key")
    hf = transformers.AutoTokenizer.from_pretrained(out, split_special_tokens=True)
    check((hf.bos_token, hf.eos_token) == ("<|begin_of_text|>", "<|end_of_text|>"),
          f"{kind}: AutoTokenizer's bos and eos", f"{hf.bos_token} {hf.eos_token}")
    for sample in SAMPLES:
        ours = [int(t) for t in run([args.atoll, "tokenizer", "encode", model_file, sample]).stdout.split()]
        theirs = hf.encode(sample, add_special_tokens=False)
        check(ours == theirs == meta.encode(sample, bos=False, eos=False, allowed_special=set()),
              f"{kind}: AutoTokenizer encodes {sample[:16]!r} to Atoll's (and tiktoken's) ids", f"{ours} vs {theirs}")
    r = run([args.atoll, "sample", out, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", "4"])
    check(r.returncode == 0 and r.stdout.startswith(PROMPT), f"{kind}: atoll sample reads the export's tokenizer.json",
          r.stdout[-200:] + r.stderr[-300:])

print(f"{len(failures)} failed" if failures else "every transformers check passed")
sys.exit(1 if failures else 0)
