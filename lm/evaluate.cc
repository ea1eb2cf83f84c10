#include "lm/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace xlnet {
namespace {

// Sum over the rows with weight 1 of -log p(target): logits [B, P, V] fp32,
// targets [B, P] int64, weight [B, P] (undefined = all ones).
double SumNll(const torch::Tensor& logits, const torch::Tensor& targets,
              const torch::Tensor& weight) {
  auto logp = torch::log_softmax(logits.to(torch::kFloat), -1);
  auto nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);  // [B, P]
  if (weight.defined()) nll = nll * weight;
  return nll.to(torch::kDouble).sum().item<double>();
}

absl::Status CheckOptions(const LmEvalOptions& o, size_t num_ids) {
  if (o.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len ", o.seq_len, ": must be >= 1"));
  }
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", o.batch_size, ": must be >= 1"));
  }
  if (o.mode == LmEvalMode::kMemory && o.mem_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mem_len ", o.mem_len,
        ": mode memory needs at least one memory row (mode none is the "
        "evaluation without memory)"));
  }
  if (num_ids < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", num_ids,
        " token(s); evaluation needs at least 2 (one to predict from)"));
  }
  return absl::OkStatus();
}

}  // namespace

double LmEvalResult::NllPerToken() const {
  return tokens > 0 ? nll / static_cast<double>(tokens) : 0.0;
}
double LmEvalResult::Perplexity() const { return std::exp(NllPerToken()); }
double LmEvalResult::BitsPerByte() const {
  return bytes > 0 ? nll / std::log(2.0) / static_cast<double>(bytes) : 0.0;
}
double LmEvalResult::TokensPerSecond() const {
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
}

absl::StatusOr<LmEvalResult> EvaluateLm(XLNetLMHeadModel model,
                                        const std::vector<int32_t>& ids,
                                        const std::vector<int32_t>& token_bytes,
                                        const LmEvalOptions& options) {
  if (absl::Status s = CheckOptions(options, ids.size()); !s.ok()) return s;
  const XLNetConfig& config = model->config();
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", t, " has id ", ids[t],
          ", outside the model's vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  LmEvalResult result;
  result.mode = options.mode;
  result.stream = ResolveStream(options.stream, config);
  result.seq_len = options.seq_len;
  result.mem_len = options.mode == LmEvalMode::kMemory ? options.mem_len : 0;
  result.batch_size =
      options.mode == LmEvalMode::kMemory ? 1 : options.batch_size;
  const bool query = result.stream == LmStream::kQuery;
  const int64_t n = static_cast<int64_t>(ids.size());
  result.tokens = n - 1;
  for (int64_t t = 1; t < n; ++t) {
    if (ids[t] < static_cast<int64_t>(token_bytes.size())) {
      result.bytes += token_bytes[ids[t]];
    }
  }

  model->eval();
  // Only mode memory has the memory that same_length is about.
  XLNetLMHeadModel run =
      options.mode == LmEvalMode::kMemory ? model : WithoutSameLength(model);
  const torch::Device device = model->parameters().front().device();
  const auto long_opts = torch::dtype(torch::kLong).device(device);
  const auto float_opts = torch::dtype(torch::kFloat).device(device);
  const torch::Tensor all =
      torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), long_opts);
  // Input position p predicts targets[p]; with the query stream input 0
  // is context only.
  const int64_t n_in = query ? n : n - 1;
  const torch::Tensor inputs = all.narrow(0, 0, n_in);
  const torch::Tensor targets = query ? all : all.narrow(0, 1, n - 1);
  const int64_t first_scored = query ? 1 : 0;
  const int64_t l = options.seq_len;

  LmForwardOptions fwd;
  fwd.stream = result.stream;
  torch::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  if (options.mode == LmEvalMode::kMemory) {
    fwd.keep_memory = options.mem_len;
    LmMemory memory = EmptyMemory(config, 1, options.mem_len, device);
    for (int64_t s = 0; s < n_in; s += l) {
      const int64_t len = std::min(l, n_in - s);
      LmForwardResult out = LmForward(
          *run, inputs.narrow(0, s, len).view({1, len}), memory, {}, fwd);
      torch::Tensor weight;
      if (s < first_scored) {
        weight = torch::ones({1, len}, float_opts);
        weight.narrow(1, 0, first_scored - s).zero_();
      }
      result.nll +=
          SumNll(out.logits, targets.narrow(0, s, len).view({1, len}), weight);
      memory = std::move(out.memory);
      ++result.forwards;
    }
  } else if (options.mode == LmEvalMode::kNone) {
    // Full segments in batches, then the shorter last one alone.
    const int64_t full = n_in / l;
    auto run_segments = [&](int64_t first, int64_t count, int64_t len) {
      const int64_t s = first * l;
      auto seg_ids = inputs.narrow(0, s, count * len).view({count, len});
      auto seg_tgt = targets.narrow(0, s, count * len).view({count, len});
      LmForwardResult out = LmForward(*run, seg_ids, LmMemory(), {}, fwd);
      torch::Tensor weight;
      if (s < first_scored) {
        weight = torch::ones({count, len}, float_opts);
        weight.view({-1}).narrow(0, 0, first_scored - s).zero_();
      }
      result.nll += SumNll(out.logits, seg_tgt, weight);
      ++result.forwards;
    };
    for (int64_t k = 0; k < full; k += options.batch_size) {
      run_segments(k, std::min(options.batch_size, full - k), l);
    }
    if (n_in % l != 0) run_segments(full, 1, n_in % l);
  } else {
    fwd.last_only = true;
    const auto offsets = torch::arange(l, long_opts).view({1, l}) - (l - 1);
    for (int64_t p = first_scored; p < n_in; p += options.batch_size) {
      const int64_t count = std::min(options.batch_size, n_in - p);
      auto ends = torch::arange(p, p + count, long_opts).view({count, 1});
      auto raw = ends + offsets;  // [B, L] positions of each window
      auto window = inputs.index({raw.clamp_min(0)});  // [B, L]
      torch::Tensor attention_mask;
      if (p < l - 1) attention_mask = (raw >= 0).to(torch::kFloat);
      LmForwardResult out =
          LmForward(*run, window, LmMemory(), attention_mask, fwd);
      result.nll +=
          SumNll(out.logits, targets.narrow(0, p, count).view({count, 1}), {});
      ++result.forwards;
    }
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace xlnet
