// One fine-tuning task's model and what only that task knows about it,
// behind one interface (TaskHead): the module whose weights are trained and
// saved, the per-example losses of a batch, scoring an evaluation set into
// metrics and predictions, the predictions file and config.json. FinetuneUnit
// (finetune_unit.h) holds one head and keeps what every task shares: the
// row stream, rank and micro-batch slicing, checkpoints of the stream.
//
// The heads, one per task, each beside its task's reader:
//   classification_task.h    classification and regression
//                            (XLNetForSequenceClassification, with the
//                            "chunks" long-input mode)
//   squad_task.h             SQuAD (XLNetForQuestionAnswering)
//   multiple_choice_task.h   multiple choice (XLNetForMultipleChoice; its
//                            reader is ReadMultipleChoiceTask in race.h)
// classification and multiple choice share LogitsHead (logits_head.h): both
// score logits [B, C] against a label. MakeTaskHead (finetune_unit.h) picks
// the head of a task.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "finetune/squad.h"
#include "finetune/task_data.h"
#include "model/xlnet.h"
#include "model_io/load.h"

namespace xlnet::finetune {

// "classification", "regression", "squad" or "multiple_choice".
enum class Task { kClassification, kRegression, kSquad, kMultipleChoice };
absl::StatusOr<Task> ParseTask(const std::string& name);
const char* TaskName(Task task);

// The metric that picks the best checkpoint when finetune.metric is empty,
// and whether lower is better for a metric name.
std::string DefaultMetric(Task task);
bool LowerIsBetter(const std::string& metric);

// What a task head is built from.
struct TaskHeadOptions {
  Task task = Task::kClassification;
  // Resolved config: model (from the init directory), train (with the
  // finetune section's overrides applied) and finetune.
  Config config;
  // The model to start from (our checkpoint, a fine-tuned or a HF dir).
  std::string init_dir;
  // kAlreadyVerified when the caller has verified init_dir's checksums.json
  // (RunFinetune, reading its config), so the load does not read every file
  // a second time.
  Checksums init_checksums = Checksums::kVerify;
  // Keep the architecture of init_dir but start from random weights (the
  // "no pretraining" baseline).
  bool from_scratch = false;
  // Class names (classification; id order) — one name means regression.
  std::vector<std::string> labels;
};

// Predictions of a set: classification/regression one row per example
// (label name or value); SQuAD the official files' contents.
struct Predictions {
  std::vector<std::string> ids;
  std::vector<std::string> values;  // label name / number
  torch::Tensor logits;             // [N, C] (classification/regression)
  // Classification: the class names, index = logit column (id2label);
  // multiple choice: the option letters.
  std::vector<std::string> labels;
  SquadPredictions squad;
};

// The text of predictions_{dev,test}.tsv of a classification or regression
// set: a header, then one row per example. Columns: `id`, `prediction` (the
// class of the largest logit, or the regression value, 6 significant
// digits), then for classification `prob_<label>` per class in id order: the
// softmax of the logits (computed in double), 6 significant digits. Tabs and
// line breaks inside ids and labels are written as spaces (the file has no
// quoting).
std::string PredictionsTsv(const Predictions& predictions, bool regression);

// How a head loads options.init_dir: the task's labels, a fresh head seeded
// with train.seed.
HeadLoadOptions HeadLoadOptionsOf(const TaskHeadOptions& options);

// The start of a head's loaded `model`: with options.from_scratch all of its
// weights random (the global generator seeded with train.seed), then on
// `device`.
template <typename Model>
void StartFrom(Model& model, const TaskHeadOptions& options,
               torch::Device device) {
  if (options.from_scratch) {
    torch::manual_seed(options.config.train.seed);
    model->ResetParameters();
  }
  model->to(device);
}

class TaskHead {
 public:
  virtual ~TaskHead() = default;

  // The model (backbone and head): its named parameters and buffers are the
  // checkpoint's tensors under HF names; train()/eval() set its mode.
  virtual torch::nn::Module& model() = 0;
  // config.json's text (TrainUnit::ModelConfigJson).
  virtual std::string ModelConfigJson() = 0;
  // Per-example losses [B] (fp32) of a batch, the model in its current
  // mode, under autocast to the head's dtype.
  virtual torch::Tensor Losses(const TensorRows& batch) = 0;
  // Metrics (when `set` is labelled) and, unless `predictions` is null, the
  // predictions of `set`. The caller sets eval mode and disables gradients.
  virtual absl::StatusOr<std::map<std::string, double>> Score(
      const EvalSet& set, Predictions* predictions) = 0;
  // Writes `predictions` of a set; `path` is RUN/predictions_<set> (a .tsv
  // file, or SQuAD's directory of official files).
  virtual absl::Status WritePredictions(const Predictions& predictions,
                                        const std::string& path) const = 0;

 protected:
  // `device` holds the model; autocast runs in `dtype`; evaluation runs
  // `eval_batch_size` rows at a time (at least 1).
  TaskHead(torch::Device device, torch::ScalarType dtype,
           int64_t eval_batch_size);

  torch::Device device() const { return device_; }
  torch::ScalarType dtype() const { return dtype_; }
  // The model inputs of a batch, on the device.
  XLNetInputs Inputs(const TensorRows& batch) const;
  // Calls `fn` on the rows of `rows` in order, eval_batch_size at a time.
  void ForEachEvalBatch(const TensorRows& rows,
                        const std::function<void(const TensorRows&)>& fn) const;

 private:
  torch::Device device_;
  torch::ScalarType dtype_;
  int64_t eval_batch_size_;
};

}  // namespace xlnet::finetune
