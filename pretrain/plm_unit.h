// The permutation-LM objective as a TrainUnit: sampler batch -> XLNet
// two-stream forward with memory -> partial-prediction loss.
//
// Micro-batches (train.grad_accum_steps = k) are k row slices of one sampler
// step, each keeping the [forward; backward] halves with bi_data, so k
// micro-batches see exactly the rows of one k-times-larger batch. Memory is
// carried per slice across steps (row r at step t+1 continues row r at t),
// detached, and saved with the sampler position in every checkpoint.
//
// The batches come from one prepared directory (`data_dir`, a Sampler) or,
// when config.data.sources is set, from a BlendSampler over those corpora
// (train split for training, eval split for evaluation); each training
// metrics line then carries the cumulative tokens_<name> of every source.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/batch_source.h"
#include "model/xlnet.h"
#include "train/trainer.h"

namespace xlnet {

struct PlmUnitOptions {
  Config config;
  // Prepared shards (xlnet-data prepare). Exactly one of this and
  // config.data.sources is set.
  std::string data_dir;
  // Start from this model directory instead of a fresh initialisation.
  std::string init_dir;
  int rank = 0;
  int world_size = 1;
  // Resuming may continue the data from a checkpoint whose batches were
  // made with other data settings, seed or batch size (the data goes on at
  // the checkpoint's step, the memory starts empty); without it that is an
  // error (--allow_changed_settings).
  bool allow_changed_settings = false;
};

// train.batch_size (the global batch) must split over `world_size` ranks
// and the accumulation micro-steps (into forward+backward halves with
// bi_data), or train.batch_size_per_device be even with bi_data; the error
// says which key to change. Checked by PlmUnit::Create, and before
// --nproc_per_node starts any rank.
absl::Status CheckBatchSplit(const Config& config, int64_t world_size);

class PlmUnit : public TrainUnit {
 public:
  static absl::StatusOr<std::unique_ptr<PlmUnit>> Create(
      const PlmUnitOptions& options);

  NamedTensors Parameters() override;
  NamedTensors StateDict() override;
  std::string ModelConfigJson() override {
    return ModelConfigToJson(config_.model);
  }
  void SetTraining(bool training) override;
  StepOutput TrainStep() override;
  std::map<std::string, double> Evaluate() override;
  // With data.sources: "tokens_<name>" -> tokens of that source in the
  // global batches of steps [0, steps_done) (BatchSource::TokensConsumed;
  // the same on every rank). For a single --data directory, "epoch": the
  // sampler's epochs, steps_done / steps_per_epoch (fractional).
  std::map<std::string, double> LogValues(int64_t steps_done) override;
  // The batch source's fingerprint (corpus, data settings, seed, global
  // batch), described by --data or the data.sources names.
  TrainingData Data() override;
  absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) override;
  absl::Status LoadUnitState(const std::string& dir, int rank) override;

  XLNetLMHeadModel& model() { return model_; }
  const data::BatchSource& sampler() const { return *train_; }

 private:
  PlmUnit(Config config, torch::Device device, torch::ScalarType dtype)
      : config_(std::move(config)), device_(device), dtype_(dtype) {}
  // Rows of the local batch that micro-batch `micro` takes.
  torch::Tensor MicroRows(int64_t local_batch, int64_t micro) const;
  // Forward + loss on one batch with `mems` (updated in place).
  StepOutput Forward(const data::PlmBatch& batch,
                     std::vector<torch::Tensor>* mems);

  Config config_;
  torch::Device device_;
  torch::ScalarType dtype_;
  XLNetLMHeadModel model_{nullptr};
  std::unique_ptr<data::BatchSource> train_;
  // Where train_ reads from, for errors: "--data DIR" or "data.sources a, b".
  std::string data_origin_;
  std::unique_ptr<data::BatchSource> eval_;
  int64_t accum_ = 1;
  int64_t micro_ = 0;
  // PlmUnitOptions::allow_changed_settings.
  bool allow_changed_settings_ = false;
  data::PlmBatch current_;
  // Add-one-smoothed unigram log-probabilities [V] of the training split,
  // the baseline reported next to eval_loss.
  torch::Tensor unigram_log_probs_;
  // mems_[micro][layer]: [M, rows of that micro-batch, D].
  std::vector<std::vector<torch::Tensor>> mems_;
};

}  // namespace xlnet
