#include "model/multiple_choice.h"

#include "model/head_ops.h"

namespace xlnet {
namespace {

using heads::CheckContentStreamOnly;

// [B, C, L] -> [B*C, L]; undefined stays undefined.
torch::Tensor FlattenChoices(const torch::Tensor& t, const char* name,
                             c10::IntArrayRef expected) {
  if (!t.defined()) return t;
  TORCH_CHECK(t.dim() == 3 && t.sizes() == expected,
              "XLNetForMultipleChoice: ", name,
              " must be [B, C, L] = ", expected, ", got ", t.sizes());
  return t.reshape({-1, t.size(2)});  // [B*C, L]
}

}  // namespace

XLNetForMultipleChoiceImpl::XLNetForMultipleChoiceImpl(
    const XLNetConfig& config)
    : SummaryHeadModelImpl(config, /*width=*/1) {}

torch::Tensor XLNetForMultipleChoiceImpl::forward(const XLNetInputs& inputs) {
  CheckContentStreamOnly(inputs, "XLNetForMultipleChoice");
  TORCH_CHECK(inputs.mems.empty(),
              "XLNetForMultipleChoice: memory is not supported");
  const torch::Tensor& ids = inputs.input_ids;
  TORCH_CHECK(ids.dim() == 3, "XLNetForMultipleChoice: input_ids must be ",
              "[B, C, L], got ", ids.sizes());
  const int64_t batch = ids.size(0);
  const int64_t choices = ids.size(1);
  XLNetInputs flat;
  flat.input_ids = FlattenChoices(ids, "input_ids", ids.sizes());
  flat.token_type_ids =
      FlattenChoices(inputs.token_type_ids, "token_type_ids", ids.sizes());
  flat.attention_mask =
      FlattenChoices(inputs.attention_mask, "attention_mask", ids.sizes());
  TORCH_CHECK(batch * choices == flat.input_ids.size(0));
  return ForwardFlat(flat, choices);
}

torch::Tensor XLNetForMultipleChoiceImpl::ForwardFlat(const XLNetInputs& flat,
                                                      int64_t num_choices) {
  CheckContentStreamOnly(flat, "XLNetForMultipleChoice");
  const torch::Tensor& ids = flat.input_ids;
  TORCH_CHECK(
      ids.dim() == 2 && num_choices >= 1 && ids.size(0) % num_choices == 0,
      "XLNetForMultipleChoice: flattened input_ids must be [B*C, L] "
      "with C = ",
      num_choices, ", got ", ids.sizes());
  XLNetForwardOptions options;
  options.use_mems = false;  // scoring needs no new memory
  const XLNetOutputs out = transformer->forward(flat, options);
  // [B*C, D] -> [B*C, 1] -> [B, C]
  return SummaryLogits(out.last_hidden_state)
      .reshape({ids.size(0) / num_choices, num_choices});
}

torch::Tensor MultipleChoiceLoss(const torch::Tensor& logits,
                                 const torch::Tensor& labels) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) >= 2,
              "MultipleChoiceLoss: logits must be [B, C] with C >= 2, got ",
              logits.sizes());
  return ClassificationLoss(logits, labels);
}

}  // namespace xlnet
