// What the classification/regression and multiple-choice heads share: both
// map a batch to logits [B, C] (C classes, or C options of a question) and
// score them against one gold label per row. LogitsHead turns that into
// per-example losses, metrics with a mean "loss", predictions (the column of
// the largest logit, or the regression value) and predictions_<set>.tsv
// (PredictionsTsv); a subclass supplies the logits, the loss of logits, the
// metrics and the names of the columns. Both read long inputs in chunks with
// finetune.long_inputs "chunks" (chunks.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "finetune/chunks.h"
#include "finetune/task_data.h"
#include "finetune/task_head.h"

namespace xlnet::finetune {

// labels [N] and the argmax of logits [N, C], as vectors (for the metrics).
std::pair<std::vector<int64_t>, std::vector<int64_t>> GoldAndPredicted(
    const torch::Tensor& logits, const torch::Tensor& labels);

class LogitsHead : public TaskHead {
 public:
  // LossOfLogits(Logits(batch), labels) under autocast, fp32.
  torch::Tensor Losses(const TensorRows& batch) override;
  // Logits of every row (eval_batch_size at a time, under autocast), then
  // Metrics and "loss" (the mean per-example loss) when `set` is labelled
  // and not empty; predictions: one value per example, the logits, and the
  // column names unless regression.
  absl::StatusOr<std::map<std::string, double>> Score(
      const EvalSet& set, Predictions* predictions) override;
  // `path`.tsv: PredictionsTsv.
  absl::Status WritePredictions(const Predictions& predictions,
                                const std::string& path) const override;

 protected:
  // The device, dtype, eval batch size and chunking of a run's head.
  LogitsHead(const TaskHeadOptions& options, torch::Device device,
             torch::ScalarType dtype);

  // Set with finetune.long_inputs "chunks".
  const std::optional<ChunkOptions>& chunks() const { return chunks_; }

  // Logits [B, C] of a batch (model in its current mode), in the compute
  // dtype.
  virtual torch::Tensor Logits(const TensorRows& batch) = 0;
  // Per-example losses [B] of logits [B, C] against gold labels [B] on the
  // device.
  virtual torch::Tensor LossOfLogits(const torch::Tensor& logits,
                                     const torch::Tensor& gold) const = 0;
  // C: the logit columns of `set`'s rows.
  virtual int64_t Columns(const EvalSet& set) const = 0;
  // The metrics of a labelled, non-empty set's logits [N, C] (CPU, fp32).
  virtual std::map<std::string, double> Metrics(const torch::Tensor& logits,
                                                const EvalSet& set) const = 0;
  // The names of the C logit columns (classes, option letters); unused for
  // regression.
  virtual std::vector<std::string> ColumnNames(int64_t columns) const = 0;
  // Regression: one output, predicted as a number.
  virtual bool regression() const { return false; }

 private:
  // LossOfLogits with `labels` moved to the device.
  torch::Tensor LabelLosses(const torch::Tensor& logits,
                            const torch::Tensor& labels) const;
  // The predictions of `set` from its logits [N, C].
  void Predict(const EvalSet& set, const torch::Tensor& logits,
               Predictions* predictions) const;

  std::optional<ChunkOptions> chunks_;
};

}  // namespace xlnet::finetune
