#include "model_io/state_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"

namespace xlnet {

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
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigFileBytes));
  absl::StatusOr<nlohmann::json> parsed = ParseJson(text, path);
  if (!parsed.ok()) {
    // Our own file, damaged.
    return absl::DataLossError(parsed.status().message());
  }
  nlohmann::json root = std::move(*parsed);
  if (!root.is_object() || !root.contains("format") ||
      !root["format"].is_string() || root["format"] != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a '", kind, "' file"));
  }
  if (!root.contains("format_version")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": missing format_version"));
  }
  // get<int>() would read 2^32 + 1 as version 1.
  XLNET_ASSIGN_OR_RETURN(const int64_t version,
                         JsonInteger(root["format_version"],
                                     absl::StrCat(path, ": format_version"),
                                     INT64_MIN, INT64_MAX));
  if (version < 1 || version > max_version) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": format_version ", version, " of '", kind,
                     "' is not readable by this build (reads 1..", max_version,
                     "); use a newer xlnet.cpp"));
  }
  return root;
}

}  // namespace xlnet
