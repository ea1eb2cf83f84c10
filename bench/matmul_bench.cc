// xlnet-bench-matmul: this machine's fp32 (and bf16) matrix-multiply rate
// through LibTorch, the peak that training throughput is compared with.
//
//   build/bin/xlnet-bench-matmul [--size 1024] [--seconds 2] [--threads 0]
#include <chrono>
#include <iostream>

#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"

namespace {

double MeasureGflops(int64_t n, torch::ScalarType dtype, double seconds) {
  torch::manual_seed(0);
  auto a = torch::randn({n, n}).to(dtype);
  auto b = torch::randn({n, n}).to(dtype);
  auto c = torch::matmul(a, b);  // warm-up
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    c = torch::matmul(a, b);
    ++iters;
    elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  return 2.0 * n * n * n * iters / elapsed / 1e9;
}

absl::Status Run(int argc, char** argv) {
  int64_t size = 1024, threads = 0, seconds = 2;
  xlnet::FlagParser flags("xlnet-bench-matmul", "[flags]");
  flags.AddInt("size", &size, "square matrix size");
  flags.AddInt("seconds", &seconds, "seconds per measurement");
  flags.AddInt("threads", &threads, "intra-op threads (0 = all cores)");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  xlnet::ConfigureThreads(threads);
  std::cout << xlnet::RuntimeSummary() << "\n";
  torch::NoGradGuard no_grad;
  const double fp32 = MeasureGflops(size, torch::kFloat32, seconds);
  const double bf16 = MeasureGflops(size, torch::kBFloat16, seconds);
  std::cout << "matmul " << size << "x" << size << ": fp32 " << fp32
            << " GFLOP/s, bf16 " << bf16 << " GFLOP/s (bf16/fp32 "
            << bf16 / fp32 << ")\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-bench-matmul", argc, argv, &Run);
}
