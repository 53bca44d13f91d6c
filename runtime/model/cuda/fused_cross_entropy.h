// Launchers of the fused cross-entropy CUDA kernels (fused_cross_entropy.cu), in plain C++ with raw
// pointers as fused_elementwise.h. The loss of each row of logits against its target: the softmax
// statistics in fp32 straight from the logits' own type (bf16 or fp32), never an fp32 copy of the
// logits nor a log-softmax tensor; the backward writes the logits' gradient in their type in one
// pass. Each runs on `stream` and returns at once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/model/cuda/element_type.h"

namespace atl::runtime::cuda_kernels {

// Row r of `logits` (rows x vocab, row r at logits + r * row_stride, unit stride along the row):
// log_sum_exp[r] = log(sum_j exp(logits[r, j])), row_loss[r] = log_sum_exp[r] - logits[r, targets[r]]
// (NaN for a target outside [0, vocab)).
void cross_entropy_forward(ElementType type, const void* logits, int64_t row_stride, const int64_t* targets,
                           float* log_sum_exp, float* row_loss, int64_t rows, int64_t vocab,
                           cudaStream_t stream);

// The gradient of scale * sum_r row_loss[r] with scale = *d_loss * inv_rows (the mean's backward,
// d_loss a device scalar: no host read): d_logits[r, j] = (softmax(logits[r])_j - [j == targets[r]]) * scale,
// d_logits contiguous rows x vocab in the logits' type.
void cross_entropy_backward(ElementType type, const void* logits, int64_t row_stride, const int64_t* targets,
                            const float* log_sum_exp, const float* d_loss, float inv_rows, void* d_logits,
                            int64_t rows, int64_t vocab, cudaStream_t stream);

}  // namespace atl::runtime::cuda_kernels
