"""transformers both ways, checked with the real package (issue 21): the model.

Export: checkpoints trained under TP=2 x PP=2 (GQA) and with tied embeddings, exported by
`atoll ckpt export`, load in LlamaForCausalLM.from_pretrained with no missing, unexpected or
mismatched keys and give Atoll's logits (training forward and KV-cache decoding) within 1e-4;
greedy `atoll sample` equals `generate()`.
Import: save_pretrained directories (sharded, fp32 and bf16) start an Atoll run whose first loss
equals transformers' loss on the same batch within 1e-4.
Bad input: another architecture, a missing tensor and a prompt longer than model.seq each give one
line and exit 2. (The tokenizers: transformers_tokenizers_check.py.)
"""
import json
import os
import struct

import torch
import transformers
from safetensors.torch import load_file, save_file

from transformers_common import (PROMPT, args, bad_input, check, config, finish, load_exported, mpirun, run,
                                 work)


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

finish()
