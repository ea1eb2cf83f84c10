// Mixed precision behind one API: fp32 (no-op), bf16 autocast on the CPU,
// bf16/fp16 autocast on CUDA. Parameters stay fp32; matmuls run in the low
// precision; attention softmax and the loss run in fp32 (see
// relative_attention.cc), so masks never overflow.
//
//   XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
//   AutocastGuard autocast(device, dtype);   // until end of scope
//   auto out = model->forward(inputs);
#pragma once

#include <torch/torch.h>

#include "absl/status/status.h"

namespace xlnet {

// OK when `dtype` (kFloat, kBFloat16, kHalf) can run on `device`: fp16 is
// CUDA only (CPU autocast supports bf16).
absl::Status CheckPrecision(torch::Device device, torch::ScalarType dtype);

// Enables autocast for `device`'s type at `dtype` (nothing for kFloat) and
// restores the previous state on destruction. TORCH_CHECKs CheckPrecision.
class AutocastGuard {
 public:
  AutocastGuard(torch::Device device, torch::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool prev_enabled_ = false;
  torch::ScalarType prev_dtype_ = torch::kFloat;
};

}  // namespace xlnet
