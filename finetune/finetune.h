// Fine-tuning (xlnet-finetune): a pretrained XLNet on a classification,
// regression or SQuAD task with the shared Trainer. Keeps the best model by
// the task's dev metric as RUN/best/ (a HuggingFace model directory with
// spiece.model) and writes RUN/eval_results.json and predictions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "train/run_setup.h"

namespace xlnet {

struct FinetuneOptions {
  // YAML config (data, train, finetune sections; may be empty: defaults)
  // and `section.key=value` overrides. The model section comes from
  // init_dir's config.json.
  std::string config_path;
  std::vector<std::string> overrides;
  // "classification", "regression" or "squad".
  std::string task;
  // The model to start from: a pretraining checkpoint of ours, a fine-tuned
  // RUN/best, or a HuggingFace XLNet directory.
  std::string init_dir;
  // Data files (.tsv/.jsonl; SQuAD .json). Without train the model is only
  // evaluated; dev picks the best checkpoint; test is scored at the end.
  std::string train;
  std::string dev;
  std::string test;
  // Run directory: best/, checkpoints/, metrics.jsonl, eval_results.json,
  // predictions.
  std::string out_dir;
  // "" (a new run), "latest" or a checkpoint directory.
  std::string resume;
  // A new run in an out_dir that holds a fine-tuning run: delete that run
  // first. Without it (and without resume) such an out_dir is an error; an
  // out_dir holding a pretraining run is refused either way.
  bool overwrite = false;
  // spiece.model; empty: data.tokenizer, else the one in init_dir.
  std::string tokenizer;
  // Classification: comma-separated class names in id order (default: the
  // fine-tuned model's, else the sorted training labels).
  std::string labels;
  // Random weights with init_dir's architecture (the baseline without
  // pretraining).
  bool from_scratch = false;
  // test may be unlabeled: write its predictions (scored when labelled).
  bool do_predict = false;
  // Local ranks (--nproc_per_node, --master_port).
  LaunchOptions launch;
};

absl::Status RunFinetuning(const FinetuneOptions& options);

}  // namespace xlnet
