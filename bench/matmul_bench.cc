// xlnet-bench-matmul: this machine's fp32 (and bf16) matrix-multiply rate
// through LibTorch, the peak that training throughput is compared with.
//
//   build/bin/xlnet-bench-matmul [--size 1024] [--seconds 2] [--threads 0]
#include <iostream>

#include "bench/matmul_peak.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"

namespace {

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
  const double fp32 =
      xlnet::bench::MeasureMatmulGflops(size, torch::kFloat32, seconds);
  const double bf16 =
      xlnet::bench::MeasureMatmulGflops(size, torch::kBFloat16, seconds);
  std::cout << "matmul " << size << "x" << size << ": fp32 " << fp32
            << " GFLOP/s, bf16 " << bf16 << " GFLOP/s (bf16/fp32 "
            << bf16 / fp32 << ")\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-bench-matmul", argc, argv, &Run);
}
