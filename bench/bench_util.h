// Helpers shared by the benchmarks: medians, peak resident memory and
// permutation-LM inputs.
#pragma once

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "common/flags.h"
#include "model/xlnet.h"

namespace xlnet::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Resets the kernel's peak-RSS mark (VmHWM) so the peak covers only what
// follows (Linux >= 4.0; otherwise the process peak so far stays in).
inline bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// A field of /proc/self/status in MiB ("VmHWM", "VmRSS"), -1 if missing.
inline double ProcStatusMb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      int64_t kb = 0;
      std::string rest = line.substr(field.size() + 1);
      rest.erase(0, rest.find_first_not_of(" \t"));
      rest = rest.substr(0, rest.find(' '));
      if (absl::SimpleAtoi(rest, &kb)) return kb / 1024.0;
    }
  }
  return -1;
}

// Peak resident set size in MiB: VmHWM, else getrusage's maximum.
inline double PeakRssMb() {
  const double hwm = ProcStatusMb("VmHWM");
  if (hwm >= 0) return hwm;
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // KiB on Linux
}

// User + system CPU time of the whole process (all threads), seconds.
inline double ProcessCpuSeconds() {
  struct rusage u = {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU time (user + system) of the calling thread alone.
inline double ThreadCpuSeconds() {
  struct rusage u = {};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// PLM inputs like XLNet's _local_perm over the whole row: a random order, the
// last P positions of the order are the targets (target_mapping sorted by
// position), two segments, no padding.
inline XLNetInputs MakePlmInputs(int64_t b, int64_t l, int64_t p, int64_t vocab,
                                 torch::Device device) {
  XLNetInputs x;
  x.input_ids = torch::randint(0, vocab, {b, l}, torch::kLong);
  x.token_type_ids = (torch::arange(l, torch::kLong) >= l / 2)
                         .to(torch::kLong)
                         .unsqueeze(0)
                         .expand({b, l})
                         .contiguous();  // [B, L]
  x.attention_mask = torch::ones({b, l});
  auto perm = torch::zeros({b, l, l});
  auto tm = torch::zeros({b, p, l});
  for (int64_t r = 0; r < b; ++r) {
    auto order = torch::randperm(l, torch::kLong);  // [L]
    auto rank = torch::empty({l}, torch::kLong);
    rank.index_put_({order},
                    torch::arange(l, torch::kLong));  // rank of each position
    auto target = rank >= (l - p);                    // [L]
    auto self_rank = torch::where(target, rank, torch::zeros_like(rank));
    auto key_rank = torch::where(target, rank, torch::full_like(rank, -1));
    perm[r] = (target.unsqueeze(0) &
               (self_rank.unsqueeze(1) <= key_rank.unsqueeze(0)))
                  .to(torch::kFloat);  // [L, L]
    auto positions =
        std::get<0>(torch::sort(order.narrow(0, l - p, p)));  // [P]
    tm[r].index_put_({torch::arange(p, torch::kLong), positions}, 1.0);
  }
  x.perm_mask = perm;
  x.target_mapping = tm;
  for (auto* t : {&x.input_ids, &x.token_type_ids, &x.attention_mask,
                  &x.perm_mask, &x.target_mapping}) {
    *t = t->to(device);
  }
  return x;
}

// The model shape and run flags the per-layer benchmarks share.
struct LayerBenchShape {
  int64_t d_model = 768, n_head = 12, d_inner = 3072, seq_len = 512;
  int64_t num_predict = 85, batch = 4, layers = 1, vocab = 1000;
  int64_t iters = 2, warmup = 1, threads = 0;

  void AddFlags(FlagParser* flags) {
    flags->AddInt("d_model", &d_model, "hidden size");
    flags->AddInt("n_head", &n_head,
                  "attention heads (d_head = d_model / n_head)");
    flags->AddInt("d_inner", &d_inner, "FFN inner size");
    flags->AddInt("seq_len", &seq_len, "L, tokens per sample");
    flags->AddInt("num_predict", &num_predict,
                  "P, prediction targets per sample");
    flags->AddInt("batch", &batch, "B");
    flags->AddInt("layers", &layers, "XLNet layers");
    flags->AddInt("vocab", &vocab, "vocabulary (the LM head is not timed)");
    flags->AddInt("iters", &iters, "timed iterations per measurement");
    flags->AddInt("warmup", &warmup, "untimed iterations first");
    flags->AddInt("threads", &threads, "CPU threads (0 = all cores)");
  }

  absl::Status Check() const {
    if (num_predict > seq_len || d_model % n_head != 0 || iters < 1) {
      return absl::InvalidArgumentError(
          "need num_predict <= seq_len, d_model divisible by n_head, "
          "iters >= 1");
    }
    return absl::OkStatus();
  }

  XLNetConfig ModelConfig(double dropout) const {
    XLNetConfig config;
    config.vocab_size = vocab;
    config.d_model = d_model;
    config.n_head = n_head;
    config.d_head = d_model / n_head;
    config.d_inner = d_inner;
    config.n_layer = layers;
    config.dropout = dropout;
    return config;
  }
};

}  // namespace xlnet::bench
