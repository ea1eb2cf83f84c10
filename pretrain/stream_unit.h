// The part of a pretraining TrainUnit that PlmUnit (plm_unit.h) and ClmUnit
// (clm_unit.h) do the same way: the model and its live parameters, the
// training batches of a `Source` (data::BatchSource or
// data::LmStreamSource) and their fingerprint, the micro-batch counter and
// the memory carried per micro-batch slice, checkpointed with the data
// position as `state_prefix`.rankR.safetensors (unit_common.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "config/config.h"
#include "model/xlnet.h"
#include "pretrain/unit_common.h"
#include "train/trainer.h"

namespace xlnet {

template <typename Source>
class StreamUnit : public TrainUnit {
 public:
  NamedTensors Parameters() override { return LiveParameters(model_); }
  NamedTensors StateDict() override { return LiveParameters(model_); }
  std::string ModelConfigJson() override {
    return ModelConfigToJson(config_.model);
  }
  void SetTraining(bool training) override { model_->train(training); }
  // The training batches' fingerprint (corpus, data settings, seed, global
  // batch), described by data_origin_.
  TrainingData Data() override {
    const std::string fingerprint = train_->State().fingerprint;
    return {fingerprint,
            absl::StrCat(data_origin_, " (fingerprint ", fingerprint, ")")};
  }
  absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) override {
    TORCH_CHECK(micro_ == 0,
                "checkpoint in the middle of an accumulation step");
    SaveStreamState(state_prefix_, rank, train_->State(), train_->local_rows(),
                    accum_, mems_, config_.train.save_memory, files);
    return absl::OkStatus();
  }
  absl::Status LoadUnitState(const std::string& dir, int rank) override {
    micro_ = 0;
    return LoadStreamState(
        dir, state_prefix_, rank,
        StreamStateTargetOf(*train_, config_, accum_, device_,
                            allow_changed_settings_),
        &mems_);
  }

  XLNetLMHeadModel& model() { return model_; }

 protected:
  StreamUnit(Config config, torch::Device device, torch::ScalarType dtype,
             const PretrainUnitOptions& options, const char* state_prefix)
      : config_(std::move(config)),
        device_(device),
        dtype_(dtype),
        accum_(config_.train.grad_accum_steps),
        allow_changed_settings_(options.allow_changed_settings),
        mems_(accum_),
        state_prefix_(state_prefix) {}

  Config config_;
  torch::Device device_;
  torch::ScalarType dtype_;
  XLNetLMHeadModel model_{nullptr};
  std::unique_ptr<Source> train_;
  // Where train_ reads from, for errors: "--data DIR" or "data.sources a, b".
  std::string data_origin_;
  int64_t accum_ = 1;
  // The next micro-batch of the current step.
  int64_t micro_ = 0;
  // PretrainUnitOptions::allow_changed_settings.
  bool allow_changed_settings_ = false;
  // mems_[micro][layer]: [M, rows of that micro-batch, D].
  SliceMems mems_;

 private:
  const char* state_prefix_;
};

}  // namespace xlnet
