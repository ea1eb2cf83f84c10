// Checkpoints: RUN/checkpoints/step_<N>/ is a HuggingFace model directory
// plus our state files, written atomically, with a checksum manifest
// (checksums.json, checksums.h: CRC-32 and size of every other file)
// written last. With several ranks, each rank's own files come from the
// staging directory with the checksums their rank computed (rank_files.h);
// rank 0 checksums only the shared files it writes. A
// checkpoint whose manifest is missing or does not match its files is never
// loaded; LatestValid() falls back to the newest one that verifies.
// RUN/checkpoints/abandoned/ holds the checkpoints of timelines a resume
// from an older checkpoint left behind (SetAsideNewerThan); nothing lists,
// loads or prunes them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "model_io/checksums.h"
#include "model_io/model_dir.h"

namespace xlnet {

// RUN/checkpoints/abandoned/: the timelines SetAsideNewerThan moved away.
inline constexpr char kAbandonedDir[] = "abandoned";

// Everything a checkpoint holds besides the model config.
struct CheckpointContents {
  // The model's parameters under HuggingFace names (model.safetensors).
  NamedTensors model;
  // Other tensor files: file name (e.g. "optimizer.safetensors") -> tensors.
  std::map<std::string, NamedTensors> tensor_files;
  // Other files verbatim: file name (e.g. "config.yaml") -> contents.
  std::map<std::string, std::string> text_files;
  // The staging directory of the ranks' own files (rank_files.h): the
  // files its `world_size` rank manifests list are moved into the
  // checkpoint under the checksums the manifests give; "" for none.
  std::string staging_dir;
  int world_size = 0;
};

// What one Save did, for its log line.
struct SaveReport {
  // Bytes read to checksum the files Save wrote itself (not the staged
  // per-rank files, whose ranks checksummed them).
  int64_t checksummed_bytes = 0;
  // Rank manifests merged.
  int merged_manifests = 0;
};

class CheckpointManager {
 public:
  // `run_dir`/checkpoints holds the checkpoints; keep the newest `keep`
  // (0 = all).
  CheckpointManager(std::string run_dir, int64_t keep);

  const std::string& checkpoints_dir() const { return checkpoints_dir_; }
  std::string StepDir(int64_t step) const;

  // Writes step_<step>/ atomically (replacing one of the same step), then
  // removes checkpoints beyond `keep` (each atomically: never visible half
  // removed), except the one set_keep_newest_before protects.
  //
  // Before writing anything it removes stale temporaries (the hidden
  // `.*.tmp-*` leftovers of a save that was killed), so that a crash on a
  // nearly full disk does not leave the next save short of the same space;
  // this assumes no other save into this directory is in progress (the run's
  // lock keeps other processes out, and saves of one run are sequential).
  // Then, when a checkpoint exists, it checks that the file system has at
  // least as many free bytes as the newest one holds: ResourceExhausted
  // naming the directory, the bytes needed and the bytes free otherwise,
  // with nothing written. With a staging directory, the rank manifests are
  // merged first (MergeRankManifests): a missing or incomplete rank is an
  // error naming the step and the ranks or files, with nothing written (the
  // previous checkpoint stays the newest).
  absl::Status Save(int64_t step, const XLNetConfig& model_config,
                    const CheckpointContents& contents);
  // The same with config.json's text given (HF keys XLNetConfig lacks);
  // `report`, when set, gets what it did.
  absl::Status Save(int64_t step, const std::string& config_json,
                    const CheckpointContents& contents,
                    SaveReport* report = nullptr);

  // How Save learns the free bytes of the file system holding a directory;
  // FreeBytes (statvfs) unless replaced (tests stand in a full disk).
  using FreeBytesFunction =
      std::function<absl::StatusOr<uint64_t>(const std::string& dir)>;
  void set_free_bytes_function(FreeBytesFunction free_bytes) {
    free_bytes_ = std::move(free_bytes);
  }

  // Pruning also keeps the newest checkpoint whose step is below `step`,
  // beside the newest `keep`: a run's last good state from before its first
  // non-finite step, so that however many checkpoints a diverged run (and
  // its restarts) saves, that one is never pruned. nullopt (the default):
  // only the newest `keep`.
  void set_keep_newest_before(std::optional<int64_t> step) {
    keep_newest_before_ = step;
  }
  // The newest checkpoint whose step is below `step` (present, verified or
  // not), nullopt when there is none.
  std::optional<int64_t> NewestBefore(int64_t step) const;

  // Steps of the checkpoints present (verified or not), ascending.
  std::vector<int64_t> ListSteps() const;

  // Moves every checkpoint newer than `step` into
  // checkpoints/abandoned/after_step_<step>/ (after_step_<step>.2/, ... when
  // that exists), unchanged, and returns that directory ("" when none was
  // newer). A run resumed from an older checkpoint (by hand, or past newer
  // ones that do not verify) starts a new timeline: left in place, the old
  // timeline's newest would be what `--resume latest` picks next, and
  // pruning, which keeps the highest steps, would remove the new
  // timeline's checkpoints before the old one's. Each move is one rename;
  // a process killed between two leaves the rest in place for the next
  // call. Nothing is deleted.
  absl::StatusOr<std::string> SetAsideNewerThan(int64_t step) const;

  // The newest checkpoint directory that verifies; nullopt when there is no
  // checkpoint at all. Newer ones that do not verify are skipped with one
  // warning each naming the problem. When checkpoints exist but none
  // verifies: DataLoss naming each one and its problem (nothing is removed).
  absl::StatusOr<std::optional<std::string>> LatestValid() const;
  // The same with `verify` deciding whether a checkpoint directory verifies
  // (ranks verifying their shares together, train/trainer.cc), each newer
  // one skipped with a warning only when `report`.
  using VerifyFunction = std::function<absl::Status(const std::string& dir)>;
  absl::StatusOr<std::optional<std::string>> LatestValid(
      const VerifyFunction& verify, bool report) const;

 private:
  // Fails when the file system has fewer free bytes than the newest
  // checkpoint holds (nothing to compare with when there is none).
  absl::Status CheckFreeSpace(int64_t step) const;

  std::string checkpoints_dir_;
  int64_t keep_;
  // Set by set_keep_newest_before.
  std::optional<int64_t> keep_newest_before_;
  FreeBytesFunction free_bytes_;
};

}  // namespace xlnet
