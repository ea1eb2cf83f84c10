// xlnet-data: tokenizer training, corpus shards and permutation-LM batches.
//
//   xlnet-data tokenizer --input FILES --vocab_size N --out spiece.model
//   xlnet-data prepare   --input FILES_OR_GLOBS --tokenizer spiece.model
//                        --out DIR [--num_tasks N --task I]
//   xlnet-data combine   --out DIR
//   xlnet-data dump      --data DIR --config CFG --batches N --out F
//   xlnet-data inspect   --data DIR --config CFG
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "config/config.h"
#include "data_pipeline/data_commands.h"
#include "data_pipeline/shard_combine.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/tokenizer_rules.h"

namespace {

constexpr char kUsage[] =
    "VERB [flags]\n\n"
    "  tokenizer  train a SentencePiece model with XLNet's special ids\n"
    "  prepare    tokenize text files into shards (+ manifest.json)\n"
    "  combine    join the parts of a prepare split with --num_tasks\n"
    "  dump       write N sampler batches to a safetensors file\n"
    "  inspect    print one sample decoded, with targets and order\n\n"
    "`xlnet-data VERB --help` lists a verb's flags.";

// Loads --config (or defaults) with --set overrides.
absl::StatusOr<xlnet::Config> LoadConfigFlags(
    const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return xlnet::ParseConfig("", "<defaults>", overrides);
  return xlnet::LoadConfig(path, overrides);
}

// dump and inspect without --config: one line on stderr naming the shapes
// they assume (the defaults, with any --set), since batches of another
// seq_len or batch_size than the run's would mislead silently.
void NoteDefaultShapes(const std::string& verb, const std::string& config_path,
                       const xlnet::Config& config) {
  if (!config_path.empty()) return;
  XLOG(WARNING) << "xlnet-data " << verb
                << ": no --config: assuming data.seq_len="
                << config.data.seq_len
                << ", train.batch_size=" << config.train.batch_size
                << " (the defaults with any --set); pass the run's --config "
                   "for its batches";
}

absl::StatusOr<xlnet::data::Split> ParseSplit(const std::string& s) {
  if (s == "train") return xlnet::data::Split::kTrain;
  if (s == "eval") return xlnet::data::Split::kEval;
  return absl::InvalidArgumentError("--split must be train or eval (got '" + s +
                                    "')");
}

absl::Status RunTokenizer(int argc, char** argv) {
  xlnet::data::TokenizerTrainOptions o;
  std::vector<std::string> inputs;
  std::string out;
  int64_t vocab_size = 32000, threads = 1, seed = 42;
  int64_t max_sentences = o.max_sentences;
  int64_t max_memory_mb = 0;
  xlnet::FlagParser flags("xlnet-data tokenizer",
                          "--input FILE [--input FILE ...] --vocab_size N "
                          "--out spiece.model [--uncased]");
  flags.AddRepeated("input", &inputs,
                    "corpus file as prepare reads it: text (one sentence a "
                    "line) or JSON Lines (*.jsonl, *.json; --json_key), "
                    "either optionally .gz or .zst; repeatable");
  flags.AddString("json_key", &o.json_key,
                  "the text field of JSON Lines records (as prepare's)");
  flags.AddInt("vocab_size", &vocab_size, "number of pieces");
  flags.AddString("out", &out, "the .model file to write");
  flags.AddBool("uncased", &o.rules.uncased,
                "lowercase the text; recorded in the .model, so prepare, "
                "pretraining, fine-tuning and export take it from there");
  flags.AddBool("keep_accents", &o.rules.keep_accents,
                "keep accents (skip NFKD + combining-mark removal); "
                "recorded as --uncased");
  flags.AddInt("threads", &threads,
               "trainer threads (a fixed count gives a fixed model)");
  flags.AddInt("seed", &seed, "random seed of the trainer");
  flags.AddInt("max_sentences", &max_sentences,
               "sentences sampled uniformly (seeded) from the whole input in "
               "one streaming pass (official 10M). Training memory grows with "
               "the sample, not the input: about 23 bytes per sample byte + "
               "138 per sentence + 174 MiB (10M Brown-like sentences: ~24 "
               "GB). The estimate is printed before training; a sample above "
               "--max_memory_mb (default: the memory available) is refused. "
               "Lower this to bound memory");
  flags.AddInt("max_memory_mb", &max_memory_mb,
               "refuse to train when the memory estimate exceeds this many "
               "MiB (0 = the memory available now)");
  flags.AddBool("ignore_memory_estimate", &o.ignore_memory_estimate,
                "train even when the memory estimate exceeds what is "
                "available");
  flags.AllowPositional();  // `--input a.txt b.txt`
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  // `--input a.txt b.txt` leaves b.txt positional: take those too.
  inputs.insert(inputs.end(), flags.positional().begin(),
                flags.positional().end());
  XLNET_ASSIGN_OR_RETURN(o.inputs, xlnet::data::ExpandInputs(inputs));
  o.vocab_size = static_cast<int>(vocab_size);
  if (threads < 1 || threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads ", threads, ": must be in [1, 256]"));
  }
  o.threads = static_cast<int>(threads);
  o.seed = static_cast<uint32_t>(seed);
  o.max_sentences = max_sentences;
  if (max_memory_mb < 0 || max_memory_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_memory_mb ", max_memory_mb, " out of range"));
  }
  o.memory_limit_bytes = static_cast<uint64_t>(max_memory_mb) << 20;
  return xlnet::data::TrainTokenizerFile(o, out, std::cout);
}

absl::Status RunPrepare(int argc, char** argv) {
  xlnet::data::PrepareOptions o;
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t workers = 1;
  bool uncased = false, keep_accents = false;
  int64_t num_tasks = 1, task = 0;
  xlnet::FlagParser flags(
      "xlnet-data prepare",
      "--input FILES_OR_GLOBS --tokenizer spiece.model --out DIR "
      "[--workers N] [--strict] [--num_tasks N --task I]\n\n"
      "Inputs:\n"
      "  plain text: one sentence a line, a blank line between documents\n"
      "    (the official XLNet format). A file whose lines hold several\n"
      "    sentences, or with many lines and no blank line, gets a warning:\n"
      "    it looks like one document per line.\n"
      "  JSON Lines (*.jsonl, *.json): one document per record, its text in\n"
      "    the string field --json_key; split into sentences after . ! ?\n"
      "    followed by a space and a capital, digit or quote (not after\n"
      "    Mr. Dr. etc., initials or U.S.), and at line breaks.\n"
      "  Any of these compressed: *.gz (zlib), *.zst (zstd), streamed.\n"
      "Over several hosts: each runs --num_tasks N --task I (inputs i with\n"
      "i % N == I) into DIR/part-I-of-N; then `xlnet-data combine --out DIR`.");
  flags.AddRepeated("input", &o.inputs,
                    "text, JSON Lines, .gz or .zst file, or a glob; "
                    "repeatable");
  flags.AddString("tokenizer", &o.tokenizer_path,
                  "spiece.model (default: data.tokenizer of --config)");
  flags.AddString("out", &o.out_dir, "output directory");
  flags.AddInt("workers", &workers, "tokenizer threads");
  flags.AddBool("strict", &o.strict,
                "fail on invalid UTF-8, over-long lines, JSON records without "
                "text or empty files");
  flags.AddInt("shard_bytes", &o.shard_bytes, "text bytes per shard (target)");
  flags.AddInt("max_line_bytes", &o.max_line_bytes,
               "longest line (JSON record) accepted");
  flags.AddString("json_key", &o.json_key,
                  "the text field of JSON Lines records");
  flags.AddInt("num_tasks", &num_tasks,
               "split the inputs over this many hosts (tasks)");
  flags.AddInt("task", &task, "this host's task, in [0, num_tasks)");
  flags.AddBool("uncased", &uncased,
                "lowercase; the tokenizer's recorded casing decides, so a "
                "value that differs is an error (decides, over "
                "data.uncased, only for a tokenizer without a record)");
  flags.AddBool("keep_accents", &keep_accents,
                "keep accents; checked against the tokenizer's record as "
                "--uncased (over data.keep_accents)");
  flags.AddConfigFlags(&config_path, &overrides);
  flags.AllowPositional();  // `--input a.txt b.txt`
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  o.inputs.insert(o.inputs.end(), flags.positional().begin(),
                  flags.positional().end());
  XLNET_ASSIGN_OR_RETURN(xlnet::Config config,
                         LoadConfigFlags(config_path, overrides));
  o.use_eod = config.data.use_eod;
  o.eval_fraction = config.data.eval_fraction;
  if (o.tokenizer_path.empty()) o.tokenizer_path = config.data.tokenizer;
  if (o.tokenizer_path.empty()) {
    return absl::InvalidArgumentError("no --tokenizer given");
  }
  // The text rules come from the tokenizer's record; a flag (else a config
  // key) that is given must agree with it, and decides only for a tokenizer
  // without one.
  XLNET_ASSIGN_OR_RETURN(
      std::vector<xlnet::data::TextRuleSetting> settings,
      xlnet::data::ConfigTextRuleSettings(config.data, config_path, overrides));
  for (const auto& [rule, value] :
       {std::pair<std::string, bool>{"uncased", uncased},
        {"keep_accents", keep_accents}}) {
    if (!flags.WasSet(rule)) continue;
    // The flag overrides the config key.
    settings.erase(
        std::remove_if(settings.begin(), settings.end(),
                       [&r = rule](const xlnet::data::TextRuleSetting& s) {
                         return s.rule == r;
                       }),
        settings.end());
    settings.push_back({"--" + rule, rule, value});
  }
  XLNET_ASSIGN_OR_RETURN(const std::optional<xlnet::data::TextRules> recorded,
                         xlnet::data::ReadRecordedTextRules(o.tokenizer_path));
  XLNET_ASSIGN_OR_RETURN(o.rules, xlnet::data::ResolveTextRules(
                                      o.tokenizer_path, recorded, settings));
  if (o.inputs.empty()) return absl::InvalidArgumentError("no --input given");
  o.workers = static_cast<int>(workers);
  o.num_tasks = static_cast<int>(num_tasks);
  o.task = static_cast<int>(task);
  XLNET_ASSIGN_OR_RETURN(xlnet::data::PrepareReport report,
                         xlnet::data::PrepareShards(o));
  std::cout << "prepared " << report.dir << ": " << report.Summary() << "\n";
  for (const std::string& warning : report.warnings) {
    std::cout << "warning: " << warning << "\n";
  }
  return absl::OkStatus();
}

absl::Status RunCombine(int argc, char** argv) {
  std::string out;
  xlnet::FlagParser flags(
      "xlnet-data combine",
      "--out DIR\n\nJoins DIR/part-*-of-N (from prepare --num_tasks N) into "
      "DIR: the shards and manifest.json a one-task prepare would write. "
      "The part directories are removed afterwards.");
  flags.AddString("out", &out, "the --out of the prepare tasks");
  flags.Require("out");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(xlnet::data::CombineReport report,
                         xlnet::data::CombineParts(out));
  std::cout << "combined " << out << ": " << report.Summary() << "\n";
  return absl::OkStatus();
}

absl::Status RunDump(int argc, char** argv) {
  xlnet::data::DumpOptions o;
  std::string config_path, split = "train";
  std::vector<std::string> overrides;
  int64_t rank = 0, world_size = 1;
  xlnet::FlagParser flags("xlnet-data dump",
                          "--data DIR --config CFG [--set k=v] --batches N "
                          "--out F.safetensors [--rank R --world_size W]\n\n"
                          "Without --data, the config's data.sources (a "
                          "blend) give the batches. Without --config, the "
                          "default shapes (data.seq_len 512, "
                          "train.batch_size 16), said on stderr.");
  flags.AddString("data", &o.data_dir,
                  "directory from xlnet-data prepare (or data.sources)");
  flags.AddInt("batches", &o.batches, "number of batches");
  flags.AddString("out", &o.out, "safetensors file to write");
  flags.AddInt("rank", &rank, "this rank");
  flags.AddInt("world_size", &world_size, "number of ranks");
  flags.AddString("split", &split, "train or eval");
  flags.AddConfigFlags(&config_path, &overrides);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(o.config, LoadConfigFlags(config_path, overrides));
  NoteDefaultShapes("dump", config_path, o.config);
  XLNET_ASSIGN_OR_RETURN(o.split, ParseSplit(split));
  o.rank = static_cast<int>(rank);
  o.world_size = static_cast<int>(world_size);
  return xlnet::data::DumpBatches(o, std::cout);
}

absl::Status RunInspect(int argc, char** argv) {
  xlnet::data::InspectOptions o;
  std::string config_path, split = "train";
  std::vector<std::string> overrides;
  xlnet::FlagParser flags("xlnet-data inspect",
                          "--data DIR --config CFG [--set k=v] [--step S] "
                          "[--row R]\n\nWithout --data, the config's "
                          "data.sources (a blend) give the sample. Without "
                          "--config, the default shapes (data.seq_len 512, "
                          "train.batch_size 16), said on stderr.");
  flags.AddString("data", &o.data_dir,
                  "directory from xlnet-data prepare (or data.sources)");
  flags.AddInt("step", &o.step, "sampler step");
  flags.AddInt("row", &o.row, "global batch row");
  flags.AddString("split", &split, "train or eval");
  flags.AddConfigFlags(&config_path, &overrides);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(o.config, LoadConfigFlags(config_path, overrides));
  NoteDefaultShapes("inspect", config_path, o.config);
  XLNET_ASSIGN_OR_RETURN(o.split, ParseSplit(split));
  return xlnet::data::InspectSample(o, std::cout);
}

absl::Status Run(int argc, char** argv) {
  const std::string verb = argc >= 2 ? argv[1] : "";
  if (verb.empty() || verb == "--help" || verb == "-h" || verb == "help") {
    std::cout << "usage: xlnet-data " << kUsage << "\n";
    return verb.empty() ? absl::InvalidArgumentError("no verb given")
                        : absl::OkStatus();
  }
  // The verb's flags start after it (argv[1] plays the program name).
  if (verb == "tokenizer") return RunTokenizer(argc - 1, argv + 1);
  if (verb == "prepare") return RunPrepare(argc - 1, argv + 1);
  if (verb == "combine") return RunCombine(argc - 1, argv + 1);
  if (verb == "dump") return RunDump(argc - 1, argv + 1);
  if (verb == "inspect") return RunInspect(argc - 1, argv + 1);
  return absl::InvalidArgumentError(
      "unknown verb '" + verb +
      "'; verbs: tokenizer, prepare, combine, dump, inspect");
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-data", argc, argv, &Run);
}
