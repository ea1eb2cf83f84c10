#include "finetune/logits_head.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "model/precision.h"

namespace xlnet::finetune {

std::pair<std::vector<int64_t>, std::vector<int64_t>> GoldAndPredicted(
    const torch::Tensor& logits, const torch::Tensor& labels) {
  const torch::Tensor pred = logits.argmax(-1).to(torch::kLong).contiguous();
  const torch::Tensor gold = labels.to(torch::kLong).contiguous();
  return {std::vector<int64_t>(gold.data_ptr<int64_t>(),
                               gold.data_ptr<int64_t>() + gold.numel()),
          std::vector<int64_t>(pred.data_ptr<int64_t>(),
                               pred.data_ptr<int64_t>() + pred.numel())};
}

LogitsHead::LogitsHead(const TaskHeadOptions& options, torch::Device device,
                       torch::ScalarType dtype)
    : TaskHead(device, dtype, options.config.finetune.eval_batch_size) {
  if (UsesChunks(options.config.finetune)) {
    chunks_ =
        ChunkOptionsFromConfig(options.config.finetune, options.config.model);
  }
}

torch::Tensor LogitsHead::LabelLosses(const torch::Tensor& logits,
                                      const torch::Tensor& labels) const {
  return LossOfLogits(logits, labels.to(device()));
}

torch::Tensor LogitsHead::Losses(const TensorRows& batch) {
  AutocastGuard autocast(device(), dtype());
  return LabelLosses(Logits(batch), batch.targets.at("labels"))
      .to(torch::kFloat);
}

absl::StatusOr<std::map<std::string, double>> LogitsHead::Score(
    const EvalSet& set, Predictions* predictions) {
  const int64_t n = set.rows.size();
  double loss_sum = 0;
  std::vector<torch::Tensor> all_logits;
  ForEachEvalBatch(set.rows, [&](const TensorRows& rows) {
    AutocastGuard autocast(device(), dtype());
    const torch::Tensor logits = Logits(rows).to(torch::kFloat);
    if (set.labelled) {
      loss_sum +=
          LabelLosses(logits, rows.targets.at("labels")).sum().item<double>();
    }
    all_logits.push_back(logits.to(torch::kCPU));
  });
  const torch::Tensor logits = all_logits.empty()
                                   ? torch::zeros({0, Columns(set)})
                                   : torch::cat(all_logits);
  std::map<std::string, double> metrics;
  if (set.labelled && n > 0) {
    metrics = Metrics(logits, set);
    metrics["loss"] = loss_sum / n;
  }
  if (predictions) Predict(set, logits, predictions);
  return metrics;
}

void LogitsHead::Predict(const EvalSet& set, const torch::Tensor& logits,
                         Predictions* predictions) const {
  predictions->ids = set.example_ids;
  predictions->logits = logits;
  predictions->values.clear();
  predictions->labels.clear();
  if (!regression()) predictions->labels = ColumnNames(Columns(set));
  for (int64_t i = 0; i < logits.size(0); ++i) {
    if (regression()) {
      predictions->values.push_back(
          absl::StrFormat("%.6g", logits[i][0].item<double>()));
    } else {
      const int64_t id = logits[i].argmax().item<int64_t>();
      const auto& names = predictions->labels;
      predictions->values.push_back(id < static_cast<int64_t>(names.size())
                                        ? names[id]
                                        : std::to_string(id));
    }
  }
}

absl::Status LogitsHead::WritePredictions(const Predictions& predictions,
                                          const std::string& path) const {
  return WriteFileAtomic(absl::StrCat(path, ".tsv"),
                         PredictionsTsv(predictions, regression()));
}

}  // namespace xlnet::finetune
