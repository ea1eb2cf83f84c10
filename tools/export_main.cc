// xlnet-export: any model directory of ours (pretraining checkpoint,
// fine-tuned model, HF directory) -> a HuggingFace directory with
// config.json, model.safetensors, spiece.model, tokenizer_config.json,
// special_tokens_map.json, README.md and the xlnet_export.json marker (see
// model_io/export.h).
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "data_pipeline/hf_tokenizer_json.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/tokenizer_rules.h"
#include "model_io/export.h"

namespace {

// "" -> unset; "true"/"false" -> the value.
absl::StatusOr<std::optional<bool>> OptionalBool(const std::string& flag,
                                                 const std::string& value) {
  if (value.empty()) return std::optional<bool>();
  if (value == "true") return std::optional<bool>(true);
  if (value == "false") return std::optional<bool>(false);
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": expected true or false, got \"", value, "\""));
}

absl::Status Run(int argc, char** argv) {
  xlnet::ExportOptions options;
  xlnet::FlagParser flags(
      "xlnet-export",
      "--checkpoint DIR --out DIR [--encoder_only] [--dtype fp32|bf16] "
      "[--overwrite] [--uncased=true|false --keep_accents=true|false]\n\n"
      "  Writes config.json, model.safetensors (HF names) and spiece.model\n"
      "  (from DIR, else DIR/.. or DIR/../.., the run directory). The whole\n"
      "  model as the checkpoint holds it (XLNetLMHeadModel,\n"
      "  XLNetForSequenceClassification, XLNetForQuestionAnswering), or with\n"
      "  --encoder_only the backbone as XLNetModel. Also "
      "tokenizer_config.json,\n"
      "  special_tokens_map.json and tokenizer.json (transformers' fast\n"
      "  tokenizer, with SentencePiece's ids), cased as spiece.model records\n"
      "  it (for a tokenizer without a record: the run's config.yaml, found\n"
      "  as spiece.model is, else DIR/tokenizer_config.json, else --uncased\n"
      "  and --keep_accents are required), and a README.md model card.\n"
      "  --out must be new or empty, or an earlier export (marked by its\n"
      "  xlnet_export.json) to replace with --overwrite.");
  flags.AddString("checkpoint", &options.checkpoint,
                  "model directory to export (e.g. RUN/checkpoints/step_N)");
  flags.Require("checkpoint");
  flags.AddString("out", &options.out, "output directory");
  flags.Require("out");
  flags.AddBool("encoder_only", &options.encoder_only,
                "only the backbone, with HF XLNetModel names");
  std::string dtype(xlnet::EnumName(options.dtype));
  flags.AddString("dtype", &dtype,
                  "fp32, or bf16 (float tensors stored as bfloat16)");
  flags.AddBool("overwrite", &options.overwrite,
                "replace an earlier export in --out (a directory holding "
                "xlnet_export.json and only an export's files); a run "
                "directory or any other content is never replaced");
  std::string uncased, keep_accents;
  flags.AddString("uncased", &uncased,
                  "true|false: the tokenizer lowercases (data.uncased); "
                  "required when neither spiece.model, a config.yaml nor a "
                  "tokenizer_config.json records the casing, else must agree");
  flags.AddString("keep_accents", &keep_accents,
                  "true|false: data.keep_accents; required and checked as "
                  "--uncased");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(
      options.dtype, xlnet::ParseEnumSetting<xlnet::Dtype>("--dtype", dtype));
  XLNET_ASSIGN_OR_RETURN(options.uncased, OptionalBool("uncased", uncased));
  XLNET_ASSIGN_OR_RETURN(options.keep_accents,
                         OptionalBool("keep_accents", keep_accents));
  // spiece.model is checked as every other tool loads it.
  options.tokenizer_pieces =
      [](const std::string& bytes,
         const std::string& path) -> absl::StatusOr<int64_t> {
    XLNET_ASSIGN_OR_RETURN(auto tokenizer,
                           xlnet::data::Tokenizer::FromBytes(bytes, path));
    return tokenizer->vocab_size();
  };
  // The casing spiece.model records (the one chosen when it was trained).
  options.tokenizer_casing = [](const std::string& bytes,
                                const std::string& path)
      -> absl::StatusOr<std::optional<xlnet::TokenizerCasing>> {
    XLNET_ASSIGN_OR_RETURN(const std::optional<xlnet::data::TextRules> rules,
                           xlnet::data::RecordedTextRules(bytes, path));
    if (!rules) return std::nullopt;
    return xlnet::TokenizerCasing{rules->uncased, rules->keep_accents};
  };
  options.tokenizer_json =
      [](const std::string& bytes, const std::string& path,
         const xlnet::TokenizerCasing& casing) -> absl::StatusOr<std::string> {
    return xlnet::data::HfTokenizerJson(
        bytes, xlnet::data::TextRules{casing.uncased, casing.keep_accents},
        xlnet::data::SpecialPieces(), path);
  };
  XLNET_ASSIGN_OR_RETURN(const xlnet::ExportSummary summary,
                         xlnet::ExportModel(options));
  std::cout << "exported " << options.out << ": " << summary.architecture
            << ", " << summary.tensors << " tensors, " << summary.parameters
            << " parameters (" << xlnet::EnumName(options.dtype)
            << "), tokenizer from " << summary.tokenizer << ", casing from "
            << (summary.run_config.empty() ? "the command line"
                                           : summary.run_config)
            << "\n";
  if (!summary.no_fast_tokenizer.empty()) {
    XLOG(WARNING) << "no tokenizer.json written (" << summary.no_fast_tokenizer
                  << "); transformers' fast tokenizer will convert "
                     "spiece.model itself, and its ids differ from "
                     "SentencePiece's around user-defined pieces: load with "
                     "use_fast=False for the ids the model was trained on";
  }
  if (summary.first_bad_step > 0) {
    XLOG(WARNING) << options.checkpoint << " comes from a run with "
                  << summary.bad_steps
                  << " non-finite steps (skipped), the first at step "
                  << summary.first_bad_step
                  << "; its weights are finite, and the run's checkpoints "
                     "from before that step are its state before them";
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-export", argc, argv, &Run);
}
