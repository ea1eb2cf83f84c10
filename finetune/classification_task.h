// The classification and regression task of xlnet-finetune: its reader
// (files -> TaskData) and its head (HF XLNetForSequenceClassification,
// model/sequence_classification.h; one output = regression). With
// finetune.long_inputs "chunks" each row is read as chunks with memory
// (finetune/chunks.h) and the head scores the last one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"
#include "finetune/logits_head.h"
#include "finetune/task_data.h"
#include "finetune/task_head.h"
#include "model/sequence_classification.h"

namespace xlnet::finetune {

// The data of an xlnet-finetune classification (or, with `task` kRegression,
// regression) run: each given path read (ReadExamples with the
// finetune.*_column keys and finetune.bad_rows; skipped rows logged) and
// encoded with finetune.max_seq_length (times max_chunks with long_inputs
// "chunks"). The labels: `labels_flag` (comma-separated names in id order),
// else those of `init_model` when it is a fine-tuned classifier, else the
// training file's in sorted order; regression: {"score"}. Empty paths are
// left out; --train must be labelled and non-empty; --test may be unlabeled
// with `do_predict`.
absl::StatusOr<TaskData> ReadClassificationTask(
    Task task, const FinetuneConfig& config, const data::Tokenizer& tokenizer,
    const XLNetConfig& init_model, const std::string& labels_flag,
    const std::string& train_path, const std::string& dev_path,
    const std::string& test_path, bool do_predict);

// Classification/regression metrics of predictions against labels.
std::map<std::string, double> ScoreLabels(Task task,
                                          const torch::Tensor& logits,
                                          const torch::Tensor& labels);

// The head of classification and regression: logits [B, N] (N classes, 1
// for regression), cross entropy or squared error per example, the metrics
// of ScoreLabels. config.json: architectures
// ["XLNetForSequenceClassification"], the run's id2label and problem_type.
class ClassificationHead : public LogitsHead {
 public:
  // Loads options.init_dir for options.task (kClassification or
  // kRegression; a model whose number of outputs does not fit is an error
  // naming the directory and the task) on `device`.
  static absl::StatusOr<std::unique_ptr<ClassificationHead>> Create(
      const TaskHeadOptions& options, torch::Device device,
      torch::ScalarType dtype);

  torch::nn::Module& model() override { return *model_; }
  std::string ModelConfigJson() override;

 protected:
  torch::Tensor Logits(const TensorRows& batch) override;
  torch::Tensor LossOfLogits(const torch::Tensor& logits,
                             const torch::Tensor& gold) const override;
  int64_t Columns(const EvalSet& set) const override;
  std::map<std::string, double> Metrics(const torch::Tensor& logits,
                                        const EvalSet& set) const override;
  std::vector<std::string> ColumnNames(int64_t columns) const override;
  bool regression() const override { return model_->is_regression(); }

 private:
  ClassificationHead(const TaskHeadOptions& options, torch::Device device,
                     torch::ScalarType dtype);

  Task task_;
  // The run's class names (id2label of config.json; empty: the model's).
  std::vector<std::string> labels_;
  XLNetForSequenceClassification model_{nullptr};
};

}  // namespace xlnet::finetune
