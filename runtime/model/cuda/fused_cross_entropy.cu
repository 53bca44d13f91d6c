// The fused cross-entropy kernels (fused_cross_entropy.h): one block per row of logits. The ATen
// chain they replace (logits cast to fp32, log_softmax, nll_loss, and their backward) wrote an fp32
// copy and an fp32 log-softmax of the whole [tokens, vocab] logits and read them back: at the 1B
// bench's shape (16,384 tokens x 32,000) 4 GiB of fp32 tensors a step and ~5% of its GPU time on an
// H100. Here the forward reads the logits once (an online max and sum of exponentials per thread,
// merged in a fixed order: deterministic) and keeps one float per row; the backward reads them once
// more and writes the gradient.
#include <cmath>
#include <cstdint>

#include "runtime/model/cuda/fused_cross_entropy.h"
#include "runtime/model/cuda/kernel_common.cuh"

namespace atl::runtime::cuda_kernels {
namespace {

using namespace device;  // NOLINT(google-build-using-namespace): this file's kernels are built of them
using namespace host;    // NOLINT(google-build-using-namespace)

constexpr int kThreads = 256;  // per row; a power of two of whole warps (the reduction below)

// A running max and the sum of exp(x - max) over the values seen.
struct MaxSum {
  float max;
  float sum;
};

__device__ inline MaxSum merged(MaxSum a, MaxSum b) {
  if (a.sum == 0.0f) return b;  // nothing seen on one side (max -inf: exp(-inf - -inf) is NaN)
  if (b.sum == 0.0f) return a;
  const float max = fmaxf(a.max, b.max);
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

__device__ inline MaxSum with(MaxSum acc, float x) {
  if (acc.sum == 0.0f) return {x, 1.0f};
  if (x > acc.max) return {x, acc.sum * expf(acc.max - x) + 1.0f};
  return {acc.max, acc.sum + expf(x - acc.max)};  // a NaN logit makes the sum NaN: the loss shows it
}

// The block's merge of every thread's MaxSum, in the same order every time; valid in thread 0.
__device__ inline MaxSum block_merged(MaxSum mine) {
  __shared__ MaxSum per_warp[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    mine = merged(mine, {__shfl_xor_sync(0xffffffffu, mine.max, offset),
                         __shfl_xor_sync(0xffffffffu, mine.sum, offset)});
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) per_warp[warp] = mine;
  __syncthreads();
  MaxSum all = {0.0f, 0.0f};
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) all = merged(all, per_warp[w]);
  return all;
}

template <typename T, int W>
__global__ void cross_entropy_forward_kernel(const T* logits, int64_t row_stride, const int64_t* targets,
                                             float* log_sum_exp, float* row_loss, int64_t vocab) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * row_stride;
  MaxSum acc = {0.0f, 0.0f};
  for (int64_t g = threadIdx.x; g < vocab / W; g += kThreads) {
    const Pack<T, W> p = load<T, W>(row, g * W);
#pragma unroll
    for (int k = 0; k < W; ++k) acc = with(acc, to_float(p.v[k]));
  }
  const MaxSum all = block_merged(acc);
  if (threadIdx.x != 0) return;
  const float lse = all.max + logf(all.sum);
  const int64_t target = targets[r];
  log_sum_exp[r] = lse;
  row_loss[r] = target >= 0 && target < vocab ? lse - to_float(row[target]) : NAN;
}

template <typename T, int W>
__global__ void cross_entropy_backward_kernel(const T* logits, int64_t row_stride, const int64_t* targets,
                                              const float* log_sum_exp, const float* d_loss, float inv_rows,
                                              T* d_logits, int64_t vocab) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * row_stride;
  T* d_row = d_logits + r * vocab;
  const float lse = log_sum_exp[r], scale = *d_loss * inv_rows;
  const int64_t target = targets[r];
  for (int64_t g = threadIdx.x; g < vocab / W; g += kThreads) {
    const Pack<T, W> p = load<T, W>(row, g * W);
    Pack<T, W> d;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float softmax = expf(to_float(p.v[k]) - lse);
      d.v[k] = from_float<T>((g * W + k == target ? softmax - 1.0f : softmax) * scale);
    }
    store<T, W>(d_row, g * W, d);
  }
}

template <typename T, int W>
struct Forward {
  static void run(const void* logits, int64_t row_stride, const int64_t* targets, float* log_sum_exp,
                  float* row_loss, int64_t rows, int64_t vocab, cudaStream_t stream) {
    cross_entropy_forward_kernel<T, W><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), row_stride, targets, log_sum_exp, row_loss, vocab);
  }
};

template <typename T, int W>
struct Backward {
  static void run(const void* logits, int64_t row_stride, const int64_t* targets, const float* log_sum_exp,
                  const float* d_loss, float inv_rows, void* d_logits, int64_t rows, int64_t vocab,
                  cudaStream_t stream) {
    cross_entropy_backward_kernel<T, W><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), row_stride, targets, log_sum_exp, d_loss, inv_rows,
        static_cast<T*>(d_logits), vocab);
  }
};

// Packs of 16 bytes where every row starts 16-byte aligned and the vocabulary is whole packs.
bool vectorizable(ElementType type, const void* logits, int64_t row_stride, const void* d_logits,
                  int64_t vocab) {
  const int width = pack_width(type);
  return aligned({logits, d_logits}) && row_stride % width == 0 && vocab % width == 0;
}

}  // namespace

void cross_entropy_forward(ElementType type, const void* logits, int64_t row_stride, const int64_t* targets,
                           float* log_sum_exp, float* row_loss, int64_t rows, int64_t vocab,
                           cudaStream_t stream) {
  if (rows == 0) return;
  dispatch<Forward>(type, vectorizable(type, logits, row_stride, nullptr, vocab), logits, row_stride, targets,
                    log_sum_exp, row_loss, rows, vocab, stream);
  check_launch("cross_entropy_forward");
}

void cross_entropy_backward(ElementType type, const void* logits, int64_t row_stride, const int64_t* targets,
                            const float* log_sum_exp, const float* d_loss, float inv_rows, void* d_logits,
                            int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows == 0) return;
  dispatch<Backward>(type, vectorizable(type, logits, row_stride, d_logits, vocab), logits, row_stride,
                     targets, log_sum_exp, d_loss, inv_rows, d_logits, rows, vocab, stream);
  check_launch("cross_entropy_backward");
}

}  // namespace atl::runtime::cuda_kernels
