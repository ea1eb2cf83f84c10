#include "bench/step_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"

#ifdef XLNET_BENCH_CUDA_STATS
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace xlnet::bench {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

bool profiling = false;
bool profiling_cuda = false;

// Event duration in microseconds (LibTorch 2.x reports nanoseconds).
double DurationUs(const prof::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return e.durationNs() / 1e3;
#else
  return static_cast<double>(e.durationUs());
#endif
}

}  // namespace

absl::Status StartStepProfile(const torch::Device& device) {
  if (profiling) return absl::FailedPreconditionError("profiler already on");
  std::set<impl::ActivityType> activities = {impl::ActivityType::CPU};
  profiling_cuda = device.is_cuda();
  if (profiling_cuda) activities.insert(impl::ActivityType::CUDA);
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  profiling = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> StopStepProfile(int64_t steps, int top,
                                            const std::string& trace_path) {
  if (!profiling) return absl::FailedPreconditionError("profiler not on");
  profiling = false;
  std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  // Device kernels on CUDA (they do not nest). On CPU every operator is
  // listed with its inclusive time (nested operators count in their parents
  // too), and the table says so.
  const c10::DeviceType want =
      profiling_cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  std::map<std::string, std::pair<double, int64_t>> by_name;  // us, count
  double total_us = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != want) continue;
    auto& slot = by_name[e.name()];
    slot.first += DurationUs(e);
    slot.second += 1;
    total_us += DurationUs(e);
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(
      by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.first > b.second.first;
  });
  const double per = steps > 0 ? static_cast<double>(steps) : 1.0;
  std::string out = absl::StrFormat(
      "profile of %d step(s): %s time %.1f ms per step (%s)\n", steps,
      profiling_cuda ? "GPU kernel" : "CPU operator", total_us / 1e3 / per,
      profiling_cuda ? "kernels summed; overlap between streams counted twice"
                     : "inclusive times, nested operators counted in each");
  out += absl::StrFormat("%10s %7s %8s  %s\n", "ms/step", "share", "calls",
                         "name");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < top; ++i) {
    std::string name = rows[i].first;
    if (name.size() > 110) name = name.substr(0, 107) + "...";
    out += absl::StrFormat(
        "%10.3f %6.1f%% %8d  %s\n", rows[i].second.first / 1e3 / per,
        total_us > 0 ? 100 * rows[i].second.first / total_us : 0.0,
        static_cast<int64_t>(rows[i].second.second / per), name);
  }
  if (!trace_path.empty()) {
    // The table stands without the trace (LibTorch builds without Kineto,
    // e.g. Debian's, cannot save one).
    try {
      result->save(trace_path);
    } catch (const c10::Error& e) {
      out += absl::StrFormat("trace not written to %s: %s\n", trace_path,
                             e.what_without_backtrace());
    }
  }
  return out;
}

void ResetGpuMemoryPeak(const torch::Device& device) {
#ifdef XLNET_BENCH_CUDA_STATS
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(
        static_cast<c10::DeviceIndex>(device.has_index() ? device.index() : 0));
  }
#else
  (void)device;
#endif
}

GpuMemoryPeak ReadGpuMemoryPeak(const torch::Device& device) {
  GpuMemoryPeak peak;
#ifdef XLNET_BENCH_CUDA_STATS
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
        static_cast<c10::DeviceIndex>(device.has_index() ? device.index() : 0));
    peak.allocated_mb = stats.allocated_bytes[0].peak / (1024.0 * 1024.0);
    peak.reserved_mb = stats.reserved_bytes[0].peak / (1024.0 * 1024.0);
  }
#else
  (void)device;
#endif
  return peak;
}

}  // namespace xlnet::bench
