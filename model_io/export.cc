#include "model_io/export.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "common/version.h"
#include "config/config.h"
#include "model/precision.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/run_layout.h"
#include "model_io/save.h"
#include "yaml-cpp/yaml.h"

namespace xlnet {
namespace {

// spiece.model files are a few MB even for large vocabularies.
constexpr uint64_t kMaxTokenizerBytes = uint64_t{256} << 20;
// The model card reads at most this much of the end of metrics.jsonl.
constexpr uint64_t kMetricsTailBytes = uint64_t{1} << 20;

constexpr char kTokenizerConfigFile[] = "tokenizer_config.json";
constexpr char kSpecialTokensFile[] = "special_tokens_map.json";
constexpr char kFastTokenizerFile[] = "tokenizer.json";
constexpr char kModelCardFile[] = "README.md";

// The marker's "format" (a state file, StateJsonText) and its version.
constexpr char kExportMarkerFormat[] = "xlnet_export";
constexpr int kExportMarkerVersion = 1;

// Every entry ExportModel writes into --out, all regular files: a directory
// holding these and kExportMarkerFile, and nothing else, is an earlier
// export that --overwrite may replace.
const std::set<std::string>& ExportEntries() {
  static const auto* entries = new std::set<std::string>{
      kConfigFile,          kWeightsFile,       kTokenizerFile,
      kTokenizerConfigFile, kSpecialTokensFile, kFastTokenizerFile,
      kModelCardFile,       kExportMarkerFile,  kChecksumsFile};
  return *entries;
}

// `path` absolute and normal, without a trailing '/'.
std::filesystem::path NormalPath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p =
      std::filesystem::absolute(std::filesystem::path(path), ec)
          .lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // trailing '/'
  return p;
}

// `name` in DIR, else in the run directories above a checkpoint (DIR/..,
// DIR/../..). Sets `looked` to every place looked at when not found.
std::optional<std::string> FindUp(const std::string& dir,
                                  const std::string& name,
                                  std::vector<std::string>* looked) {
  namespace fs = std::filesystem;
  fs::path here = NormalPath(dir);
  for (int up = 0; up < 3 && !here.empty(); ++up) {
    const std::string candidate = (here / name).string();
    if (PathExists(candidate)) return candidate;
    looked->push_back(candidate);
    if (here == here.parent_path()) break;
    here = here.parent_path();
  }
  return std::nullopt;
}

// The entries of directory `path`, sorted (so that an error names the same
// one every time).
absl::StatusOr<std::vector<std::string>> ListEntries(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat(path, ": listing failed: ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Whether --out may be written: a missing or empty directory always, one
// that holds an earlier export (only ExportEntries(), the marker among
// them) with `overwrite`, nothing else. A run directory (run.lock, run.json,
// metrics.jsonl, checkpoints/, ...) or anyone's other files are never
// replaced, whatever the flags say: --overwrite means "replace my last
// export", not "delete this directory".
absl::Status CheckOut(const std::string& out, bool overwrite) {
  if (!PathExists(out)) return absl::OkStatus();
  if (!IsDirectory(out)) {
    return absl::FailedPreconditionError(
        absl::StrCat(out, ": exists and is not a directory"));
  }
  XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> entries,
                         ListEntries(out));
  if (entries.empty()) return absl::OkStatus();
  const std::string refuse = absl::StrCat(
      "; xlnet-export writes only into a new or empty directory or, with "
      "--overwrite, over an earlier export of its own and nothing else "
      "(never a run directory or other files): choose another --out, or "
      "remove ",
      out, " yourself");
  namespace fs = std::filesystem;
  for (const std::string& name : entries) {
    std::error_code ec;
    const bool regular =
        fs::is_regular_file(fs::symlink_status(fs::path(out) / name, ec));
    const bool known = ExportEntries().count(name) > 0;
    if (!known || !regular) {
      return absl::FailedPreconditionError(absl::StrCat(
          out, ": ", name,
          known ? " is not a regular file, as xlnet-export writes it"
                : " is not one of the files that xlnet-export writes",
          refuse));
    }
  }
  const std::string marker = absl::StrCat(out, "/", kExportMarkerFile);
  if (!PathExists(marker)) {
    return absl::FailedPreconditionError(absl::StrCat(
        out, ": no ", kExportMarkerFile,
        ", so xlnet-export did not write it (e.g. an HF download or a "
        "run's model directory)",
        refuse));
  }
  const absl::StatusOr<nlohmann::json> read =
      ReadStateJson(marker, kExportMarkerFormat, kExportMarkerVersion);
  if (!read.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(read.status().message(), refuse));
  }
  if (!overwrite) {
    return absl::FailedPreconditionError(absl::StrCat(
        out, ": holds an earlier export; pass --overwrite to replace it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::ScalarType> ExportScalarType(Dtype dtype) {
  if (dtype == Dtype::kFp16) {
    return absl::InvalidArgumentError(
        "--dtype: fp16 is not an export precision; use fp32 or bf16");
  }
  return ScalarTypeOf(dtype);
}

// Checks the flags and the places before anything is read or written.
absl::Status CheckPaths(const ExportOptions& options) {
  if (options.checkpoint.empty() || options.out.empty()) {
    return absl::InvalidArgumentError("--checkpoint and --out are required");
  }
  const std::string& dir = options.checkpoint;
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  if (!PathExists(absl::StrCat(dir, "/", kConfigFile))) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (no ", kConfigFile, ")"));
  }
  const std::string& out = options.out;
  // Writing --out replaces the whole directory: it must neither hold the
  // source (a run directory above the checkpoint) nor lie inside it.
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path source = fs::weakly_canonical(fs::absolute(dir), ec);
  const fs::path target = fs::weakly_canonical(fs::absolute(out), ec);
  const auto within = [](const fs::path& inner, const fs::path& outer) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end() && !o->empty(); ++o, ++i) {
      if (i == inner.end() || *i != *o) return false;
    }
    return true;
  };
  if (!ec && (within(source, target) || within(target, source))) {
    return absl::InvalidArgumentError(
        absl::StrCat(out,
                     ": --out must not be, hold or lie inside the --checkpoint "
                     "directory ",
                     dir, " (it is replaced as a whole)"));
  }
  return CheckOut(out, options.overwrite);
}

// The model the checkpoint holds, loaded (and so validated) into ours.
struct LoadedModel {
  std::string architecture;
  XLNetConfig config;
  NamedTensors whole;    // HF names of `architecture`
  NamedTensors encoder;  // HF XLNetModel names
  // HF config keys beyond XLNetConfig (problem_type of a classifier).
  nlohmann::json extra = nlohmann::json::object();
  // The source has a fine-tuning head (even when only the encoder is
  // exported).
  bool fine_tuned = false;
  // The architecture of the source's weights (its head's, when only the
  // encoder is exported).
  std::string source_architecture{};
};

absl::StatusOr<LoadedModel> LoadAny(const std::string& dir, bool encoder_only) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir, ReadModelDir(dir));
  const bool qa = HasHead(model_dir.tensors, QuestionAnsweringHeadPrefixes());
  const bool cls =
      HasHead(model_dir.tensors, SequenceClassificationHeadPrefixes());
  if (qa && cls) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir.weights_path,
        ": holds both a classification and a question-answering head"));
  }
  bool bare = true;
  for (const auto& [name, t] : model_dir.tensors) {
    if (absl::StartsWith(name, "transformer.")) bare = false;
  }
  LoadedModel out;
  if (qa) {
    XLNET_ASSIGN_OR_RETURN(auto model, LoadForQuestionAnswering(model_dir));
    out = {"XLNetForQuestionAnswering", model->config(), HfStateDict(*model),
           HfStateDict(*model->transformer)};
    out.fine_tuned = true;
  } else if (cls && IsMultipleChoiceDir(model_dir)) {
    XLNET_ASSIGN_OR_RETURN(auto model, LoadForMultipleChoice(model_dir));
    out = {"XLNetForMultipleChoice", model->config(), HfStateDict(*model),
           HfStateDict(*model->transformer)};
    out.config.id2label = XLNetConfig().id2label;
    out.fine_tuned = true;
  } else if (cls) {
    XLNET_ASSIGN_OR_RETURN(auto model,
                           LoadForSequenceClassification(model_dir));
    out = {"XLNetForSequenceClassification", model->config(),
           HfStateDict(*model), HfStateDict(*model->transformer)};
    out.extra["problem_type"] = ProblemType(model->num_labels());
    out.fine_tuned = true;
  } else {
    XLNetLMHeadModel model(nullptr);
    XLNET_RETURN_IF_ERROR(CatchExceptions(dir, [&]() -> absl::Status {
      model = XLNetLMHeadModel(model_dir.config);
      return absl::OkStatus();
    }));
    // Heads we do not export (e.g. HF's qa_outputs) are dropped only when
    // the encoder alone is asked for; otherwise they are an error.
    LoadOptions load_options;
    if (encoder_only) load_options.ignore_prefixes = FineTuningHeadPrefixes();
    XLNET_RETURN_IF_ERROR(LoadStateDict(*model, model_dir.tensors,
                                        model_dir.weights_path, load_options));
    out = {bare ? "XLNetModel" : "XLNetLMHeadModel", model->config(),
           HfStateDict(*model), HfStateDict(*model->transformer)};
  }
  out.source_architecture = out.architecture;
  if (bare || encoder_only) {
    out.architecture = "XLNetModel";
    out.whole = std::move(out.encoder);
    out.extra = nlohmann::json::object();
  }
  return out;
}

// What the run around a checkpoint says: its resolved config, the steps
// trained, its evaluations.
struct RunInfo {
  std::string config_path;  // "" when none was found
  std::string config_text;
  Config config;
  std::vector<std::string> config_looked;  // when none was found
  // Without a config.yaml: DIR/tokenizer_config.json (an HF directory or
  // one of our exports), "" if none; its casing and model_max_length.
  std::string tokenizer_config_path;
  bool do_lower_case = false;
  bool keep_accents = false;
  std::optional<int64_t> model_max_length;
  std::optional<int64_t> step;
  std::string step_source;
  // From the checkpoint's trainer_state.json: the run's non-finite steps
  // (skipped, not loss-scale calibration) up to this checkpoint, and the
  // first of them (0: none).
  int64_t bad_steps = 0;
  int64_t first_bad_step = 0;
  nlohmann::json last_eval;  // the last metrics.jsonl eval line, or null
  std::string metrics_path;
  nlohmann::json best;  // best.json, or null
  std::string best_path;
  // RUN/eval_results.json of a fine-tuning run (its final dev and test
  // scores, of the model in RUN/best when it kept one), or null.
  nlohmann::json eval_results;
  std::string eval_results_path;
  // Whether those scores are of the exported directory: it is the RUN/best
  // beside eval_results.json, and the run kept a best model ("best_dir").
  bool eval_results_scored_here = false;
};

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(const std::string text,
                         ReadFile(path, kMaxConfigFileBytes));
  return ParseJson(text, path);
}

absl::StatusOr<RunInfo> ReadRunInfo(const std::string& dir) {
  RunInfo run;
  if (auto path = FindUp(dir, kRunConfigFile, &run.config_looked)) {
    run.config_path = *path;
    XLNET_ASSIGN_OR_RETURN(run.config_text,
                           ReadFile(*path, kMaxConfigFileBytes));
    XLNET_ASSIGN_OR_RETURN(run.config, ParseConfig(run.config_text, *path));
  } else {
    XLNET_ASSIGN_OR_RETURN(std::optional<HfTokenizerConfig> tok,
                           ReadTokenizerConfig(dir));
    if (tok) {
      run.tokenizer_config_path = tok->path;
      run.do_lower_case = tok->do_lower_case;
      run.keep_accents = tok->keep_accents;
      run.model_max_length = tok->model_max_length;
    }
  }
  std::vector<std::string> unused;
  if (auto path =
          FindUp(dir, absl::StrCat(kBestDir, "/", kBestStateFile), &unused)) {
    run.best_path = *path;
    XLNET_ASSIGN_OR_RETURN(run.best, ReadJsonFile(*path));
  }
  const std::string state_path = absl::StrCat(dir, "/", kTrainerStateFile);
  const std::string best_here = absl::StrCat(dir, "/", kBestStateFile);
  if (PathExists(state_path)) {  // a checkpoint
    XLNET_ASSIGN_OR_RETURN(const nlohmann::json state,
                           ReadStateJson(state_path, "trainer_state", 1));
    if (state.contains("step") && state["step"].is_number_integer()) {
      run.step = state["step"].get<int64_t>();
      run.step_source = state_path;
    }
    if (state.contains("first_bad_step") &&
        state["first_bad_step"].is_number_integer() &&
        state.contains("bad_steps") && state["bad_steps"].is_number_integer()) {
      run.first_bad_step = state["first_bad_step"].get<int64_t>();
      run.bad_steps = state["bad_steps"].get<int64_t>();
    }
  } else if (PathExists(best_here)) {  // RUN/best
    run.best_path = best_here;
    XLNET_ASSIGN_OR_RETURN(run.best, ReadJsonFile(best_here));
    if (run.best.is_object() && run.best.contains("step") &&
        run.best["step"].is_number_integer()) {
      run.step = run.best["step"].get<int64_t>();
      run.step_source = best_here;
    }
  }
  if (auto path = FindUp(dir, kEvalResultsFile, &unused)) {
    run.eval_results_path = *path;
    XLNET_ASSIGN_OR_RETURN(run.eval_results, ReadJsonFile(*path));
    // finetune writes best_dir as RUN/best (RunPath), the directory beside
    // eval_results.json; the path itself may be relative to another cwd.
    const std::filesystem::path here = NormalPath(dir);
    run.eval_results_scored_here =
        run.eval_results.is_object() && run.eval_results.contains("best_dir") &&
        here.filename() == kBestDir &&
        here.parent_path() == std::filesystem::path(*path).parent_path();
  }
  if (auto path = FindUp(dir, kMetricsFile, &unused)) {
    run.metrics_path = *path;
    XLNET_RETURN_IF_ERROR(ReadMetricsLines(
        *path, kMetricsTailBytes, MetricsWindow::kTail,
        [&](const std::string&, const nlohmann::json& j) {
          if (!j.contains("step") || !j["step"].is_number_integer()) return;
          if (run.step && j["step"].get<int64_t>() > *run.step) return;
          for (const auto& [k, v] : j.items()) {
            if (absl::StartsWith(k, "eval_")) {
              run.last_eval = j;
              return;
            }
          }
        }));
  }
  return run;
}

// The tokenizer's casing: the run's config, else what the caller said.
// Where the casing comes from: config.yaml, else tokenizer_config.json.
const std::string& CasingSource(const RunInfo& run) {
  return run.config_path.empty() ? run.tokenizer_config_path : run.config_path;
}

// The casing: spiece.model's record (`recorded`, from `tokenizer`) when it
// has one, with config.yaml / tokenizer_config.json and the flags checked
// against it; else config.yaml, else tokenizer_config.json, else the flags.
absl::StatusOr<TokenizerCasing> ResolveCasing(
    const ExportOptions& options, const RunInfo& run,
    const std::optional<TokenizerCasing>& recorded,
    const std::string& tokenizer) {
  const bool from_yaml = !run.config_path.empty();
  if (CasingSource(run).empty() && !recorded) {
    if (!options.uncased || !options.keep_accents) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.checkpoint, ": no ", kRunConfigFile, " (looked at ",
          absl::StrJoin(run.config_looked, ", "), ") nor ",
          kTokenizerConfigFile, ", and ", tokenizer,
          " records no casing, so the tokenizer's casing is unknown; pass "
          "--uncased=true|false and --keep_accents=true|false as the model "
          "was trained"));
    }
    return TokenizerCasing{*options.uncased, *options.keep_accents};
  }
  const auto check =
      [&tokenizer](const std::string& what, const std::string& where,
                   bool value, const std::string& known_what,
                   const std::string& known_where, bool known) -> absl::Status {
    if (value == known) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        what, "=", value ? "true" : "false", where, " disagrees with ",
        known_what, ": ", known ? "true" : "false", " in ", known_where,
        known_where == tokenizer
            ? "; casing is chosen when the tokenizer is trained, everything "
              "after takes it from there: drop or correct the other value"
            : ""));
  };
  // What the run's files say, if anything.
  std::optional<TokenizerCasing> in_file;
  if (from_yaml) {
    in_file =
        TokenizerCasing{run.config.data.uncased, run.config.data.keep_accents};
  } else if (!run.tokenizer_config_path.empty()) {
    in_file = TokenizerCasing{run.do_lower_case, run.keep_accents};
  }
  const std::string file_uncased = from_yaml ? "data.uncased" : "do_lower_case";
  const std::string file_accents =
      from_yaml ? "data.keep_accents" : "keep_accents";
  // The reference: the record, else the run's file.
  const TokenizerCasing known = recorded ? *recorded : *in_file;
  const std::string known_where = recorded ? tokenizer : CasingSource(run);
  const std::string known_uncased = recorded ? "uncased" : file_uncased;
  const std::string known_accents = recorded ? "keep_accents" : file_accents;
  if (recorded && in_file) {
    const std::string where = absl::StrCat(" in ", CasingSource(run));
    XLNET_RETURN_IF_ERROR(check(file_uncased, where, in_file->uncased,
                                known_uncased, known_where, known.uncased));
    XLNET_RETURN_IF_ERROR(check(file_accents, where, in_file->keep_accents,
                                known_accents, known_where,
                                known.keep_accents));
  }
  if (options.uncased) {
    XLNET_RETURN_IF_ERROR(check("--uncased", "", *options.uncased,
                                known_uncased, known_where, known.uncased));
  }
  if (options.keep_accents) {
    XLNET_RETURN_IF_ERROR(check("--keep_accents", "", *options.keep_accents,
                                known_accents, known_where,
                                known.keep_accents));
  }
  return known;
}

// HF XLNetTokenizer's special tokens (the pieces of our tokenizer).
nlohmann::json SpecialTokensMap() {
  return {{"bos_token", "<s>"},
          {"eos_token", "</s>"},
          {"unk_token", "<unk>"},
          {"sep_token", "<sep>"},
          {"pad_token", "<pad>"},
          {"cls_token", "<cls>"},
          {"mask_token", "<mask>"},
          {"additional_special_tokens", {"<eop>", "<eod>"}}};
}

nlohmann::json TokenizerConfig(const TokenizerCasing& casing,
                               const RunInfo& run, bool fine_tuned) {
  nlohmann::json j = {{"tokenizer_class", "XLNetTokenizer"},
                      {"do_lower_case", casing.uncased},
                      {"keep_accents", casing.keep_accents},
                      {"remove_space", true},
                      {"padding_side", "left"}};
  if (!run.config_path.empty()) {
    j["model_max_length"] = fine_tuned ? run.config.finetune.max_seq_length
                                       : run.config.data.seq_len;
  } else if (run.model_max_length) {
    j["model_max_length"] = *run.model_max_length;
  }
  j.update(SpecialTokensMap());
  return j;
}

std::string FormatMetrics(const nlohmann::json& line) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : line.items()) {
    if (k == "step") continue;
    if (v.is_number_float()) {
      parts.push_back(absl::StrFormat("%s %.6g", k, v.get<double>()));
    } else {
      parts.push_back(absl::StrCat(k, " ", v.dump()));
    }
  }
  return absl::StrJoin(parts, ", ");
}

// The last component of `path` ("a/wiki/" -> "wiki").
std::string BaseName(const std::string& path) {
  return NormalPath(path).filename().string();
}

// The names a model card gives the files it cites: paths relative to the
// run directory around the exported one (the highest of DIR, DIR/..,
// DIR/../.. that holds a cited file, e.g. "checkpoints/step_40/config.yaml"),
// a file elsewhere by its basename; never an absolute path, so that a card
// says nothing of the machine or the user that wrote it.
class CardNames {
 public:
  CardNames(const std::string& dir, const std::vector<std::string>& cited)
      : dir_(NormalPath(dir)), root_(dir_) {
    // FindUp looks no higher than DIR/../.., nor does the run directory.
    for (const std::string& path : cited) {
      if (path.empty()) continue;
      const std::filesystem::path p = NormalPath(path);
      std::filesystem::path up = root_;
      for (int above = Above(root_);
           !Within(p, up) && above < 2 && up != up.parent_path(); ++above) {
        up = up.parent_path();
      }
      if (Within(p, up)) root_ = up;
    }
  }
  // `path` relative to the run directory, else its basename.
  std::string Name(const std::string& path) const {
    const std::filesystem::path p = NormalPath(path);
    return Within(p, root_) ? p.lexically_relative(root_).string()
                            : p.filename().string();
  }
  // The exported directory: relative to the run directory ("best",
  // "checkpoints/step_40"), else its own name.
  std::string Dir() const {
    return root_ == dir_ ? dir_.filename().string()
                         : dir_.lexically_relative(root_).string();
  }
  // The run directory's name, "" when no cited file lies above DIR.
  std::string Run() const {
    return root_ == dir_ ? std::string() : root_.filename().string();
  }

 private:
  // `inner` is `outer` or lies inside it (both normal).
  static bool Within(const std::filesystem::path& inner,
                     const std::filesystem::path& outer) {
    const std::string rel = inner.lexically_relative(outer).string();
    return !rel.empty() && rel != ".." && !absl::StartsWith(rel, "../");
  }
  // How many levels `up` lies above DIR.
  int Above(const std::filesystem::path& up) const {
    int n = 0;
    for (std::filesystem::path p = dir_; p != up && p != p.parent_path();
         p = p.parent_path()) {
      ++n;
    }
    return n;
  }
  std::filesystem::path dir_;
  std::filesystem::path root_;
};

// The xlnet-finetune --task that trained a fine-tuned head.
std::string FineTuningTask(const LoadedModel& model) {
  if (model.source_architecture == "XLNetForQuestionAnswering") return "squad";
  if (model.source_architecture == "XLNetForMultipleChoice") {
    return "multiple_choice";
  }
  return model.config.id2label.size() == 1 ? "regression" : "classification";
}

// The data keys fine-tuning reads, and the train keys it does not
// (FinetuneConfigScope in finetune/finetune.cc, which model_io cannot
// include): a fine-tuned model's card leaves the others out, since a
// fine-tuning run's config.yaml holds them at pretraining defaults it never
// used (data.seq_len 512, data.bi_data true).
constexpr const char* kFineTuningDataKeys[] = {"tokenizer", "uncased",
                                               "keep_accents"};
constexpr const char* kFineTuningUnreadTrainKeys[] = {
    "attention", "activation_checkpointing", "fused_elementwise"};

// The run's resolved config as the card shows it: paths as basenames
// (data.tokenizer, data.sources[].path); model.architectures the exported
// one (a fine-tuning run's model section is its --init's, an LM); for a
// fine-tuned model the model, train and finetune sections and data's text
// rules, for a pretrained one every section but finetune (which pretraining
// does not read).
absl::StatusOr<std::string> CardConfigYaml(Config config,
                                           const std::string& architecture,
                                           bool fine_tuned,
                                           const std::string& source) {
  config.model.architectures = {architecture};
  if (!config.data.tokenizer.empty()) {
    config.data.tokenizer = BaseName(config.data.tokenizer);
  }
  for (DataSource& s : config.data.sources) s.path = BaseName(s.path);
  std::string text;
  XLNET_RETURN_IF_ERROR(CatchExceptions(source, [&]() -> absl::Status {
    YAML::Node root = YAML::Load(ConfigToYaml(config));
    if (fine_tuned) {
      YAML::Node data(YAML::NodeType::Map);
      for (const char* key : kFineTuningDataKeys) {
        if (root["data"][key]) data[key] = root["data"][key];
      }
      root["data"] = data;
      for (const char* key : kFineTuningUnreadTrainKeys) {
        root["train"].remove(key);
      }
    } else {
      root.remove("finetune");
    }
    YAML::Emitter out;
    out << root;
    text = absl::StrCat(out.c_str(), "\n");
    return absl::OkStatus();
  }));
  return text;
}

// The card's YAML front matter, its title and where the export came from.
std::string CardHeader(const ExportSummary& summary, const LoadedModel& loaded,
                       const CardNames& names) {
  const std::string run_name = names.Run();
  std::string text = absl::StrCat(
      "---\nlibrary_name: transformers\nlicense: apache-2.0\ntags:\n- xlnet\n"
      "---\n\n# XLNet (",
      summary.architecture, ")\n\nExported by xlnet.cpp `xlnet-export` from `",
      names.Dir(), "`",
      run_name.empty() ? std::string()
                       : absl::StrCat(" of the run `", run_name, "`"),
      ".\n");
  if (loaded.fine_tuned && summary.architecture != loaded.source_architecture) {
    absl::StrAppend(&text, "It is the encoder of a fine-tuned ",
                    loaded.source_architecture,
                    " without its task head; the scores in this card are "
                    "those of the whole model.\n");
  }
  return text;
}

// The card's "Model" section: the architecture, its size and dimensions.
std::string CardModelSection(const ExportOptions& options,
                             const ExportSummary& summary,
                             const XLNetConfig& model) {
  return absl::StrCat(
      "\n## Model\n\n| | |\n| --- | --- |\n", "| architecture | ",
      summary.architecture, " |\n", "| parameters | ", summary.parameters, " (",
      EnumName(options.dtype), ") |\n", "| n_layer | ", model.n_layer,
      " |\n| d_model | ", model.d_model, " |\n", "| n_head | ", model.n_head,
      " |\n| d_head | ", model.d_head, " |\n", "| d_inner | ", model.d_inner,
      " |\n| ff_activation | ", model.ff_activation, " |\n| vocab_size | ",
      model.vocab_size, " |\n");
}

// The card's "Data" section: the tokenizer, the casing and the sequence
// length.
std::string CardDataSection(const ExportSummary& summary,
                            const LoadedModel& loaded,
                            const TokenizerCasing& casing, const RunInfo& run,
                            const nlohmann::json& tokenizer_config,
                            const CardNames& names) {
  std::string text = absl::StrCat(
      "\n## Data\n\n- tokenizer: SentencePiece `spiece.model` (from `",
      names.Name(summary.tokenizer),
      "`)\n- uncased (do_lower_case): ", casing.uncased ? "true" : "false",
      "\n- keep_accents: ", casing.keep_accents ? "true" : "false", "\n");
  if (run.config_path.empty()) {
    // summary.run_config: where the casing came from (the tokenizer's
    // record, tokenizer_config.json, or nothing: the command line).
    absl::StrAppend(
        &text, "- casing from ",
        summary.run_config.empty()
            ? std::string("the command line")
            : absl::StrCat("`", names.Name(summary.run_config), "`",
                           summary.run_config == summary.tokenizer
                               ? " (the casing it records)"
                               : ""),
        " (no run config found); ",
        loaded.fine_tuned ? "max_seq_length" : "seq_len", " unknown\n");
  } else if (loaded.fine_tuned) {
    absl::StrAppend(&text, "- model_max_length (finetune.max_seq_length): ",
                    tokenizer_config["model_max_length"].dump(), "\n");
  } else {
    absl::StrAppend(&text, "- seq_len: ", run.config.data.seq_len,
                    "\n- model_max_length: ",
                    tokenizer_config["model_max_length"].dump(), "\n");
  }
  return text;
}

// The card's "Fine-tuning" section (task, labels, settings); "" for a
// pretrained model.
std::string CardFineTuningSection(const LoadedModel& loaded,
                                  const RunInfo& run) {
  if (!loaded.fine_tuned) return "";
  const std::string task = FineTuningTask(loaded);
  std::string text = absl::StrCat("\n## Fine-tuning\n\n- task: ", task, " (",
                                  loaded.source_architecture, ")\n");
  if (task == "classification") {
    absl::StrAppend(&text, "- labels (id order): ",
                    absl::StrJoin(loaded.config.id2label, ", "), "\n");
  }
  if (!run.config_path.empty()) {
    const FinetuneConfig& ft = run.config.finetune;
    absl::StrAppend(&text, "- max_seq_length: ", ft.max_seq_length,
                    "\n- long_inputs: ", EnumName(ft.long_inputs),
                    "\n- steps: ", run.config.train.max_steps, ", batch size ",
                    run.config.train.batch_size, ", lr ",
                    absl::StrFormat("%g", run.config.train.lr),
                    "\n- every finetune.* key: the config below\n");
  }
  return text;
}

// The card's "Training" section: how many steps the model was trained.
std::string CardTrainingSection(const RunInfo& run, const CardNames& names) {
  if (run.step) {
    std::string text =
        absl::StrCat("\n## Training\n\n- steps trained: ", *run.step, " (`",
                     names.Name(run.step_source), "`)\n");
    if (run.first_bad_step > 0) {
      absl::StrAppend(&text, "- non-finite steps: ", run.bad_steps,
                      ", skipped, the first at step ", run.first_bad_step,
                      " (the weights are finite; the run's checkpoints from "
                      "before that step are its state before them)\n");
    }
    return text;
  }
  return absl::StrCat("\n## Training\n\n- steps trained: unknown (no ",
                      kTrainerStateFile, " or ", kBestStateFile, ")\n");
}

// The card's "Evaluation" section: the final, last and best scores the run
// recorded.
std::string CardEvaluationSection(const RunInfo& run, const CardNames& names) {
  std::string text = "\n## Evaluation\n\n";
  const bool final_scores =
      run.eval_results_scored_here && run.eval_results.is_object();
  if (final_scores) {
    for (const char* set : {"test", "dev"}) {
      if (run.eval_results.contains(set) && run.eval_results[set].is_object()) {
        absl::StrAppend(&text, "- ", set, " (`",
                        names.Name(run.eval_results_path),
                        "`): ", FormatMetrics(run.eval_results[set]), "\n");
      }
    }
  } else if (!run.eval_results_path.empty()) {
    absl::StrAppend(&text, "- the run's final dev and test scores (`",
                    names.Name(run.eval_results_path), "`) are of its `",
                    kBestDir,
                    "` model (or of the model at the end of training), "
                    "not of this directory\n");
  }
  if (run.last_eval.is_null() && run.best.is_null() && !final_scores) {
    absl::StrAppend(&text, "No evaluation results in the run.\n");
  }
  if (!run.last_eval.is_null()) {
    absl::StrAppend(&text, "- last evaluation (step ",
                    run.last_eval["step"].get<int64_t>(), ", `",
                    names.Name(run.metrics_path),
                    "`): ", FormatMetrics(run.last_eval), "\n");
  }
  if (run.best.is_object()) {
    absl::StrAppend(&text, "- best checkpoint (`", names.Name(run.best_path),
                    "`): ", FormatMetrics(run.best), "\n");
  }
  return text;
}

// The card's "Config" section: the run's resolved config (CardConfigYaml);
// "" without a run config.
absl::StatusOr<std::string> CardConfigSection(const ExportSummary& summary,
                                              const LoadedModel& loaded,
                                              const RunInfo& run,
                                              const CardNames& names) {
  if (run.config_path.empty()) return std::string();
  XLNET_ASSIGN_OR_RETURN(const std::string yaml,
                         CardConfigYaml(run.config, summary.architecture,
                                        loaded.fine_tuned, run.config_path));
  return absl::StrCat("\n## Config\n\nThe run's resolved config (`",
                      names.Name(run.config_path), "`), ",
                      loaded.fine_tuned
                          ? "the keys fine-tuning reads (the other data keys "
                            "shape pretraining batches)"
                          : "the keys pretraining reads",
                      "; paths by their names:\n\n```yaml\n", yaml, "```\n");
}

// The card's "License" section: the licence and whose it is.
std::string CardLicenseSection() {
  return "\n## License\n\nApache License 2.0 (`apache-2.0`), the licence of "
         "xlnet.cpp (its `LICENSE` file; copyright The xlnet.cpp authors), of "
         "the official XLNet code and of HuggingFace transformers. The "
         "weights were trained on the run's data; that data's own terms "
         "apply as well.\n";
}

// README.md of an export: a HuggingFace model card (YAML front matter, then
// Markdown). Every path in it is relative to the run (CardNames).
absl::StatusOr<std::string> ModelCard(const ExportOptions& options,
                                      const ExportSummary& summary,
                                      const LoadedModel& loaded,
                                      const TokenizerCasing& casing,
                                      const RunInfo& run,
                                      const nlohmann::json& tokenizer_config) {
  const CardNames names(
      options.checkpoint,
      {summary.tokenizer, run.config_path, run.tokenizer_config_path,
       run.step_source, run.metrics_path, run.best_path,
       run.eval_results_path});
  XLNET_ASSIGN_OR_RETURN(const std::string config,
                         CardConfigSection(summary, loaded, run, names));
  return absl::StrCat(
      CardHeader(summary, loaded, names),
      CardModelSection(options, summary, loaded.config),
      CardDataSection(summary, loaded, casing, run, tokenizer_config, names),
      CardFineTuningSection(loaded, run), CardTrainingSection(run, names),
      CardEvaluationSection(run, names), config, CardLicenseSection());
}

}  // namespace

absl::StatusOr<std::string> FindTokenizer(const std::string& dir) {
  std::vector<std::string> looked;
  if (auto found = FindUp(dir, kTokenizerFile, &looked)) return *found;
  return absl::NotFoundError(absl::StrCat(
      dir, ": no ", kTokenizerFile, " (looked at ", absl::StrJoin(looked, ", "),
      "); copy the tokenizer beside the checkpoint"));
}

absl::StatusOr<ExportSummary> ExportModel(const ExportOptions& options) {
  XLNET_ASSIGN_OR_RETURN(const torch::ScalarType dtype,
                         ExportScalarType(options.dtype));
  XLNET_RETURN_IF_ERROR(CheckPaths(options));
  ExportSummary summary;
  XLNET_ASSIGN_OR_RETURN(summary.tokenizer, FindTokenizer(options.checkpoint));
  XLNET_ASSIGN_OR_RETURN(const std::string tokenizer_bytes,
                         ReadFile(summary.tokenizer, kMaxTokenizerBytes));
  if (!options.tokenizer_pieces) {
    return absl::InternalError("ExportOptions::tokenizer_pieces is not set");
  }
  XLNET_ASSIGN_OR_RETURN(
      const int64_t pieces,
      options.tokenizer_pieces(tokenizer_bytes, summary.tokenizer));
  XLNET_ASSIGN_OR_RETURN(const RunInfo run, ReadRunInfo(options.checkpoint));
  std::optional<TokenizerCasing> recorded;
  if (options.tokenizer_casing) {
    XLNET_ASSIGN_OR_RETURN(
        recorded, options.tokenizer_casing(tokenizer_bytes, summary.tokenizer));
  }
  XLNET_ASSIGN_OR_RETURN(
      const TokenizerCasing casing,
      ResolveCasing(options, run, recorded, summary.tokenizer));
  summary.run_config = recorded ? summary.tokenizer : CasingSource(run);
  std::string fast_tokenizer;
  if (options.tokenizer_json) {
    absl::StatusOr<std::string> json =
        options.tokenizer_json(tokenizer_bytes, summary.tokenizer, casing);
    if (json.ok()) {
      fast_tokenizer = *std::move(json);
    } else {
      summary.no_fast_tokenizer = std::string(json.status().message());
    }
  } else {
    summary.no_fast_tokenizer = "not asked for";
  }
  summary.bad_steps = run.bad_steps;
  summary.first_bad_step = run.first_bad_step;
  XLNET_ASSIGN_OR_RETURN(LoadedModel model,
                         LoadAny(options.checkpoint, options.encoder_only));
  if (pieces > model.config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        summary.tokenizer, " has ", pieces, " pieces but the model's ",
        "vocab_size is ", model.config.vocab_size, " (", options.checkpoint,
        "/", kConfigFile, ")"));
  }
  summary.architecture = model.architecture;
  NamedTensors tensors = std::move(model.whole);
  for (auto& [name, t] : tensors) {
    if (t.is_floating_point()) t = t.to(dtype).contiguous();
    summary.parameters += t.numel();
  }
  summary.tensors = static_cast<int64_t>(tensors.size());
  model.config.architectures = {model.architecture};
  // bi_data is a layout of pretraining batches; in HF it would split every
  // batch into forward and backward halves.
  model.config.bi_data = false;
  const char* dtype_name = dtype == torch::kBFloat16 ? "bfloat16" : "float32";
  // transformers < 4.56 reads torch_dtype, later versions dtype.
  model.extra["torch_dtype"] = dtype_name;
  model.extra["dtype"] = dtype_name;
  XLNET_ASSIGN_OR_RETURN(const std::string config_json,
                         ModelConfigJsonWith(model.config, model.extra));
  const nlohmann::json tokenizer_config =
      TokenizerConfig(casing, run, model.fine_tuned);
  XLNET_ASSIGN_OR_RETURN(
      const std::string card,
      ModelCard(options, summary, model, casing, run, tokenizer_config));
  // The source relative to the export, never an absolute path: a published
  // directory does not reveal where it was made, and the name still holds
  // when the run and the export move together.
  std::error_code ec;
  const std::filesystem::path source =
      std::filesystem::absolute(options.checkpoint, ec).lexically_normal();
  const std::filesystem::path out =
      std::filesystem::absolute(options.out, ec).lexically_normal();
  std::filesystem::path relative = source.lexically_relative(out);
  if (ec || relative.empty()) relative = source.filename();
  const nlohmann::json marker = {{"tool", "xlnet-export"},
                                 {"version", ProjectVersion()},
                                 {"commit", GitCommit()},
                                 {"source", relative.generic_string()}};
  XLNET_RETURN_IF_ERROR(WriteModelDir(
      options.out, config_json, tensors,
      [&](const AtomicDirWriter& writer) -> absl::Status {
        XLNET_RETURN_IF_ERROR(
            WriteFileAtomic(writer.Path(kTokenizerFile), tokenizer_bytes));
        XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(kTokenizerConfigFile),
                                              tokenizer_config.dump(2) + "\n"));
        XLNET_RETURN_IF_ERROR(
            WriteFileAtomic(writer.Path(kSpecialTokensFile),
                            SpecialTokensMap().dump(2) + "\n"));
        if (!fast_tokenizer.empty()) {
          XLNET_RETURN_IF_ERROR(
              WriteFileAtomic(writer.Path(kFastTokenizerFile), fast_tokenizer));
        }
        XLNET_RETURN_IF_ERROR(
            WriteFileAtomic(writer.Path(kModelCardFile), card));
        XLNET_RETURN_IF_ERROR(WriteStateJson(writer.Path(kExportMarkerFile),
                                             kExportMarkerFormat,
                                             kExportMarkerVersion, marker));
        // Loading took a while: check --out again right before it is
        // replaced (a run may have started there since).
        return CheckOut(options.out, options.overwrite);
      }));
  return summary;
}

}  // namespace xlnet
