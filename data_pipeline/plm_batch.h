// One permutation-LM batch, with HuggingFace XLNet's input names, and its
// field list (written once: Named, Cat and dumps walk it).
#pragma once

#include <torch/torch.h>

#include <array>
#include <utility>
#include <vector>

#include "common/safetensors.h"

namespace xlnet::data {

// One batch; B = local batch, L = seq_len, P = num_predict.
struct PlmBatch {
  torch::Tensor input_ids;       // [B, L] int64, original tokens
  torch::Tensor token_type_ids;  // [B, L] int64, 0 = reuse+A+<sep>, 1 =
                                 // B+<sep>, 2 = <cls>
  torch::Tensor perm_mask;       // [B, L, L] float, 1 = i may not attend to j
                                 // (bool with SamplerOptions::compact_masks)
  torch::Tensor target_mapping;  // [B, P, L] float, one-hot target positions
                                 // (bool with SamplerOptions::compact_masks)
  torch::Tensor target;       // [B, P] int64, the target tokens (0 = padding)
  torch::Tensor target_mask;  // [B, P] float, 1 = real target
  torch::Tensor is_masked;    // [B, L] bool, positions chosen for prediction

  // (name, tensor) in the order of kPlmBatchFields.
  NamedTensors Named() const;
  // The rows of `parts` one after the other, field by field (every part
  // has every field, with the same trailing sizes).
  static PlmBatch Cat(const std::vector<PlmBatch>& parts);
};

// Every field of PlmBatch with its name, in the order above.
inline constexpr std::array<std::pair<const char*, torch::Tensor PlmBatch::*>,
                            7>
    kPlmBatchFields = {{
        {"input_ids", &PlmBatch::input_ids},
        {"token_type_ids", &PlmBatch::token_type_ids},
        {"perm_mask", &PlmBatch::perm_mask},
        {"target_mapping", &PlmBatch::target_mapping},
        {"target", &PlmBatch::target},
        {"target_mask", &PlmBatch::target_mask},
        {"is_masked", &PlmBatch::is_masked},
    }};

}  // namespace xlnet::data
