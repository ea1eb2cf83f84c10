// Parsing JSON that a user or a later run hands us, strictly: a key given
// twice in one object is an error (JSON readers disagree on which one wins,
// so neither may silently win).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xlnet {

// Parses `text`; errors are InvalidArgument naming `source` (a path): "SOURCE:
// not valid JSON (byte N)" or "SOURCE: duplicate key 'K'".
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text,
                                         const std::string& source);

// `value` as an integer in [min, max]. nlohmann's get<int>() of a float or of
// an integer too big for the target type is a silent cast (1e300 is
// undefined behaviour, 2^32 + 1 becomes 1), so every integer read from a
// file goes through here. Errors are InvalidArgument: "WHAT: V is not an
// integer in [MIN, MAX]", `what` naming the file and field.
absl::StatusOr<int64_t> JsonInteger(const nlohmann::json& value,
                                    absl::string_view what, int64_t min,
                                    int64_t max);

}  // namespace xlnet
