// Fine-tuning tasks as TrainUnits: the same Trainer as pretraining runs them
// (schedule, layer-wise decay, clipping, accumulation, data parallel,
// checkpoints, metrics.jsonl); a unit supplies only "batch -> loss",
// evaluation and prediction. What differs between the tasks is the unit's
// one TaskHead (task_head.h); the unit keeps what they share.
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "finetune/task_data.h"
#include "finetune/task_head.h"
#include "train/trainer.h"

namespace xlnet::finetune {

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

// A unit's options: its head's, and where this process stands.
struct FinetuneUnitOptions : TaskHeadOptions {
  // This process's rank, 0 <= rank < world_size.
  int rank = 0;
  // The number of ranks a global batch is split over.
  int world_size = 1;
};

// The head of options.task (task_head.h), loaded from options.init_dir on
// `device`. finetune.long_inputs "chunks" with SQuAD is an error.
absl::StatusOr<std::unique_ptr<TaskHead>> MakeTaskHead(
    const TaskHeadOptions& options, torch::Device device,
    torch::ScalarType dtype);

// train.batch_size must split over `world_size` ranks and the accumulation
// micro-steps. Checked by FinetuneUnit::Create, and before --nproc_per_node
// starts any rank.
absl::Status CheckFinetuneBatchSplit(const TrainConfig& tc, int64_t world_size);

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
  // A hash of the training rows' tokens and targets, and their number.
  TrainingData Data() override;
  std::map<std::string, double> Evaluate() override;
  // Training rows / train.batch_size (the global batch); nullopt without
  // training rows.
  std::optional<double> StepsPerEpoch() override;
  // "epoch": training rows consumed / training rows (fractional; the
  // stream's position, so exact after a resume too).
  std::map<std::string, double> LogValues(int64_t steps_done) override;
  absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) override;
  absl::Status LoadUnitState(const std::string& dir, int rank) override;

  // Metrics (when labelled) and predictions of `set`, in eval mode.
  absl::StatusOr<std::map<std::string, double>> Score(const EvalSet& set,
                                                      Predictions* predictions);
  // Loads the weights of a model directory of this task (e.g. RUN/best).
  absl::Status LoadWeights(const std::string& dir);
  // Writes `predictions` of `set` into the run directory `out_dir`
  // (predictions_<set>.tsv, or SQuAD's predictions_<set>/).
  absl::Status WritePredictions(const std::string& out_dir, const EvalSet& set,
                                const Predictions& predictions) const;

 private:
  FinetuneUnit(FinetuneUnitOptions options, std::unique_ptr<TaskHead> head);
  NamedTensors Named(bool parameters_only);

  FinetuneUnitOptions options_;
  // The task's model and what only the task knows (losses, scoring,
  // config.json).
  std::unique_ptr<TaskHead> head_;
  TensorRows train_;
  std::optional<EvalSet> dev_;
  std::unique_ptr<RowStream> stream_;
  int64_t accum_ = 1;
  int64_t micro_ = 0;
  // This rank's rows of the current global batch.
  std::vector<int64_t> local_rows_;
};

}  // namespace xlnet::finetune
