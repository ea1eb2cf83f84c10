// HuggingFace's XLNetForSequenceClassification (and regression) on the
// XLNet backbone, with HF's module names, parameter names and numerics (see
// model/README.md, "Fine-tuning heads"). N = id2label size; 1 = regression:
//   transformer.*                                 the XLNetModel (xlnet.h)
//   sequence_summary.summary.{weight [D, D], bias [D]}   (summary_use_proj)
//   logits_proj.{weight [N, D], bias [N]}
// Content stream only (no perm_mask, no target_mapping). Losses are per
// example ([B], fp32 or wider) so a trainer can sum them over micro-batches
// and ranks and divide once. Loading and saving: model_io/load.h, save.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/xlnet.h"

namespace xlnet {

// HF SequenceSummary as XLNet configures it: pick one vector per sequence
// (summary_type "last", "first", "mean" over all L positions, padding
// included, as HF and the official code, or "cls_index"), then the
// optional D x D projection (summary_use_proj), the activation
// (summary_activation "tanh" or none) and dropout (summary_last_dropout).
class SequenceSummaryImpl : public torch::nn::Module {
 public:
  explicit SequenceSummaryImpl(const XLNetConfig& config);
  // Normal(initializer_range) weight, zero bias; `generator` null = global.
  void ResetParameters(double initializer_range,
                       c10::optional<at::Generator> generator = c10::nullopt);
  // hidden [B, L, D]; cls_index [B] int64 (only for "cls_index"; undefined =
  // the last position, as HF) -> [B, D].
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& cls_index = {});

  // Undefined without summary_use_proj.
  torch::nn::Linear summary{nullptr};

 private:
  std::string type_;
  std::string activation_;
  double last_dropout_;
};
TORCH_MODULE(SequenceSummary);

// What XLNetForSequenceClassification and XLNetForMultipleChoice share:
// the backbone, one SequenceSummary and logits_proj [W, D] on it, under HF's
// names (transformer.*, sequence_summary.*, logits_proj.*). The two differ
// only in W (N labels; 1 score per option) and in how their inputs reach
// the backbone.
class SummaryHeadModelImpl : public torch::nn::Module {
 public:
  // Everything, XLNet init, global generator (as XLNetModelImpl).
  void ResetParameters();
  // Only sequence_summary and logits_proj, from a generator seeded with
  // `seed` (deterministic, independent of the global generator).
  void ResetHeadParameters(uint64_t seed);
  const XLNetConfig& config() const { return transformer->config(); }

  XLNetModel transformer{nullptr};
  SequenceSummary sequence_summary{nullptr};
  torch::nn::Linear logits_proj{nullptr};

 protected:
  // Registers the three modules in that order; logits_proj has `width`
  // outputs.
  SummaryHeadModelImpl(const XLNetConfig& config, int64_t width);
  // logits_proj(sequence_summary(hidden, cls_index)): hidden [B, L, D] ->
  // [B, W].
  torch::Tensor SummaryLogits(const torch::Tensor& hidden,
                              const torch::Tensor& cls_index = {});
};

struct SequenceClassificationOutputs {
  // [B, N] (N = 1 for regression), the dtype of the last hidden state.
  torch::Tensor logits;
  // As XLNetOutputs::new_mems (only with options.use_mems).
  std::vector<torch::Tensor> new_mems;
};

// HF XLNetForSequenceClassification: transformer + sequence_summary +
// logits_proj. N = config.id2label.size(); N == 1 is regression (HF's
// problem_type "regression"), otherwise single-label classification.
class XLNetForSequenceClassificationImpl : public SummaryHeadModelImpl {
 public:
  explicit XLNetForSequenceClassificationImpl(const XLNetConfig& config);
  // Content stream only: inputs.perm_mask and inputs.target_mapping must be
  // undefined. cls_index [B] int64 is used by summary_type "cls_index".
  SequenceClassificationOutputs forward(
      const XLNetInputs& inputs, const torch::Tensor& cls_index = {},
      const XLNetForwardOptions& options = {});
  int64_t num_labels() const { return num_labels_; }
  bool is_regression() const { return num_labels_ == 1; }

 private:
  int64_t num_labels_;
};
TORCH_MODULE(XLNetForSequenceClassification);

// Per-example cross entropy [B] (fp32 or wider): logits [B, N], labels [B]
// int64 in [0, N). HF's loss is the mean of these.
torch::Tensor ClassificationLoss(const torch::Tensor& logits,
                                 const torch::Tensor& labels);

// Per-example squared error [B] (fp32 or wider): logits [B, 1] or [B],
// labels [B] float. HF's MSELoss is the mean of these.
torch::Tensor RegressionLoss(const torch::Tensor& logits,
                             const torch::Tensor& labels);

}  // namespace xlnet
