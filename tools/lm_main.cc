// xlnet-lm: left-to-right language modelling with a model directory.
//
//   xlnet-lm eval     --model DIR --text FILE [--mode memory|none|sliding|all]
//                     [--seq_len L] [--mem_len M] [--json OUT.json]
//   xlnet-lm generate --model DIR --prompt TEXT [--max_new_tokens N]
//                     [--greedy | --temperature T --top_k K --top_p P]
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "config/settings.h"
#include "lm/lm_commands.h"

namespace {

constexpr char kUsage[] =
    "VERB [flags]\n\n"
    "  eval      perplexity and bits per byte of a text, in the modes\n"
    "            memory (Transformer-XL), none (independent segments),\n"
    "            sliding (vanilla Transformer, one window per token)\n"
    "  generate  continue a prompt, the memory as the cache\n\n"
    "`xlnet-lm VERB --help` lists a verb's flags.";

// The flags both verbs share.
struct CommonFlags {
  std::string dtype = xlnet::EnumName(xlnet::Dtype::kFp32);
  std::string stream = xlnet::EnumName(xlnet::LmStream::kAuto);
  int64_t threads = 0;

  void Add(xlnet::FlagParser* flags, std::string* model_dir,
           std::string* device) {
    flags->AddString("model", model_dir,
                     "model directory (config.json, weights, spiece.model)");
    flags->AddString(
        "dtype", &dtype,
        "compute precision: " + xlnet::EnumNameList<xlnet::Dtype>() +
            " (fp16 on CUDA only)");
    flags->AddString("device", device, "cpu, cuda or cuda:N");
    flags->AddString(
        "stream", &stream,
        "which stream predicts: " + xlnet::EnumNameList<xlnet::LmStream>() +
            "; auto = content for attn_type uni (causal LM), query for bi "
            "(PLM, left to right through a perm_mask)");
    flags->AddInt("threads", &threads, "CPU threads (0 = all cores)");
  }

  absl::Status Apply(xlnet::Dtype* dtype_out,
                     xlnet::LmStream* stream_out) const {
    XLNET_ASSIGN_OR_RETURN(
        *dtype_out, xlnet::ParseEnumSetting<xlnet::Dtype>("--dtype", dtype));
    XLNET_ASSIGN_OR_RETURN(
        *stream_out,
        xlnet::ParseEnumSetting<xlnet::LmStream>("--stream", stream));
    if (threads < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--threads ", threads, ": must be >= 0"));
    }
    xlnet::ConfigureThreads(xlnet::CapThreads(threads, "--threads"));
    return absl::OkStatus();
  }
};

absl::Status RunEval(int argc, char** argv) {
  xlnet::LmEvalCommand c;
  CommonFlags common;
  std::string mode = "memory";
  xlnet::FlagParser flags(
      "xlnet-lm eval",
      "--model DIR --text FILE [--mode " +
          absl::StrJoin(xlnet::EnumNames<xlnet::LmEvalMode>(), "|") +
          "|all] [--seq_len L] [--mem_len M] [--batch_size B] [--dtype] "
          "[--device] [--max_tokens N] [--json OUT.json]\n\n"
          "The text is tokenized as xlnet-data prepare does (one sentence a\n"
          "line, a blank line between documents, <eod> after each) with the\n"
          "model's spiece.model. Every mode scores tokens 1..N-1, each from\n"
          "the tokens before it: memory = segments of L over a memory of M\n"
          "cached positions per layer; none = independent segments of L;\n"
          "sliding = one L-token forward per token (B windows a forward).");
  common.Add(&flags, &c.model_dir, &c.device);
  flags.AddString("text", &c.text_path,
                  "text file (plain, JSON Lines, .gz, .zst)");
  flags.AddString("mode", &mode, "memory, none, sliding or all (one row each)");
  flags.AddInt("seq_len", &c.eval.seq_len,
               "L: tokens per forward (segment or window)");
  flags.AddInt("mem_len", &c.eval.mem_len, "M: memory rows (mode memory)");
  flags.AddInt("batch_size", &c.eval.batch_size,
               "segments (none) or windows (sliding) per forward");
  flags.AddInt("max_tokens", &c.max_tokens,
               "evaluate only the first N tokens of the text (0 = all)");
  flags.AddString("json", &c.json_path, "also write the rows as JSON here");
  flags.Require("model");
  flags.Require("text");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_RETURN_IF_ERROR(common.Apply(&c.dtype, &c.eval.stream));
  if (mode == "all") {
    c.modes = {xlnet::LmEvalMode::kMemory, xlnet::LmEvalMode::kNone,
               xlnet::LmEvalMode::kSliding};
  } else {
    XLNET_ASSIGN_OR_RETURN(
        const xlnet::LmEvalMode one,
        xlnet::ParseEnumSetting<xlnet::LmEvalMode>("--mode", mode));
    c.modes = {one};
  }
  return xlnet::RunLmEval(c, std::cout);
}

absl::Status RunGenerate(int argc, char** argv) {
  xlnet::LmGenerateCommand c;
  CommonFlags common;
  int64_t seed = 0;
  bool no_cache = false;
  xlnet::FlagParser flags(
      "xlnet-lm generate",
      "--model DIR --prompt TEXT [--max_new_tokens N] [--greedy | "
      "--temperature T --top_k K --top_p P] [--seed S] [--mem_len M] "
      "[--no_cache] [--stop_at_eod]\n\n"
      "Each new token is one forward of that token over the cached memory\n"
      "of the last M positions; --no_cache recomputes the last M + 1 tokens\n"
      "for every token instead (the reference, slower as the text grows).");
  common.Add(&flags, &c.model_dir, &c.device);
  flags.AddString("prompt", &c.prompt, "the text to continue");
  flags.AddInt("max_new_tokens", &c.generate.max_new_tokens,
               "tokens to generate");
  flags.AddBool("greedy", &c.generate.greedy,
                "always the most likely token (no sampling)");
  flags.AddDouble("temperature", &c.generate.temperature,
                  "sampling temperature, > 0");
  flags.AddInt("top_k", &c.generate.top_k,
               "sample among the K most likely tokens (0 = all)");
  flags.AddDouble("top_p", &c.generate.top_p,
                  "sample among the most likely tokens of total probability "
                  "P, in (0, 1]");
  flags.AddInt("seed", &seed, "sampler seed (same seed, same text)");
  flags.AddInt("mem_len", &c.generate.mem_len,
               "M: memory rows per layer kept as the cache");
  flags.AddBool("no_cache", &no_cache,
                "recompute the context window for every token (reference)");
  flags.AddBool("stop_at_eod", &c.generate.stop_at_eod,
                "stop after <eod> or </s>");
  flags.Require("model");
  flags.Require("prompt");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_RETURN_IF_ERROR(common.Apply(&c.dtype, &c.generate.stream));
  if (seed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seed ", seed, ": must be >= 0"));
  }
  c.generate.seed = static_cast<uint64_t>(seed);
  c.generate.use_cache = !no_cache;
  return xlnet::RunLmGenerate(c, std::cout);
}

absl::Status Run(int argc, char** argv) {
  const std::string verb = argc >= 2 ? argv[1] : "";
  if (verb.empty() || verb == "--help" || verb == "-h" || verb == "help") {
    std::cout << "usage: xlnet-lm " << kUsage << "\n";
    return verb.empty() ? absl::InvalidArgumentError("no verb given")
                        : absl::OkStatus();
  }
  // The verb's flags start after it (argv[1] plays the program name).
  if (verb == "eval") return RunEval(argc - 1, argv + 1);
  if (verb == "generate") return RunGenerate(argc - 1, argv + 1);
  return absl::InvalidArgumentError("unknown verb '" + verb +
                                    "'; verbs: eval, generate");
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-lm", argc, argv, &Run);
}
