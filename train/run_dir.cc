#include "train/run_dir.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/model_dir.h"
#include "model_io/run_layout.h"

namespace xlnet {
namespace {

constexpr int kRunInfoVersion = 1;

bool IsRunEntry(const std::string& name) {
  for (const std::string& entry : RunEntries()) {
    if (name == entry) return true;
  }
  return absl::StartsWith(name, kPredictionsPrefix);
}

// The run entries present in `dir` (run.json and the lock do not count:
// they say who may write, not that a run has written), sorted.
absl::StatusOr<std::vector<std::string>> PresentEntries(
    const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return absl::InternalError(absl::StrCat(dir, ": cannot list"));
  }
  std::vector<std::string> present;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (IsRunEntry(name)) present.push_back(name);
  }
  ::closedir(d);
  std::sort(present.begin(), present.end());
  return present;
}

// "config.yaml, metrics.jsonl, checkpoints/ (step_2, step_4)".
std::string Describe(const std::string& dir,
                     const std::vector<std::string>& present) {
  std::vector<std::string> parts;
  for (const std::string& name : present) {
    if (name != kCheckpointsDir) {
      parts.push_back(name);
      continue;
    }
    std::vector<std::string> steps;
    for (int64_t step : CheckpointManager(dir, 0).ListSteps()) {
      steps.push_back(absl::StrCat("step_", step));
    }
    if (steps.size() > 4) {
      steps.erase(steps.begin() + 1, steps.end() - 2);
      steps.insert(steps.begin() + 1, "...");
    }
    parts.push_back(steps.empty()
                        ? absl::StrCat(kCheckpointsDir, "/")
                        : absl::StrCat(kCheckpointsDir, "/ (",
                                       absl::StrJoin(steps, ", "), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

// run.json's kind, "" when there is none.
absl::StatusOr<std::string> StoredKind(const std::string& dir) {
  const std::string path = RunPath(dir, kRunInfoFile);
  if (!PathExists(path)) return std::string();
  XLNET_ASSIGN_OR_RETURN(nlohmann::json info,
                         ReadStateJson(path, "run", kRunInfoVersion));
  if (!info.contains("kind") || !info["kind"].is_string()) {
    return absl::DataLossError(absl::StrCat(path, ": no kind"));
  }
  return info["kind"].get<std::string>();
}

// The kind of a run written before run.json existed, from what it wrote:
// fine-tuning leaves best/, eval_results.json or predictions, and its
// checkpoints hold a task head; pretraining checkpoints hold
// XLNetLMHeadModel. "" when nothing tells (no checkpoint, no results).
std::string InferredKind(const std::string& dir,
                         const std::vector<std::string>& present) {
  for (const std::string& name : present) {
    if (name == kBestDir || name == kEvalResultsFile ||
        absl::StartsWith(name, kPredictionsPrefix)) {
      return "fine-tuning";
    }
  }
  CheckpointManager manager(dir, 0);
  const std::vector<int64_t> steps = manager.ListSteps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto config = ReadModelConfigJson(
        absl::StrCat(manager.StepDir(*it), "/", kConfigFile));
    if (!config.ok() || config->architectures.empty()) continue;
    return config->architectures[0] == "XLNetLMHeadModel" ? "pretraining"
                                                          : "fine-tuning";
  }
  return "";
}

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? resolved : "";
}

// --resume DIR: DIR must be a checkpoint of this run with nothing newer
// beside it, or, when RUN holds no run yet, any checkpoint.
absl::Status CheckResumeDir(const std::string& dir, const std::string& resume,
                            bool holds_run) {
  const std::string checkpoint = RealPath(resume);
  if (checkpoint.empty() || !IsDirectory(checkpoint)) {
    return absl::NotFoundError(
        absl::StrCat("--resume ", resume, ": no such checkpoint directory"));
  }
  CheckpointManager manager(dir, 0);
  const std::string ours = RealPath(manager.checkpoints_dir());
  const auto slash = checkpoint.find_last_of('/');
  const std::string parent = checkpoint.substr(0, slash);
  const std::string name = checkpoint.substr(slash + 1);
  if (ours.empty() || parent != ours) {
    if (!holds_run) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "--resume ", resume, " continues a checkpoint of another run, but ",
        dir, " already holds a run; give an --out without one"));
  }
  int64_t step = -1;
  if (!absl::StartsWith(name, "step_") ||
      !absl::SimpleAtoi(name.substr(5), &step)) {
    return absl::OkStatus();
  }
  std::vector<std::string> newer;
  for (int64_t s : manager.ListSteps()) {
    if (s > step) newer.push_back(absl::StrCat("step_", s));
  }
  if (newer.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--resume ", resume, ": ", manager.checkpoints_dir(),
      " has newer checkpoints (", absl::StrJoin(newer, ", "),
      ") that continuing from an older one would mix with a second history; "
      "move them out of the run first, or continue the newest with --resume "
      "latest"));
}

// Removes RUN/.launch-* (rank 0, with the lock held).
absl::Status RemoveLaunchFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return absl::InternalError(absl::StrCat(dir, ": cannot list"));
  }
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    if (absl::StartsWith(e->d_name, kLaunchFilePrefix)) {
      stale.push_back(e->d_name);
    }
  }
  ::closedir(d);
  for (const std::string& name : stale) {
    XLNET_RETURN_IF_ERROR(RemoveAll(RunPath(dir, name)));
  }
  return absl::OkStatus();
}

// Every rank of a launch writes into the directory rank 0 took: rank 0
// leaves RUN/.launch-ID there under a fresh ID, and every rank looks it up
// by name. A name no earlier launch used, so that no directory entry a
// shared file system cached before can answer for it.
absl::Status CheckSameRunDirectory(const std::string& dir,
                                   ProcessGroup* group) {
  std::string id;
  absl::Status written;
  if (group->rank() == 0) {
    std::random_device random;
    const uint64_t value = (static_cast<uint64_t>(random()) << 32) ^ random();
    id = absl::StrCat(absl::Hex(value, absl::kZeroPad16));
    written = WriteFileAtomic(
        RunPath(dir, absl::StrCat(kLaunchFilePrefix, id)),
        absl::StrCat("host ", HostName(), " pid ", ::getpid(), "\n"));
    if (!written.ok()) id.clear();
  }
  XLNET_RETURN_IF_ERROR(CatchExceptions("sharing the launch id", [&]() {
    group->BroadcastText(&id, 0);
    return absl::OkStatus();
  }));
  if (id.empty()) {
    if (group->rank() == 0) return written;
    return absl::FailedPreconditionError(absl::StrCat(
        "rank 0 could not write into the run directory (its error says why; "
        "this rank's --out is ",
        dir, ")"));
  }
  const std::string name = absl::StrCat(kLaunchFilePrefix, id);
  const bool found = PathExists(RunPath(dir, name));
  return group->AgreeWithRank0(
      "the run directory (--out)", found ? "found" : "missing",
      absl::StrCat(dir, " on host ", HostName(),
                   found ? "" : absl::StrCat(" (no ", name, " there)")),
      "every rank needs the same --out, on a file system all ranks share");
}

// Rank 0's part of Open, with the lock held.
absl::Status CheckAndPrepare(const RunDirOptions& o) {
  const std::string& dir = o.dir;
  XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> present,
                         PresentEntries(dir));
  XLNET_ASSIGN_OR_RETURN(std::string stored_kind, StoredKind(dir));
  const bool holds_run = !present.empty();
  const bool has_run_info = !stored_kind.empty();
  if (holds_run && stored_kind.empty()) {
    stored_kind = InferredKind(dir, present);
  }
  const std::string what =
      stored_kind.empty() ? "a run" : absl::StrCat("a ", stored_kind, " run");
  if (holds_run && !stored_kind.empty() && stored_kind != o.kind) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " already holds ", what, " (", Describe(dir, present), "); a ",
        o.kind, " run never continues or replaces it: give another --out"));
  }
  if (o.resume.empty() && holds_run) {
    if (!o.overwrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, " already holds ", what, " (", Describe(dir, present),
          "); continue it with --resume latest, or start over with "
          "--overwrite (which deletes it)"));
    }
    XLOG(WARNING) << "--overwrite: removing the run in " << dir << " ("
                  << Describe(dir, present) << ")";
    for (const std::string& name : present) {
      XLNET_RETURN_IF_ERROR(RemoveAll(RunPath(dir, name)));
    }
  }
  if (!o.resume.empty() && o.resume != "latest") {
    XLNET_RETURN_IF_ERROR(CheckResumeDir(dir, o.resume, holds_run));
  }
  // Leftovers of writers killed mid-file, and earlier launches' ids;
  // nobody else writes here now.
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(dir).status());
  XLNET_RETURN_IF_ERROR(RemoveLaunchFiles(dir));
  if (!has_run_info || stored_kind != o.kind) {
    XLNET_RETURN_IF_ERROR(WriteStateJson(RunPath(dir, kRunInfoFile), "run",
                                         kRunInfoVersion, {{"kind", o.kind}}));
  }
  return absl::OkStatus();
}

}  // namespace

void AddRunDirFlags(FlagParser& flags, const std::string& kind,
                    std::string* resume, bool* overwrite,
                    bool* allow_changed_settings) {
  flags.AddString(
      "resume", resume,
      "'latest' (the newest checkpoint in --out that verifies; a new run "
      "when there is none) or a checkpoint directory. Settings that differ "
      "from the checkpoint's config.yaml are reported key by key and "
      "recorded in RUN/config_changes.jsonl; the checkpoints keep theirs");
  flags.AddBool("overwrite", overwrite,
                absl::StrCat("start a new run in an --out that holds a ", kind,
                             " run, deleting it (without --resume or this, "
                             "that is an error)"));
  flags.AddBool(
      "allow_changed_settings", allow_changed_settings,
      "with --resume: resume even when a setting that makes it another run "
      "(a model.* key, the data's tokens or batches, train.seed, "
      "train.batch_size) differs from the checkpoint's (a warning instead of "
      "an error; config/resume_changes.cc lists each key's class)");
}

absl::StatusOr<std::unique_ptr<RunDirectory>> RunDirectory::Open(
    const RunDirOptions& options, ProcessGroup* group) {
  if (options.overwrite && !options.resume.empty()) {
    return absl::InvalidArgumentError(
        "--overwrite starts a new run and --resume continues one; give one "
        "of them");
  }
  const int rank = group != nullptr ? group->rank() : 0;
  std::unique_ptr<FileLock> lock;
  absl::Status status;
  if (rank == 0) {
    status = MakeDirs(options.dir);
    if (status.ok()) {
      auto acquired =
          FileLock::Acquire(RunPath(options.dir, kRunLockFile), options.dir);
      if (acquired.ok()) {
        lock = std::move(*acquired);
        status = CheckAndPrepare(options);
      } else {
        status = acquired.status();
      }
    }
  }
  if (group != nullptr && group->world_size() > 1) {
    // Every rank stops when rank 0 could not take the directory.
    double failed = status.ok() ? 0 : 1;
    XLNET_RETURN_IF_ERROR(CatchExceptions("run directory check", [&]() {
      std::vector<torch::Tensor> t = {torch::tensor({failed}, torch::kFloat64)};
      group->AllReduceSum(t);
      failed = t[0][0].item<double>();
      return absl::OkStatus();
    }));
    if (rank != 0 && failed > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank 0 could not take the run directory ", options.dir,
                       " (its error says why)"));
    }
  }
  XLNET_RETURN_IF_ERROR(status);
  if (group != nullptr && group->world_size() > 1) {
    XLNET_RETURN_IF_ERROR(CheckSameRunDirectory(options.dir, group));
  }
  return std::unique_ptr<RunDirectory>(
      new RunDirectory(options.dir, std::move(lock)));
}

absl::Status RunDirectory::CheckLock() const {
  if (lock_ == nullptr) return absl::OkStatus();
  const absl::Status status = lock_->Check();
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), "; another process may be writing into ",
                   dir_));
}

}  // namespace xlnet
