// Export of any model directory of ours (a pretraining checkpoint
// RUN/checkpoints/step_N/, a fine-tuned model, a HuggingFace directory) as a
// clean HuggingFace directory: config.json, model.safetensors, spiece.model.
//
// What is written:
//   whole model (default): what the checkpoint holds, HF names:
//     LM:                  transformer.* + lm_loss.bias (lm_loss.weight is
//                          tied, not stored)   ["XLNetLMHeadModel"]
//     classification head: transformer.* + sequence_summary.* + logits_proj.*
//                          ["XLNetForSequenceClassification"]
//     QA head:             transformer.* + start_logits.* + end_logits.* +
//                          answer_class.*       ["XLNetForQuestionAnswering"]
//     bare encoder:        as --encoder_only
//   encoder_only: the backbone under HF XLNetModel's names (no prefix), no LM
//     or task head ["XLNetModel"]; mask_emb is kept because HF's XLNetModel
//     declares it (its state dict has it).
//
// Every tensor is validated by loading it into our model first (shapes,
// names, config), and spiece.model by `tokenizer_pieces` (special ids, no
// more pieces than vocab_size). The directory appears atomically and never
// replaces a non-empty directory unless `overwrite`, nor the source.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model_io/model_dir.h"

namespace xlnet {

struct ExportOptions {
  // Source model directory.
  std::string checkpoint;
  // Output directory.
  std::string out;
  // Only the backbone, as XLNetModel.
  bool encoder_only = false;
  // "fp32" or "bf16" (float tensors cast to bfloat16; config.json
  // torch_dtype/dtype "bfloat16").
  std::string dtype = "fp32";
  // Replace an existing non-empty `out` (never one that holds `checkpoint`
  // or lies inside it).
  bool overwrite = false;
  // Checks spiece.model as the other tools do and returns its number of
  // pieces (an error names `path`). Required: xlnet-export passes
  // data::Tokenizer's check (model_io cannot include data_pipeline/).
  std::function<absl::StatusOr<int64_t>(const std::string& bytes,
                                        const std::string& path)>
      tokenizer_pieces;
};

struct ExportSummary {
  std::string architecture;  // e.g. "XLNetLMHeadModel"
  int64_t tensors = 0;
  int64_t parameters = 0;
  std::string tokenizer;  // the spiece.model that was copied
};

// The tokenizer of a model directory: DIR/spiece.model, else the run
// directories above a checkpoint (DIR/.., DIR/../..). NotFound names every
// place looked at.
absl::StatusOr<std::string> FindTokenizer(const std::string& dir);

absl::StatusOr<ExportSummary> ExportModel(const ExportOptions& options);

}  // namespace xlnet
