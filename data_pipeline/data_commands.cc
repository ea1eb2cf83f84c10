#include "data_pipeline/data_commands.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "common/strings.h"
#include "data_pipeline/open_batch_source.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/tokenizer_rules.h"

namespace xlnet::data {
namespace {

SamplerOptions MakeSamplerOptions(const Config& config, int rank,
                                  int world_size, Split split) {
  SamplerOptions o;
  o.data = config.data;
  o.batch_size = GlobalBatchSize(config.train, world_size);
  o.seed = config.train.seed;
  o.rank = rank;
  o.world_size = world_size;
  o.split = split;
  return o;
}

// dump and inspect show permutation-LM batches; a causal-LM config's
// batches are ordered streams (lm_stream_source.h), which they do not show.
absl::Status CheckShowsObjective(const Config& config, const char* verb) {
  if (config.train.objective == Objective::kPlm) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "xlnet-data ", verb,
      " shows permutation-LM batches; this config sets train.objective: "
      "clm, whose batches are the corpus read in order (row r of step t is "
      "stream r's tokens [t*seq_len, (t+1)*seq_len + 1), "
      "data_pipeline/lm_stream_source.h)"));
}

}  // namespace

absl::Status TrainTokenizerFile(const TokenizerTrainOptions& given,
                                const std::string& out, std::ostream& log) {
  if (out.empty()) return absl::InvalidArgumentError("no output file (--out)");
  // The folder of --out, made before training (as the other tools make
  // theirs), so that a path that cannot be made fails before minutes of
  // training rather than after.
  const std::string parent = std::filesystem::path(out).parent_path().string();
  if (!parent.empty()) {
    XLNET_RETURN_IF_ERROR(Annotate(MakeDirs(parent), "--out"));
  }
  const auto start = std::chrono::steady_clock::now();
  TokenizerTrainOptions options = given;
  if (!options.progress) {
    // Phases on the log (stderr), with the time since the start.
    options.progress = [start](const std::string& line) {
      const double secs = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      XLOG(INFO) << "tokenizer [" << FormatDuration(secs) << "] " << line;
    };
  }
  XLNET_ASSIGN_OR_RETURN(TokenizerSample sample,
                         SampleTokenizerSentences(options));
  const TokenizerTrainStats stats = sample.stats;
  const uint64_t estimate =
      EstimateTokenizerTrainingBytes(stats.sample_bytes, stats.sentences);
  const bool limited = options.memory_limit_bytes > 0;
  const uint64_t available =
      limited ? options.memory_limit_bytes : AvailableMemoryBytes();
  const std::string records =
      stats.skipped_records > 0
          ? absl::StrCat(", ", stats.skipped_records,
                         " JSON records without --json_key")
          : "";
  log << absl::StrFormat(
      "sampled %d of %d sentences (%s; %d invalid UTF-8 and %d over-long "
      "lines skipped%s); training needs about %s of memory (%s %s)\n",
      stats.sentences, stats.sentences_seen, HumanBytes(stats.sample_bytes),
      stats.skipped_invalid_utf8, stats.skipped_overlong, records,
      HumanBytes(estimate), limited ? "limit" : "available",
      HumanBytes(available));
  log.flush();
  if (estimate > available && !options.ignore_memory_estimate) {
    // Sentences that would fit, at this sample's mean length.
    const double per_sentence =
        static_cast<double>(estimate) / static_cast<double>(stats.sentences);
    const int64_t fit = static_cast<int64_t>(
        0.9 * static_cast<double>(available) / per_sentence);
    return absl::ResourceExhaustedError(absl::StrCat(
        "training on ", stats.sentences, " sentences needs about ",
        HumanBytes(estimate), " of memory, more than the ",
        HumanBytes(available), limited ? " limit (--max_memory_mb)" : " available",
        "; lower --max_sentences (about ", fit,
        " fit) or pass --ignore_memory_estimate"));
  }
  XLNET_ASSIGN_OR_RETURN(std::string bytes,
                         TrainTokenizerOnSample(std::move(sample), options));
  // Check what we wrote loads as an XLNet tokenizer before keeping it.
  XLNET_ASSIGN_OR_RETURN(auto tok,
                         Tokenizer::FromBytes(bytes, out, options.rules));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(out, bytes));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  log << absl::StrFormat(
      "wrote %s: %d pieces, hash %s, trained on %d sentences in %.1f s; "
      "casing %s recorded in it (prepare, pretraining, fine-tuning and "
      "export take it from there)\n",
      out, tok->vocab_size(), tok->hash(), stats.sentences, secs,
      TextRulesString(options.rules));
  return absl::OkStatus();
}

absl::Status DumpBatches(const DumpOptions& options, std::ostream& log) {
  if (options.batches < 1) {
    return absl::InvalidArgumentError("--batches must be >= 1");
  }
  if (options.out.empty()) return absl::InvalidArgumentError("no --out file");
  XLNET_RETURN_IF_ERROR(CheckShowsObjective(options.config, "dump"));
  XLNET_ASSIGN_OR_RETURN(
      auto sampler,
      OpenBatchSource(options.data_dir,
                      MakeSamplerOptions(options.config, options.rank,
                                         options.world_size, options.split)));
  const SamplerState first = sampler->State();
  std::map<std::string, std::vector<torch::Tensor>> parts;
  std::vector<std::string> order;
  for (int64_t n = 0; n < options.batches; ++n) {
    const PlmBatch batch = sampler->Next();
    for (const auto& [name, tensor] : batch.Named()) {
      if (n == 0) order.push_back(name);
      parts[name].push_back(tensor);
    }
  }
  NamedTensors tensors;
  for (const std::string& name : order) {
    tensors.emplace_back(name, torch::stack(parts[name]));
  }
  const DataConfig& d = options.config.data;
  std::map<std::string, std::string> metadata = {
      {"format", "xlnet-plm-batches"},
      {"batches", std::to_string(options.batches)},
      {"global_batch_size", std::to_string(GlobalBatchSize(
                                options.config.train, options.world_size))},
      {"rank", std::to_string(options.rank)},
      {"world_size", std::to_string(options.world_size)},
      {"seed", std::to_string(options.config.train.seed)},
      {"split", options.split == Split::kTrain ? "train" : "eval"},
      {"seq_len", std::to_string(d.seq_len)},
      {"reuse_len", std::to_string(d.reuse_len)},
      {"perm_size", std::to_string(d.perm_size)},
      {"num_predict", std::to_string(d.num_predict)},
      {"bi_data", d.bi_data ? "true" : "false"},
      {"official_span_quirks", d.official_span_quirks ? "true" : "false"},
      {"global_rows",
       [&] {
         std::string rows;
         for (int64_t r : sampler->local_rows()) {
           absl::StrAppend(&rows, rows.empty() ? "" : ",", r);
         }
         return rows;
       }()},
      {"sources",
       [&] {
         std::string names;
         for (const SourcePart& part : sampler->Parts()) {
           absl::StrAppend(&names, names.empty() ? "" : ",",
                           part.name.empty() ? options.data_dir : part.name);
         }
         return names;
       }()},
      {"sampler_state_begin", first.ToString()},
      {"sampler_state_end", sampler->State().ToString()},
  };
  XLNET_RETURN_IF_ERROR(WriteSafetensors(options.out, tensors, metadata));
  log << "wrote " << options.out << ": " << options.batches << " batches of "
      << sampler->local_rows().size() << " rows (rank " << options.rank
      << " of " << options.world_size << "), seq_len " << d.seq_len << "\n";
  return absl::OkStatus();
}

absl::Status InspectSample(const InspectOptions& options, std::ostream& out) {
  XLNET_RETURN_IF_ERROR(CheckShowsObjective(options.config, "inspect"));
  SamplerOptions so = MakeSamplerOptions(options.config, 0, 1, options.split);
  so.data.prefetch_batches = 0;
  XLNET_ASSIGN_OR_RETURN(auto source, OpenBatchSource(options.data_dir, so));
  const int64_t rows = GlobalBatchSize(options.config.train, 1);
  if (options.row < 0 || options.row >= rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--row ", options.row, " is not in [0, batch_size=", rows, ")"));
  }
  if (options.step < 0)
    return absl::InvalidArgumentError("--step must be >= 0");
  // A blend's row reads one source at that source's own step.
  const RowOrigin origin = source->Origin(options.step, options.row);
  const Sampler* sampler = origin.sampler;
  if (!origin.name.empty()) {
    out << "blend step " << options.step << ": row " << options.row
        << " reads source '" << origin.name << "' (" << sampler->shards().dir()
        << ") at its step " << origin.step << "\n";
  }
  SampleDebug debug;
  const PlmBatch b = sampler->BuildRow(origin.step, options.row, &debug);
  const Tokenizer& tok = sampler->tokenizer();
  const DataConfig& d = options.config.data;
  const int64_t L = d.seq_len;
  const int64_t R = d.reuse_len;
  auto ids = b.input_ids[0];
  auto types = b.token_type_ids[0];
  auto masked = b.is_masked[0];
  auto tmask = b.target_mask[0];
  auto mapping = b.target_mapping[0];
  std::vector<uint8_t> is_target(L, 0);
  for (int64_t k = 0; k < d.num_predict; ++k) {
    if (tmask[k].item<float>() > 0) {
      is_target[mapping[k].argmax().item<int64_t>()] = 1;
    }
  }
  const bool backward = options.row >= sampler->num_streams();
  out << "step " << origin.step << ", row " << options.row << " ("
      << (backward ? "backward" : "forward") << " stream "
      << options.row % sampler->num_streams() << " of "
      << sampler->num_streams() << ", stream length "
      << sampler->stream_length() << ", " << sampler->steps_per_epoch()
      << " steps per epoch)\n";
  if (backward) {
    out << "backward stream: tokens are in reverse order (read right to "
           "left); spans are sampled on the flipped sequence\n";
  }
  const int64_t a_len = debug.split.a_end - debug.split.a_begin;
  const int64_t b_len = debug.split.b_end - debug.split.b_begin;
  out << "layout: reuse [0," << R << ") A [" << R << "," << R + a_len
      << ") <sep> " << R + a_len << " B [" << R + a_len + 1 << ","
      << R + a_len + 1 + b_len << ") <sep> " << L - 2 << " <cls> " << L - 1
      << "; label " << debug.split.label
      << (debug.split.label ? " (B continues A)" : " (B is random)") << "\n";
  int64_t n_targets = 0;
  for (int64_t i = 0; i < L; ++i) n_targets += is_target[i];
  out << "targets: " << n_targets << " of num_predict " << d.num_predict
      << " (masked: " << masked.sum().item<int64_t>() << ")\n\n";

  // The text by segment, targets in [brackets].
  for (int seg = 0; seg <= 2; ++seg) {
    out << "segment " << seg << ": ";
    bool open = false;
    for (int64_t i = 0; i < L; ++i) {
      if (types[i].item<int64_t>() != seg) continue;
      if (seg == 0 && i == R && R > 0) out << " |reuse end| ";
      const bool t = is_target[i] != 0;
      if (t && !open) out << "[";
      if (!t && open) out << "]";
      open = t;
      out << tok.DecodeForDisplay(
          {static_cast<int32_t>(ids[i].item<int64_t>())});
    }
    if (open) out << "]";
    out << "\n";
  }
  // Prediction order: targets and functional tokens by factorisation index.
  out << "\nfactorisation order (per half; * = target, others are masked/"
         "functional and never predicted):\n";
  for (int half = 0; half < 2; ++half) {
    const int64_t lo = half == 0 ? 0 : R;
    const int64_t hi = half == 0 ? R : L;
    std::vector<std::pair<int64_t, int64_t>> by_order;
    for (int64_t i = lo; i < hi; ++i) {
      if (debug.order[i] >= 0) by_order.emplace_back(debug.order[i], i);
    }
    std::sort(by_order.begin(), by_order.end());
    out << (half == 0 ? "  reuse half: " : "  second half: ");
    for (const auto& [o, i] : by_order) {
      out << tok.IdToPiece(static_cast<int32_t>(ids[i].item<int64_t>())) << "@"
          << i << (is_target[i] ? "*" : "") << " ";
    }
    out << "\n";
  }
  out << "\n pos seg order target token\n";
  for (int64_t i = 0; i < L; ++i) {
    out << absl::StrFormat(
        "%4d %3d %5s %6s %s\n", i, types[i].item<int64_t>(),
        debug.order[i] >= 0 ? absl::StrCat(debug.order[i]) : "-",
        is_target[i] ? "*" : (masked[i].item<bool>() ? "m" : ""),
        tok.IdToPiece(static_cast<int32_t>(ids[i].item<int64_t>())));
  }
  return absl::OkStatus();
}

}  // namespace xlnet::data
