#include "common/model_dir.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet {

absl::Status WriteModelDir(
    const std::string& dir, const XLNetConfig& config,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(config));
  return WriteModelDir(dir, ModelConfigToJson(config), tensors, write_extra);
}

absl::Status WriteModelDir(
    const std::string& dir, const std::string& config_json,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra) {
  XLNET_ASSIGN_OR_RETURN(AtomicDirWriter writer, AtomicDirWriter::Begin(dir));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(kConfigFile), config_json));
  XLNET_RETURN_IF_ERROR(
      WriteSafetensors(writer.Path(kWeightsFile), tensors, {{"format", "pt"}}));
  if (write_extra) XLNET_RETURN_IF_ERROR(write_extra(writer));
  return writer.Commit();
}

absl::StatusOr<ModelDir> ReadModelDir(const std::string& dir) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  const std::string config_path = absl::StrCat(dir, "/", kConfigFile);
  if (!PathExists(config_path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (no ", kConfigFile, ")"));
  }
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadModelConfigJson(config_path));
  const std::string weights_path = absl::StrCat(dir, "/", kWeightsFile);
  if (!PathExists(weights_path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no ", kWeightsFile, " beside config.json"));
  }
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile weights,
                         SafetensorsFile::Open(weights_path));
  return ModelDir{dir, std::move(config), std::move(weights)};
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
