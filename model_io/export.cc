#include "model_io/export.h"

#include <dirent.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"

namespace xlnet {
namespace {

// spiece.model files are a few MB even for large vocabularies.
constexpr uint64_t kMaxTokenizerBytes = uint64_t{256} << 20;

bool IsEmptyDirectory(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return false;
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

absl::StatusOr<torch::ScalarType> ParseExportDtype(const std::string& dtype) {
  if (dtype == "fp32") return torch::kFloat;
  if (dtype == "bf16") return torch::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype: expected fp32 or bf16, got \"", dtype, "\""));
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
  if (PathExists(out)) {
    if (!IsDirectory(out)) {
      return absl::FailedPreconditionError(
          absl::StrCat(out, ": exists and is not a directory"));
    }
    if (!IsEmptyDirectory(out) && !options.overwrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          out, ": exists and is not empty; pass --overwrite to replace it"));
    }
  }
  return absl::OkStatus();
}

// The model the checkpoint holds, loaded (and so validated) into ours.
struct LoadedModel {
  std::string architecture;
  XLNetConfig config;
  NamedTensors whole;    // HF names of `architecture`
  NamedTensors encoder;  // HF XLNetModel names
  // HF config keys beyond XLNetConfig (problem_type of a classifier).
  nlohmann::json extra = nlohmann::json::object();
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
  } else if (cls) {
    XLNET_ASSIGN_OR_RETURN(auto model,
                           LoadForSequenceClassification(model_dir));
    out = {"XLNetForSequenceClassification", model->config(),
           HfStateDict(*model), HfStateDict(*model->transformer)};
    out.extra["problem_type"] = ProblemType(model->num_labels());
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
  if (bare || encoder_only) {
    out.architecture = "XLNetModel";
    out.whole = std::move(out.encoder);
    out.extra = nlohmann::json::object();
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> FindTokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path here = fs::absolute(fs::path(dir), ec).lexically_normal();
  if (!here.has_filename()) here = here.parent_path();  // trailing '/'
  std::vector<std::string> looked;
  for (int up = 0; up < 3 && !here.empty(); ++up) {
    const std::string candidate = (here / kTokenizerFile).string();
    if (PathExists(candidate)) return candidate;
    looked.push_back(candidate);
    if (here == here.parent_path()) break;
    here = here.parent_path();
  }
  return absl::NotFoundError(absl::StrCat(
      dir, ": no ", kTokenizerFile, " (looked at ", absl::StrJoin(looked, ", "),
      "); copy the tokenizer beside the checkpoint"));
}

absl::StatusOr<ExportSummary> ExportModel(const ExportOptions& options) {
  XLNET_ASSIGN_OR_RETURN(const torch::ScalarType dtype,
                         ParseExportDtype(options.dtype));
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
  XLNET_RETURN_IF_ERROR(WriteModelDir(
      options.out, config_json, tensors, [&](const AtomicDirWriter& writer) {
        return WriteFileAtomic(writer.Path(kTokenizerFile), tokenizer_bytes);
      }));
  return summary;
}

}  // namespace xlnet
