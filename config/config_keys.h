// Whether a config sets a key at all, as distinct from the default applying:
// a step that takes a setting from elsewhere (the text rules, recorded in
// the tokenizer) checks only the keys a user actually wrote.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xlnet {

// Where "section.key" is set: "FILE:LINE" in the YAML file at `config_path`
// (empty: no file), or "--set section.key=value" for the last of
// `overrides` that sets it; nullopt when neither does. Errors as LoadConfig's
// (a config that LoadConfig accepted gives none).
absl::StatusOr<std::optional<std::string>> ConfigKeyLocation(
    const std::string& config_path, const std::vector<std::string>& overrides,
    const std::string& key);

}  // namespace xlnet
