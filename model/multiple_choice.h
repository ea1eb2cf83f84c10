// HuggingFace's XLNetForMultipleChoice (RACE, SWAG) on the XLNet backbone,
// with HF's module and parameter names (model/README.md, "Fine-tuning
// heads"). Every option of a question is one sequence; one shared summary
// head scores each:
//   transformer.*                                 the XLNetModel (xlnet.h)
//   sequence_summary.summary.{weight [D, D], bias [D]}   (summary_use_proj)
//   logits_proj.{weight [1, D], bias [1]}
// Inputs are [B, C, L] (C options per question), flattened to [B*C, L] for
// the backbone; the C scores of a question are its logits [B, C]. The loss
// is the cross entropy over the C options, per question ([B], fp32 or
// wider). Loading and saving: model_io/load.h, save.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/config.h"
#include "model/sequence_classification.h"
#include "model/xlnet.h"

namespace xlnet {

// The summary head of SummaryHeadModelImpl (sequence_classification.h)
// with one output: each option's score.
class XLNetForMultipleChoiceImpl : public SummaryHeadModelImpl {
 public:
  explicit XLNetForMultipleChoiceImpl(const XLNetConfig& config);
  // inputs.input_ids, token_type_ids, attention_mask [B, C, L] (the last
  // two may be undefined); perm_mask, target_mapping and mems must be
  // absent. Returns logits [B, C] in the dtype of the last hidden state.
  torch::Tensor forward(const XLNetInputs& inputs);
  // The same on inputs already flattened to [B*C, L] (option c of question b
  // is row b*C + c), which may carry memory (mems, mems_attention_mask,
  // mems_token_type_ids: a long article read in chunks,
  // finetune/chunks.h). Returns logits [B, C].
  torch::Tensor ForwardFlat(const XLNetInputs& flat, int64_t num_choices);
};
TORCH_MODULE(XLNetForMultipleChoice);

// Per-question cross entropy over the options [B] (fp32 or wider): logits
// [B, C], labels [B] int64 in [0, C). HF's loss is the mean of these.
torch::Tensor MultipleChoiceLoss(const torch::Tensor& logits,
                                 const torch::Tensor& labels);

}  // namespace xlnet
