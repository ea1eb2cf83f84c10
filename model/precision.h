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

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/settings.h"

namespace xlnet {

// The tensor type of a train.dtype / --dtype setting.
torch::ScalarType ScalarTypeOf(Dtype dtype);

// The device of train.device (or a tool's --device): "cpu", "cuda" or
// "cuda:N" (ParseDeviceSetting, config/settings.h), checked to be usable in
// this build and on this machine (a CPU-only LibTorch refuses "cuda" with a
// clear error).
absl::StatusOr<torch::Device> ParseDevice(const std::string& name);

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

// The calling thread's autocast settings for both device types, so work
// recomputed later (activation checkpointing, in backward) runs under the
// settings its forward had.
struct AutocastState {
  bool cpu_enabled = false;
  bool cuda_enabled = false;
  torch::ScalarType cpu_dtype = torch::kBFloat16;
  torch::ScalarType cuda_dtype = torch::kHalf;
};
AutocastState CurrentAutocastState();

// The dtype autocast casts to on `device`'s type while autocast is on for
// that type in the calling thread; nullopt while it is off.
std::optional<torch::ScalarType> AutocastDtypeOf(const torch::Device& device);

// Sets `state` for its scope and restores the previous settings after.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
  bool nested_ = false;
};

}  // namespace xlnet
