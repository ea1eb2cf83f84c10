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

absl::Status LoadStateDict(
    XLNetLMHeadModelImpl& model,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::string& source, const LoadOptions& options) {
  // XLNetModel checkpoints have no `transformer.` prefix.
  bool has_prefix = false;
  for (const auto& [name, t] : tensors) {
    if (absl::StartsWith(name, kPrefix)) has_prefix = true;
  }
  auto params = model.named_parameters(/*recurse=*/true);
  std::set<std::string> pending;
  for (const auto& item : params) pending.insert(item.key());

  std::vector<std::string> problems;
  std::vector<std::string> unexpected;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // dst, src
  torch::Tensor tied_weight;
  for (const auto& [stored, tensor] : tensors) {
    bool ignored = false;
    for (const auto& prefix : options.ignore_prefixes) {
      if (absl::StartsWith(stored, prefix)) ignored = true;
    }
    if (ignored) continue;
    std::string name = stored;
    if (!has_prefix && !absl::StartsWith(name, "lm_loss.")) {
      name = kPrefix + name;
    }
    if (name == "lm_loss.weight") {
      tied_weight = tensor;
      continue;
    }
    auto* dst = params.find(name);
    if (dst == nullptr) {
      unexpected.push_back(stored);
      continue;
    }
    pending.erase(name);
    if (!tensor.is_floating_point()) {
      problems.push_back(absl::StrCat(stored, ": dtype ",
                                      c10::toString(tensor.scalar_type()),
                                      " is not floating point"));
    } else if (!tensor.sizes().equals(dst->sizes())) {
      problems.push_back(absl::StrCat(stored, ": shape ",
                                      ShapeString(tensor.sizes()), " expected ",
                                      ShapeString(dst->sizes())));
    } else {
      copies.emplace_back(*dst, tensor);
    }
  }
  if (tied_weight.defined()) {
    auto emb = model.transformer->word_embedding->weight;
    if (!tied_weight.sizes().equals(emb.sizes())) {
      problems.push_back(absl::StrCat("lm_loss.weight: shape ",
                                      ShapeString(tied_weight.sizes()),
                                      " expected ", ShapeString(emb.sizes()),
                                      " (tied to the word embedding)"));
    }
  }
  // A bare XLNetModel checkpoint has no LM head bias: it keeps its zeros.
  if (!has_prefix && pending.count("lm_loss.bias")) {
    pending.erase("lm_loss.bias");
    XLOG(INFO) << source << ": XLNetModel weights; lm_loss.bias starts at zero";
  }
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

absl::StatusOr<XLNetLMHeadModel> LoadPretrained(const std::string& dir,
                                                const LoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config,
                         ReadModelConfigJson(dir + "/config.json"));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), dir));
  if (config.d_model != config.n_head * config.d_head) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, "/config.json: d_model ", config.d_model, " != n_head * d_head = ",
        config.n_head * config.d_head));
  }
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::string source = dir + "/model.safetensors";
  if (PathExists(source)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(source));
    XLNET_ASSIGN_OR_RETURN(tensors, file.LoadAll());
  } else if (PathExists(dir + "/pytorch_model.bin")) {
    source = dir + "/pytorch_model.bin";
    XLNET_ASSIGN_OR_RETURN(tensors, ReadTorchSaveStateDict(source));
  } else {
    return absl::NotFoundError(absl::StrCat(
        dir, ": no model.safetensors or pytorch_model.bin"));
  }
  XLNetLMHeadModel model(nullptr);
  XLNET_RETURN_IF_ERROR(CatchExceptions(dir, [&]() -> absl::Status {
    model = XLNetLMHeadModel(config);
    return absl::OkStatus();
  }));
  XLNET_RETURN_IF_ERROR(LoadStateDict(*model, tensors, source, options));
  return model;
}

std::vector<std::pair<std::string, torch::Tensor>> HfStateDict(
    XLNetLMHeadModelImpl& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(),
                     item.value().detach().to(torch::kCPU).contiguous());
  }
  return out;
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
