#include "common/runtime.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

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
    return absl::InvalidArgumentError(
        absl::StrCat("device '", name, "' is not one of cpu, cuda, cuda:N"));
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
  // LibTorch calls sgemm_ through libblas.so.3, which Debian's alternatives
  // point at OpenBLAS or the (many times slower) reference BLAS. Report the
  // library that really provides the symbol.
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info;
  std::string provider = "unknown";
  if (sgemm != nullptr && dladdr(sgemm, &info) != 0 && info.dli_fname) {
    char resolved[PATH_MAX];
    provider = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  }
  std::string kind;
  if (provider.find("openblas") != std::string::npos) {
    using ParallelFn = int (*)();
    auto parallel = reinterpret_cast<ParallelFn>(
        dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    const int mode = parallel != nullptr ? parallel() : -1;
    kind = mode == 2   ? "OpenBLAS (OpenMP)"
           : mode == 1 ? "OpenBLAS (pthreads)"
                       : "OpenBLAS";
  } else if (provider.find("mkl") != std::string::npos) {
    kind = "MKL";
  } else if (provider.find("libtorch_cpu") != std::string::npos) {
    // pip wheels link MKL (x86-64) into libtorch_cpu.so itself.
    kind = "linked into LibTorch (MKL in pip wheels)";
  } else {
    kind = "reference BLAS? (slow: install libopenblas0-openmp)";
  }
  return absl::StrCat(kind, ", sgemm from ", provider);
}

std::string RuntimeSummary() {
  return absl::StrCat(
      "LibTorch ", TORCH_VERSION, ", ", torch::get_num_threads(),
      " threads, BLAS: ", BlasDescription(),
      torch::cuda::is_available()
          ? absl::StrCat(", CUDA devices: ", torch::cuda::device_count())
          : ", CUDA: not available");
}

}  // namespace xlnet
