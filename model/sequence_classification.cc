#include "model/sequence_classification.h"

#include <ATen/CPUGeneratorImpl.h>

#include "model/head_ops.h"

namespace xlnet {
namespace {

using heads::AtLeastFloat;
using heads::CheckContentStreamOnly;
using heads::ClsIndexOrLast;
using heads::GatherPositions;
using heads::GatherRows;
using heads::InitLinear;

// The number of labels of a classifier (id2label), checked before any
// module is built.
int64_t NumLabels(const XLNetConfig& config) {
  const int64_t n = static_cast<int64_t>(config.id2label.size());
  TORCH_CHECK(n >= 1, "id2label must name at least one label");
  return n;
}

}  // namespace

SequenceSummaryImpl::SequenceSummaryImpl(const XLNetConfig& config)
    : type_(config.summary_type),
      activation_(config.summary_activation),
      last_dropout_(config.summary_last_dropout) {
  TORCH_CHECK(type_ == "last" || type_ == "first" || type_ == "mean" ||
                  type_ == "cls_index",
              "summary_type must be last, first, mean or cls_index, got ",
              type_);
  if (config.summary_use_proj) {
    summary = register_module(
        "summary", torch::nn::Linear(config.d_model, config.d_model));
  }
  ResetParameters(config.initializer_range);
}

void SequenceSummaryImpl::ResetParameters(
    double initializer_range, c10::optional<at::Generator> generator) {
  if (summary) InitLinear(summary, initializer_range, generator);
}

torch::Tensor SequenceSummaryImpl::forward(const torch::Tensor& hidden,
                                           const torch::Tensor& cls_index) {
  TORCH_CHECK(hidden.dim() == 3,
              "SequenceSummary: hidden must be [B, L, D], got ",
              hidden.sizes());
  torch::Tensor out;
  if (type_ == "last") {
    out = hidden.select(1, -1);
  } else if (type_ == "first") {
    out = hidden.select(1, 0);
  } else if (type_ == "mean") {
    out = hidden.mean(1);
  } else {
    out = GatherRows(hidden, ClsIndexOrLast(cls_index, hidden));
  }
  if (summary) out = summary(out);
  if (activation_ == "tanh") out = torch::tanh(out);
  return torch::dropout(out, last_dropout_, is_training());
}

SummaryHeadModelImpl::SummaryHeadModelImpl(const XLNetConfig& config,
                                           int64_t width) {
  transformer = register_module("transformer", XLNetModel(config));
  sequence_summary =
      register_module("sequence_summary", SequenceSummary(config));
  logits_proj =
      register_module("logits_proj", torch::nn::Linear(config.d_model, width));
  InitLinear(logits_proj, config.initializer_range, c10::nullopt);
}

void SummaryHeadModelImpl::ResetParameters() {
  transformer->ResetParameters();
  sequence_summary->ResetParameters(config().initializer_range);
  InitLinear(logits_proj, config().initializer_range, c10::nullopt);
}

void SummaryHeadModelImpl::ResetHeadParameters(uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  sequence_summary->ResetParameters(config().initializer_range, generator);
  InitLinear(logits_proj, config().initializer_range, generator);
}

torch::Tensor SummaryHeadModelImpl::SummaryLogits(
    const torch::Tensor& hidden, const torch::Tensor& cls_index) {
  return logits_proj(sequence_summary(hidden, cls_index));
}

XLNetForSequenceClassificationImpl::XLNetForSequenceClassificationImpl(
    const XLNetConfig& config)
    : SummaryHeadModelImpl(config, NumLabels(config)),
      num_labels_(NumLabels(config)) {}

SequenceClassificationOutputs XLNetForSequenceClassificationImpl::forward(
    const XLNetInputs& inputs, const torch::Tensor& cls_index,
    const XLNetForwardOptions& options) {
  CheckContentStreamOnly(inputs, "XLNetForSequenceClassification");
  XLNetOutputs out = transformer->forward(inputs, options);
  SequenceClassificationOutputs result;
  result.logits = SummaryLogits(out.last_hidden_state, cls_index);
  result.new_mems = std::move(out.new_mems);
  return result;
}

torch::Tensor ClassificationLoss(const torch::Tensor& logits,
                                 const torch::Tensor& labels) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 &&
                  labels.size(0) == logits.size(0),
              "ClassificationLoss: logits [B, N] and labels [B], got ",
              logits.sizes(), " and ", labels.sizes());
  const auto index = labels.to(logits.device(), torch::kLong);
  return -torch::log_softmax(AtLeastFloat(logits), -1)
              .gather(1, index.unsqueeze(1))
              .squeeze(1);
}

torch::Tensor RegressionLoss(const torch::Tensor& logits,
                             const torch::Tensor& labels) {
  TORCH_CHECK(
      labels.dim() == 1 && logits.numel() == labels.size(0) &&
          (logits.dim() == 1 || (logits.dim() == 2 && logits.size(1) == 1)),
      "RegressionLoss: logits [B, 1] or [B] and labels [B], got ",
      logits.sizes(), " and ", labels.sizes());
  const auto x = AtLeastFloat(logits).reshape({-1});
  return (x - labels.to(x.device(), x.scalar_type())).pow(2);
}

}  // namespace xlnet
