// Parsing JSON that a user or a later run hands us, strictly: a key given
// twice in one object is an error (JSON readers disagree on which one wins,
// so neither may silently win).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace xlnet {

// Parses `text`; errors are InvalidArgument naming `source` (a path): "SOURCE:
// not valid JSON (byte N)" or "SOURCE: duplicate key 'K'".
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text,
                                         const std::string& source);

}  // namespace xlnet
