#!/usr/bin/env python3
"""The peer of Atoll's training benchmark: the same Llama, optimizer and batch in PyTorch
(Python, eager), data-parallel with DistributedDataParallel over gloo, one thread per process.

Run with the interpreter of the venv Atoll builds against (the same torch as Atoll's LibTorch):
  .venv/bin/python bench/pytorch_llama_ddp.py --world 2 --steps 30 --data data/pydocs/train.bin
Prints one machine-readable last line: `pytorch_ddp tokens_per_s=<x> step_s=<y>`.
The model mirrors runtime/model/llama.cpp: RMSNorm, RoPE (rotate-half, --rope-theta), causal
grouped-query attention, SwiGLU, no biases, an untied LM head unless --tie-embeddings -- written as
a PyTorch user would: attention through
F.scaled_dot_product_attention (fused CPU kernels), and `--precision bf16` through
torch.autocast (PyTorch's natural mixed-precision path: fp32 parameters, bf16 matmuls).
"""
import argparse
import math
import socket
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = a.heads, a.kv_heads, a.dim // a.heads
        self.input_layernorm = RMSNorm(a.dim)
        self.q_proj = nn.Linear(a.dim, a.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(a.dim, a.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(a.dim, a.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(a.heads * self.head_dim, a.dim, bias=False)
        self.post_attention_layernorm = RMSNorm(a.dim)
        self.gate_proj = nn.Linear(a.dim, a.ffn, bias=False)
        self.up_proj = nn.Linear(a.dim, a.ffn, bias=False)
        self.down_proj = nn.Linear(a.ffn, a.dim, bias=False)

    def attention(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))

    def forward(self, h, cos, sin):
        h = h + self.attention(self.input_layernorm(h), cos, sin)
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.dim)
        self.lm_head = nn.Linear(a.dim, a.vocab, bias=False)
        head_dim = a.dim // a.heads
        inv_freq = a.rope_theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(a.seq, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        for name, p in self.named_parameters():
            if "norm" not in name:
                std = 0.02 / math.sqrt(2 * a.layers) if ("o_proj" in name or "down_proj" in name) else 0.02
                nn.init.normal_(p, 0.0, std)
        if a.tie_embeddings:  # model.tie_embeddings: the head reads the embedding matrix
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, tokens, targets):
        h = self.embed_tokens(tokens)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        logits = self.lm_head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def load_tokens(path, needed, vocab, seed):
    """The first `needed` tokens of an llm.c shard (wrapping around a short one), else random tokens.

    Only what the run consumes is read: a whole shard as one large int64 array changed glibc's
    heap behaviour enough to slow every later step by ~1.5x (measured), which is no cost of training.
    """
    if path:
        header = np.fromfile(path, dtype=np.int32, count=256)
        if header[0] not in (20240520, 20240801):
            raise SystemExit(f"{path}: not an llm.c token shard (magic {header[0]})")
        dtype = np.uint16 if header[0] == 20240520 else np.uint32
        tokens = np.fromfile(path, dtype=dtype, count=min(needed, int(header[2])), offset=1024)
        return torch.from_numpy(np.resize(tokens, needed).astype(np.int64))
    return torch.randint(0, vocab, (needed,), generator=torch.Generator().manual_seed(seed))


def add_model_options(p):
    """The model fields beyond the shape integers, with Atoll's defaults (model.rope_theta, model.tie_embeddings)."""
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--tie-embeddings", action="store_true", help="the LM head shares the embedding matrix")


def worker(rank, a, port, queue):
    torch.set_num_threads(1)  # one core per rank, as Atoll's run.threads: 1
    # Loopback only: the benchmark never opens a port beyond this machine.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world)
    torch.manual_seed(a.seed)
    model = nn.parallel.DistributedDataParallel(Llama(a))
    decay = [p for n, p in model.named_parameters() if "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if "norm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    per_rank = a.global_batch // a.world
    tokens = load_tokens(a.data, (a.steps + 1) * a.global_batch * (a.seq + 1), a.vocab, a.seed)
    windows = (tokens.numel() - 1) // a.seq
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        first = (step * a.global_batch + rank * per_rank) % (windows - per_rank)
        batch = torch.stack([tokens[(first + i) * a.seq:(first + i) * a.seq + a.seq + 1] for i in range(per_rank)])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(batch[:, :-1], batch[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        queue.put(statistics.median(times[a.warmup_steps:]))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in [("dim", 256), ("layers", 4), ("heads", 8), ("kv-heads", 8), ("ffn", 688), ("seq", 256),
                          ("vocab", 256), ("global-batch", 16), ("steps", 30), ("warmup-steps", 5), ("world", 2),
                          ("seed", 1234)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-4)
    add_model_options(p)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: torch.autocast to bfloat16 (mixed precision)")
    p.add_argument("--data", default="", help="llm.c token shard (default: random tokens)")
    a = p.parse_args()
    if a.global_batch % a.world or a.dim % a.heads or a.heads % a.kv_heads:
        p.error("global-batch must divide by world, dim by heads, heads by kv-heads")
    if not 0 <= a.warmup_steps < a.steps:
        p.error(f"--warmup-steps {a.warmup_steps} leaves no measured step of --steps {a.steps}")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(worker, args=(a, free_port(), queue), nprocs=a.world, join=True)
    step_s = queue.get()
    print(f"pytorch_ddp tokens_per_s={a.global_batch * a.seq / step_s:.1f} step_s={step_s:.4f}")


if __name__ == "__main__":
    main()
