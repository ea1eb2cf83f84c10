// Process-level setup shared by the tools: CPU threads, devices, BLAS.
#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace xlnet {

// Sets LibTorch's intra-op threads (`threads` 0 = all cores, at most the
// cores). Debian's LibTorch otherwise starts with one. Returns the count in
// use.
int ConfigureThreads(int64_t threads);

// `requested` threads, at most the machine's cores: a larger count from a
// config (`key`, e.g. "train.threads") is capped with a warning naming it.
int64_t CapThreads(int64_t requested, const std::string& key);

// Bytes of memory this process can still allocate: /proc/meminfo's
// MemAvailable, or less under a cgroup v2 memory limit.
uint64_t AvailableMemoryBytes();

// Which BLAS LibTorch calls on this machine, e.g. "OpenBLAS 0.3.21 ... OpenMP"
// or "reference BLAS (slow: install libopenblas0-openmp)".
std::string BlasDescription();

// One line describing LibTorch, threads and BLAS, for logs and benchmarks.
std::string RuntimeSummary();

// This machine's host name ("?" when it cannot be read).
std::string HostName();

}  // namespace xlnet
