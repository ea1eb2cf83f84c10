// The multiple-choice task of xlnet-finetune (RACE): its head, HF
// XLNetForMultipleChoice (model/multiple_choice.h), which scores each of a
// question's C options with one shared summary head. Its reader,
// ReadMultipleChoiceTask, is in race.h beside the RACE readers and encoding
// it runs. With finetune.long_inputs "chunks" every option sequence is read
// as chunks with memory (finetune/chunks.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "finetune/logits_head.h"
#include "finetune/task_data.h"
#include "finetune/task_head.h"
#include "model/multiple_choice.h"

namespace xlnet::finetune {

// Multiple choice: MultipleChoiceMetrics (race.h) of logits [N, C] against
// labels [N]; `levels` [N] (or empty: no RACE levels).
std::map<std::string, double> ScoreChoices(
    const torch::Tensor& logits, const torch::Tensor& labels,
    const std::vector<std::string>& levels);

// The head of multiple choice: logits [B, C] over a question's options
// (inputs [B, C, L]), the cross entropy over the options, the metrics of
// ScoreChoices with the set's RACE levels, the option letters as column
// names. config.json: MultipleChoiceConfigJson (architectures
// ["XLNetForMultipleChoice"]).
class MultipleChoiceHead : public LogitsHead {
 public:
  // Loads options.init_dir (its backbone, and its head when it is a
  // multiple-choice model) on `device`.
  static absl::StatusOr<std::unique_ptr<MultipleChoiceHead>> Create(
      const TaskHeadOptions& options, torch::Device device,
      torch::ScalarType dtype);

  torch::nn::Module& model() override { return *model_; }
  std::string ModelConfigJson() override;

 protected:
  torch::Tensor Logits(const TensorRows& batch) override;
  torch::Tensor LossOfLogits(const torch::Tensor& logits,
                             const torch::Tensor& gold) const override;
  // The options per question (0 for an empty set).
  int64_t Columns(const EvalSet& set) const override;
  std::map<std::string, double> Metrics(const torch::Tensor& logits,
                                        const EvalSet& set) const override;
  std::vector<std::string> ColumnNames(int64_t columns) const override;

 private:
  MultipleChoiceHead(const TaskHeadOptions& options, torch::Device device,
                     torch::ScalarType dtype);

  XLNetForMultipleChoice model_{nullptr};
};

}  // namespace xlnet::finetune
