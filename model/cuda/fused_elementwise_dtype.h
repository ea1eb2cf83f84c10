// The dtype of a fused element-wise kernel's tensors (LibTorch's) as the
// kernels' DType (fused_elementwise_kernels.h, which includes no LibTorch):
// for the autograd nodes that launch them (fused_elementwise.cc,
// weight_casts.cc). CUDA builds only.
#pragma once

#include <torch/torch.h>

#include "model/cuda/fused_elementwise_kernels.h"

namespace xlnet::fused_elementwise {

// fp32, fp16 or bf16; TORCH_CHECK failure for any other dtype.
inline DType KernelDType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return DType::kFloat;
    case torch::kHalf:
      return DType::kHalf;
    case torch::kBFloat16:
      return DType::kBFloat16;
    default:
      TORCH_CHECK(false, "fused element-wise kernels: fp32, fp16 or bf16, got ",
                  t);
  }
  return DType::kFloat;
}

}  // namespace xlnet::fused_elementwise
