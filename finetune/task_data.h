// The encoded rows of a fine-tuning set, as every task's reader produces
// them and FinetuneUnit consumes them: model inputs with the task's targets
// (TensorRows), an evaluation set with what scoring needs (EvalSet), and
// the sets of a run (TaskData).
// Their own header so that the task readers (race.h, ...) need not include
// the unit.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "finetune/squad.h"

namespace xlnet::finetune {

// Model inputs of a set of rows, on the CPU; rows are selected by index.
struct TensorRows {
  // [N, L]; multiple choice [N, C, L] (C options per question).
  torch::Tensor input_ids;       // int64
  torch::Tensor token_type_ids;  // int64
  torch::Tensor attention_mask;  // float
  // Task targets, [N] each: "labels" (classification int64 / regression
  // float / multiple choice: the option index); SQuAD: "start_positions", "end_positions", "cls_index",
  // "is_impossible", and [N, L] "p_mask".
  std::map<std::string, torch::Tensor> targets;
  int64_t size() const { return input_ids.defined() ? input_ids.size(0) : 0; }
  TensorRows Select(const torch::Tensor& index) const;
  // Inputs with target "labels" when `labels` is defined.
  static TensorRows Labelled(torch::Tensor input_ids,
                             torch::Tensor token_type_ids,
                             torch::Tensor attention_mask,
                             const torch::Tensor& labels);
};

// One labelled evaluation set and what is needed to score it.
struct EvalSet {
  std::string name;  // "dev", "test"
  TensorRows rows;
  // Classification/regression/multiple choice: the examples' ids
  // (predictions files).
  std::vector<std::string> example_ids;
  // Multiple choice: each question's RACE level ("middle", "high", "").
  std::vector<std::string> levels;
  // SQuAD: the questions and their windows (post-processing and EM/F1).
  SquadDataset squad;
  SquadFeatures squad_features;
  // Whether the set has labels (metrics) or only gets predictions.
  bool labelled = true;
};

// The sets of one xlnet-finetune run, as each task's reader returns them
// (ReadClassificationTask, ReadSquadTask, ReadMultipleChoiceTask).
struct TaskData {
  // The training rows; empty without --train.
  TensorRows train;
  // --dev and --test, when given.
  std::optional<EvalSet> dev;
  std::optional<EvalSet> test;
  // Classification: the class names in id order; regression: {"score"};
  // empty for the tasks without labels of their own (SQuAD, multiple
  // choice).
  std::vector<std::string> labels;
};

// Reads a set of a task: `path`, named `name` ("train", "dev", "test"),
// labels required when `labelled`.
using ReadSetFn = std::function<absl::StatusOr<EvalSet>(
    const std::string& path, const std::string& name, bool labelled)>;

// data->dev from `dev_path` (labelled) and data->test from `test_path`
// (labelled unless `do_predict`) with `read`; empty paths are left out.
absl::Status ReadEvalSets(const ReadSetFn& read, const std::string& dev_path,
                          const std::string& test_path, bool do_predict,
                          TaskData* data);

}  // namespace xlnet::finetune
