#include "lm/lm_commands.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"
#include "data_pipeline/token_bytes.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/tokenizer_rules.h"
#include "model/precision.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"

namespace xlnet {
namespace {

// The model (eval mode, on the device) and its tokenizer.
struct LoadedLm {
  XLNetLMHeadModel model{nullptr};
  std::unique_ptr<data::Tokenizer> tokenizer;
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat;
};

absl::StatusOr<LoadedLm> LoadLm(const std::string& model_dir, Dtype dtype,
                                const std::string& device_name) {
  if (model_dir.empty()) {
    return absl::InvalidArgumentError("no --model directory given");
  }
  LoadedLm lm;
  XLNET_ASSIGN_OR_RETURN(lm.device, ParseDevice(device_name));
  lm.dtype = ScalarTypeOf(dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(lm.device, lm.dtype));
  const std::string spiece = model_dir + "/" + kTokenizerFile;
  if (!PathExists(spiece)) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, " has no ", kTokenizerFile,
        ": xlnet-lm tokenizes text with the model's own tokenizer (copy the "
        "spiece.model the model was trained with into the directory)"));
  }
  // The text rules are the tokenizer's record (default rules without one),
  // as prepare takes them.
  XLNET_ASSIGN_OR_RETURN(const std::optional<data::TextRules> recorded,
                         data::ReadRecordedTextRules(spiece));
  XLNET_ASSIGN_OR_RETURN(const data::TextRules rules,
                         data::ResolveTextRules(spiece, recorded, {}));
  XLNET_ASSIGN_OR_RETURN(lm.tokenizer, data::Tokenizer::Load(spiece, rules));
  LoadOptions load;
  load.ignore_prefixes = FineTuningHeadPrefixes();
  XLNET_ASSIGN_OR_RETURN(lm.model, LoadPretrained(model_dir, load));
  if (lm.tokenizer->vocab_size() > lm.model->config().vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        spiece, " has ", lm.tokenizer->vocab_size(),
        " pieces but the model's vocab_size is ", lm.model->config().vocab_size,
        ": not this model's tokenizer"));
  }
  lm.model->to(lm.device);
  lm.model->eval();
  return lm;
}

nlohmann::json RowJson(const LmEvalResult& r) {
  return {{"mode", EnumName(r.mode)},
          {"stream", EnumName(r.stream)},
          {"seq_len", r.seq_len},
          {"mem_len", r.mem_len},
          {"batch_size", r.batch_size},
          {"forwards", r.forwards},
          {"tokens", r.tokens},
          {"bytes", r.bytes},
          {"nll", r.nll},
          {"nll_per_token", r.NllPerToken()},
          {"perplexity", r.Perplexity()},
          {"bits_per_byte", r.BitsPerByte()},
          {"seconds", r.seconds},
          {"tokens_per_sec", r.TokensPerSecond()}};
}

}  // namespace

absl::Status RunLmEval(const LmEvalCommand& command, std::ostream& out) {
  if (command.text_path.empty()) {
    return absl::InvalidArgumentError("no --text file given");
  }
  if (command.modes.empty()) {
    return absl::InvalidArgumentError("no evaluation mode given");
  }
  XLNET_ASSIGN_OR_RETURN(
      LoadedLm lm, LoadLm(command.model_dir, command.dtype, command.device));
  TextIdsOptions text_options;
  text_options.max_tokens = command.max_tokens;
  XLNET_ASSIGN_OR_RETURN(
      TextIds text,
      TokenizeTextFile(command.text_path, *lm.tokenizer, text_options));
  const std::vector<int32_t> token_bytes = data::TokenTextBytes(*lm.tokenizer);
  const XLNetConfig& config = lm.model->config();
  out << absl::StrFormat(
      "%s: %d tokens%s, %d lines%s; model %s (attn_type %s, clamp_len %d, "
      "same_length %s), %s on %s\n",
      command.text_path, static_cast<int64_t>(text.ids.size()),
      text.truncated ? " (--max_tokens)" : "", text.lines,
      text.skipped_lines > 0 ? absl::StrCat(" (", text.skipped_lines,
                                            " skipped as prepare skips them)")
                             : "",
      command.model_dir, config.attn_type, config.clamp_len,
      config.same_length ? "true" : "false", EnumName(command.dtype),
      lm.device.str());
  std::vector<LmEvalResult> rows;
  XLNET_RETURN_IF_ERROR(CatchExceptions("evaluation", [&]() -> absl::Status {
    AutocastGuard autocast(lm.device, lm.dtype);
    for (LmEvalMode mode : command.modes) {
      LmEvalOptions options = command.eval;
      options.mode = mode;
      XLNET_ASSIGN_OR_RETURN(
          LmEvalResult r, EvaluateLm(lm.model, text.ids, token_bytes, options));
      rows.push_back(r);
    }
    return absl::OkStatus();
  }));
  out << absl::StrFormat("%-8s %-7s %5s %5s %9s %10s %11s %9s %9s %10s\n",
                         "mode", "stream", "L", "M", "tokens", "nll/token",
                         "perplexity", "bits/byte", "seconds", "tokens/s");
  for (const LmEvalResult& r : rows) {
    out << absl::StrFormat(
        "%-8s %-7s %5d %5s %9d %10.4f %11.3f %9.4f %9.3f %10.1f\n",
        EnumName(r.mode), EnumName(r.stream), r.seq_len,
        r.mode == LmEvalMode::kMemory ? absl::StrCat(r.mem_len) : "-", r.tokens,
        r.NllPerToken(), r.Perplexity(), r.BitsPerByte(), r.seconds,
        r.TokensPerSecond());
  }
  for (const LmEvalResult& r : rows) {
    if (r.mode != LmEvalMode::kSliding) continue;
    out << absl::StrFormat(
        "sliding: one forward of L=%d tokens per predicted token, %d windows "
        "batched per forward (%d forwards): batching shares the work of a "
        "call, not the L-token cost of each window\n",
        r.seq_len, r.batch_size, r.forwards);
  }
  if (!command.json_path.empty()) {
    nlohmann::json doc = {{"text", command.text_path},
                          {"model", command.model_dir},
                          {"dtype", EnumName(command.dtype)},
                          {"device", lm.device.str()},
                          {"rows", nlohmann::json::array()}};
    for (const LmEvalResult& r : rows) doc["rows"].push_back(RowJson(r));
    XLNET_RETURN_IF_ERROR(
        WriteFileAtomic(command.json_path, doc.dump(2) + "\n"));
  }
  return absl::OkStatus();
}

absl::Status RunLmGenerate(const LmGenerateCommand& command,
                           std::ostream& out) {
  XLNET_RETURN_IF_ERROR(CheckGenerateOptions(command.generate));
  XLNET_ASSIGN_OR_RETURN(
      LoadedLm lm, LoadLm(command.model_dir, command.dtype, command.device));
  std::vector<int32_t> prompt;
  XLNET_RETURN_IF_ERROR(
      Annotate(lm.tokenizer->EncodeIds(command.prompt, &prompt), "--prompt"));
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "--prompt has no tokens; give some text to continue");
  }
  GenerateResult result;
  XLNET_RETURN_IF_ERROR(CatchExceptions("generation", [&]() -> absl::Status {
    AutocastGuard autocast(lm.device, lm.dtype);
    XLNET_ASSIGN_OR_RETURN(result,
                           Generate(lm.model, prompt, command.generate));
    return absl::OkStatus();
  }));
  out << lm.tokenizer->DecodeForDisplay(result.ids) << "\n";
  const GenerateOptions& g = command.generate;
  out << absl::StrFormat(
      "generated %d tokens after a %d-token prompt (%s, %s, M=%d%s): first "
      "token %.2f ms (with the prompt), then %.2f ms/token\n",
      static_cast<int64_t>(result.ids.size()),
      static_cast<int64_t>(prompt.size()),
      g.use_cache ? "memory cache" : "no cache",
      g.greedy ? "greedy" : absl::StrFormat("sampled, seed %d", g.seed),
      g.mem_len, result.stopped ? ", stopped at <eod>" : "",
      result.token_seconds.empty() ? 0.0 : 1e3 * result.token_seconds[0],
      1e3 * result.MeanStepSeconds());
  return absl::OkStatus();
}

}  // namespace xlnet
