#!/usr/bin/env python3
"""The PyTorch peer of bench/bench_gpu.sh: the model of bench/pytorch_llama_ddp.py (Atoll's Llama:
RMSNorm, RoPE, GQA, SwiGLU, tied or untied head) trained the way a PyTorch user trains it on GPUs --
eager, bf16 autocast, F.scaled_dot_product_attention (flash / memory-efficient kernels),
DistributedDataParallel over NCCL (none on one GPU), fused AdamW, grad-norm clipping.

One process per GPU, under torchrun (without it: one process, one GPU):
  .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 8 \\
      bench/pytorch_llama_gpu.py --dim 2048 --layers 16 ... --global-batch 32 --data data/pydocs/train.bin
`--device cpu` runs the same code on the CPU over gloo (a smoke test of the script, not a figure).
`--float8 tensorwise|rowwise` is the FP8 peer of Atoll's `train.precision: fp8` (torchao's float8
training, meant to run under `--compile`): the decoder layers' seven linears (q, k, v, o, gate, up,
down: what Atoll's fp8 covers) become torchao Float8Linear modules of that recipe; the embedding and
the LM head stay in bf16, as torchao recommends. torchao is imported only then.

Prints rank 0's progress and one machine-readable last line:
  pytorch_gpu gpus=N tokens_per_s=X step_s=S flops_per_token=F peak_flops_measured=P
              peak_flops_datasheet=D mfu_measured=M mfu_datasheet=MD peak_bytes=B
MFU counts FLOPs as Atoll does (training_flops_per_token below); the measured peak is a bf16 matmul
probe run on every GPU at once, as Atoll's start-up probe; the datasheet peak is 0 when the device
is not in DATASHEET_BF16; peak_bytes is torch.cuda.max_memory_allocated, the largest over ranks.
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from pytorch_llama_ddp import Llama, add_model_options, load_tokens

# Dense (no sparsity) bf16 tensor-core peak per GPU from NVIDIA's datasheets, by a substring of
# torch.cuda.get_device_name(), first match wins (so the PCIe and NVL parts come before the SXM one).
DATASHEET_BF16 = [("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H200 NVL", 835e12),
                  ("H100", 989e12), ("H200", 989e12), ("A100", 312e12)]


def datasheet_peak(name):
    return next((flops for key, flops in DATASHEET_BF16 if key in name), 0.0)


# The decoder layer's linears Atoll's train.precision fp8 runs in FP8 (LlamaModel::linear); the FP8
# peer converts exactly these, so both compare the same products in FP8.
DECODER_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def is_decoder_linear(module, fqn):
    """torchao's module_filter_fn: a linear of a decoder layer ("layers.3.q_proj"), never the LM head."""
    parts = fqn.split(".")
    return isinstance(module, nn.Linear) and parts[0] == "layers" and parts[-1] in DECODER_LINEARS


def convert_to_float8(model, recipe):
    """The model's decoder linears as torchao Float8Linear of `recipe` ("tensorwise": dynamic per-tensor
    scales, E4M3 forward, E5M2 gradients; "rowwise": per-row scales, E4M3 throughout, power-of-two
    scales); returns the converted modules' names."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear
    convert_to_float8_training(model, module_filter_fn=is_decoder_linear,
                               config=Float8LinearConfig.from_recipe_name(recipe))
    return [name for name, m in model.named_modules() if isinstance(m, Float8Linear)]


def training_flops_per_token(a):
    """runtime/model/llama.cpp training_flops_per_token: 6 x non-embedding parameters (the LM head
    counted, tied or not) + 12 x layers x seq x dim for attention scores and values."""
    head_dim = a.dim / a.heads
    per_layer = a.dim * head_dim * (2 * a.heads + 2 * a.kv_heads) + 3 * a.dim * a.ffn + 2 * a.dim
    non_embedding = a.layers * per_layer + a.dim + a.vocab * a.dim
    return 6 * non_embedding + 12 * a.layers * a.seq * a.dim


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_matmul_peak(dtype, device, seconds=1.0):
    """FLOP/s of square matmuls in `dtype`, best of repeated timings (large on a GPU, so the probe
    reaches the tensor cores' plateau; small on the CPU, where this is only a smoke test)."""
    n, reps = (8192, 10) if device.type == "cuda" else (256, 1)
    x, y = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    out = torch.mm(x, y)  # warm-up: cuBLAS picks its kernel, the allocator its block
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        sync(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(x, y, out=out)
        sync(device)
        best = max(best, 2.0 * n**3 * reps / (time.perf_counter() - t0))
    return best


def init_distributed(device_kind):
    """torchrun's environment, or a one-process world on this machine's loopback when run directly."""
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    local_rank = int(os.environ["LOCAL_RANK"])
    if device_kind == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device, dist.get_rank(), dist.get_world_size()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in [("dim", 2048), ("layers", 16), ("heads", 32), ("kv-heads", 8), ("ffn", 8192),
                          ("seq", 2048), ("vocab", 32000), ("global-batch", 8), ("steps", 30),
                          ("warmup-steps", 5), ("log-every", 10), ("seed", 1234)]:
        p.add_argument("--" + name, type=int, default=default)
    add_model_options(p)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16", help="bf16: torch.autocast to bfloat16")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke test over gloo")
    p.add_argument("--data", default="", help="llm.c token shard (default: random tokens)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor: fused norms, RoPE, SwiGLU and loss); compile time "
                        "falls in the warm-up steps")
    p.add_argument("--float8", choices=("none", "tensorwise", "rowwise"), default="none",
                   help="torchao float8 training of the decoder linears with this recipe (use with --compile)")
    a = p.parse_args()
    if a.dim % a.heads or a.heads % a.kv_heads:
        p.error("dim must divide by heads, heads by kv-heads")
    if not 0 <= a.warmup_steps < a.steps:
        p.error(f"--warmup-steps {a.warmup_steps} leaves no measured step of --steps {a.steps}")
    if a.float8 != "none" and a.precision != "bf16":
        p.error("--float8 runs under bf16 autocast (--precision bf16), as Atoll's fp8 is bf16 around FP8 products")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pytorch_llama_gpu: no CUDA device visible to torch; use --device cpu for a smoke test")

    device, rank, world = init_distributed(a.device)
    if a.global_batch % world:
        raise SystemExit(f"pytorch_llama_gpu: --global-batch {a.global_batch} does not split over {world} processes")
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    say = print if rank == 0 else (lambda *_, **__: None)

    # Every GPU probes at once, as they will compute at once (Atoll's probe does the same); the mean
    # over ranks is the peak per GPU.
    peak = torch.tensor([measure_matmul_peak(dtype, device)], dtype=torch.float64, device=device)
    dist.all_reduce(peak)
    peak_measured = peak.item() / world
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak_datasheet = datasheet_peak(name) if a.precision == "bf16" else 0.0
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)

    torch.manual_seed(a.seed)
    with device:  # parameters drawn where they live (DDP broadcasts rank 0's anyway)
        model = Llama(a)
    if a.float8 != "none":
        converted = convert_to_float8(model, a.float8)
        expected = [f"layers.{i}.{n}" for i in range(a.layers) for n in DECODER_LINEARS]
        if sorted(converted) != sorted(expected):
            raise SystemExit(f"pytorch_llama_gpu: float8 converted {converted}, expected the decoder linears {expected}")
        say(f"float8: torchao {a.float8} recipe on {len(converted)} linears ({len(DECODER_LINEARS)} per layer); "
            f"embedding and LM head in bf16")
    say(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters; device: {name} x {world}; "
        f"matmul peak measured {peak_measured / 1e12:.1f} TFLOP/s per device")
    # One GPU needs no gradient reduction, and a PyTorch user would not wrap the model.
    if world > 1:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True)
    if a.compile:
        model = torch.compile(model)
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if "norm" not in n], "weight_decay": 0.1},
              {"params": [p for n, p in named if "norm" in n], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), fused=device.type == "cuda")

    per_rank = a.global_batch // world
    tokens = load_tokens(a.data, (a.steps + 1) * a.global_batch * (a.seq + 1), a.vocab, a.seed).to(device)
    windows = tokens.unfold(0, a.seq + 1, a.seq)  # sequence i: tokens[i*seq : i*seq + seq + 1], a view
    times = []
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        first = ((step - 1) * a.global_batch + rank * per_rank) % (windows.shape[0] - per_rank)
        batch = windows[first:first + per_rank]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(batch[:, :-1], batch[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = loss.item()  # Atoll reads its loss every step too
        sync(device)
        times.append(time.perf_counter() - t0)
        if step % a.log_every == 0 or step == a.steps:
            say(f"step {step}/{a.steps} loss {loss_value:.4f} step_s {times[-1]:.4f}", flush=True)

    peak_bytes = torch.tensor([torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0],
                              dtype=torch.float64, device=device)
    dist.all_reduce(peak_bytes, op=dist.ReduceOp.MAX)
    step_s = statistics.median(times[a.warmup_steps:])
    tokens_per_s = a.global_batch * a.seq / step_s
    flops = training_flops_per_token(a)
    mfu_datasheet = tokens_per_s * flops / (peak_datasheet * world) if peak_datasheet else 0.0
    # float8=RECIPE only on the FP8 peer's line: bench_gpu.sh's bf16 summary reads every field as a number.
    say(f"pytorch_gpu compiled={int(a.compile)}{'' if a.float8 == 'none' else ' float8=' + a.float8} gpus={world} tokens_per_s={tokens_per_s:.1f} step_s={step_s:.4f} flops_per_token={flops:.6g} "
        f"peak_flops_measured={peak_measured:.6g} peak_flops_datasheet={peak_datasheet:.6g} "
        f"mfu_measured={tokens_per_s * flops / (peak_measured * world):.4f} mfu_datasheet={mfu_datasheet:.4f} "
        f"peak_bytes={int(peak_bytes.item())}", flush=True)
    # DDP's reducer goes before its process group (the other way round a gloo rank sometimes aborted at exit).
    del model, opt
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
