// The causal language-modelling objective (Transformer-XL's job) as a
// TrainUnit: ordered stream batch -> XLNet content stream with causal
// attention (model.attn_type uni) and memory -> next-token loss.
//
// The batches come from LmStreamSource (data_pipeline/lm_stream_source.h):
// row r of step t+1 continues row r of step t, so the memory of
// model.mem_len positions carried per row from step to step (detached:
// gradients stop at the segment boundary) is the text just before.
// Micro-batches (train.grad_accum_steps = k) are k contiguous row slices of
// one step, each with its own memory, so k micro-batches see exactly the
// rows of one k-times-larger batch. The LM head is the model's, tied to the
// word embedding. The loss is the cross-entropy of every position's next
// token, summed, with the target count as its normalizer (as PlmUnit).
//
// Checkpoints carry the stream position and the memory of every slice
// (clm_state.rankR.safetensors), so a resumed run continues exactly.
// Evaluate() reads train.eval_batches steps (at most one epoch) of the
// eval split in stream order from its start, with memory, and reports loss
// (nats per target token), ppl (exp(loss)) and bpb (bits per byte: the summed
// loss over ln 2 over the bytes of text the targets stand for, token_bytes.h;
// <eod> and other special targets stand for no bytes but their loss counts).
// data.sources blends are not read: one --data directory.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/lm_stream_source.h"
#include "model/xlnet.h"
#include "pretrain/stream_unit.h"
#include "pretrain/unit_common.h"
#include "train/trainer.h"

namespace xlnet {

class ClmUnit : public StreamUnit<data::LmStreamSource> {
 public:
  // Needs train.objective clm (and so model.attn_type uni), a --data
  // directory and train.batch_size split evenly over ranks and micro-steps.
  static absl::StatusOr<std::unique_ptr<ClmUnit>> Create(
      const PretrainUnitOptions& options);

  // Metrics: accuracy (next-token argmax) and ppl, exp of the micro-batch's
  // mean loss (averaged over micro-batches; the line's loss is the mean over
  // the log window).
  StepOutput TrainStep() override;
  // loss, ppl, bpb and accuracy of the eval split (empty without one).
  std::map<std::string, double> Evaluate() override;
  // The stream's steps_per_epoch.
  std::optional<double> StepsPerEpoch() override;
  // "epoch": steps_done / the stream's steps per epoch (fractional).
  std::map<std::string, double> LogValues(int64_t steps_done) override;

  const data::LmStreamSource& source() const { return *train_; }

 private:
  ClmUnit(Config config, torch::Device device, torch::ScalarType dtype,
          const PretrainUnitOptions& options)
      : StreamUnit(std::move(config), device, dtype, options, "clm_state") {}
  // Forward + summed next-token loss on `batch` with `mems` (updated in
  // place with the detached new memory).
  StepOutput Forward(const data::LmBatch& batch,
                     std::vector<torch::Tensor>* mems);

  std::unique_ptr<data::LmStreamSource> eval_;
  // Bytes of text of every token id (TokenTextBytes), for eval bpb.
  torch::Tensor token_bytes_;
  data::LmBatch current_;
};

}  // namespace xlnet
