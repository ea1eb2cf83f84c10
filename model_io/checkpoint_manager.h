// Checkpoints: RUN/checkpoints/step_<N>/ is a HuggingFace model directory
// plus our state files, written atomically, with a checksum manifest
// (checksums.json: CRC-32 and size of every other file) written last. A
// checkpoint whose manifest is missing or does not match its files is never
// loaded; LatestValid() falls back to the newest one that verifies.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "model_io/model_dir.h"

namespace xlnet {

inline constexpr char kChecksumsFile[] = "checksums.json";

// Everything a checkpoint holds besides the model config.
struct CheckpointContents {
  // The model's parameters under HuggingFace names (model.safetensors).
  NamedTensors model;
  // Other tensor files: file name (e.g. "optimizer.safetensors") -> tensors.
  std::map<std::string, NamedTensors> tensor_files;
  // Other files verbatim: file name (e.g. "config.yaml") -> contents.
  std::map<std::string, std::string> text_files;
  // A directory whose files (other ranks' state) are moved into the
  // checkpoint; "" for none.
  std::string moved_files_dir;
};

// CRC-32 (zlib polynomial) of a file, streamed.
absl::StatusOr<uint32_t> FileCrc32(const std::string& path);

// Writes checksums.json for every regular file in `dir` except itself.
absl::Status WriteChecksums(const std::string& dir);
// Verifies checksums.json against the files in `dir` (missing, extra-size or
// changed files are errors naming the file).
absl::Status VerifyChecksums(const std::string& dir);

class CheckpointManager {
 public:
  // `run_dir`/checkpoints holds the checkpoints; keep the newest `keep`
  // (0 = all).
  CheckpointManager(std::string run_dir, int64_t keep);

  const std::string& checkpoints_dir() const { return checkpoints_dir_; }
  std::string StepDir(int64_t step) const;

  // Writes step_<step>/ atomically (replacing one of the same step), then
  // removes checkpoints beyond `keep` (each atomically: never visible half
  // removed) and stale temporaries.
  absl::Status Save(int64_t step, const XLNetConfig& model_config,
                    const CheckpointContents& contents);
  // The same with config.json's text given (HF keys XLNetConfig lacks).
  absl::Status Save(int64_t step, const std::string& config_json,
                    const CheckpointContents& contents);

  // Steps of the checkpoints present (verified or not), ascending.
  std::vector<int64_t> ListSteps() const;

  // The newest checkpoint directory that verifies; nullopt when there is no
  // checkpoint at all. Newer ones that do not verify are skipped with one
  // warning each naming the problem. When checkpoints exist but none
  // verifies: DataLoss naming each one and its problem (nothing is removed).
  absl::StatusOr<std::optional<std::string>> LatestValid() const;

 private:
  std::string checkpoints_dir_;
  int64_t keep_;
};

}  // namespace xlnet
