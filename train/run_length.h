// A run's length: train.max_steps, or train.num_epochs passes over the
// training data (HF's num_train_epochs) turned into optimizer steps once the
// data is open. Both the pretraining and the fine-tuning run call it after
// creating their unit and before the config is recorded, so config.yaml,
// the learning-rate schedule (which decays to max_steps) and a resume all
// see the same number of steps.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/config.h"
#include "train/trainer.h"

namespace xlnet {

// With train->num_epochs > 0: sets train->max_steps to
// ceil(num_epochs x unit.StepsPerEpoch()) and logs it (rank 0). A
// train.max_steps that the config file at `config_path` sets is replaced
// when `overrides` set num_epochs (--set over the file, as for any key);
// one set beside num_epochs (both in the file, or max_steps with --set) must
// equal the result, as a run's own config.yaml records it, or it is an
// error naming both; so is data without one epoch (a blend of
// data.sources). A started step counts (at least one). Without num_epochs
// nothing changes.
absl::Status ApplyNumEpochs(TrainUnit& unit, const std::string& config_path,
                            const std::vector<std::string>& overrides, int rank,
                            TrainConfig* train);

}  // namespace xlnet
