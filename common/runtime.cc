#include "common/runtime.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace xlnet {

namespace {

// The number after `key` in /proc/meminfo-style text ("MemAvailable:  123
// kB"), in bytes; 0 when absent.
uint64_t MeminfoBytes(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(text.c_str() + at + key.size(), nullptr, 10) * 1024;
}

// A cgroup v2 value ("max" or bytes) from /sys/fs/cgroup; 0 when unlimited
// or unreadable.
uint64_t CgroupBytes(const std::string& file) {
  auto text = ReadFile("/sys/fs/cgroup/" + file, 4096);
  if (!text.ok() || text->rfind("max", 0) == 0) return 0;
  return std::strtoull(text->c_str(), nullptr, 10);
}

}  // namespace

uint64_t AvailableMemoryBytes() {
  uint64_t available = 0;
  if (auto meminfo = ReadFile("/proc/meminfo", 1 << 20); meminfo.ok()) {
    available = MeminfoBytes(*meminfo, "MemAvailable:");
  }
  if (available == 0) {
    available = static_cast<uint64_t>(::sysconf(_SC_AVPHYS_PAGES)) *
                static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  if (const uint64_t limit = CgroupBytes("memory.max"); limit > 0) {
    const uint64_t used = CgroupBytes("memory.current");
    available = std::min(available, limit > used ? limit - used : 0);
  }
  return available;
}

int64_t CapThreads(int64_t requested, const std::string& key) {
  const int64_t cores =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (requested <= cores) return requested;
  XLOG(WARNING) << key << "=" << requested << " is more than the " << cores
                << " cores of this machine; using " << cores;
  return cores;
}

int ConfigureThreads(int64_t threads) {
  const int64_t cores =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  // At most one per core (callers warn through CapThreads): a count like
  // 100000 would start threads until the process is killed.
  const int n =
      static_cast<int>(threads <= 0 ? cores : std::min(threads, cores));
  torch::set_num_threads(n);
  return torch::get_num_threads();
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

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

}  // namespace xlnet
