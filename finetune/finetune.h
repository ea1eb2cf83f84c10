// Fine-tuning (xlnet-finetune): a pretrained XLNet on a classification,
// regression, SQuAD or multiple-choice (RACE) task with the shared Trainer. Keeps the best model by
// the task's dev metric as RUN/best/ (a HuggingFace model directory with
// spiece.model) and writes RUN/eval_results.json and predictions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"
#include "train/run_setup.h"

namespace xlnet {

struct FinetuneOptions {
  // YAML config (data, train, finetune sections; may be empty: defaults)
  // and `section.key=value` overrides. The model section comes from
  // init_dir's config.json.
  std::string config_path;
  std::vector<std::string> overrides;
  // "classification", "regression", "squad" or "multiple_choice".
  std::string task;
  // The model to start from: a pretraining checkpoint of ours, a fine-tuned
  // RUN/best, or a HuggingFace XLNet directory.
  std::string init_dir;
  // Data files (.tsv/.csv/.jsonl; SQuAD .json; multiple choice: a RACE
  // directory or .txt file, or .jsonl). Without train the model is only
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
  // With resume: settings that break the run's exactness (the model, the
  // inputs, the seed) may differ from the checkpoint's (a warning instead
  // of an error; TrainerOptions::allow_changed_settings).
  bool allow_changed_settings = false;
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

// What xlnet-finetune reads of a config: the data, train and finetune
// sections, without the data keys of pretraining batches (data.seq_len,
// data.sources, ...), train.attention, train.activation_checkpointing and
// train.fused_elementwise; setting one of those is an error naming the command.
ConfigScope FinetuneConfigScope();

// The config of a fine-tuning run, in this order of precedence:
//   model section: `init_dir`/config.json (never the YAML);
//   data.uncased, data.keep_accents (the text rules): the record in
//     `init_dir`/spiece.model (else data.tokenizer) when it has one (casing
//     is chosen when the tokenizer is trained, data_pipeline/
//     tokenizer_rules.h); `init_dir`/config.yaml when there is one (our
//     pretraining checkpoints, fine-tuning checkpoints and RUN/best), else
//     its tokenizer_config.json, so text is normalized exactly as in the
//     model's pretraining; else `config_path` (or the defaults, cased with
//     accents stripped) with the `overrides`. Each of these that is given
//     (a config key left at its default is not) must agree with those
//     before it: a contradiction is an error naming both;
//   everything else: `config_path` (or the defaults), then `overrides`.
// Only the data, train and finetune sections may be given, and of them
// only the keys fine-tuning reads (FinetuneConfigScope).
absl::StatusOr<Config> LoadFinetuneConfig(
    const std::string& config_path, const std::vector<std::string>& overrides,
    const std::string& init_dir);

// The tokenizer fine-tuning encodes with: `tokenizer_path`, else
// config.data.tokenizer, else `init_dir`/spiece.model, applying
// config.data's text rules (uncased, keep_accents); a tokenizer that records
// other rules is an error naming it. More pieces than
// config.model.vocab_size is an error naming the file.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> LoadFinetuneTokenizer(
    const Config& config, const std::string& tokenizer_path,
    const std::string& init_dir);

}  // namespace xlnet
