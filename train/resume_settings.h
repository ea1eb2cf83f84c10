// A resumed run against the settings its checkpoint was trained with: every
// changed key is reported, the ones that break the run's exactness are
// refused unless --allow_changed_settings, and the run directory records
// each change instead of relabelling the earlier steps.
//
//   RUN/config.yaml           the settings of the latest segment (the steps
//                             since the last resume), with a comment naming
//                             that step when an earlier segment differed
//   RUN/config_changes.jsonl  one JSON object per changed key and resume:
//                             {"step", "key", "old", "new", "kind",
//                              "resumed_from", "forced"}
//   RUN/checkpoints/step_N/config.yaml
//                             what step_N was trained with; never rewritten
//
// The keys' classes are config/resume_changes.h's table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/resume_changes.h"

namespace xlnet {

// What CompareResumedSettings found.
struct ResumedSettings {
  // Every key whose value differs, in config.yaml's order.
  std::vector<SettingChange> changes;
  // Some of them break exactness and --allow_changed_settings let them
  // through.
  bool forced = false;
};

// Compares the config.yaml of checkpoint `checkpoint_dir` with `config_yaml`
// (the resumed run's resolved config, ConfigFileText) key by key. With
// `report` (rank 0), logs one line per changed key, "resume: train.lr
// 0.0003 -> 0.001" (a warning unless the key is kBookkeeping), and the
// warning for forced keys. Keys of class
// kBreaksExactness are an InvalidArgument naming each with its old and new
// value and --allow_changed_settings, unless `allow_changed_settings`.
// A checkpoint without config.yaml is compared with nothing (a warning); one
// whose config.yaml does not parse is an error unless
// `allow_changed_settings`.
absl::StatusOr<ResumedSettings> CompareResumedSettings(
    const std::string& checkpoint_dir, const std::string& config_yaml,
    bool allow_changed_settings, bool report);

// Rank 0, before the first step of a run that starts at `step` (0 for a
// fresh start) from `checkpoint_dir` ("" for none): drops the records of
// RUN/config_changes.jsonl from `step` on (the steps the run repeats or
// replaces), appends `resumed`'s changes at `step`, and writes
// RUN/config.yaml as `config_yaml`, with a comment after its first line
// naming the step from which it holds when the file records changes.
absl::Status WriteRunSettings(const std::string& run_dir, int64_t step,
                              const std::string& checkpoint_dir,
                              const std::string& config_yaml,
                              const ResumedSettings& resumed);

}  // namespace xlnet
