// What `xlnet-inspect` prints, as library functions (so tests can call them).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xlnet {

// One line per tensor (name, dtype, shape, bytes) and totals.
absl::Status InspectSafetensors(const std::string& path, std::ostream& out);

// A HuggingFace-layout model directory: config summary, parameter count,
// and the other files present; first its checksums.json, when it has one,
// is verified (VerifyModelDir: DataLoss naming a damaged file).
absl::Status InspectModelDir(const std::string& dir, std::ostream& out);

// The fully resolved, validated YAML config.
absl::Status InspectConfig(const std::string& path,
                           const std::vector<std::string>& overrides,
                           std::ostream& out);

// Dispatches on what `path` is: *.safetensors, a directory, *.yaml/*.yml.
absl::Status InspectPath(const std::string& path,
                         const std::vector<std::string>& overrides,
                         std::ostream& out);

}  // namespace xlnet
