// Causal attention, forward + backward: Atoll's hand-written attention (runtime/attention.h)
// against LibTorch's at::scaled_dot_product_attention (fused flash-attention CPU kernels since
// 2.x), measured in the same run, interleaved, on one thread (the training runs' setting).
//   build/bin/bench_attention [REPS=20]
// Shapes: the reference model's per-rank microbatch (8 sequences, 8 heads of 32, seq 256) and the
// same at seq 512 and 1024, in fp32 and bf16. Prints the median milliseconds of each and the ratio
// hand-written / SDPA (> 1: SDPA is faster), and checks both agree (max abs difference).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/model/attention.h"

namespace {

struct Shape {
  int64_t batch, heads, seq, head_dim;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One forward + backward of `attention`; returns seconds and leaves the output in `out`.
template <typename Attention>
double time_step(Attention attention, const std::vector<at::Tensor>& qkv, const at::Tensor& d_out,
                 at::Tensor& out) {
  for (const at::Tensor& t : qkv) t.mutable_grad() = at::Tensor();
  const auto t0 = std::chrono::steady_clock::now();
  out = attention(qkv[0], qkv[1], qkv[2]);
  out.backward(d_out);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(const Shape& s, at::ScalarType dtype, int reps) {
  at::manual_seed(0);
  const auto options = at::TensorOptions().dtype(dtype);
  std::vector<at::Tensor> qkv;
  for (int i = 0; i < 3; ++i)
    qkv.push_back(at::randn({s.batch, s.heads, s.seq, s.head_dim}, options).requires_grad_(true));
  const at::Tensor d_out = at::randn({s.batch, s.heads, s.seq, s.head_dim}, options);
  const at::Tensor mask = atl::runtime::causal_mask(s.seq, dtype);
  auto handwritten = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return atl::runtime::handwritten_causal_attention(q, k, v, mask);
  };
  auto sdpa = [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  };
  at::Tensor out_hand, out_sdpa;
  std::vector<double> t_hand, t_sdpa;
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up rounds, then interleaved
    const double a = time_step(handwritten, qkv, d_out, out_hand);
    const at::Tensor grad_hand = r == 0 ? qkv[0].grad().clone() : at::Tensor();  // compared once, below
    const double b = time_step(sdpa, qkv, d_out, out_sdpa);
    if (r >= 2) {
      t_hand.push_back(a);
      t_sdpa.push_back(b);
    }
    if (r == 0) {
      const double out_diff = (out_hand.to(at::kFloat) - out_sdpa.to(at::kFloat)).abs().max().item<double>();
      const double grad_diff =
          (grad_hand.to(at::kFloat) - qkv[0].grad().to(at::kFloat)).abs().max().item<double>();
      std::printf("  agreement: max |out diff| %.2e, max |dq diff| %.2e\n", out_diff, grad_diff);
    }
  }
  const double hand = median(t_hand) * 1e3, fused = median(t_sdpa) * 1e3;
  std::printf("%-5s seq %5ld  hand-written %8.2f ms   sdpa %8.2f ms   hand/sdpa %.2fx   atoll uses %s\n",
              dtype == at::kFloat ? "fp32" : "bf16", static_cast<long>(s.seq), hand, fused, hand / fused,
              atl::runtime::fused_attention_is_faster(dtype, s.seq) ? "sdpa" : "hand-written");
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  std::printf(
      "causal attention forward + backward, batch 8 x 8 heads x head_dim 32, 1 thread, median of %d\n", reps);
  for (const int64_t seq : {256, 512, 1024})
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) run({8, 8, seq, 32}, dtype, reps);
  return 0;
}
