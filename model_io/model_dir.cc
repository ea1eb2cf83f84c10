#include "model_io/model_dir.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model_io/torch_pickle.h"

namespace xlnet {

absl::StatusOr<torch::Tensor> ModelDir::Tensor(const std::string& name) const {
  for (const auto& [stored, tensor] : tensors) {
    if (stored == name) return tensor;
  }
  return absl::NotFoundError(absl::StrCat(weights_path, ": no tensor ", name));
}

absl::StatusOr<XLNetConfig> ReadModelDirConfig(const std::string& dir) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  const std::string path = absl::StrCat(dir, "/", kConfigFile);
  if (!PathExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (no ", kConfigFile, ")"));
  }
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadModelConfigJson(path));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), path));
  if (config.d_model != config.n_head * config.d_head) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": d_model ", config.d_model,
                     " != n_head * d_head = ", config.n_head * config.d_head));
  }
  return config;
}

absl::StatusOr<ModelDir> ReadModelDir(const std::string& dir) {
  ModelDir out;
  out.path = dir;
  XLNET_ASSIGN_OR_RETURN(out.config, ReadModelDirConfig(dir));
  const std::string config_path = absl::StrCat(dir, "/", kConfigFile);
  XLNET_ASSIGN_OR_RETURN(const std::string text, ReadFile(config_path));
  out.config_json =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  out.weights_path = absl::StrCat(dir, "/", kWeightsFile);
  if (PathExists(out.weights_path)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::Open(out.weights_path));
    XLNET_ASSIGN_OR_RETURN(out.tensors, file.LoadAll());
  } else if (PathExists(absl::StrCat(dir, "/", kTorchWeightsFile))) {
    out.weights_path = absl::StrCat(dir, "/", kTorchWeightsFile);
    XLNET_ASSIGN_OR_RETURN(out.tensors,
                           ReadTorchSaveStateDict(out.weights_path));
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kWeightsFile, " or ",
                                            kTorchWeightsFile, " beside ",
                                            kConfigFile));
  }
  return out;
}

absl::Status CopyWeightsFromDir(const std::string& dir,
                                const NamedTensors& tensors) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir, ReadModelDir(dir));
  std::map<std::string, const torch::Tensor*> stored;
  for (const auto& [name, tensor] : model_dir.tensors) stored[name] = &tensor;
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_dir.weights_path, ": no tensor ", name));
    }
    const torch::Tensor& saved = *it->second;
    if (saved.sizes() != tensor.sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", name, " has shape ", c10::str(saved.sizes()),
                       " but the model has ", c10::str(tensor.sizes())));
    }
    tensor.copy_(saved);  // keeps the tensor's device and dtype
  }
  return absl::OkStatus();
}

absl::Status WriteModelDir(
    const std::string& dir, const std::string& config_json,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra) {
  XLNET_ASSIGN_OR_RETURN(AtomicDirWriter writer, AtomicDirWriter::Begin(dir));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(kConfigFile), config_json));
  XLNET_RETURN_IF_ERROR(
      WriteSafetensors(writer.Path(kWeightsFile), tensors, {{"format", "pt"}}));
  if (write_extra) XLNET_RETURN_IF_ERROR(write_extra(writer));
  return writer.Commit();
}

absl::Status WriteModelDir(
    const std::string& dir, const XLNetConfig& config,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(config));
  return WriteModelDir(dir, ModelConfigToJson(config), tensors, write_extra);
}

std::string StateJsonText(const std::string& kind, int version,
                          const nlohmann::json& body) {
  nlohmann::json out = body.is_object() ? body : nlohmann::json::object();
  out["format"] = kind;
  out["format_version"] = version;
  return out.dump(2) + "\n";
}

absl::Status WriteStateJson(const std::string& path, const std::string& kind,
                            int version, const nlohmann::json& body) {
  return WriteFileAtomic(path, StateJsonText(kind, version, body));
}

absl::StatusOr<nlohmann::json> ReadStateJson(const std::string& path,
                                             const std::string& kind,
                                             int max_version) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": not valid JSON (byte ", e.byte, ")"));
  }
  if (!root.is_object() || !root.contains("format") ||
      !root["format"].is_string() || root["format"] != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a '", kind, "' file"));
  }
  if (!root.contains("format_version") ||
      !root["format_version"].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": missing format_version"));
  }
  const int version = root["format_version"].get<int>();
  if (version < 1 || version > max_version) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": format_version ", version, " of '", kind,
                     "' is not readable by this build (reads 1..", max_version,
                     "); use a newer xlnet.cpp"));
  }
  return root;
}

}  // namespace xlnet
