#include "model/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "absl/strings/str_cat.h"

// LibTorch 2.4 replaced the per-device autocast setters with ones taking a
// device type; 1.13 .. 2.3 have only the old ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define XLNET_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace xlnet {
namespace {

bool AutocastEnabled(bool cuda) {
#ifdef XLNET_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void SetAutocastEnabled(bool cuda, bool enabled) {
#ifdef XLNET_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
#else
  if (cuda) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

torch::ScalarType AutocastDtype(bool cuda) {
#ifdef XLNET_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::get_autocast_gpu_dtype()
              : at::autocast::get_autocast_cpu_dtype();
#endif
}

void SetAutocastDtype(bool cuda, torch::ScalarType dtype) {
#ifdef XLNET_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
#else
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace

absl::StatusOr<torch::Device> ParseDevice(const std::string& name) {
  const absl::StatusOr<DeviceSetting> setting = ParseDeviceSetting(name);
  if (!setting.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device: ", setting.status().message()));
  }
  if (!setting->is_cuda()) return torch::Device(torch::kCPU);
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device '", name,
        "' requested but this LibTorch has no usable CUDA (build against a "
        "CUDA LibTorch, or use train.device=cpu)"));
  }
  if (setting->index >= static_cast<int>(torch::cuda::device_count())) {
    return absl::FailedPreconditionError(
        absl::StrCat("device '", name, "' but only ",
                     torch::cuda::device_count(), " CUDA devices exist"));
  }
  return setting->index < 0
             ? torch::Device(torch::kCUDA)
             : torch::Device(torch::kCUDA,
                             static_cast<int16_t>(setting->index));
}

torch::ScalarType ScalarTypeOf(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return torch::kFloat32;
    case Dtype::kBf16:
      return torch::kBFloat16;
    case Dtype::kFp16:
      return torch::kFloat16;
  }
  TORCH_CHECK(false, "ScalarTypeOf: unknown Dtype ", static_cast<int>(dtype));
}

absl::Status CheckPrecision(torch::Device device, torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return absl::OkStatus();
  if (dtype != torch::kBFloat16 && dtype != torch::kHalf) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported compute dtype ", c10::toString(dtype),
        " (use fp32, bf16 or fp16)"));
  }
  if (device.is_cpu()) {
    if (dtype == torch::kHalf) {
      return absl::InvalidArgumentError(
          "fp16 runs on CUDA only; use bf16 on the CPU");
    }
    return absl::OkStatus();
  }
  if (device.is_cuda()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("no autocast for device ", device.str()));
}

AutocastGuard::AutocastGuard(torch::Device device, torch::ScalarType dtype) {
  auto status = CheckPrecision(device, dtype);
  TORCH_CHECK(status.ok(), std::string(status.message()));
  if (dtype == torch::kFloat) return;
  active_ = true;
  cuda_ = device.is_cuda();
  prev_enabled_ = AutocastEnabled(cuda_);
  prev_dtype_ = AutocastDtype(cuda_);
  SetAutocastEnabled(cuda_, true);
  SetAutocastDtype(cuda_, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocastEnabled(cuda_, prev_enabled_);
  SetAutocastDtype(cuda_, prev_dtype_);
}

AutocastState CurrentAutocastState() {
  AutocastState state;
  state.cpu_enabled = AutocastEnabled(/*cuda=*/false);
  state.cuda_enabled = AutocastEnabled(/*cuda=*/true);
  state.cpu_dtype = AutocastDtype(/*cuda=*/false);
  state.cuda_dtype = AutocastDtype(/*cuda=*/true);
  return state;
}

std::optional<torch::ScalarType> AutocastDtypeOf(const torch::Device& device) {
  const AutocastState state = CurrentAutocastState();
  if (device.is_cuda() && state.cuda_enabled) return state.cuda_dtype;
  if (device.is_cpu() && state.cpu_enabled) return state.cpu_dtype;
  return std::nullopt;
}

AutocastStateGuard::AutocastStateGuard(const AutocastState& state)
    : previous_(CurrentAutocastState()) {
  SetAutocastEnabled(/*cuda=*/false, state.cpu_enabled);
  SetAutocastEnabled(/*cuda=*/true, state.cuda_enabled);
  SetAutocastDtype(/*cuda=*/false, state.cpu_dtype);
  SetAutocastDtype(/*cuda=*/true, state.cuda_dtype);
  // As AutocastGuard: casts of weights are cached while nested.
  nested_ = state.cpu_enabled || state.cuda_enabled;
  if (nested_) at::autocast::increment_nesting();
}

AutocastStateGuard::~AutocastStateGuard() {
  if (nested_ && at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  SetAutocastEnabled(/*cuda=*/false, previous_.cpu_enabled);
  SetAutocastEnabled(/*cuda=*/true, previous_.cuda_enabled);
  SetAutocastDtype(/*cuda=*/false, previous_.cpu_dtype);
  SetAutocastDtype(/*cuda=*/true, previous_.cuda_dtype);
}

}  // namespace xlnet
