#include "finetune/task_head.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xlnet::finetune {

absl::StatusOr<Task> ParseTask(const std::string& name) {
  if (name == "classification") return Task::kClassification;
  if (name == "regression") return Task::kRegression;
  if (name == "squad") return Task::kSquad;
  if (name == "multiple_choice") return Task::kMultipleChoice;
  return absl::InvalidArgumentError(
      absl::StrCat("--task: unknown task '", name,
                   "' (classification, regression, squad or multiple_choice)"));
}

const char* TaskName(Task task) {
  switch (task) {
    case Task::kClassification:
      return "classification";
    case Task::kRegression:
      return "regression";
    case Task::kSquad:
      return "squad";
    case Task::kMultipleChoice:
      return "multiple_choice";
  }
  return "?";
}

std::string DefaultMetric(Task task) {
  switch (task) {
    case Task::kClassification:
      return "accuracy";
    case Task::kRegression:
      return "pearson";
    case Task::kSquad:
      return "f1";
    case Task::kMultipleChoice:
      return "accuracy";
  }
  return "loss";
}

bool LowerIsBetter(const std::string& metric) {
  return metric == "loss" || metric == "mse";
}

std::string PredictionsTsv(const Predictions& predictions, bool regression) {
  auto clean = [](std::string text) {
    std::replace_if(
        text.begin(), text.end(),
        [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return text;
  };
  std::string text = "id\tprediction";
  const int64_t n = static_cast<int64_t>(predictions.values.size());
  TORCH_CHECK(static_cast<int64_t>(predictions.ids.size()) == n,
              "predictions: ", predictions.ids.size(), " ids for ", n,
              " values");
  torch::Tensor probs;
  if (!regression) {
    for (const std::string& label : predictions.labels) {
      absl::StrAppend(&text, "\tprob_", clean(label));
    }
    TORCH_CHECK(predictions.logits.dim() == 2 &&
                    predictions.logits.size(0) == n &&
                    predictions.logits.size(1) ==
                        static_cast<int64_t>(predictions.labels.size()),
                "predictions: logits ", predictions.logits.sizes(), " for ", n,
                " rows of ", predictions.labels.size(), " classes");
    probs =
        torch::softmax(predictions.logits.to(torch::kFloat64), 1).contiguous();
  }
  text += "\n";
  for (int64_t i = 0; i < n; ++i) {
    absl::StrAppend(&text, clean(predictions.ids[i]), "\t",
                    clean(predictions.values[i]));
    if (probs.defined()) {
      const double* row = probs.data_ptr<double>() + i * probs.size(1);
      for (int64_t c = 0; c < probs.size(1); ++c) {
        absl::StrAppend(&text, "\t", absl::StrFormat("%.6g", row[c]));
      }
    }
    text += "\n";
  }
  return text;
}

HeadLoadOptions HeadLoadOptionsOf(const TaskHeadOptions& options) {
  HeadLoadOptions load;
  load.labels = options.labels;
  load.seed = static_cast<uint64_t>(options.config.train.seed);
  load.checksums = options.init_checksums;
  return load;
}

TaskHead::TaskHead(torch::Device device, torch::ScalarType dtype,
                   int64_t eval_batch_size)
    : device_(device),
      dtype_(dtype),
      eval_batch_size_(std::max<int64_t>(1, eval_batch_size)) {}

XLNetInputs TaskHead::Inputs(const TensorRows& batch) const {
  XLNetInputs in;
  in.input_ids = batch.input_ids.to(device_);
  in.token_type_ids = batch.token_type_ids.to(device_);
  in.attention_mask = batch.attention_mask.to(device_);
  return in;
}

void TaskHead::ForEachEvalBatch(
    const TensorRows& rows,
    const std::function<void(const TensorRows&)>& fn) const {
  const int64_t n = rows.size();
  for (int64_t begin = 0; begin < n; begin += eval_batch_size_) {
    const int64_t end = std::min(n, begin + eval_batch_size_);
    fn(rows.Select(torch::arange(begin, end)));
  }
}

}  // namespace xlnet::finetune
