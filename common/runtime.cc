#include "common/runtime.h"

#include <dlfcn.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace xlnet {

int ConfigureThreads(int64_t threads) {
  int n = static_cast<int>(threads);
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(n);
  return torch::get_num_threads();
}

absl::StatusOr<torch::Device> ParseDevice(const std::string& name) {
  torch::Device device(torch::kCPU);
  try {
    device = torch::Device(name);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", name, "' is not one of cpu, cuda, cuda:N"));
  }
  if (device.is_cuda()) {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device '", name,
          "' requested but this LibTorch has no usable CUDA (build against a "
          "CUDA LibTorch, or use train.device=cpu)"));
    }
    if (device.has_index() &&
        device.index() >= static_cast<int>(torch::cuda::device_count())) {
      return absl::FailedPreconditionError(
          absl::StrCat("device '", name, "' but only ",
                       torch::cuda::device_count(), " CUDA devices exist"));
    }
  } else if (!device.is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", name, "' is not one of cpu, cuda, cuda:N"));
  }
  return device;
}

absl::StatusOr<torch::ScalarType> ParseDtype(const std::string& name) {
  if (name == "fp32") return torch::kFloat32;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp16") return torch::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not one of fp32, bf16, fp16"));
}

std::string BlasDescription() {
  // OpenBLAS exports openblas_get_config; the reference BLAS does not.
  using ConfigFn = const char* (*)();
  auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (fn != nullptr) return absl::StrCat("OpenBLAS (", fn(), ")");
  if (dlsym(RTLD_DEFAULT, "mkl_get_version") != nullptr) return "MKL";
  return "no OpenBLAS found (reference BLAS is many times slower: install "
         "libopenblas0-openmp)";
}

std::string RuntimeSummary() {
  return absl::StrCat("LibTorch ", TORCH_VERSION, ", ", torch::get_num_threads(),
                      " threads, BLAS: ", BlasDescription(),
                      torch::cuda::is_available()
                          ? absl::StrCat(", CUDA devices: ",
                                         torch::cuda::device_count())
                          : ", CUDA: not available");
}

}  // namespace xlnet
