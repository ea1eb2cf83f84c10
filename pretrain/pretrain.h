// Pretraining, the toolkit's main job (xlnet-pretrain): one rank's run of
// the unit of train.objective (the permutation-LM PlmUnit, or the causal-LM
// ClmUnit) on the shared Trainer, or, with --nproc_per_node and no
// WORLD_SIZE in the environment, the local ranks of it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/config.h"
#include "train/run_setup.h"

namespace xlnet {

struct PretrainOptions {
  // YAML config (--config) and its `section.key=value` overrides (--set).
  std::string config_path;
  std::vector<std::string> overrides;
  // Prepared shards (xlnet-data prepare); empty when the config sets
  // data.sources (one of the two is required).
  std::string data_dir;
  // Run directory: config.yaml, metrics.jsonl, checkpoints/.
  std::string out_dir;
  // "" (a new run), "latest" (the newest checkpoint in out_dir that
  // verifies; a new run when there is none) or a checkpoint directory.
  std::string resume;
  // A new run in an out_dir that holds a pretraining run: delete that run
  // first. Without it (and without resume) such an out_dir is an error.
  bool overwrite = false;
  // With resume: settings that break the run's exactness (model, data,
  // seed) may differ from the checkpoint's (a warning instead of an error;
  // TrainerOptions::allow_changed_settings).
  bool allow_changed_settings = false;
  // Start from this model directory (HF layout) instead of random weights.
  std::string init_dir;
  // Local ranks (--nproc_per_node, --master_port).
  LaunchOptions launch;
};

absl::Status RunPretraining(const PretrainOptions& options);

// What xlnet-pretrain reads of a config: the model, data and train
// sections, without the fine-tuning trainer keys (train.patience,
// train.patience_min_delta) and, under train.objective clm, without the
// permutation-LM data keys (reuse_len, perm_size, num_predict, mask_alpha,
// mask_beta, max_gram, official_span_quirks, bi_data: true) and blends
// (data.sources, source_block_steps); setting one of those is an error
// naming the file, the key and the command.
ConfigScope PretrainConfigScope();

}  // namespace xlnet
