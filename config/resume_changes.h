// What a resumed run may change of the settings its checkpoint was trained
// with: one table (resume_changes.cc) sorts every config key by what a
// change does to a resumed run, and ChangedSettings compares two resolved
// configs key by key.
//
//   std::vector<SettingChange> changes = ChangedSettings(checkpoint, now);
//   DescribeChange(changes[0])  -> "train.lr 0.0003 -> 0.001"
//
// The trainer reports every change at resume and refuses the
// kBreaksExactness ones unless --allow_changed_settings (train/trainer.h).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/settings.h"

namespace xlnet {

// What changing a key between a checkpoint and a run resumed from it does.
enum class ResumeChange {
  // Nothing trained differs: when to log, save, evaluate or stop, and
  // what an evaluation reports. Reported.
  kBookkeeping,
  // The run goes on, on purpose, on other terms from the resumed step (the
  // learning-rate schedule, the optimizer, the device and precision):
  // allowed and reported; the steps before keep the old values.
  kTraining,
  // The resumed run would no longer continue the same run: another model,
  // other tokens or batches, other random streams. Refused unless
  // --allow_changed_settings.
  kBreaksExactness,
};

template <>
struct EnumTable<ResumeChange> {
  static constexpr std::array<std::pair<ResumeChange, const char*>, 3> kNames{{
      {ResumeChange::kBookkeeping, "bookkeeping"},
      {ResumeChange::kTraining, "training"},
      {ResumeChange::kBreaksExactness, "breaks_exactness"},
  }};
};

// One key whose value differs.
struct SettingChange {
  // "section.key", e.g. "train.lr".
  std::string key;
  // The values as ConfigValueTexts writes them ("0.0003", "\"gelu\"").
  std::string old_value;
  std::string new_value;
  // What the change does to a resumed run.
  ResumeChange kind = ResumeChange::kBookkeeping;
};

// The class of `key` ("section.key") in the table; nullopt for a key it
// lacks. Every key of ConfigKeys(section) has one (tests/config check it);
// ChangedSettings counts a missing one as kBreaksExactness, so a key added
// without a decision is refused rather than silently allowed.
std::optional<ResumeChange> ResumeChangeOf(const std::string& key);

// The keys whose values differ from `before` (the checkpoint's config) to
// `after` (the resumed run's), in config.yaml's order.
std::vector<SettingChange> ChangedSettings(const Config& before,
                                           const Config& after);

// "train.lr 0.0003 -> 0.001".
std::string DescribeChange(const SettingChange& change);

}  // namespace xlnet
