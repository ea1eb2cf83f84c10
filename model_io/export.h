// Export of any model directory of ours (a pretraining checkpoint
// RUN/checkpoints/step_N/, a fine-tuned model, a HuggingFace directory) as a
// clean HuggingFace directory: config.json, model.safetensors, spiece.model,
// tokenizer_config.json, special_tokens_map.json and a README.md model card.
//
// What is written:
//   whole model (default): what the checkpoint holds, HF names:
//     LM:                  transformer.* + lm_loss.bias (lm_loss.weight is
//                          tied, not stored)   ["XLNetLMHeadModel"]
//     classification head: transformer.* + sequence_summary.* + logits_proj.*
//                          ["XLNetForSequenceClassification"]
//     multiple choice:     the same names, logits_proj.weight [1, D], when
//                          config.json says ["XLNetForMultipleChoice"]
//     QA head:             transformer.* + start_logits.* + end_logits.* +
//                          answer_class.*       ["XLNetForQuestionAnswering"]
//     bare encoder:        as --encoder_only
//   encoder_only: the backbone under HF XLNetModel's names (no prefix), no LM
//     or task head ["XLNetModel"]; mask_emb is kept because HF's XLNetModel
//     declares it (its state dict has it).
//
// Tokenizer files: the casing (do_lower_case, keep_accents) is the one
// spiece.model records (`tokenizer_casing`; casing is chosen when the
// tokenizer is trained, data_pipeline/tokenizer_rules.h), and the run's
// config.yaml, a tokenizer_config.json or a casing given must agree with it.
// For a tokenizer without a record (one made elsewhere) it comes from the
// run's resolved config (do_lower_case = data.uncased, keep_accents =
// data.keep_accents), config.yaml in the checkpoint or the run directories
// above it (as for spiece.model);
// model_max_length is data.seq_len for a pretrained (LM or bare) source,
// finetune.max_seq_length for a fine-tuned one (a head in the checkpoint).
// Without a config.yaml, DIR/tokenizer_config.json (an HF directory, one of
// our exports) gives the casing and model_max_length; without either the
// caller must say the casing (`uncased`, `keep_accents`) and
// model_max_length is left out. A casing given beside a file must agree. The
// model card (README.md) says the architecture (of the exported weights), the
// data settings, for a fine-tuned model its task, labels and fine-tuning
// settings, the steps trained (trainer_state.json or best.json), the last
// evaluation in the run's metrics.jsonl (a bounded tail) and best.json, the
// run's final dev and test scores (RUN/eval_results.json, when the export is
// the RUN/best they are of), the resolved config (a fine-tuned model's
// without the data keys of pretraining batches, a pretrained one's without
// finetune.*) and the licence (Apache-2.0, front matter and a section). It
// cites files relative to the run directory (or by basename), never by an
// absolute path.
//
// Every tensor is validated by loading it into our model first (shapes,
// names, config), and spiece.model by `tokenizer_pieces` (special ids, no
// more pieces than vocab_size). The directory appears atomically, with
// kExportMarkerFile in it. It is written only into a new or empty directory,
// or, with `overwrite`, over a directory that holds an earlier export and
// nothing else (the marker and only the files an export writes); never over
// a run directory, a directory with other content, or the source.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/settings.h"
#include "model_io/model_dir.h"

namespace xlnet {

// OUT/xlnet_export.json: says that xlnet-export wrote OUT, so that
// `--overwrite` may replace it (and nothing else). A state file
// {"format": "xlnet_export", "format_version": 1, "tool": "xlnet-export",
// "version", "commit", "source"}; transformers' from_pretrained ignores it.
inline constexpr char kExportMarkerFile[] = "xlnet_export.json";

// The text rules as HF's XLNetTokenizer names them.
struct TokenizerCasing {
  // do_lower_case (data.uncased).
  bool uncased = false;
  // keep_accents (data.keep_accents).
  bool keep_accents = false;
};

struct ExportOptions {
  // Source model directory.
  std::string checkpoint;
  // Output directory.
  std::string out;
  // Only the backbone, as XLNetModel.
  bool encoder_only = false;
  // fp32 or bf16 (float tensors cast to bfloat16; config.json
  // torch_dtype/dtype "bfloat16"); fp16 is refused.
  Dtype dtype = Dtype::kFp32;
  // Replace an existing non-empty `out` that holds an earlier export and
  // nothing else. Any other non-empty `out` (a run directory, a locked one,
  // one with a file an export does not write) is refused with or without
  // it, as is one that holds `checkpoint` or lies inside it.
  bool overwrite = false;
  // Checks spiece.model as the other tools do and returns its number of
  // pieces (an error names `path`). Required: xlnet-export passes
  // data::Tokenizer's check (model_io cannot include data_pipeline/).
  std::function<absl::StatusOr<int64_t>(const std::string& bytes,
                                        const std::string& path)>
      tokenizer_pieces;
  // The casing recorded in spiece.model's bytes (`path` names it in
  // errors), nullopt for a tokenizer without a record; xlnet-export passes
  // data::RecordedTextRules. Unset: no tokenizer is taken to record one.
  std::function<absl::StatusOr<std::optional<TokenizerCasing>>(
      const std::string& bytes, const std::string& path)>
      tokenizer_casing;
  // tokenizer.json (HF's fast tokenizer) for spiece.model's bytes (`path`
  // names it in errors) with the export's casing; xlnet-export passes
  // data::HfTokenizerJson. Unset, or an error (a tokenizer the format cannot
  // express): no tokenizer.json, and transformers converts spiece.model
  // itself, which differs around user-defined pieces
  // (ExportSummary::no_fast_tokenizer says why).
  std::function<absl::StatusOr<std::string>(const std::string& bytes,
                                            const std::string& path,
                                            const TokenizerCasing& casing)>
      tokenizer_json;
  // The tokenizer's casing when neither spiece.model nor the source records
  // it (required then); otherwise a given value must equal the recorded one.
  std::optional<bool> uncased;
  std::optional<bool> keep_accents;
};

struct ExportSummary {
  std::string architecture;  // e.g. "XLNetLMHeadModel"
  int64_t tensors = 0;
  int64_t parameters = 0;
  std::string tokenizer;  // the spiece.model that was copied
  // The spiece.model (its record), config.yaml or tokenizer_config.json the
  // casing came from, "" if it was given.
  std::string run_config;
  // The source checkpoint's non-finite steps (skipped) and the first of
  // them, from its trainer_state.json; 0 when it records none. The model
  // card says so too.
  int64_t bad_steps = 0;
  int64_t first_bad_step = 0;
  // Why no tokenizer.json was written ("" when one was).
  std::string no_fast_tokenizer;
};

// The tokenizer of a model directory: DIR/spiece.model, else the run
// directories above a checkpoint (DIR/.., DIR/../..). NotFound names every
// place looked at.
absl::StatusOr<std::string> FindTokenizer(const std::string& dir);

absl::StatusOr<ExportSummary> ExportModel(const ExportOptions& options);

}  // namespace xlnet
