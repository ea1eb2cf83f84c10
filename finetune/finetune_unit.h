// Fine-tuning tasks as TrainUnits: the same Trainer as pretraining runs them
// (schedule, layer-wise decay, clipping, accumulation, data parallel,
// checkpoints, metrics.jsonl); a unit supplies only "batch -> loss",
// evaluation and prediction.
//
// Training order: every epoch is a permutation of the training rows seeded by
// (train.seed, epoch); a global batch of train.batch_size rows is split into
// world_size rank slices and each slice into grad_accum_steps micro-batches,
// so the same config gives the same updates on any number of ranks. The
// position in the stream is saved in checkpoints (exact resume).
//
// Evaluation runs the whole dev set on every rank (fine-tuning dev sets are
// small; every rank gets identical numbers without a collective).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"
#include "finetune/chunks.h"
#include "finetune/examples.h"
#include "finetune/squad.h"
#include "finetune/task_data.h"
#include "model/multiple_choice.h"
#include "model/question_answering.h"
#include "model/sequence_classification.h"
#include "train/trainer.h"

namespace xlnet::finetune {

// "classification", "regression", "squad" or "multiple_choice".
enum class Task { kClassification, kRegression, kSquad, kMultipleChoice };
absl::StatusOr<Task> ParseTask(const std::string& name);
const char* TaskName(Task task);

// The metric that picks the best checkpoint when finetune.metric is empty,
// and whether lower is better for a metric name.
std::string DefaultMetric(Task task);
bool LowerIsBetter(const std::string& metric);

// Deterministic epoch-permutation stream of row indices (see top comment).
class RowStream {
 public:
  RowStream(int64_t rows, int64_t seed) : rows_(rows), seed_(seed) {}
  // The next `n` row indices of the stream (crossing epoch boundaries).
  std::vector<int64_t> Next(int64_t n);
  int64_t epoch() const { return epoch_; }
  int64_t offset() const { return offset_; }
  void Restore(int64_t epoch, int64_t offset);

 private:
  void Shuffle();
  int64_t rows_;
  int64_t seed_;
  int64_t epoch_ = 0;
  int64_t offset_ = 0;
  std::vector<int64_t> order_;
};

struct FinetuneUnitOptions {
  Task task = Task::kClassification;
  // Resolved config: model (from the init directory), train (with the
  // finetune section's overrides applied) and finetune.
  Config config;
  // The model to start from (our checkpoint, a fine-tuned or a HF dir).
  std::string init_dir;
  // Keep the architecture of init_dir but start from random weights (the
  // "no pretraining" baseline).
  bool from_scratch = false;
  // Class names (classification; id order) — one name means regression.
  std::vector<std::string> labels;
  int rank = 0;
  int world_size = 1;
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

class FinetuneUnit : public TrainUnit {
 public:
  // `train` is the training set (may be empty for prediction only); `dev`
  // is evaluated by Evaluate().
  static absl::StatusOr<std::unique_ptr<FinetuneUnit>> Create(
      const FinetuneUnitOptions& options, TensorRows train,
      std::optional<EvalSet> dev);

  NamedTensors Parameters() override;
  NamedTensors StateDict() override;
  std::string ModelConfigJson() override;
  void SetTraining(bool training) override;
  StepOutput TrainStep() override;
  std::map<std::string, double> Evaluate() override;
  absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) override;
  absl::Status LoadUnitState(const std::string& dir, int rank) override;

  // Metrics (when labelled) and predictions of `set`, in eval mode.
  absl::StatusOr<std::map<std::string, double>> Score(const EvalSet& set,
                                                      Predictions* predictions);
  // Loads the weights of a model directory of this task (e.g. RUN/best).
  absl::Status LoadWeights(const std::string& dir);

 private:
  FinetuneUnit(FinetuneUnitOptions options, torch::Device device,
               torch::ScalarType dtype);
  // Per-example losses [B] of a batch (model in its current mode).
  torch::Tensor Losses(const TensorRows& batch);
  XLNetInputs Inputs(const TensorRows& batch) const;
  // Classification/regression/multiple choice: logits [B, C] of a batch
  // (classification/regression with finetune.long_inputs "chunks": the
  // chunks in order, finetune/chunks.h), and the per-example losses [B] of
  // such logits.
  torch::Tensor Logits(const TensorRows& batch);
  torch::Tensor LabelLosses(const torch::Tensor& logits,
                            const torch::Tensor& labels) const;
  NamedTensors Named(bool parameters_only);

  FinetuneUnitOptions options_;
  torch::Device device_;
  torch::ScalarType dtype_;
  XLNetForSequenceClassification classifier_{nullptr};
  XLNetForQuestionAnswering qa_{nullptr};
  XLNetForMultipleChoice choice_{nullptr};
  // Set with finetune.long_inputs "chunks".
  std::optional<ChunkOptions> chunks_;
  TensorRows train_;
  std::optional<EvalSet> dev_;
  std::unique_ptr<RowStream> stream_;
  int64_t accum_ = 1;
  int64_t micro_ = 0;
  // This rank's rows of the current global batch.
  std::vector<int64_t> local_rows_;
};

// Classification/regression metrics of predictions against labels.
std::map<std::string, double> ScoreLabels(Task task,
                                          const torch::Tensor& logits,
                                          const torch::Tensor& labels);
// Multiple choice: MultipleChoiceMetrics (race.h) of logits [N, C] against
// labels [N]; `levels` [N] (or empty: no RACE levels).
std::map<std::string, double> ScoreChoices(
    const torch::Tensor& logits, const torch::Tensor& labels,
    const std::vector<std::string>& levels);

}  // namespace xlnet::finetune
