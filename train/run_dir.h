// The run directory of a training command (RUN/ of xlnet-pretrain and
// xlnet-finetune) before anything is written into it: one process owns it
// (a lock held for the run's life), an existing run is never replaced
// without --overwrite, and a run of one kind is never continued or replaced
// by a command of the other.
//
//   RUN/run.lock   flock held by rank 0; records pid, host, start, command
//   RUN/run.json   {"kind": "pretraining" | "fine-tuning"}
//
// The names of these and of every other entry of RUN/ are in
// model_io/run_layout.h.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_lock.h"
#include "common/flags.h"
#include "train/distributed.h"

namespace xlnet {

struct RunDirOptions {
  // The run directory (--out).
  std::string dir;
  // "pretraining" or "fine-tuning"; recorded in run.json.
  std::string kind;
  // "" (a new run), "latest" or a checkpoint directory (continue a run).
  std::string resume;
  // A new run in a directory that holds a run of the same kind: remove the
  // old run's files first (--overwrite).
  bool overwrite = false;
};

// Registers the run directory's flags of a training command, the same for
// xlnet-pretrain and xlnet-finetune: --resume (into `resume`), --overwrite
// and --allow_changed_settings. `kind` ("pretraining", "fine-tuning")
// names the run in the help.
void AddRunDirFlags(FlagParser& flags, const std::string& kind,
                    std::string* resume, bool* overwrite,
                    bool* allow_changed_settings);

// Holds RUN for the life of a run.
class RunDirectory {
 public:
  // On rank 0 (`group` null or rank 0): creates RUN, takes its lock, checks
  // what is there against the options and, with `overwrite`, removes the old
  // run. Other ranks learn whether rank 0 succeeded (one collective). Errors:
  // FailedPrecondition for a locked or existing run, naming the flag that
  // would allow it; InvalidArgument for contradictory options.
  static absl::StatusOr<std::unique_ptr<RunDirectory>> Open(
      const RunDirOptions& options, ProcessGroup* group);

  // Whether RUN is still ours: OK unless RUN/run.lock was removed or
  // replaced after Open took it (FileLock::Check), when a second run may
  // have taken RUN and be writing into it: FailedPrecondition naming the
  // lock file and RUN. OK on ranks other than 0 (they hold no lock). The
  // trainer calls it before each write of a checkpoint
  // (TrainerOptions::check_run_lock).
  absl::Status CheckLock() const;

 private:
  RunDirectory(std::string dir, std::unique_ptr<FileLock> lock)
      : dir_(std::move(dir)), lock_(std::move(lock)) {}
  std::string dir_;
  std::unique_ptr<FileLock> lock_;  // null on ranks other than 0
};

}  // namespace xlnet
