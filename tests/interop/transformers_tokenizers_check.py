"""transformers both ways, checked with the real package (issue 21): the tokenizers.

A SentencePiece model from `atoll tokenizer train`, carried by the checkpoint into the export, loads
in AutoTokenizer and encodes to Atoll's ids; greedy sampling agrees in ids and text. Llama 3's
tokenizer.model (tiktoken), carried by a checkpoint into the export as a tokenizer.json that
AutoTokenizer loads with Atoll's ids; the exported tokenizer.json is the one transformers'
TikTokenConverter writes, key for key, and the exported directory samples in Atoll with it. A
tokenizer of another vocabulary than the model's is one line, exit 2. (The model:
transformers_models_check.py.)
"""
import json
import os
from pathlib import Path

import torch
import transformers
from llama_models.llama3 import tokenizer as llama3_tokenizer
from transformers.convert_slow_tokenizer import TikTokenConverter

from transformers_common import (PROMPT, args, bad_input, check, config, finish, load_exported, mpirun, run,
                                 work)

LLAMA3 = Path(llama3_tokenizer.__file__).parent / "tokenizer.model"  # Meta's, from the llama-models package

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
# Atoll begins a prompt as data prepare --documents begins a document: after SentencePiece's <s>.
prompt_ids = [tokenizer.bos_token_id] + tokenizer.encode(PROMPT)
r = run([args.atoll, "sample", sp_export, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", "12", "--ids", "yes"])
ours = [int(t) for t in r.stdout.split()]
with torch.no_grad():
    out = sp_model_hf.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=12, min_new_tokens=12,
                               pad_token_id=0, eos_token_id=None)
theirs = out[0, len(prompt_ids):].tolist()
check(ours == theirs, "subword: greedy atoll sample equals generate()", f"{ours} vs {theirs}")
r = run([args.atoll, "sample", f"{work}/subword/checkpoints", "--prompt", PROMPT, "--temperature", "0",
         "--max-tokens", "12"])
check(r.stdout.rstrip("\n") == tokenizer.decode(prompt_ids[1:] + theirs),
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

finish()
