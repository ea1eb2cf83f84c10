// Left-to-right language modelling with an XLNet checkpoint: one forward
// over a segment of tokens that follows a Transformer-XL memory, returning
// the logits that predict each token from the tokens before it.
//
// Two ways to read a prediction off the model (LmStream):
//   content  a causal-LM checkpoint (config attn_type "uni"): position i's
//            content stream h_i, which saw tokens <= i, predicts token i + 1
//            through the tied LM head.
//   query    a permutation-LM checkpoint (attn_type "bi"): a perm_mask that
//            lets position i's query stream see only positions j < i (its
//            content stream j <= i) and a target_mapping over the positions
//            read, so g_i predicts token i from its left context: the
//            left-to-right order is one of the factorisation orders PLM
//            trained on.
//
// Memory (LmMemory) holds each layer's input for the last M positions, with
// a validity row so a memory that is not full yet (the start of a text) has
// the same shape as a full one: every forward then attends to exactly M
// memory rows plus its own segment, which bounds the cost of a segment (or
// of one generated token) by M, and makes the model's same_length (each
// query sees the same number of keys) hold from the first token on.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "config/settings.h"
#include "model/xlnet.h"

namespace xlnet {

// Which stream predicts (--stream); auto follows the checkpoint's attn_type.
enum class LmStream { kAuto, kContent, kQuery };

template <>
struct EnumTable<LmStream> {
  static constexpr std::array<std::pair<LmStream, const char*>, 3> kNames{{
      {LmStream::kAuto, "auto"},
      {LmStream::kContent, "content"},
      {LmStream::kQuery, "query"},
  }};
};

// kAuto -> kContent for attn_type "uni", kQuery otherwise; others as given.
LmStream ResolveStream(LmStream stream, const XLNetConfig& config);

// The cached hidden states of the positions before a segment.
struct LmMemory {
  // n_layer tensors [M, B, D]: layer n's input at the last M positions
  // (oldest first); empty = no memory at all.
  std::vector<torch::Tensor> states;
  // [B, M] 1 = a real position, 0 = a padding row not filled yet (no query
  // attends to it); undefined with `states` empty.
  torch::Tensor valid;

  int64_t rows() const { return states.empty() ? 0 : states[0].size(0); }
  // Real positions held (valid rows of batch row 0).
  int64_t filled() const;
};

// A memory of `m` rows, all padding: the start of a text. m = 0 gives the
// empty memory (no memory rows at all).
LmMemory EmptyMemory(const XLNetConfig& config, int64_t batch, int64_t m,
                     torch::Device device);

struct LmForwardResult {
  // [B, L, V] (or [B, 1, V] with last_only), fp32. Row i predicts, for the
  // content stream, token i + 1; for the query stream, token i.
  torch::Tensor logits;
  // The memory for the next segment (only when asked for, see LmForward).
  LmMemory memory;
};

// What one forward reads and keeps.
struct LmForwardOptions {
  LmStream stream = LmStream::kContent;  // kContent or kQuery (resolved)
  // Logits of the last position only (sliding windows, generation).
  bool last_only = false;
  // Return the memory for the next segment: the last `keep_memory` rows of
  // (memory, this segment's first `cache_positions` positions); -1 = none.
  int64_t keep_memory = -1;
  // Positions of this segment that join the memory; -1 = all. Generation
  // with the query stream ends its segment with a slot for the token to
  // predict, which has no content yet and must not be cached.
  int64_t cache_positions = -1;
};

// One eval-mode forward of `ids` [B, L] after `memory`. `attention_mask`
// [B, L] (1 real, 0 padding; undefined = all real) lets windows shorter
// than L be left-padded. No grad; the caller's autocast applies.
LmForwardResult LmForward(XLNetLMHeadModelImpl& model, const torch::Tensor& ids,
                          const LmMemory& memory,
                          const torch::Tensor& attention_mask,
                          const LmForwardOptions& options);

// A copy of `model` built from `config` (which must give the same parameter
// shapes): its parameter values, device and attention implementation.
XLNetLMHeadModel CopyWithConfig(const XLNetLMHeadModel& model,
                                const XLNetConfig& config);

// A copy of `model` (same parameters, same device) whose config has
// same_length off: the forwards without memory (evaluation modes none and
// sliding, generation without cache) run on it, since same_length limits a
// query to the keys of a memory-length window ending at it, which without
// memory would leave each token only itself. The model itself when
// same_length is already off.
XLNetLMHeadModel WithoutSameLength(const XLNetLMHeadModel& model);

}  // namespace xlnet
