// xlnet-export: any model directory of ours (pretraining checkpoint,
// fine-tuned model, HF directory) -> a HuggingFace directory with
// config.json, model.safetensors and spiece.model (see model_io/export.h).
#include <iostream>

#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "data_pipeline/tokenizer.h"
#include "model_io/export.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::ExportOptions options;
  xlnet::FlagParser flags(
      "xlnet-export",
      "--checkpoint DIR --out DIR [--encoder_only] [--dtype fp32|bf16] "
      "[--overwrite]\n\n"
      "  Writes config.json, model.safetensors (HF names) and spiece.model\n"
      "  (from DIR, else DIR/.. or DIR/../.., the run directory). The whole\n"
      "  model as the checkpoint holds it (XLNetLMHeadModel,\n"
      "  XLNetForSequenceClassification, XLNetForQuestionAnswering), or with\n"
      "  --encoder_only the backbone as XLNetModel.");
  flags.AddString("checkpoint", &options.checkpoint,
                  "model directory to export (e.g. RUN/checkpoints/step_N)");
  flags.Require("checkpoint");
  flags.AddString("out", &options.out, "output directory");
  flags.Require("out");
  flags.AddBool("encoder_only", &options.encoder_only,
                "only the backbone, with HF XLNetModel names");
  flags.AddString("dtype", &options.dtype,
                  "fp32, or bf16 (float tensors stored as bfloat16)");
  flags.AddBool("overwrite", &options.overwrite,
                "replace a non-empty --out directory");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  // spiece.model is checked as every other tool loads it.
  options.tokenizer_pieces =
      [](const std::string& bytes,
         const std::string& path) -> absl::StatusOr<int64_t> {
    XLNET_ASSIGN_OR_RETURN(auto tokenizer,
                           xlnet::data::Tokenizer::FromBytes(bytes, path));
    return tokenizer->vocab_size();
  };
  XLNET_ASSIGN_OR_RETURN(const xlnet::ExportSummary summary,
                         xlnet::ExportModel(options));
  std::cout << "exported " << options.out << ": " << summary.architecture
            << ", " << summary.tensors << " tensors, " << summary.parameters
            << " parameters (" << options.dtype << "), tokenizer from "
            << summary.tokenizer << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-export", argc, argv, &Run);
}
