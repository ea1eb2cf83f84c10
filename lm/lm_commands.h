// What the `xlnet-lm` verbs do (tools/lm_main.cc only parses flags):
//   eval      RunLmEval: a model directory on a text file, each mode a row
//   generate  RunLmGenerate: a prompt continued, per-token times
// The model directory is any XLNetLMHeadModel directory (model_io/) with
// its spiece.model (checkpoints and exports carry it); the text rules are
// the tokenizer's record (data_pipeline/tokenizer_rules.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/settings.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/text_ids.h"

namespace xlnet {

struct LmEvalCommand {
  // Model directory (config.json, weights, spiece.model).
  std::string model_dir;
  // The text (plain text, JSON Lines, .gz, .zst; see lm/text_ids.h).
  std::string text_path;
  // The modes to run, one table row each, on the same tokens.
  std::vector<LmEvalMode> modes = {LmEvalMode::kMemory};
  // seq_len, mem_len, batch_size, stream (mode is set per row).
  LmEvalOptions eval;
  // Evaluate the first max_tokens tokens only (0 = all, see text_ids.h).
  int64_t max_tokens = 0;
  // Compute precision (bf16 autocast on CPU or CUDA, fp16 on CUDA).
  Dtype dtype = Dtype::kFp32;
  // "cpu", "cuda", "cuda:N".
  std::string device = "cpu";
  // Also write the rows as JSON here ("" = no file).
  std::string json_path;
};

// Loads the model and tokenizer, reads the text, evaluates each mode and
// prints the table (and writes json_path).
absl::Status RunLmEval(const LmEvalCommand& command, std::ostream& out);

struct LmGenerateCommand {
  std::string model_dir;
  // The prompt text, tokenized as one line (no <eod>).
  std::string prompt;
  GenerateOptions generate;
  Dtype dtype = Dtype::kFp32;
  std::string device = "cpu";
};

// Prints the continuation, then the per-token time.
absl::Status RunLmGenerate(const LmGenerateCommand& command, std::ostream& out);

}  // namespace xlnet
