// xlnet-bench: full pretraining steps (data pipeline, forward, backward,
// all-reduce, clipping, AdamW) through the real PlmUnit and Trainer, timed
// per step, with memory, analytic model FLOPs and this machine's sgemm peak
// measured in the same run. Writes one JSON file (fields in bench/README.md).
//
//   build/bin/xlnet-bench --config configs/tiny.yaml --steps 20 --warmup 3
//       --json tiny.json [--set k=v ...] [--data DIR] [--nproc_per_node 2]
//
// Without --data, a tokenizer is trained on the bundled sample corpus and
// shards are prepared in a temporary directory first (not timed).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "bench/matmul_peak.h"
#include "bench/step_profile.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"
#include "model/attention.h"
#include "model/precision.h"
#include "pretrain/plm_unit.h"
#include "pretrain/pretrain.h"
#include "train/distributed.h"
#include "train/launcher.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;

// Model FLOPs of one training step per input token, counted analytically
// from the config (matrix products only; softmax, LayerNorm, GELU, dropout
// and the optimizer are O(tokens * D) and left out, as is conventional).
// Per sample of L tokens with memory M (steady state: mem_len, 0 without),
// K = M + L keys, R = K + L relative positions, P = num_predict query-stream
// targets, D = d_model = H * Dh, Di = d_inner, V = vocab_size, per layer the
// multiply-adds are
//   content stream:  q  L*D^2,  k and v  2*K*D^2  (over [mem; h]),
//                    scores (q+r_w)k^T L*K*D, positions (q+r_r)k_r^T L*R*D,
//                    segments L*2*D, probs*v L*K*D, output o  L*D^2,
//                    FFN 2*L*D*Di;
//   query stream:    (P rows; k, v and k_r are shared with the content
//                    stream) q P*D^2, scores P*K*D, positions P*R*D,
//                    segments P*2*D, probs*v P*K*D, o P*D^2, FFN 2*P*D*Di;
//   positions:       k_r = pos_emb r, R*D^2 per distinct position row
//                    (Bp = 2 with bi_data, else 1) shared by the B rows of
//                    a micro-batch, so Bp/B * R*D^2 per sample;
// plus the LM head on the P targets, P*D*V. Forward FLOPs = 2 x multiply-
// adds; a training step = forward + backward = 3 x forward (backward takes
// two products per forward product). Activation checkpointing recomputes
// the forward (4 x in all) but model FLOPs, as in MFU, do not count it.
double ModelFlopsPerToken(const xlnet::Config& c, int64_t micro_batch) {
  const double d = c.model.d_model, di = c.model.d_inner,
               v = c.model.vocab_size, n_layer = c.model.n_layer;
  const double l = c.data.seq_len, p = c.data.num_predict;
  const double m = c.model.mem_len.value_or(0) > 0 ? *c.model.mem_len : 0;
  const double k = m + l, r = k + l;
  const double bp = c.model.bi_data ? 2 : 1;
  const double content = l * d * d + 2 * k * d * d + l * k * d + l * r * d +
                         l * 2 * d + l * k * d + l * d * d + 2 * l * d * di;
  const double query = p * d * d + p * k * d + p * r * d + p * 2 * d +
                       p * k * d + p * d * d + 2 * p * d * di;
  const double positions = bp / micro_batch * r * d * d;
  const double macs = n_layer * (content + query + positions) + p * d * v;
  return 3 * 2 * macs / l;
}

// Tokenizer + shards from `corpus` in `dir` (the xlnet-data steps).
absl::Status PrepareSampleData(const std::string& corpus,
                               const xlnet::Config& config, int64_t vocab,
                               const std::string& dir) {
  xlnet::data::TokenizerTrainOptions t;
  t.inputs = {corpus};
  t.vocab_size = static_cast<int>(vocab);
  XLNET_ASSIGN_OR_RETURN(std::string model, xlnet::data::TrainTokenizer(t));
  const std::string tokenizer = dir + "/spiece.model";
  XLNET_RETURN_IF_ERROR(xlnet::WriteFileAtomic(tokenizer, model));
  xlnet::data::PrepareOptions p;
  p.inputs = {corpus};
  p.tokenizer_path = tokenizer;
  p.out_dir = dir + "/data";
  p.use_eod = config.data.use_eod;
  p.progress = false;
  XLNET_ASSIGN_OR_RETURN(xlnet::data::PrepareReport report,
                         xlnet::data::PrepareShards(p));
  std::cout << "xlnet-bench: prepared " << report.tokens << " tokens of "
            << corpus << " (tokenizer of " << vocab << " pieces) in " << dir
            << std::endl;  // before the ranks' output
  return absl::OkStatus();
}

struct Flags {
  std::string config_path, data_dir, json_path, work_dir;
  std::string corpus =
      std::string(XLNET_SOURCE_DIR) + "/data/sample/brown_sample.txt";
  std::vector<std::string> overrides;
  int64_t steps = 20, warmup = 3, vocab = 1000, nproc = 1, master_port = 0;
  int64_t matmul_size = 0, matmul_seconds = 2, data_batches = 10;
  // Steps profiled after the timed ones (not timed), the Chrome trace file
  // and the number of kernel/operator names listed.
  int64_t profile_steps = 0, profile_top = 25;
  std::string profile_trace;
};

absl::Status RunRank(const Flags& f, xlnet::Config config) {
  XLNET_ASSIGN_OR_RETURN(xlnet::RankSetup rank, xlnet::SetUpRank(&config));
  const xlnet::DistEnv& env = rank.env;
  const torch::Device device = rank.device;
  const int used_threads = rank.threads;
  std::unique_ptr<xlnet::ProcessGroup> group = std::move(rank.group);
  // The benchmark's own settings: only timed steps, no evaluation or saving.
  const int64_t timed_end = f.warmup + f.steps;
  config.train.max_steps = timed_end + f.profile_steps;
  config.train.eval_steps = 0;
  config.train.log_steps = std::max<int64_t>(1, config.train.max_steps);
  const int64_t micro_batch = config.train.batch_size /
                              (env.world_size * config.train.grad_accum_steps);

  const bool reset_rss = xlnet::bench::ResetPeakRss();
  xlnet::PlmUnitOptions unit_options;
  unit_options.config = config;
  unit_options.data_dir = f.data_dir;
  unit_options.rank = env.rank;
  unit_options.world_size = env.world_size;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<xlnet::PlmUnit> unit,
                         xlnet::PlmUnit::Create(unit_options));
  int64_t params = 0;
  for (const auto& [name, p] : unit->Parameters()) params += p.numel();
  // The core that runs (train.attention: auto resolved).
  const xlnet::AttentionImpl attention = xlnet::ResolveAttention(
      config.train.attention, device, xlnet::ScalarTypeOf(config.train.dtype),
      config.model.d_head);
  if (env.rank == 0) {
    std::cout << absl::StrFormat(
        "xlnet-bench: %d layers, d_model %d, %d parameters; global batch %d "
        "x %d tokens, grad_accum_steps %d, activation_checkpointing %s, "
        "attention %s, dtype %s, %d rank(s) x %d threads; %d warm-up + %d "
        "timed steps\n",
        config.model.n_layer, config.model.d_model, params,
        config.train.batch_size, config.data.seq_len,
        config.train.grad_accum_steps,
        config.train.activation_checkpointing ? "true" : "false",
        xlnet::EnumName(attention), xlnet::EnumName(config.train.dtype),
        env.world_size, used_threads, f.warmup, f.steps);
  }

  xlnet::bench::ResetGpuMemoryPeak(device);
  xlnet::bench::GpuMemoryPeak gpu_peak;
  absl::Status profile_status;
  std::string profile_report;
  std::vector<xlnet::StepTiming> timings;
  // Process CPU time (all threads) between consecutive step ends, and the
  // CPU time of this thread alone (the one that runs the steps: the host
  // side of forward, backward and the optimizer).
  std::vector<double> cpu_seconds, host_seconds;
  double cpu_mark = xlnet::bench::ProcessCpuSeconds();
  double host_mark = xlnet::bench::ThreadCpuSeconds();
  xlnet::TrainerOptions options;
  options.train = config.train;
  options.config_yaml = xlnet::RunConfigYaml(unit_options.config, rank);
  options.run_dir = f.work_dir + "/run";
  options.progress = false;
  options.save_checkpoints = false;
  options.on_step = [&](const xlnet::StepTiming& t) {
    if (t.step > timed_end) {  // profiled steps
      if (t.step == timed_end + f.profile_steps && profile_status.ok()) {
        auto report = xlnet::bench::StopStepProfile(
            f.profile_steps, static_cast<int>(f.profile_top), f.profile_trace);
        if (report.ok()) {
          profile_report = *report;
        } else {
          profile_status = report.status();
        }
      }
      return;
    }
    timings.push_back(t);
    const double cpu_now = xlnet::bench::ProcessCpuSeconds();
    cpu_seconds.push_back(cpu_now - cpu_mark);
    cpu_mark = cpu_now;
    const double host_now = xlnet::bench::ThreadCpuSeconds();
    host_seconds.push_back(host_now - host_mark);
    host_mark = host_now;
    if (env.rank == 0) {
      std::cout << absl::StrFormat(
          "step %d: %.3f s (host %.3f s, CPU %.3f s, read wait %.4f s), "
          "loss %.4f%s\n",
          t.step, t.seconds, host_seconds.back(), cpu_seconds.back(),
          t.read_seconds, t.loss, t.step <= f.warmup ? " (warm-up)" : "");
    }
    if (t.step == timed_end) {
      gpu_peak = xlnet::bench::ReadGpuMemoryPeak(device);
      if (f.profile_steps > 0 && env.rank == 0) {
        profile_status = xlnet::bench::StartStepProfile(device);
      }
    }
  };
  xlnet::Trainer trainer(options, unit.get(), group.get());
  XLNET_ASSIGN_OR_RETURN(xlnet::TrainResult result, trainer.Run());
  const double peak_rss_mb = xlnet::bench::PeakRssMb();
  (void)result;
  XLNET_RETURN_IF_ERROR(profile_status);
  if (!profile_report.empty()) std::cout << profile_report << std::flush;

  std::vector<double> step_seconds, step_cpu_seconds, step_host_seconds,
      step_read_seconds;
  double tokens = 0, seconds = 0;
  for (size_t i = 0; i < timings.size(); ++i) {
    const auto& t = timings[i];
    if (t.step <= f.warmup) continue;
    step_seconds.push_back(t.seconds);
    step_cpu_seconds.push_back(cpu_seconds[i]);
    step_host_seconds.push_back(host_seconds[i]);
    step_read_seconds.push_back(t.read_seconds);
    tokens += t.tokens;
    seconds += t.seconds;
  }
  const double tokens_per_step =
      static_cast<double>(config.train.batch_size) * config.data.seq_len;
  const double step_median = xlnet::bench::Median(step_seconds);

  // The sampler alone: this rank's batches built on the calling thread (no
  // prefetching), i.e. the data pipeline's CPU work per step.
  xlnet::data::SamplerOptions so;
  so.data = config.data;
  so.data.prefetch_batches = 0;
  so.batch_size = config.train.batch_size;
  so.seed = config.train.seed + 1;
  so.rank = env.rank;
  so.world_size = env.world_size;
  XLNET_ASSIGN_OR_RETURN(auto sampler,
                         xlnet::data::Sampler::Create(f.data_dir, so));
  sampler->Next();  // warm-up
  std::vector<double> data_seconds;
  for (int64_t i = 0; i < f.data_batches; ++i) {
    const auto t0 = Clock::now();
    xlnet::data::PlmBatch batch = sampler->Next();
    data_seconds.push_back(
        std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double data_median = xlnet::bench::Median(data_seconds);

  // The machine's matmul peaks in the same run, measured by rank 0 with
  // every core while the other ranks wait: fp32, and the training dtype's
  // (bf16/fp16) when that is not fp32; MFU is against the training dtype's.
  const torch::ScalarType train_dtype = xlnet::ScalarTypeOf(config.train.dtype);
  double fp32_gflops = 0, peak_gflops = 0;
  // Large enough to reach a GPU's tensor-core rate (2048 reaches about half
  // of an H100's bf16 rate), small enough for a CPU's seconds.
  const int64_t matmul_size =
      f.matmul_size > 0 ? f.matmul_size : (device.is_cuda() ? 8192 : 2048);
  if (group) group->Barrier();
  if (env.rank == 0) {
    const int saved = torch::get_num_threads();
    if (!device.is_cuda()) xlnet::ConfigureThreads(0);
    fp32_gflops = xlnet::bench::MeasureMatmulGflops(
        matmul_size, torch::kFloat32, f.matmul_seconds, device);
    peak_gflops =
        train_dtype == torch::kFloat32
            ? fp32_gflops
            : xlnet::bench::MeasureMatmulGflops(matmul_size, train_dtype,
                                                f.matmul_seconds, device);
    xlnet::ConfigureThreads(saved);
  }
  if (group) group->Barrier();
  if (env.rank != 0) return absl::OkStatus();

  const double flops_per_token = ModelFlopsPerToken(config, micro_batch);
  const double tokens_per_sec =
      step_median > 0 ? tokens_per_step / step_median : 0;
  const double model_flops = flops_per_token * tokens_per_sec;
  nlohmann::json j;
  j["tokens_per_sec"] = tokens_per_sec;
  j["tokens_per_sec_mean"] = seconds > 0 ? tokens / seconds : 0;
  j["step_seconds_median"] = step_median;
  j["step_seconds"] = step_seconds;
  j["step_cpu_seconds_median"] = xlnet::bench::Median(step_cpu_seconds);
  j["step_cpu_seconds"] = step_cpu_seconds;
  const double host_median = xlnet::bench::Median(step_host_seconds);
  j["step_host_seconds_median"] = host_median;
  j["step_host_seconds"] = step_host_seconds;
  j["step_read_seconds_median"] = xlnet::bench::Median(step_read_seconds);
  j["peak_rss_mb"] = peak_rss_mb;
  j["peak_rss_scope"] = reset_rss ? "model, data pipeline and steps"
                                  : "whole process (VmHWM reset unavailable)";
  j["model_flops_per_token"] = flops_per_token;
  j["model_flops_per_sec"] = model_flops;
  j["matmul_peak_flops_per_sec"] = peak_gflops * 1e9;
  j["matmul_peak_dtype"] = xlnet::EnumName(config.train.dtype);
  j["matmul_peak_size"] = matmul_size;
  j["gpu_peak_allocated_mb"] = gpu_peak.allocated_mb;
  j["gpu_peak_reserved_mb"] = gpu_peak.reserved_mb;
  j["fraction_of_matmul_peak"] =
      peak_gflops > 0 ? model_flops / (peak_gflops * 1e9) : 0;
  j["fp32_matmul_peak_flops_per_sec"] = fp32_gflops * 1e9;
  j["fraction_of_fp32_matmul_peak"] =
      fp32_gflops > 0 ? model_flops / (fp32_gflops * 1e9) : 0;
  j["data_seconds_median"] = data_median;
  j["data_fraction_of_step"] = step_median > 0 ? data_median / step_median : 0;
  j["steps"] = f.steps;
  j["warmup"] = f.warmup;
  j["world_size"] = env.world_size;
  j["threads"] = used_threads;
  j["hardware_threads"] = std::thread::hardware_concurrency();
  j["blas"] = xlnet::BlasDescription();
  j["runtime"] = xlnet::RuntimeSummary();
  j["device"] = device.str();
  j["parameters"] = params;
  j["config"] = {
      {"file", f.config_path},
      {"overrides", f.overrides},
      {"n_layer", config.model.n_layer},
      {"d_model", config.model.d_model},
      {"n_head", config.model.n_head},
      {"d_inner", config.model.d_inner},
      {"vocab_size", config.model.vocab_size},
      {"mem_len", config.model.mem_len.value_or(0)},
      {"seq_len", config.data.seq_len},
      {"reuse_len", config.data.reuse_len},
      {"num_predict", config.data.num_predict},
      {"bi_data", config.data.bi_data},
      {"batch_size", config.train.batch_size},
      {"grad_accum_steps", config.train.grad_accum_steps},
      {"activation_checkpointing", config.train.activation_checkpointing},
      {"attention", xlnet::EnumName(attention)},
      {"dtype", xlnet::EnumName(config.train.dtype)},
      {"prefetch_batches", config.data.prefetch_batches},
      {"loader_threads", config.data.loader_threads}};
  j["config_yaml"] = xlnet::ConfigToYaml(config);
  XLNET_RETURN_IF_ERROR(xlnet::WriteFileAtomic(f.json_path, j.dump(2) + "\n"));
  std::cout << absl::StrFormat(
      "xlnet-bench: %.0f tokens/s (median step %.3f s, host %.3f s, read "
      "wait %.4f s), peak RSS %.0f MiB, "
      "%.3g model GFLOP/s = %.1f%% of the %.1f GFLOP/s %s matmul peak, "
      "data %.4f s/step (%.2f%% of a step)%s -> %s\n",
      tokens_per_sec, step_median, host_median,
      j["step_read_seconds_median"].get<double>(), peak_rss_mb,
      model_flops / 1e9, 100 * j["fraction_of_matmul_peak"].get<double>(),
      peak_gflops, xlnet::EnumName(config.train.dtype), data_median,
      100 * j["data_fraction_of_step"].get<double>(),
      gpu_peak.allocated_mb >= 0
          ? absl::StrFormat(", GPU peak %.0f MiB allocated (%.0f reserved)",
                            gpu_peak.allocated_mb, gpu_peak.reserved_mb)
          : std::string(),
      f.json_path);
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv) {
  Flags f;
  xlnet::FlagParser flags(
      "xlnet-bench",
      "--config CFG.yaml --steps N --warmup W --json OUT.json [--set k=v ...] "
      "[--data DIR] [--nproc_per_node N]");
  flags.AddConfigFlags(&f.config_path, &f.overrides);
  flags.AddInt("steps", &f.steps, "timed optimizer steps");
  flags.AddInt("warmup", &f.warmup, "untimed optimizer steps first");
  flags.AddString("json", &f.json_path, "where to write the results");
  flags.AddString("data", &f.data_dir,
                  "prepared shards (default: built from --corpus first)");
  flags.AddString("corpus", &f.corpus,
                  "text for the default dataset (the bundled sample corpus)");
  flags.AddInt("vocab_size", &f.vocab,
               "pieces of the default dataset's tokenizer (at most "
               "model.vocab_size)");
  flags.AddInt("nproc_per_node", &f.nproc,
               "local data-parallel ranks (Gloo on CPU), as xlnet-pretrain");
  flags.AddInt("master_port", &f.master_port,
               "rendezvous port for --nproc_per_node (0 = a free port)");
  flags.AddInt("matmul_size", &f.matmul_size,
               "n of the n x n products (fp32 and the training dtype) that "
               "measure the peak (0: 8192 on CUDA, 2048 on CPU)");
  flags.AddInt("profile_steps", &f.profile_steps,
               "steps run after the timed ones under LibTorch's profiler; "
               "prints the kernels (CUDA) or operators (CPU) taking the most "
               "time per step");
  flags.AddInt("profile_top", &f.profile_top, "names listed by the profile");
  flags.AddString("profile_trace", &f.profile_trace,
                  "Chrome trace of the profiled steps (chrome://tracing)");
  flags.AddInt("matmul_seconds", &f.matmul_seconds,
               "seconds the peak is measured for");
  flags.AddInt("data_batches", &f.data_batches,
               "sampler batches timed for data_seconds_median");
  flags.AddString("work_dir", &f.work_dir,
                  "scratch directory (default: a temp dir, removed after)");
  for (const char* name : {"config", "json"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  if (f.steps < 1 || f.warmup < 0 || f.nproc < 1 || f.data_batches < 1 ||
      f.profile_steps < 0 || f.profile_top < 1 || f.matmul_size < 0) {
    return absl::InvalidArgumentError(
        "--steps, --nproc_per_node, --data_batches and --profile_top must be "
        ">= 1 and --warmup, --profile_steps, --matmul_size >= 0");
  }
  XLNET_ASSIGN_OR_RETURN(xlnet::Config config,
                         xlnet::LoadConfigFor(xlnet::PretrainConfigScope(),
                                              f.config_path, f.overrides));
  const bool child = std::getenv("WORLD_SIZE") != nullptr;

  bool remove_work_dir = false;
  if (f.work_dir.empty()) {
    char tmpl[] = "/tmp/xlnet_bench.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      return absl::InternalError("xlnet-bench: mkdtemp in /tmp failed");
    }
    f.work_dir = tmpl;
    remove_work_dir = true;
  }
  absl::Status status = [&]() -> absl::Status {
    XLNET_RETURN_IF_ERROR(xlnet::MakeDirs(f.work_dir));
    if (f.data_dir.empty()) {
      const int64_t vocab = std::min(f.vocab, config.model.vocab_size);
      XLNET_RETURN_IF_ERROR(
          PrepareSampleData(f.corpus, config, vocab, f.work_dir));
      f.data_dir = f.work_dir + "/data";
    }
    if (f.nproc > 1 && !child) {
      // Children get the prepared data and their own scratch directory.
      std::vector<std::string> args =
          xlnet::RankArgs(argc, argv, {"data", "work_dir"});
      args.insert(args.end(),
                  {"--data", f.data_dir, "--work_dir", f.work_dir + "/ranks"});
      return xlnet::LaunchLocalRanks(static_cast<int>(f.nproc), args,
                                     static_cast<int>(f.master_port));
    }
    return RunRank(f, config);
  }();
  // Scratch goes either way; the first error is the one reported.
  if (remove_work_dir && !child) {
    absl::Status removed = xlnet::RemoveAll(f.work_dir);
    if (status.ok()) status = removed;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-bench", argc, argv, &Run);
}
