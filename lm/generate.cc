#include "lm/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet {

absl::Status CheckGenerateOptions(const GenerateOptions& o) {
  if (o.max_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens ", o.max_new_tokens, ": must be >= 0"));
  }
  if (o.mem_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mem_len ", o.mem_len, ": must be >= 1"));
  }
  if (o.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k ", o.top_k, ": must be >= 0 (0 = no limit)"));
  }
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p ", o.top_p, ": must be in (0, 1]"));
  }
  if (!o.greedy && !(o.temperature > 0.0 && std::isfinite(o.temperature))) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature ", o.temperature,
                     ": must be > 0 when sampling (or choose greedy)"));
  }
  return absl::OkStatus();
}

double GenerateResult::MeanStepSeconds() const {
  if (token_seconds.size() < 2) return 0.0;
  return std::accumulate(token_seconds.begin() + 1, token_seconds.end(), 0.0) /
         static_cast<double>(token_seconds.size() - 1);
}

int32_t ChooseToken(const torch::Tensor& logits, const GenerateOptions& options,
                    std::mt19937_64* rng) {
  const torch::Tensor cpu =
      logits.to(torch::kCPU, torch::kDouble).contiguous().view({-1});
  const int64_t v = cpu.size(0);
  const double* x = cpu.data_ptr<double>();
  if (options.greedy) {
    return static_cast<int32_t>(std::max_element(x, x + v) - x);
  }
  // Most likely first; ties by id, so top_k 1 is the greedy choice.
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, v) : v;
  auto more_likely = [x](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
  order.resize(k);
  // Softmax at the temperature over the kept ids (the max subtracted).
  std::vector<double> p(k);
  const double top = x[order[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    p[i] = std::exp((x[order[i]] - top) / options.temperature);
    sum += p[i];
  }
  // Nucleus: the shortest prefix whose mass reaches top_p.
  int64_t kept = k;
  if (options.top_p < 1.0) {
    double mass = 0;
    for (int64_t i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= options.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  const double total = std::accumulate(p.begin(), p.begin() + kept, 0.0);
  const double u = std::uniform_real_distribution<double>(0.0, total)(*rng);
  double acc = 0;
  for (int64_t i = 0; i < kept; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[kept - 1];
}

absl::StatusOr<GenerateResult> Generate(XLNetLMHeadModel model,
                                        const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options) {
  if (absl::Status s = CheckGenerateOptions(options); !s.ok()) return s;
  const XLNetConfig& config = model->config();
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "the prompt has no tokens; generation needs at least one");
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token id ", id, " is outside the model's vocabulary [0, ",
          config.vocab_size, ")"));
    }
  }
  model->eval();
  const LmStream stream = ResolveStream(options.stream, config);
  const bool query = stream == LmStream::kQuery;
  const torch::Device device = model->parameters().front().device();
  const auto long_opts = torch::dtype(torch::kLong).device(device);
  const int64_t m = options.mem_len;
  // The query stream's prediction slot: its id is never read (the slot's
  // query starts from mask_emb and nothing attends to its content).
  const int64_t slot_id = data::kMaskId;
  auto as_row = [&](const std::vector<int64_t>& ids) {
    return torch::tensor(ids, long_opts).view({1, -1});
  };

  GenerateResult result;
  std::mt19937_64 rng(options.seed);
  std::vector<int64_t> text(prompt.begin(), prompt.end());
  torch::NoGradGuard no_grad;
  XLNetLMHeadModel reference =
      options.use_cache ? model : WithoutSameLength(model);
  LmMemory memory;
  if (options.use_cache) memory = EmptyMemory(config, 1, m, device);
  // Tokens not yet in the memory: the prompt, then each new token.
  std::vector<int64_t> pending(text.begin(), text.end());
  LmForwardOptions fwd;
  fwd.stream = stream;
  fwd.last_only = true;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor logits;  // [1, 1, V]
    if (options.use_cache) {
      fwd.keep_memory = m;
      // A long prompt runs in segments of M; only the last predicts.
      while (static_cast<int64_t>(pending.size()) > m) {
        std::vector<int64_t> head(pending.begin(), pending.begin() + m);
        fwd.cache_positions = -1;
        memory = LmForward(*model, as_row(head), memory, {}, fwd).memory;
        result.max_memory_rows =
            std::max(result.max_memory_rows, memory.rows());
        pending.erase(pending.begin(), pending.begin() + m);
      }
      std::vector<int64_t> segment = pending;
      if (query) segment.push_back(slot_id);
      fwd.cache_positions = static_cast<int64_t>(pending.size());
      LmForwardResult out = LmForward(*model, as_row(segment), memory, {}, fwd);
      logits = out.logits;
      memory = std::move(out.memory);
      result.max_memory_rows = std::max(result.max_memory_rows, memory.rows());
    } else {
      // The last M + 1 tokens (then the prediction slot): what the cached
      // forward sees, M memory rows and the newest token.
      const int64_t window = m + 1;
      const int64_t size = static_cast<int64_t>(text.size());
      std::vector<int64_t> segment(
          text.begin() + std::max<int64_t>(0, size - window), text.end());
      if (query) segment.push_back(slot_id);
      logits =
          LmForward(*reference, as_row(segment), LmMemory(), {}, fwd).logits;
    }
    const int32_t id = ChooseToken(logits, options, &rng);
    result.token_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    result.ids.push_back(id);
    text.push_back(id);
    pending.assign(1, id);
    if (options.stop_at_eod && (id == data::kEodId || id == data::kEosId)) {
      result.stopped = true;
      break;
    }
  }
  return result;
}

}  // namespace xlnet
