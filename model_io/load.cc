#include "model_io/load.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"

namespace xlnet {
namespace {

constexpr char kTransformerPrefix[] = "transformer.";

std::string ShapeString(c10::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool HasAnyPrefix(const std::string& name,
                  const std::vector<std::string>& prefixes) {
  for (const auto& prefix : prefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

// Copies the backbone (and the head when `has_head`) into `model`: stored
// `transformer.*` or bare XLNetModel names, lm_loss.* skipped, other heads
// skipped with a warning. Without the head, its parameters keep their values.
absl::Status LoadBackboneAndHead(torch::nn::Module& model,
                                 const ModelDir& weights,
                                 const std::vector<std::string>& head_prefixes,
                                 bool has_head) {
  bool has_prefix = false;
  for (const auto& [name, t] : weights.tensors) {
    if (absl::StartsWith(name, kTransformerPrefix)) has_prefix = true;
  }
  std::set<std::string> other_heads;
  const ParameterNameMap name_map = [&](const std::string& stored) {
    if (HasAnyPrefix(stored, head_prefixes)) return stored;
    if (absl::StartsWith(stored, "lm_loss.")) return std::string();
    if (HasAnyPrefix(stored, FineTuningHeadPrefixes())) {
      other_heads.insert(stored);
      return std::string();
    }
    return has_prefix ? stored : kTransformerPrefix + stored;
  };
  std::vector<std::string> may_be_missing;
  if (!has_head) {
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (HasAnyPrefix(item.key(), head_prefixes)) {
        may_be_missing.push_back(item.key());
      }
    }
  }
  XLNET_RETURN_IF_ERROR(LoadParameters(
      model, weights.tensors, weights.weights_path, name_map, may_be_missing));
  if (!other_heads.empty()) {
    XLOG(WARNING) << weights.weights_path << ": ignoring another task's head: "
                  << absl::StrJoin(other_heads, ", ");
  }
  return absl::OkStatus();
}

// config.json's problem_type (a HF key XLNetConfig does not hold) must agree
// with the number of labels: 1 = regression, more = single-label.
absl::Status CheckProblemType(const ModelDir& dir, int64_t num_labels) {
  const nlohmann::json& root = dir.config_json;
  if (!root.is_object() || !root.contains("problem_type") ||
      !root["problem_type"].is_string()) {
    return absl::OkStatus();
  }
  const std::string path = absl::StrCat(dir.path, "/", kConfigFile);
  const std::string type = root["problem_type"].get<std::string>();
  if (type == "multi_label_classification") {
    return absl::UnimplementedError(absl::StrCat(
        path, ": problem_type \"", type,
        "\" is not supported (single-label classification or regression)"));
  }
  if (type == "regression" && num_labels != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": problem_type \"regression\" needs 1 label, the "
                     "model has ",
                     num_labels));
  }
  if (type == "single_label_classification" && num_labels < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": problem_type \"single_label_classification\" needs at least "
        "2 labels (1 label is regression)"));
  }
  return absl::OkStatus();
}

// The labels of a sequence classifier loaded from `dir`.
absl::StatusOr<std::vector<std::string>> ResolveLabels(
    const ModelDir& dir, bool has_head, const HeadLoadOptions& options) {
  const XLNetConfig& config = dir.config;
  std::vector<std::string> labels =
      options.labels.empty() ? config.id2label : options.labels;
  if (!has_head) return labels;
  int64_t stored = -1;
  for (const auto& [name, t] : dir.tensors) {
    if (name == "logits_proj.weight" && t.dim() == 2) stored = t.size(0);
  }
  if (stored < 0) return labels;  // LoadParameters reports it missing.
  if (static_cast<int64_t>(config.id2label.size()) != stored) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.path, ": config.json id2label has ", config.id2label.size(),
        " labels but logits_proj.weight in ", dir.weights_path, " has ", stored,
        " rows"));
  }
  if (static_cast<int64_t>(labels.size()) != stored) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.path, ": the fine-tuned classification head has ", stored,
        " labels (", absl::StrJoin(config.id2label, ", "),
        ") but the task has ", labels.size(), " (", absl::StrJoin(labels, ", "),
        "); start from the pretrained model instead"));
  }
  if (labels != config.id2label) {
    XLOG(INFO) << dir.path << ": label names " << absl::StrJoin(labels, ", ")
               << " replace " << absl::StrJoin(config.id2label, ", ");
  }
  return labels;
}

// `dir` without the tensors named with `prefixes` (another task's head with
// the same names), logging a warning that names them.
ModelDir WithoutHead(const ModelDir& dir,
                     const std::vector<std::string>& prefixes) {
  ModelDir out = dir;
  out.tensors.clear();
  std::vector<std::string> dropped;
  for (const auto& [name, t] : dir.tensors) {
    if (HasAnyPrefix(name, prefixes)) {
      dropped.push_back(name);
    } else {
      out.tensors.emplace_back(name, t);
    }
  }
  if (!dropped.empty()) {
    XLOG(WARNING) << dir.weights_path << ": ignoring another task's head: "
                  << absl::StrJoin(dropped, ", ");
  }
  return out;
}

template <typename Model>
absl::StatusOr<Model> BuildModel(const std::string& dir,
                                 const XLNetConfig& config) {
  Model model(nullptr);
  XLNET_RETURN_IF_ERROR(CatchExceptions(dir, [&]() -> absl::Status {
    model = Model(config);
    return absl::OkStatus();
  }));
  return model;
}

}  // namespace

const std::vector<std::string>& FineTuningHeadPrefixes() {
  static const auto* prefixes = new std::vector<std::string>{
      "sequence_summary.", "logits_proj.", "qa_outputs.",
      "start_logits.",     "end_logits.",  "answer_class."};
  return *prefixes;
}

absl::Status LoadParameters(torch::nn::Module& module,
                            const NamedTensors& tensors,
                            const std::string& source,
                            const ParameterNameMap& name_map,
                            const std::vector<std::string>& may_be_missing,
                            std::vector<std::string> extra_problems) {
  auto params = module.named_parameters(/*recurse=*/true);
  std::set<std::string> pending;
  for (const auto& item : params) pending.insert(item.key());
  std::vector<std::string>& problems = extra_problems;
  std::vector<std::string> unexpected;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // dst, src
  for (const auto& [name, tensor] : tensors) {
    const std::string param = name_map ? name_map(name) : name;
    if (param.empty()) continue;
    auto* dst = params.find(param);
    if (dst == nullptr) {
      unexpected.push_back(name);
      continue;
    }
    pending.erase(param);
    if (!tensor.is_floating_point()) {
      problems.push_back(absl::StrCat(name, ": dtype ",
                                      c10::toString(tensor.scalar_type()),
                                      " is not floating point"));
    } else if (!tensor.sizes().equals(dst->sizes())) {
      problems.push_back(absl::StrCat(name, ": shape ",
                                      ShapeString(tensor.sizes()), " expected ",
                                      ShapeString(dst->sizes())));
    } else {
      copies.emplace_back(*dst, tensor);
    }
  }
  for (const auto& name : may_be_missing) pending.erase(name);
  if (!pending.empty()) {
    problems.push_back(absl::StrCat(
        "missing: ",
        absl::StrJoin(std::vector<std::string>(pending.begin(), pending.end()),
                      ", ")));
  }
  if (!unexpected.empty()) {
    problems.push_back(
        absl::StrCat("unexpected: ", absl::StrJoin(unexpected, ", ")));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": weights do not match the model (", problems.size(),
        " problem", problems.size() == 1 ? "" : "s",
        "): ", absl::StrJoin(problems, "; ")));
  }
  torch::NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
  return absl::OkStatus();
}

absl::Status LoadStateDict(XLNetLMHeadModelImpl& model,
                           const NamedTensors& tensors,
                           const std::string& source,
                           const LoadOptions& options) {
  // XLNetModel checkpoints have no `transformer.` prefix.
  bool has_prefix = false;
  for (const auto& [name, t] : tensors) {
    if (absl::StartsWith(name, kTransformerPrefix)) has_prefix = true;
  }
  std::vector<std::string> problems;
  const auto ignored = [&](const std::string& stored) {
    for (const auto& prefix : options.ignore_prefixes) {
      if (absl::StartsWith(stored, prefix)) return true;
    }
    return false;
  };
  const ParameterNameMap name_map = [&](const std::string& stored) {
    if (ignored(stored) || stored == "lm_loss.weight") return std::string();
    const bool bare = !has_prefix && !absl::StartsWith(stored, "lm_loss.");
    return bare ? kTransformerPrefix + stored : stored;
  };
  for (const auto& [stored, tensor] : tensors) {
    if (stored != "lm_loss.weight" || ignored(stored)) continue;
    // The tied word embedding: only its shape is checked.
    const auto& emb = model.transformer->word_embedding->weight;
    if (!tensor.sizes().equals(emb.sizes())) {
      problems.push_back(absl::StrCat(
          "lm_loss.weight: shape ", ShapeString(tensor.sizes()), " expected ",
          ShapeString(emb.sizes()), " (tied to the word embedding)"));
    }
  }
  // A bare XLNetModel checkpoint has no LM head bias: it keeps its zeros.
  std::vector<std::string> may_be_missing;
  if (!has_prefix) {
    may_be_missing.push_back("lm_loss.bias");
    XLOG(INFO) << source << ": XLNetModel weights; lm_loss.bias starts at zero";
  }
  return LoadParameters(model, tensors, source, name_map, may_be_missing,
                        std::move(problems));
}

absl::StatusOr<XLNetLMHeadModel> LoadPretrained(const std::string& dir,
                                                const LoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir, ReadModelDir(dir));
  XLNET_ASSIGN_OR_RETURN(auto model,
                         BuildModel<XLNetLMHeadModel>(dir, model_dir.config));
  XLNET_RETURN_IF_ERROR(LoadStateDict(*model, model_dir.tensors,
                                      model_dir.weights_path, options));
  return model;
}

// ---------------------------------------------------------------------------
// Fine-tuning models.

const std::vector<std::string>& SequenceClassificationHeadPrefixes() {
  static const auto* prefixes =
      new std::vector<std::string>{"sequence_summary.", "logits_proj."};
  return *prefixes;
}

const std::vector<std::string>& QuestionAnsweringHeadPrefixes() {
  static const auto* prefixes = new std::vector<std::string>{
      "start_logits.", "end_logits.", "answer_class."};
  return *prefixes;
}

bool HasHead(const NamedTensors& tensors,
             const std::vector<std::string>& prefixes) {
  for (const auto& [name, t] : tensors) {
    if (HasAnyPrefix(name, prefixes)) return true;
  }
  return false;
}

absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const ModelDir& dir, const HeadLoadOptions& options) {
  const auto& prefixes = SequenceClassificationHeadPrefixes();
  if (IsMultipleChoiceDir(dir) && HasHead(dir.tensors, prefixes)) {
    // A multiple-choice head has the same names: the backbone only.
    return LoadForSequenceClassification(WithoutHead(dir, prefixes), options);
  }
  const bool has_head = HasHead(dir.tensors, prefixes);
  XLNetConfig config = dir.config;
  XLNET_ASSIGN_OR_RETURN(config.id2label,
                         ResolveLabels(dir, has_head, options));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), dir.path));
  XLNET_RETURN_IF_ERROR(
      CheckProblemType(dir, static_cast<int64_t>(config.id2label.size())));
  XLNET_ASSIGN_OR_RETURN(
      auto model, BuildModel<XLNetForSequenceClassification>(dir.path, config));
  XLNET_RETURN_IF_ERROR(LoadBackboneAndHead(*model, dir, prefixes, has_head));
  if (!has_head) {
    model->ResetHeadParameters(options.seed);
    XLOG(INFO) << dir.path << ": new classification head, "
               << config.id2label.size() << " label(s), seed " << options.seed;
  }
  return model;
}

absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const ModelDir& dir, const HeadLoadOptions& options) {
  const auto& prefixes = QuestionAnsweringHeadPrefixes();
  const bool has_head = HasHead(dir.tensors, prefixes);
  XLNET_ASSIGN_OR_RETURN(
      auto model, BuildModel<XLNetForQuestionAnswering>(dir.path, dir.config));
  XLNET_RETURN_IF_ERROR(LoadBackboneAndHead(*model, dir, prefixes, has_head));
  if (!has_head) {
    model->ResetHeadParameters(options.seed);
    XLOG(INFO) << dir.path << ": new question-answering head, seed "
               << options.seed;
  }
  return model;
}

bool IsMultipleChoiceDir(const ModelDir& dir) {
  return !dir.config.architectures.empty() &&
         dir.config.architectures[0] == "XLNetForMultipleChoice";
}

absl::StatusOr<XLNetForMultipleChoice> LoadForMultipleChoice(
    const ModelDir& dir, const HeadLoadOptions& options) {
  const auto& prefixes = SequenceClassificationHeadPrefixes();
  const bool has_head =
      IsMultipleChoiceDir(dir) && HasHead(dir.tensors, prefixes);
  // A classification head has the same names (other shapes): not ours.
  const ModelDir weights = has_head ? dir : WithoutHead(dir, prefixes);
  XLNET_ASSIGN_OR_RETURN(
      auto model, BuildModel<XLNetForMultipleChoice>(dir.path, dir.config));
  XLNET_RETURN_IF_ERROR(
      LoadBackboneAndHead(*model, weights, prefixes, has_head));
  if (!has_head) {
    model->ResetHeadParameters(options.seed);
    XLOG(INFO) << dir.path << ": new multiple-choice head, seed "
               << options.seed;
  }
  return model;
}

absl::StatusOr<XLNetForMultipleChoice> LoadForMultipleChoice(
    const std::string& dir, const HeadLoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir,
                         ReadModelDir(dir, options.checksums));
  return LoadForMultipleChoice(model_dir, options);
}

absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const std::string& dir, const HeadLoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir,
                         ReadModelDir(dir, options.checksums));
  return LoadForSequenceClassification(model_dir, options);
}

absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const std::string& dir, const HeadLoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir,
                         ReadModelDir(dir, options.checksums));
  return LoadForQuestionAnswering(model_dir, options);
}

}  // namespace xlnet
