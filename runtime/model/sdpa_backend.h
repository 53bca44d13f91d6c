// Which of LibTorch's fused attention kernels SDPA runs on a GPU (kernels.attention): flash
// attention 2, cuDNN's, or the memory-efficient one. SDPA tries its backends in a process-wide
// priority order and runs the first whose constraints the inputs meet (cuDNN's, for one, is passed by
// under deterministic algorithms); LibTorch's own order depends on its version, the cuDNN it ships
// and the GPU.
#pragma once

#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "runtime/config/config.h"

namespace atl::runtime {

// SDPA's backend names as LibTorch's Python API spells them (flash_attention, cudnn_attention, ...).
std::string sdpa_backend_name(at::SDPBackend backend);

// Puts `backend` first in SDPA's priority order for the rest of the process, the others after it in
// the order they had: inputs it cannot take still run on the next one that can. `device` is where
// attention will run (LibTorch settles its default order at its first choice on a GPU, which would
// otherwise overwrite this).
void prefer_sdpa_backend(at::SDPBackend backend, const c10::Device& device);

// The backend SDPA picks for the causal attention of one training microbatch row: q [1, heads, seq,
// head_dim], k and v [1, kv_heads, ...] (grouped inside SDPA when fewer), needing gradients. With
// `document_mask`, for document_masked_attention's call instead: a boolean mask, kv heads repeated.
at::SDPBackend sdpa_choice(const c10::Device& device, at::ScalarType dtype, int64_t heads, int64_t kv_heads,
                           int64_t seq, int64_t head_dim, bool document_mask = false);

// The backend kernels.attention puts first; none for auto (LibTorch's own order).
std::optional<at::SDPBackend> preferred_sdpa_backend(AttentionKernel kernel);

// The start-up line naming the attention kernel a GPU run's layers get from SDPA (this rank's heads
// under parallel.tp, in `dtype`).
std::string attention_line(const Config& config, const c10::Device& device, at::ScalarType dtype);

}  // namespace atl::runtime
