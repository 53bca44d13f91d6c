// The element types the model's CUDA kernels take (their launchers' headers share it).
#pragma once

namespace atl::runtime::cuda_kernels {

enum class ElementType { kFloat32, kBFloat16 };

}  // namespace atl::runtime::cuda_kernels
