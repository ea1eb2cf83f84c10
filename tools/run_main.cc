// xlnet-run: one eval-mode forward pass of a model directory over inputs in
// a safetensors file (batch-first, HF names); writes the outputs.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "model_io/run.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::RunOptions options;
  int64_t threads = 0;
  xlnet::FlagParser flags(
      "xlnet-run",
      "--model DIR --inputs IN.safetensors --outputs OUT.safetensors "
      "[--dtype " +
          absl::StrJoin(xlnet::EnumNames<xlnet::Dtype>(), "|") +
          "] [--device cpu|cuda]\n\n"
          "  inputs:  input_ids [B,L] int64; optional token_type_ids [B,L],\n"
          "           attention_mask [B,L], perm_mask [B,L,L], target_mapping "
          "[B,P,L],\n"
          "           mems.0..mems.{n_layer-1} [M,B,D]\n"
          "  outputs: last_hidden_state [B,L,D], query_hidden_state [B,P,D],\n"
          "           logits [B,P,V] or [B,L,V], mems.i [M',B,D]");
  flags.AddString("model", &options.model_dir,
                  "model directory (config.json + weights)");
  flags.AddString("inputs", &options.inputs_path,
                  "input tensors (.safetensors)");
  flags.AddString("outputs", &options.outputs_path,
                  "output tensors (.safetensors)");
  std::string dtype(xlnet::EnumName(options.dtype));
  flags.AddString("dtype", &dtype,
                  "compute precision: " + xlnet::EnumNameList<xlnet::Dtype>() +
                      " (fp16 on CUDA only)");
  flags.AddString("device", &options.device, "cpu, cuda or cuda:N");
  flags.AddBool(
      "query-all-positions", &options.query_all_positions,
      "query stream over all L positions (HF's way) instead of the P targets");
  flags.AddInt("threads", &threads, "CPU threads (0 = all cores)");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(
      options.dtype, xlnet::ParseEnumSetting<xlnet::Dtype>("--dtype", dtype));
  if (options.model_dir.empty() || options.inputs_path.empty() ||
      options.outputs_path.empty()) {
    return absl::InvalidArgumentError(
        "--model, --inputs and --outputs are required; see xlnet-run --help");
  }
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads ", threads, ": must be >= 0"));
  }
  // More threads than cores only slow the pass down; 100000 would spawn
  // until killed.
  xlnet::ConfigureThreads(xlnet::CapThreads(threads, "--threads"));
  return xlnet::RunModel(options);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-run", argc, argv, &Run);
}
