// Language-model evaluation of a token sequence in three modes:
//
//   memory   Transformer-XL: segments of L tokens, each attending to the
//            cached hidden states of the M positions before it (LmMemory),
//            so every token after the first segment has M..M+L-1 tokens of
//            context for the cost of an L-token forward. The model's
//            clamp_len and same_length apply as configured.
//   none     independent segments of L tokens: a token has only the tokens
//            of its own segment before it (context fragmentation).
//   sliding  the vanilla Transformer: for every token one forward over the
//            L tokens ending at it, of which only the last prediction is
//            read. Windows are batched, batch_size per forward; each still
//            costs a full L-token forward, so the comparison stays fair.
//
// Every mode scores the same predictions: tokens 1 .. N-1 of the sequence,
// each from (at most) the tokens before it; token 0 has no left context.
// With the content stream (causal checkpoints) the model reads tokens
// 0 .. N-2 and position t predicts token t + 1; with the query stream
// (PLM checkpoints, see language_model.h) it reads tokens 0 .. N-1 and
// position t predicts token t, so in mode none the first token of each
// segment is predicted from no context at all.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "config/settings.h"
#include "lm/language_model.h"
#include "model/xlnet.h"

namespace xlnet {

// The evaluation mode (--mode).
enum class LmEvalMode { kMemory, kNone, kSliding };

template <>
struct EnumTable<LmEvalMode> {
  static constexpr std::array<std::pair<LmEvalMode, const char*>, 3> kNames{{
      {LmEvalMode::kMemory, "memory"},
      {LmEvalMode::kNone, "none"},
      {LmEvalMode::kSliding, "sliding"},
  }};
};

struct LmEvalOptions {
  LmEvalMode mode = LmEvalMode::kMemory;
  // L: tokens per forward (segment or window), >= 1.
  int64_t seq_len = 128;
  // M: memory rows per layer in mode memory, >= 1 there (ignored by the
  // other modes).
  int64_t mem_len = 128;
  // Segments (none) or windows (sliding) per forward; mode memory reads its
  // segments one after another (each needs the previous one's memory), so
  // it runs one at a time.
  int64_t batch_size = 8;
  // kAuto: the content stream for attn_type uni, the query stream for bi.
  LmStream stream = LmStream::kAuto;
};

struct LmEvalResult {
  LmEvalMode mode = LmEvalMode::kMemory;
  LmStream stream = LmStream::kContent;  // resolved
  int64_t seq_len = 0;
  int64_t mem_len = 0;  // 0 outside mode memory
  int64_t batch_size = 0;
  // Forward passes run.
  int64_t forwards = 0;
  // Predictions scored (N - 1) and the sum of their negative log
  // likelihoods, in nats.
  int64_t tokens = 0;
  double nll = 0;
  // Bytes of text the scored tokens stand for (TokenTextBytes).
  int64_t bytes = 0;
  double seconds = 0;

  double NllPerToken() const;
  double Perplexity() const;
  double BitsPerByte() const;
  double TokensPerSecond() const;
};

// Evaluates `model` (eval mode, on its device; under the caller's autocast)
// on `ids` (N >= 2 tokens). `token_bytes` gives each id's bytes
// (TokenTextBytes; an id beyond it counts 0). Errors: bad options
// (InvalidArgument naming the option), ids outside the vocabulary.
absl::StatusOr<LmEvalResult> EvaluateLm(XLNetLMHeadModel model,
                                        const std::vector<int32_t>& ids,
                                        const std::vector<int32_t>& token_bytes,
                                        const LmEvalOptions& options);

}  // namespace xlnet
