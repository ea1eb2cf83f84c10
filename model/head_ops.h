// Tensor operations shared by the fine-tuning heads
// (sequence_classification.h, question_answering.h). Letters as in
// model/README.md.
#pragma once

#include <torch/torch.h>

#include "model/xlnet.h"

namespace xlnet {
namespace heads {

// Half and bfloat16 go to fp32; fp32 and fp64 stay (fp64 for gradcheck).
torch::Tensor AtLeastFloat(const torch::Tensor& t);

// hidden [B, L, D], index [B, K] int64 -> [B, K, D] (HF's gather). Indices
// are not range-checked here (that would sync a GPU every step): the
// readers produce them; on the CPU gather itself throws.
torch::Tensor GatherPositions(const torch::Tensor& hidden,
                              const torch::Tensor& index);

// hidden [B, L, D], positions [B] -> [B, D].
torch::Tensor GatherRows(const torch::Tensor& hidden,
                         const torch::Tensor& positions);

// cls_index [B], or the last position of every row when undefined.
torch::Tensor ClsIndexOrLast(const torch::Tensor& cls_index,
                             const torch::Tensor& hidden);

// Normal(0, std) weight from `generator` (null = the global one), zero bias.
void InitLinear(torch::nn::Linear& linear, double std,
                c10::optional<at::Generator> generator);

// Throws unless `inputs` has no perm_mask and no target_mapping.
void CheckContentStreamOnly(const XLNetInputs& inputs, const char* model);

}  // namespace heads
}  // namespace xlnet
