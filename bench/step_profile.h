// Where a training step's time goes: LibTorch's Kineto profiler around a few
// steps, summed by kernel (CUDA) or operator (CPU) name, and the GPU
// allocator's peak. Used by xlnet-bench (--profile_steps, --profile_trace).
#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace xlnet::bench {

// Starts LibTorch's profiler for CPU operators and, on `device` CUDA, CUDA
// kernels. One profiler per process; Stop() ends it.
absl::Status StartStepProfile(const torch::Device& device);

// Ends the profiler started by StartStepProfile and returns a table of the
// `top` names with the most time per step (device kernels on CUDA, CPU
// operators otherwise) and the share of the profiled total; writes the
// Chrome trace to `trace_path` unless it is empty (where LibTorch cannot,
// the table's last line says why).
absl::StatusOr<std::string> StopStepProfile(int64_t steps, int top,
                                            const std::string& trace_path);

// Peak bytes the CUDA caching allocator handed out (allocated) and held
// (reserved) on `device` since the last reset; -1 each without a CUDA build
// or on a CPU device.
struct GpuMemoryPeak {
  double allocated_mb = -1, reserved_mb = -1;
};
void ResetGpuMemoryPeak(const torch::Device& device);
GpuMemoryPeak ReadGpuMemoryPeak(const torch::Device& device);

}  // namespace xlnet::bench
