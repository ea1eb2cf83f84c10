#include "model_io/checkpoint_manager.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "model_io/checksums.h"
#include "model_io/rank_files.h"
#include "model_io/run_layout.h"

namespace xlnet {

CheckpointManager::CheckpointManager(std::string run_dir, int64_t keep)
    : checkpoints_dir_(RunPath(run_dir, kCheckpointsDir)),
      keep_(keep),
      free_bytes_(FreeBytes) {}

namespace {

// Removes the checkpoints of `manager` beyond the newest `keep` (0: keep
// all), each atomically, except the newest one before `keep_newest_before`.
absl::Status Prune(const CheckpointManager& manager, int64_t keep,
                   std::optional<int64_t> keep_newest_before) {
  if (keep <= 0) return absl::OkStatus();
  const std::vector<int64_t> steps = manager.ListSteps();
  const std::optional<int64_t> last_good =
      keep_newest_before ? manager.NewestBefore(*keep_newest_before)
                         : std::nullopt;
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    if (steps[i] == last_good) continue;
    XLNET_RETURN_IF_ERROR(RemoveAllAtomically(manager.StepDir(steps[i])));
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointManager::StepDir(int64_t step) const {
  return absl::StrCat(checkpoints_dir_, "/step_", step);
}

absl::Status CheckpointManager::Save(int64_t step,
                                     const XLNetConfig& model_config,
                                     const CheckpointContents& contents) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(model_config));
  return Save(step, ModelConfigToJson(model_config), contents);
}

absl::Status CheckpointManager::Save(int64_t step,
                                     const std::string& config_json,
                                     const CheckpointContents& contents,
                                     SaveReport* report) {
  XLNET_RETURN_IF_ERROR(MakeDirs(checkpoints_dir_));
  // A save killed mid-way (on a full disk, say) left its temporary behind,
  // and one killed after its commit left the checkpoints it would have
  // pruned: both go first, or this save would run short of the same space
  // at every restart.
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(checkpoints_dir_).status());
  XLNET_RETURN_IF_ERROR(Prune(*this, keep_, keep_newest_before_));
  XLNET_RETURN_IF_ERROR(CheckFreeSpace(step));
  // The ranks' files, from their manifests: every rank's complete, or
  // nothing is written.
  ChecksumEntries staged;
  if (!contents.staging_dir.empty()) {
    XLNET_ASSIGN_OR_RETURN(
        staged,
        MergeRankManifests(contents.staging_dir, step, contents.world_size));
  }
  int64_t checksummed = 0;
  XLNET_RETURN_IF_ERROR(WriteModelDir(
      StepDir(step), config_json, contents.model,
      [&](const AtomicDirWriter& writer) -> absl::Status {
        for (const auto& [name, tensors] : contents.tensor_files) {
          XLNET_RETURN_IF_ERROR(WriteSafetensors(writer.Path(name), tensors));
        }
        for (const auto& [name, text] : contents.text_files) {
          XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(name), text));
        }
        return absl::OkStatus();
      },
      [&](const AtomicDirWriter& writer) -> absl::StatusOr<ChecksumEntries> {
        for (const auto& [name, entry] : staged) {
          const std::string from = contents.staging_dir + "/" + name;
          const std::string to = writer.Path(name);
          if (PathExists(to)) {
            return absl::InvalidArgumentError(absl::StrCat(
                from, ": a staged file has the name of a shared file"));
          }
          if (::rename(from.c_str(), to.c_str()) != 0) {
            return absl::InternalError(
                absl::StrCat(from, ": cannot move into ", writer.temp_dir()));
          }
        }
        return staged;
      },
      &checksummed));
  if (report != nullptr) {
    report->checksummed_bytes = checksummed;
    report->merged_manifests =
        contents.staging_dir.empty() ? 0 : contents.world_size;
  }
  return Prune(*this, keep_, keep_newest_before_);
}

std::optional<int64_t> CheckpointManager::NewestBefore(int64_t step) const {
  std::optional<int64_t> newest;
  for (int64_t s : ListSteps()) {
    if (s < step) newest = s;
  }
  return newest;
}

absl::StatusOr<std::string> CheckpointManager::SetAsideNewerThan(
    int64_t step) const {
  std::vector<int64_t> newer;
  for (int64_t s : ListSteps()) {
    if (s > step) newer.push_back(s);
  }
  if (newer.empty()) return std::string();
  const std::string parent = checkpoints_dir_ + "/" + kAbandonedDir;
  XLNET_RETURN_IF_ERROR(MakeDirs(parent));
  // A fresh directory per resume: the same step may be resumed from again.
  const std::string base = absl::StrCat(parent, "/after_step_", step);
  std::string target = base;
  constexpr int kMaxSameStep = 1000;
  for (int i = 2; PathExists(target); ++i) {
    if (i > kMaxSameStep) {
      return absl::ResourceExhaustedError(absl::StrCat(
          base, ": ", kMaxSameStep,
          " earlier timelines from this step are kept; delete the ones no "
          "longer needed"));
    }
    target = absl::StrCat(base, ".", i);
  }
  XLNET_RETURN_IF_ERROR(MakeDirs(target));
  for (int64_t s : newer) {
    const std::string from = StepDir(s);
    const std::string to = absl::StrCat(target, "/step_", s);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return absl::InternalError(absl::StrCat(from, ": cannot move to ", to,
                                              ": ", std::strerror(errno)));
    }
  }
  XLNET_RETURN_IF_ERROR(SyncDir(target));
  XLNET_RETURN_IF_ERROR(SyncDir(checkpoints_dir_));
  return target;
}

absl::Status CheckpointManager::CheckFreeSpace(int64_t step) const {
  const std::vector<int64_t> steps = ListSteps();
  if (steps.empty()) return absl::OkStatus();
  // The next checkpoint holds the same tensors as the newest one; the old
  // ones are removed only after it is complete, so all of it must fit.
  const std::string newest = StepDir(steps.back());
  XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                         ListDirectoryFiles(newest));
  uint64_t needed = 0;
  for (const std::string& name : files) {
    struct stat st;
    if (::stat((newest + "/" + name).c_str(), &st) == 0) needed += st.st_size;
  }
  XLNET_ASSIGN_OR_RETURN(const uint64_t free, free_bytes_(checkpoints_dir_));
  if (free >= needed) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      checkpoints_dir_, ": not enough free space for checkpoint step_", step,
      ": it needs about ", needed, " bytes (the size of step_", steps.back(),
      ") but the file system has ", free, " bytes free; nothing was written"));
}

std::vector<int64_t> CheckpointManager::ListSteps() const {
  std::vector<int64_t> steps;
  DIR* d = ::opendir(checkpoints_dir_.c_str());
  if (d == nullptr) return steps;
  while (struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    int64_t step;
    if (name.rfind("step_", 0) == 0 &&
        absl::SimpleAtoi(name.substr(5), &step) &&
        IsDirectory(checkpoints_dir_ + "/" + name)) {
      steps.push_back(step);
    }
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::StatusOr<std::optional<std::string>> CheckpointManager::LatestValid()
    const {
  return LatestValid(
      [](const std::string& dir) { return VerifyChecksums(dir); },
      /*report=*/true);
}

absl::StatusOr<std::optional<std::string>> CheckpointManager::LatestValid(
    const VerifyFunction& verify, bool report) const {
  const std::vector<int64_t> steps = ListSteps();
  std::vector<std::string> problems;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string dir = StepDir(*it);
    const absl::Status status = verify(dir);
    if (status.ok()) {
      for (const std::string& problem : problems) {
        if (report) XLOG(WARNING) << "skipping checkpoint " << problem;
      }
      return std::optional<std::string>(dir);
    }
    problems.push_back(absl::StrCat("step_", *it, ": ", status.message()));
  }
  if (problems.empty()) return std::optional<std::string>();
  return absl::DataLossError(absl::StrCat(
      "no checkpoint in ", checkpoints_dir_, " verifies (",
      absl::StrJoin(problems, "; "), "); nothing was loaded or removed"));
}

}  // namespace xlnet
