// Our own JSON state files (trainer_state.json, checksums.json, best.json,
// the export marker, ...): one object with a "format" name and a
// "format_version", so a reader refuses a file it does not understand with a
// clear message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet {

// The text of a JSON state file of ours:
// {"format": kind, "format_version": N, ...body}.
std::string StateJsonText(const std::string& kind, int version,
                          const nlohmann::json& body);

// Writes StateJsonText(kind, version, body) to `path` atomically.
absl::Status WriteStateJson(const std::string& path, const std::string& kind,
                            int version, const nlohmann::json& body);

// Reads a state file, checking the format name and that its version is one
// this build reads (1..max_version). Returns the whole object.
absl::StatusOr<nlohmann::json> ReadStateJson(const std::string& path,
                                             const std::string& kind,
                                             int max_version);

}  // namespace xlnet
