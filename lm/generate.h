// Text continuation with the Transformer-XL memory as the cache: the prompt
// runs once (in segments of at most M tokens), then every new token is one
// forward of that token alone over the cached memory of the last M
// positions, so a token costs the same however long the text so far (the
// attention reads M + 1 keys). The query stream (PLM checkpoints) adds to
// each forward a slot for the token to predict, whose query sees the memory
// and the tokens before it; the slot itself is not cached.
//
// `use_cache = false` is the reference without cache: each token recomputes
// one forward over the last M + 1 tokens of the text (the context the
// cached forward sees: M memory rows and the newest token), so the two agree
// exactly while the text fits in M + 1 tokens, and the per-token cost grows
// with the context up to M.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lm/language_model.h"
#include "model/xlnet.h"

namespace xlnet {

struct GenerateOptions {
  // Tokens to generate (fewer when stop_at_eod stops early), >= 0.
  int64_t max_new_tokens = 32;
  // Pick the most likely token (argmax; the first on ties); ignores the
  // sampling options below.
  bool greedy = false;
  // Sampling: logits / temperature (> 0), then the top_k most likely
  // tokens (0 = all), then the smallest set of those whose probabilities
  // add up to top_p (in (0, 1]; 1 = all), renormalised.
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  // Seeds the sampler's own generator (std::mt19937_64): the same seed,
  // model and prompt give the same text.
  uint64_t seed = 0;
  // M: memory rows per layer kept as the cache (>= 1); without cache, the
  // context window is M + 1 tokens.
  int64_t mem_len = 512;
  bool use_cache = true;
  // Stop after generating <eod> or </s> (the token is kept).
  bool stop_at_eod = false;
  // kAuto: content stream for attn_type uni, query stream for bi.
  LmStream stream = LmStream::kAuto;
};

// InvalidArgument naming the option: max_new_tokens < 0, mem_len < 1,
// top_k < 0, top_p outside (0, 1], temperature <= 0 (or not finite)
// without greedy.
absl::Status CheckGenerateOptions(const GenerateOptions& options);

struct GenerateResult {
  // The new tokens (the prompt excluded).
  std::vector<int32_t> ids;
  // Wall seconds of each new token: its forward and its choice. The first
  // includes the prompt's forward.
  std::vector<double> token_seconds;
  // The most memory rows per layer held at any step (<= mem_len); 0
  // without cache.
  int64_t max_memory_rows = 0;
  // Whether stop_at_eod ended the text.
  bool stopped = false;

  // Mean seconds of the tokens after the first (0 with fewer than two).
  double MeanStepSeconds() const;
};

// Continues `prompt` (>= 1 token, ids in the vocabulary) with `model` (put
// in eval mode, on its device, under the caller's autocast).
absl::StatusOr<GenerateResult> Generate(XLNetLMHeadModel model,
                                        const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options);

// The token chosen from `logits` [V] (any float dtype, any device) with
// options' greedy / temperature / top_k / top_p, drawing from `rng`.
int32_t ChooseToken(const torch::Tensor& logits, const GenerateOptions& options,
                    std::mt19937_64* rng);

}  // namespace xlnet
