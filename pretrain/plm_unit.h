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
#include "pretrain/stream_unit.h"
#include "pretrain/unit_common.h"
#include "train/trainer.h"

namespace xlnet {

// The options of a pretraining unit (unit_common.h).
using PlmUnitOptions = PretrainUnitOptions;

// The unigram baseline's log-probabilities [vocab_size]: token frequencies
// of the training split (add-one smoothed) over the vocabulary. A blend
// counts every source's training split in proportion to its weight (each
// source's frequencies normalised, then mixed by the normalised weights),
// the mixture the batches are drawn from; with one source this is exactly
// the single-directory baseline. The counts are the manifest's when it
// records them (Corpus::recorded_unigram, no shard read), else a scan of
// the split; the two are equal.
torch::Tensor UnigramLogProbs(const std::vector<data::SourcePart>& parts,
                              int64_t vocab_size);

class PlmUnit : public StreamUnit<data::BatchSource> {
 public:
  static absl::StatusOr<std::unique_ptr<PlmUnit>> Create(
      const PlmUnitOptions& options);

  StepOutput TrainStep() override;
  std::map<std::string, double> Evaluate() override;
  // The sampler's steps_per_epoch; nullopt with data.sources (each
  // source runs its own epochs).
  std::optional<double> StepsPerEpoch() override;
  // With data.sources: "tokens_<name>" -> tokens of that source in the
  // global batches of steps [0, steps_done) (BatchSource::TokensConsumed;
  // the same on every rank). For a single --data directory, "epoch": the
  // sampler's epochs, steps_done / steps_per_epoch (fractional).
  std::map<std::string, double> LogValues(int64_t steps_done) override;

  const data::BatchSource& sampler() const { return *train_; }

 private:
  PlmUnit(Config config, torch::Device device, torch::ScalarType dtype,
          const PlmUnitOptions& options)
      : StreamUnit(std::move(config), device, dtype, options, "plm_state") {}
  // Rows of the local batch that micro-batch `micro` takes.
  torch::Tensor MicroRows(int64_t local_batch, int64_t micro) const;
  // Forward + loss on one batch with `mems` (updated in place).
  StepOutput Forward(const data::PlmBatch& batch,
                     std::vector<torch::Tensor>* mems);

  std::unique_ptr<data::BatchSource> eval_;
  data::PlmBatch current_;
  // Add-one-smoothed unigram log-probabilities [V] of the training split,
  // the baseline reported next to eval_loss.
  torch::Tensor unigram_log_probs_;
};

}  // namespace xlnet
