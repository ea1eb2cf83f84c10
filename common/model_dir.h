// Model directories in HuggingFace's layout, plus our own state files.
//
//   DIR/config.json          XLNetConfig with HF keys (transformers loads it)
//   DIR/model.safetensors    parameters under HF names
//   DIR/<other files>        ours: optimizer, trainer state, ... (optional)
//
// Writing is atomic: the whole directory appears at once or not at all.
// State files of our own are JSON with a "format" name and "format_version"
// so a reader can refuse files it does not understand with a clear message.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/safetensors.h"

namespace xlnet {

inline constexpr char kConfigFile[] = "config.json";
inline constexpr char kWeightsFile[] = "model.safetensors";

// Writes `dir` atomically: config.json, model.safetensors (`tensors` in the
// given order, metadata {"format": "pt"} as transformers writes), then
// whatever `write_extra` puts into the temporary directory.
absl::Status WriteModelDir(
    const std::string& dir, const XLNetConfig& config,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra =
        {});

// The same with config.json's text given (a config with HF keys XLNetConfig
// does not hold, e.g. torch_dtype, problem_type).
absl::Status WriteModelDir(
    const std::string& dir, const std::string& config_json,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra =
        {});

struct ModelDir {
  std::string path;
  XLNetConfig config;
  SafetensorsFile weights;
};

// Reads config.json and maps model.safetensors (validated, not yet copied).
absl::StatusOr<ModelDir> ReadModelDir(const std::string& dir);

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
