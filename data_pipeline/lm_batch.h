// One causal-LM batch (ordered streams, LmStreamSource in
// lm_stream_source.h) and its field list.
//
// A type of its own rather than a PlmBatch with fields left undefined:
// PlmBatch's consumers (Cat, Named, dumps, the pinning walk) expect every
// one of its seven fields, and a causal batch has only two. Both types share
// the prefetching and position code (step_batches.h) through the template
// it is written as.
#pragma once

#include <torch/torch.h>

#include <array>
#include <utility>

namespace xlnet::data {

// B = rows (local batch), L = seq_len.
struct LmBatch {
  torch::Tensor input_ids;  // [B, L] int64, stream tokens [t*L, t*L + L)
  torch::Tensor target;     // [B, L] int64, the next token of every position
                            // (stream tokens [t*L + 1, t*L + L + 1))
};

// Every field of LmBatch with its name, in the order above.
inline constexpr std::array<std::pair<const char*, torch::Tensor LmBatch::*>, 2>
    kLmBatchFields = {{
        {"input_ids", &LmBatch::input_ids},
        {"target", &LmBatch::target},
    }};

}  // namespace xlnet::data
