// xlnet-bench-lm: what the Transformer-XL memory buys at evaluation and in
// generation, on a random model (the timing does not depend on the weights).
//
//   evaluation: EvaluateLm in mode memory (segments of L over M cached
//     positions) against mode sliding (one L-token forward per token,
//     --batch_size windows a forward) on the same tokens, for each L of
//     --seq_lens, M = L: tokens/s of each and their ratio.
//   generation: Generate's per-token time with the memory cache (M = the
//     context) against recomputing the context window for every token,
//     for each context length of --contexts.
// Each figure is the best of --repeats runs (the two sides alternating), so
// a burst of load from other processes on a shared machine costs a repeat,
// not the figure.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "model/xlnet.h"

namespace {

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(part, &v) && v > 0) out.push_back(v);
  }
  return out;
}

std::vector<int32_t> RandomIds(int64_t n, int64_t vocab) {
  auto t = torch::randint(vocab, {n}, torch::kLong);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(t[i].item<int64_t>());
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t d_model = 256, n_layer = 4, vocab = 1000, tokens = 512,
          batch_size = 16, new_tokens = 16, threads = 0, repeats = 3;
  std::string seq_lens = "32,64,128", contexts = "32,128,512";
  xlnet::FlagParser flags(
      "xlnet-bench-lm",
      "[--d_model D] [--n_layer N] [--tokens T] [--seq_lens 32,64,128] "
      "[--batch_size B] [--contexts 32,128,512] [--new_tokens K]");
  flags.AddInt("d_model", &d_model, "model width (d_head 64)");
  flags.AddInt("n_layer", &n_layer, "layers");
  flags.AddInt("vocab", &vocab, "vocabulary size");
  flags.AddInt("tokens", &tokens, "tokens evaluated per mode");
  flags.AddString("seq_lens", &seq_lens, "attention lengths L (M = L)");
  flags.AddInt("batch_size", &batch_size, "sliding windows per forward");
  flags.AddString("contexts", &contexts,
                  "generation context lengths (M = the context)");
  flags.AddInt("new_tokens", &new_tokens, "tokens generated per timing");
  flags.AddInt("threads", &threads, "CPU threads (0 = all cores)");
  flags.AddInt("repeats", &repeats, "runs of each measurement, best kept");
  auto proceed = flags.ParseCommandLine(argc, argv);
  if (!proceed.ok()) {
    std::fprintf(stderr, "xlnet-bench-lm: %s\n",
                 std::string(proceed.status().message()).c_str());
    return 2;
  }
  if (!*proceed) return 0;
  if (repeats < 1) repeats = 1;
  const int used_threads =
      xlnet::ConfigureThreads(xlnet::CapThreads(threads, "--threads"));

  xlnet::XLNetConfig config;
  config.vocab_size = vocab;
  config.d_model = d_model;
  config.n_head = d_model / 64;
  config.d_head = 64;
  config.d_inner = 4 * d_model;
  config.n_layer = n_layer;
  config.attn_type = "uni";
  config.dropout = 0.0;
  torch::manual_seed(0);
  xlnet::XLNetLMHeadModel model(config);
  model->eval();
  const std::vector<int32_t> ids = RandomIds(tokens, vocab);
  std::printf(
      "model: d_model %lld, %lld layers, %lld heads, vocab %lld, uni, fp32, "
      "%d threads\n",
      static_cast<long long>(d_model), static_cast<long long>(n_layer),
      static_cast<long long>(config.n_head), static_cast<long long>(vocab),
      used_threads);

  std::printf("\nevaluation of %lld tokens (sliding: %lld windows a forward)\n",
              static_cast<long long>(tokens),
              static_cast<long long>(batch_size));
  std::printf("%5s %5s %14s %15s %7s %12s %12s\n", "L", "M", "memory tok/s",
              "sliding tok/s", "ratio", "memory nll", "sliding nll");
  for (const int64_t l : ParseList(seq_lens)) {
    xlnet::LmEvalOptions o;
    o.seq_len = l;
    o.mem_len = l;
    o.batch_size = batch_size;
    xlnet::LmEvalResult memory, sliding;
    double memory_rate = 0, sliding_rate = 0;
    for (int64_t r = 0; r < repeats; ++r) {
      o.mode = xlnet::LmEvalMode::kMemory;
      auto m = xlnet::EvaluateLm(model, ids, {}, o);
      o.mode = xlnet::LmEvalMode::kSliding;
      auto s = xlnet::EvaluateLm(model, ids, {}, o);
      if (!m.ok() || !s.ok()) {
        std::fprintf(stderr, "xlnet-bench-lm: evaluation failed\n");
        return 1;
      }
      if (m->TokensPerSecond() > memory_rate) {
        memory = *m;
        memory_rate = m->TokensPerSecond();
      }
      if (s->TokensPerSecond() > sliding_rate) {
        sliding = *s;
        sliding_rate = s->TokensPerSecond();
      }
    }
    std::printf("%5lld %5lld %14.1f %15.1f %6.1fx %12.4f %12.4f\n",
                static_cast<long long>(l), static_cast<long long>(l),
                memory_rate, sliding_rate, memory_rate / sliding_rate,
                memory.NllPerToken(), sliding.NllPerToken());
  }

  std::printf(
      "\ngeneration, %lld tokens after a prompt of the context length "
      "(greedy; the first token, which runs the prompt, not counted)\n",
      static_cast<long long>(new_tokens));
  std::printf("%8s %5s %16s %19s %7s\n", "context", "M", "cache ms/token",
              "no cache ms/token", "ratio");
  for (const int64_t c : ParseList(contexts)) {
    const std::vector<int32_t> prompt = RandomIds(c, vocab);
    xlnet::GenerateOptions g;
    g.greedy = true;
    g.max_new_tokens = new_tokens;
    g.mem_len = c;
    double cached = 1e30, recomputed = 1e30;
    for (int64_t r = 0; r < repeats; ++r) {
      g.use_cache = true;
      auto with_cache = xlnet::Generate(model, prompt, g);
      g.use_cache = false;
      auto without = xlnet::Generate(model, prompt, g);
      if (!with_cache.ok() || !without.ok()) {
        std::fprintf(stderr, "xlnet-bench-lm: generation failed\n");
        return 1;
      }
      cached = std::min(cached, with_cache->MeanStepSeconds());
      recomputed = std::min(recomputed, without->MeanStepSeconds());
    }
    std::printf("%8lld %5lld %16.2f %19.2f %6.1fx\n", static_cast<long long>(c),
                static_cast<long long>(c), 1e3 * cached, 1e3 * recomputed,
                recomputed / cached);
  }
  return 0;
}
