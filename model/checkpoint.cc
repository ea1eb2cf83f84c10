#include "model/checkpoint.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "model/torch_pickle.h"

namespace xlnet {
namespace {

constexpr char kPrefix[] = "transformer.";

std::string ShapeString(c10::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

const std::vector<std::string>& FineTuningHeadPrefixes() {
  static const auto* prefixes = new std::vector<std::string>{
      "sequence_summary.", "logits_proj.", "qa_outputs.", "start_logits.",
      "end_logits.", "answer_class."};
  return *prefixes;
}

absl::Status LoadParameters(
    torch::nn::Module& module,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::string& source, const ParameterNameMap& name_map,
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
        " problem", problems.size() == 1 ? "" : "s", "): ",
        absl::StrJoin(problems, "; ")));
  }
  torch::NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
  return absl::OkStatus();
}

absl::Status LoadStateDict(
    XLNetLMHeadModelImpl& model,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::string& source, const LoadOptions& options) {
  // XLNetModel checkpoints have no `transformer.` prefix.
  bool has_prefix = false;
  for (const auto& [name, t] : tensors) {
    if (absl::StartsWith(name, kPrefix)) has_prefix = true;
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
    return bare ? kPrefix + stored : stored;
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

absl::StatusOr<XLNetConfig> ReadPretrainedConfig(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config,
                         ReadModelConfigJson(dir + "/config.json"));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), dir));
  if (config.d_model != config.n_head * config.d_head) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, "/config.json: d_model ", config.d_model, " != n_head * d_head = ",
        config.n_head * config.d_head));
  }
  return config;
}

absl::StatusOr<StoredWeights> ReadStoredWeights(const std::string& dir) {
  StoredWeights out;
  out.path = dir + "/model.safetensors";
  if (PathExists(out.path)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::Open(out.path));
    XLNET_ASSIGN_OR_RETURN(out.tensors, file.LoadAll());
  } else if (PathExists(dir + "/pytorch_model.bin")) {
    out.path = dir + "/pytorch_model.bin";
    XLNET_ASSIGN_OR_RETURN(out.tensors, ReadTorchSaveStateDict(out.path));
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no model.safetensors or pytorch_model.bin"));
  }
  return out;
}

absl::StatusOr<XLNetLMHeadModel> LoadPretrained(const std::string& dir,
                                                const LoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadPretrainedConfig(dir));
  XLNET_ASSIGN_OR_RETURN(StoredWeights weights, ReadStoredWeights(dir));
  XLNetLMHeadModel model(nullptr);
  XLNET_RETURN_IF_ERROR(CatchExceptions(dir, [&]() -> absl::Status {
    model = XLNetLMHeadModel(config);
    return absl::OkStatus();
  }));
  XLNET_RETURN_IF_ERROR(
      LoadStateDict(*model, weights.tensors, weights.path, options));
  return model;
}

std::vector<std::pair<std::string, torch::Tensor>> HfStateDict(
    torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(),
                     item.value().detach().to(torch::kCPU).contiguous());
  }
  return out;
}

absl::StatusOr<std::string> ModelConfigJsonWith(const XLNetConfig& config,
                                                const nlohmann::json& extra) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(config));
  TORCH_CHECK(extra.is_object(),
              "ModelConfigJsonWith: extra must be a JSON object");
  nlohmann::json out = nlohmann::json::parse(ModelConfigToJson(config));
  for (const auto& [key, value] : extra.items()) out[key] = value;
  return out.dump(2) + "\n";
}

absl::Status SavePretrained(XLNetLMHeadModelImpl& model,
                            const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(auto writer, AtomicDirWriter::Begin(dir));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path("config.json"),
                                        ModelConfigToJson(model.config())));
  XLNET_RETURN_IF_ERROR(WriteSafetensors(writer.Path("model.safetensors"),
                                         HfStateDict(model),
                                         {{"format", "pt"}}));
  return writer.Commit();
}

}  // namespace xlnet
