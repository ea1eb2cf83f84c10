// This machine's matrix-multiply rate through LibTorch, the peak that
// training throughput is compared with (xlnet-bench-matmul, xlnet-bench).
#pragma once

#include <torch/torch.h>

#include <chrono>

namespace xlnet::bench {

inline void SyncDevice(torch::Device device) {
#ifdef XLNET_WITH_CUDA
  if (device.is_cuda()) torch::cuda::synchronize();
#endif
}

// GFLOP/s (2 n^3 per product) of n x n `dtype` products on `device`, timed
// for about `seconds` after one untimed warm-up product (CPU: on the current
// thread count).
inline double MeasureMatmulGflops(int64_t n, torch::ScalarType dtype,
                                  double seconds,
                                  torch::Device device = torch::kCPU) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  auto a = torch::randn({n, n}).to(device, dtype);
  auto b = torch::randn({n, n}).to(device, dtype);
  auto c = torch::matmul(a, b);  // warm-up
  SyncDevice(device);
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    c = torch::matmul(a, b);
    SyncDevice(device);
    ++iters;
    elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  return 2.0 * n * n * n * iters / elapsed / 1e9;
}

}  // namespace xlnet::bench
