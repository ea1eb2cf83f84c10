// xlnet-bench-attention: one XLNet layer (both streams, memory, PLM masks,
// segments, attention dropout) with each attention core, forward and
// forward+backward time and the step's peak memory, in one run.
//
//   build/bin/xlnet-bench-attention [--d_model 768 --n_head 12 --seq_len 512
//       --mem_len 384 --num_predict 85 --batch 1 --layers 1 --iters 2
//       --dtype fp32 --impls unfused,tiled --tiles 64,0 --device cpu]
//
// On --device cuda the times end with a device synchronisation, and the
// memory column is left out (the caching allocator's peak is xlnet-bench's).
// Each core is measured twice (alternating) and the faster run is kept.
// Times are wall clock and process CPU time (all threads; less sensitive to
// other load on a shared machine, but it counts OpenMP's spin-waiting). The
// memory column is the peak resident memory of the timed forward+backward
// steps above the resident memory before them, after returning the heap's
// free memory to the system (malloc_trim; VmHWM after clear_refs): what the
// steps' activations and temporaries add.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "model/attention.h"
#include "model/precision.h"
#include "model/xlnet.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double fwd_ms = 1e300, fwd_bwd_ms = 1e300, fwd_bwd_cpu_ms = 1e300;
  double peak_mb = 1e300;
  torch::Tensor out;
};

absl::Status Run(int argc, char** argv) {
  xlnet::bench::LayerBenchShape shape;
  shape.batch = 1;
  int64_t mem_len = 384;
  std::string dtype_name = "fp32", impls_flag = "unfused,tiled",
              tiles_flag = "64,0", dropout_flag = "0.1", device_name = "cpu";
  xlnet::FlagParser flags("xlnet-bench-attention",
                          "[--d_model N --seq_len L --mem_len M --batch B "
                          "--impls unfused,tiled ...]");
  shape.AddFlags(&flags);
  flags.AddInt("mem_len", &mem_len, "M, memory tokens (K = M + L keys)");
  flags.AddString("dropout", &dropout_flag,
                  "dropout (attention probabilities included)");
  flags.AddString("dtype", &dtype_name, "fp32 or bf16 (autocast)");
  flags.AddString("impls", &impls_flag, "attention cores to compare");
  flags.AddString("device", &device_name, "cpu or cuda");
  flags.AddString("tiles", &tiles_flag,
                  "tiled path: query rows, keys per tile (0 = all keys)");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_RETURN_IF_ERROR(shape.Check());
  double dropout = 0;
  if (!absl::SimpleAtod(dropout_flag, &dropout) || dropout < 0 ||
      dropout >= 1) {
    return absl::InvalidArgumentError("--dropout must be in [0, 1)");
  }
  std::vector<std::string> tile_parts = absl::StrSplit(tiles_flag, ',');
  xlnet::AttentionTiles tiles;
  if (tile_parts.size() != 2 ||
      !absl::SimpleAtoi(tile_parts[0], &tiles.query) ||
      !absl::SimpleAtoi(tile_parts[1], &tiles.key) || tiles.query < 1 ||
      tiles.key < 0) {
    return absl::InvalidArgumentError(
        "--tiles must be Q,K with Q >= 1, K >= 0");
  }
  std::vector<xlnet::AttentionImpl> impls;
  for (const auto& name : absl::StrSplit(impls_flag, ',')) {
    XLNET_ASSIGN_OR_RETURN(const xlnet::AttentionImpl impl,
                           xlnet::ParseEnumSetting<xlnet::AttentionImpl>(
                               "--impls", std::string(name)));
    impls.push_back(impl);
  }
  if (impls.empty() || mem_len < 0) {
    return absl::InvalidArgumentError("need --impls and --mem_len >= 0");
  }
  XLNET_ASSIGN_OR_RETURN(
      const xlnet::Dtype dtype_setting,
      xlnet::ParseEnumSetting<xlnet::Dtype>("--dtype", dtype_name));
  const torch::ScalarType dtype = xlnet::ScalarTypeOf(dtype_setting);
  if (device_name != "cpu" && device_name != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: 'cpu' or 'cuda', got '", device_name, "'"));
  }
  const torch::Device device(device_name == "cuda" ? torch::kCUDA
                                                   : torch::kCPU);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError("--device cuda: no CUDA device");
  }
  XLNET_RETURN_IF_ERROR(xlnet::CheckPrecision(device, dtype));
  const xlnet::XLNetConfig config = shape.ModelConfig(dropout);
  for (auto& impl : impls) {
    impl = xlnet::ResolveAttention(impl, device, dtype, config.d_head);
    XLNET_RETURN_IF_ERROR(xlnet::CheckAttentionAvailable(impl, device));
  }
  xlnet::ConfigureThreads(shape.threads);
  std::cout << xlnet::RuntimeSummary() << "\n";

  torch::manual_seed(0);
  xlnet::XLNetModel model(config);
  model->to(device);
  model->train();
  auto x = xlnet::bench::MakePlmInputs(shape.batch, shape.seq_len,
                                       shape.num_predict, shape.vocab, device);
  for (int64_t n = 0; n < shape.layers; ++n) {
    if (mem_len > 0) {
      x.mems.push_back(torch::randn({mem_len, shape.batch, shape.d_model},
                                    torch::TensorOptions().device(device)));
    }
  }
  // Work queued on the device is done before a clock is read.
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };

  auto elapsed_ms = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  // One measurement of `impl`; keeps the better figures in *res.
  auto measure = [&](xlnet::AttentionImpl impl, Result* res) {
    xlnet::AttentionOptions opts;
    opts.impl = impl;
    opts.tiles = tiles;
    model->SetAttention(opts);
    xlnet::AutocastGuard autocast(device, dtype);
    {
      torch::NoGradGuard no_grad;
      for (int64_t i = 0; i < shape.warmup; ++i) model->forward(x);
      sync();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < shape.iters; ++i) {
        res->out = model->forward(x).query_hidden_state;
      }
      sync();
      res->fwd_ms = std::min(res->fwd_ms, elapsed_ms(t0) / shape.iters);
    }
    auto step = [&]() {
      model->zero_grad();
      auto out = model->forward(x);
      (out.query_hidden_state.to(torch::kFloat).square().mean() +
       out.last_hidden_state.to(torch::kFloat).square().mean())
          .backward();
    };
    for (int64_t i = 0; i < shape.warmup; ++i) step();
    sync();
    malloc_trim(0);
    const double before = xlnet::bench::ProcStatusMb("VmRSS");
    xlnet::bench::ResetPeakRss();
    const auto t0 = Clock::now();
    const double cpu0 = 1e3 * xlnet::bench::ProcessCpuSeconds();
    for (int64_t i = 0; i < shape.iters; ++i) step();
    sync();
    res->fwd_bwd_cpu_ms = std::min(
        res->fwd_bwd_cpu_ms,
        (1e3 * xlnet::bench::ProcessCpuSeconds() - cpu0) / shape.iters);
    res->fwd_bwd_ms = std::min(res->fwd_bwd_ms, elapsed_ms(t0) / shape.iters);
    if (!device.is_cuda()) {
      res->peak_mb = std::min(res->peak_mb, xlnet::bench::PeakRssMb() - before);
    }
  };
  std::map<xlnet::AttentionImpl, Result> results;
  for (int round = 0; round < 2; ++round) {
    for (auto impl : impls) measure(impl, &results[impl]);
  }
  // Attention FLOPs of one layer's forward (both streams): scores, band of
  // position products (R = K + L for the unfused path), probs x values.
  const double k = mem_len + shape.seq_len, r = k + shape.seq_len,
               dh = shape.d_model / shape.n_head;
  const double attn_fwd_gflop = 2.0 * shape.batch * shape.n_head * dh *
                                (shape.seq_len + shape.num_predict) *
                                (2 * k + r) / 1e9;
  std::printf(
      "config: layers %lld, d_model %lld, heads %lld, d_inner %lld, B %lld, "
      "L %lld, M %lld, P %lld, dropout %.2f, %s, tiles %lld x %lld, %lld "
      "iters, %s\n",
      (long long)shape.layers, (long long)shape.d_model,
      (long long)shape.n_head, (long long)shape.d_inner, (long long)shape.batch,
      (long long)shape.seq_len, (long long)mem_len,
      (long long)shape.num_predict, dropout, dtype_name.c_str(),
      (long long)tiles.query, (long long)tiles.key, (long long)shape.iters,
      device.str().c_str());
  std::printf("attention forward FLOPs per layer (unfused count): %.2f GFLOP\n",
              attn_fwd_gflop * shape.layers);
  std::printf("%-10s %12s %12s %16s %22s\n", "attention", "forward ms",
              "fwd+bwd ms", "fwd+bwd CPU ms", "fwd+bwd peak MiB (+)");
  for (auto impl : impls) {
    const Result& res = results[impl];
    const std::string peak =
        device.is_cuda() ? "-" : absl::StrFormat("%.0f", res.peak_mb);
    std::printf("%-10s %12.1f %12.1f %16.1f %22s\n", xlnet::EnumName(impl),
                res.fwd_ms, res.fwd_bwd_ms, res.fwd_bwd_cpu_ms, peak.c_str());
  }
  const Result& first = results[impls[0]];
  for (size_t i = 1; i < impls.size(); ++i) {
    const Result& res = results[impls[i]];
    std::printf(
        "%s vs %s: forward %.2fx, fwd+bwd %.2fx, query stream max |diff| "
        "%.3g (dropout masks differ between cores when dropout > 0)\n",
        xlnet::EnumName(impls[i]), xlnet::EnumName(impls[0]),
        first.fwd_ms / res.fwd_ms, first.fwd_bwd_ms / res.fwd_bwd_ms,
        (res.out.to(torch::kFloat) - first.out.to(torch::kFloat))
            .abs()
            .max()
            .item<double>());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-bench-attention", argc, argv, &Run);
}
