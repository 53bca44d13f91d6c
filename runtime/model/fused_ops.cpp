#include "runtime/model/fused_ops.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "atoll/build_config.h"

#if ATOLL_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "runtime/model/cuda/fused_cross_entropy.h"
#include "runtime/model/cuda/fused_elementwise.h"
#endif

namespace atl::runtime {
namespace {

bool kernel_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
}

// x = [batch, heads, seq, head_dim] whose transpose(1, 2) is contiguous memory.
bool by_position_contiguous(const at::Tensor& x) {
  return x.dim() == 4 && x.transpose(1, 2).is_contiguous();
}

}  // namespace

bool fused_swiglu_takes(const at::Tensor& gate_in, const at::Tensor& up) {
  return fused_ops_built() && gate_in.is_cuda() && kernel_dtype(gate_in) && gate_in.sizes() == up.sizes() &&
         gate_in.scalar_type() == up.scalar_type() && gate_in.device() == up.device();
}

bool fused_rope_takes(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin) {
  return fused_ops_built() && x.is_cuda() && kernel_dtype(x) && by_position_contiguous(x) &&
         x.size(3) % 2 == 0 && cos.dim() == 2 && cos.size(0) == x.size(2) && cos.size(1) == x.size(3) &&
         cos.sizes() == signed_sin.sizes() && cos.is_contiguous() && signed_sin.is_contiguous() &&
         cos.scalar_type() == x.scalar_type() && signed_sin.scalar_type() == x.scalar_type() &&
         cos.device() == x.device() && signed_sin.device() == x.device();
}

bool fused_cross_entropy_takes(const at::Tensor& logits, const at::Tensor& targets) {
  return fused_ops_built() && logits.is_cuda() && kernel_dtype(logits) && logits.dim() == 2 &&
         logits.stride(1) == 1 && logits.size(1) > 0 && targets.dim() == 1 &&
         targets.scalar_type() == at::kLong && targets.size(0) == logits.size(0) &&
         targets.device() == logits.device();
}

#if ATOLL_CUDA

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace kernels = cuda_kernels;

kernels::ElementType element_type(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat32;
}

cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

class SwiGlu : public torch::autograd::Function<SwiGlu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_in_any, const at::Tensor& up_any) {
    const c10::cuda::CUDAGuard guard(gate_in_any.device());
    const at::Tensor gate_in = gate_in_any.contiguous(), up = up_any.contiguous();
    at::Tensor out = at::empty_like(gate_in, at::MemoryFormat::Contiguous);
    kernels::swiglu_forward(element_type(gate_in), gate_in.data_ptr(), up.data_ptr(), out.data_ptr(),
                            gate_in.numel(), stream_of(gate_in));
    ctx->save_for_backward({gate_in, up});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &gate_in = saved[0], &up = saved[1];
    const c10::cuda::CUDAGuard guard(gate_in.device());
    const at::Tensor d_out = grads[0].contiguous();
    at::Tensor d_gate_in = at::empty_like(gate_in), d_up = at::empty_like(up);
    kernels::swiglu_backward(element_type(gate_in), d_out.data_ptr(), gate_in.data_ptr(), up.data_ptr(),
                             d_gate_in.data_ptr(), d_up.data_ptr(), gate_in.numel(), stream_of(gate_in));
    return {d_gate_in, d_up};
  }
};

// Over [batch, seq, heads, head_dim] (by position): the layout the kernels index, and the one the
// rotated q and k keep, viewed by head outside the Function (an output that is a view of a tensor
// made inside one is a special case of autograd's).
at::Tensor rotated(const at::Tensor& by_position_any, const at::Tensor& cos, const at::Tensor& signed_sin,
                   bool backward) {
  const at::Tensor by_position = by_position_any.contiguous();
  at::Tensor out = at::empty_like(by_position);
  const int64_t batch = by_position.size(0), seq = by_position.size(1), heads = by_position.size(2),
                head_dim = by_position.size(3);
  const auto launch = backward ? kernels::rope_backward : kernels::rope_forward;
  launch(element_type(by_position), by_position.data_ptr(), cos.data_ptr(), signed_sin.data_ptr(),
         out.data_ptr(), batch, seq, heads, head_dim, stream_of(by_position));
  return out;
}

class Rope : public torch::autograd::Function<Rope> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& by_position, const at::Tensor& cos,
                            const at::Tensor& signed_sin) {
    const c10::cuda::CUDAGuard guard(by_position.device());
    ctx->save_for_backward({cos, signed_sin});  // constants: the backward needs no input values
    return rotated(by_position, cos, signed_sin, /*backward=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const c10::cuda::CUDAGuard guard(grads[0].device());
    return {rotated(grads[0], saved[0], saved[1], /*backward=*/true), at::Tensor(), at::Tensor()};
  }
};

// The mean over rows of each row's cross-entropy; keeps the logits (as the ATen chain kept its
// log-softmax, in fp32) and one float per row for backward.
class CrossEntropy : public torch::autograd::Function<CrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets_any) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor targets = targets_any.contiguous();
    const int64_t rows = logits.size(0);
    const auto floats = logits.options().dtype(at::kFloat);
    at::Tensor log_sum_exp = at::empty({rows}, floats), row_loss = at::empty({rows}, floats);
    kernels::cross_entropy_forward(element_type(logits), logits.data_ptr(), logits.stride(0),
                                   targets.data_ptr<int64_t>(), log_sum_exp.data_ptr<float>(),
                                   row_loss.data_ptr<float>(), rows, logits.size(1), stream_of(logits));
    ctx->save_for_backward({logits, targets, log_sum_exp});
    return row_loss.mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &log_sum_exp = saved[2];
    const c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor d_loss = grads[0].to(at::kFloat).contiguous();
    const int64_t rows = logits.size(0), vocab = logits.size(1);
    at::Tensor d_logits = at::empty({rows, vocab}, logits.options());
    kernels::cross_entropy_backward(element_type(logits), logits.data_ptr(), logits.stride(0),
                                    targets.data_ptr<int64_t>(), log_sum_exp.data_ptr<float>(),
                                    d_loss.data_ptr<float>(),
                                    1.0f / static_cast<float>(std::max<int64_t>(rows, 1)),
                                    d_logits.data_ptr(), rows, vocab, stream_of(logits));
    return {d_logits, at::Tensor()};
  }
};

}  // namespace

bool fused_ops_built() {
  return true;
}

at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  if (!fused_cross_entropy_takes(logits, targets))
    throw std::invalid_argument(
        "fused_cross_entropy: needs CUDA logits [rows, vocab] (fp32 or bf16, unit stride along a row) and "
        "int64 targets [rows] on the same device");
  return CrossEntropy::apply(logits, targets);
}

at::Tensor fused_swiglu(const at::Tensor& gate_in, const at::Tensor& up) {
  if (!fused_swiglu_takes(gate_in, up))
    throw std::invalid_argument("fused_swiglu: needs two CUDA tensors of one shape, fp32 or bf16");
  return SwiGlu::apply(gate_in, up);
}

at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin) {
  if (!fused_rope_takes(x, cos, signed_sin))
    throw std::invalid_argument(
        "fused_rope: needs CUDA x [batch, heads, seq, head_dim] over [batch, seq, heads, head_dim] "
        "memory and [seq, head_dim] tables of its dtype, fp32 or bf16");
  return Rope::apply(x.transpose(1, 2), cos, signed_sin).transpose(1, 2);
}

#else

bool fused_ops_built() {
  return false;
}

at::Tensor fused_swiglu(const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("fused_swiglu: this build has no CUDA path");
}

at::Tensor fused_rope(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("fused_rope: this build has no CUDA path");
}

at::Tensor fused_cross_entropy(const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("fused_cross_entropy: this build has no CUDA path");
}

#endif

}  // namespace atl::runtime
