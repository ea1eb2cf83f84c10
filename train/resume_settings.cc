#include "train/resume_settings.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "model_io/run_layout.h"

namespace xlnet {
namespace {

// "train.seed 1234 -> 7; model.dropout 0.1 -> 0.2".
std::string DescribeChanges(const std::vector<SettingChange>& changes) {
  std::vector<std::string> parts;
  for (const SettingChange& c : changes) parts.push_back(DescribeChange(c));
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::StatusOr<ResumedSettings> CompareResumedSettings(
    const std::string& checkpoint_dir, const std::string& config_yaml,
    bool allow_changed_settings, bool report) {
  ResumedSettings result;
  const std::string path = RunPath(checkpoint_dir, kRunConfigFile);
  if (!PathExists(path)) {
    if (report) {
      XLOG(WARNING) << checkpoint_dir << " has no " << kRunConfigFile
                    << ": the settings it was trained with are unknown and "
                       "are not compared with this run's";
    }
    return result;
  }
  XLNET_ASSIGN_OR_RETURN(const std::string old_text,
                         ReadFile(path, kMaxConfigFileBytes));
  absl::StatusOr<Config> before = ParseConfig(old_text, path);
  if (!before.ok()) {
    if (!allow_changed_settings) {
      return absl::InvalidArgumentError(absl::StrCat(
          before.status().message(),
          "; the checkpoint's settings cannot be compared with this run's. "
          "Pass --allow_changed_settings to resume without the comparison"));
    }
    if (report) {
      XLOG(WARNING) << "--allow_changed_settings: resuming without comparing "
                       "the settings: "
                    << before.status().message();
    }
    return result;
  }
  // config_yaml is ConfigFileText of a validated config, so it parses; an
  // error here is the caller's.
  XLNET_ASSIGN_OR_RETURN(const Config after,
                         ParseConfig(config_yaml, "the resumed run's config"));
  result.changes = ChangedSettings(*before, after);
  std::vector<SettingChange> breaking;
  for (const SettingChange& c : result.changes) {
    // A change of what is trained is a warning, so that it shows at
    // XLNET_LOG_LEVEL=warning too; one of when to log or save is not.
    if (report && c.kind == ResumeChange::kBookkeeping) {
      XLOG(INFO) << "resume: " << DescribeChange(c);
    } else if (report) {
      XLOG(WARNING) << "resume: " << DescribeChange(c);
    }
    if (c.kind == ResumeChange::kBreaksExactness) breaking.push_back(c);
  }
  if (breaking.empty()) return result;
  if (!allow_changed_settings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resuming from ", checkpoint_dir,
        " would change settings that make this another run than the one "
        "checkpointed (another model, other tokens or batches, other random "
        "streams): ",
        DescribeChanges(breaking),
        ". Set them back to the checkpoint's values (", path,
        "), start a new run (another --out, or --overwrite), or pass "
        "--allow_changed_settings to resume with them"));
  }
  result.forced = true;
  if (report) {
    XLOG(WARNING) << "--allow_changed_settings: resuming from "
                  << checkpoint_dir
                  << " with settings that break the run's exactness: "
                  << DescribeChanges(breaking)
                  << "; the steps from here on are not those the "
                     "checkpointed run would have taken";
  }
  return result;
}

absl::Status WriteRunSettings(const std::string& run_dir, int64_t step,
                              const std::string& checkpoint_dir,
                              const std::string& config_yaml,
                              const ResumedSettings& resumed) {
  const std::string history = RunPath(run_dir, kConfigChangesFile);
  // The records of the steps before `step` stay: the run keeps those steps.
  std::string kept;
  int64_t last_step = -1;
  if (PathExists(history)) {
    XLNET_RETURN_IF_ERROR(
        ReadMetricsLines(history, kMaxConfigFileBytes, MetricsWindow::kWhole,
                         [&](const std::string& line, const nlohmann::json& j) {
                           if (!j.contains("step")) return;
                           absl::StatusOr<int64_t> s =
                               JsonInteger(j["step"], history, 0, INT64_MAX);
                           if (!s.ok() || *s >= step) return;
                           absl::StrAppend(&kept, line, "\n");
                           last_step = std::max(last_step, *s);
                         }));
  }
  for (const SettingChange& c : resumed.changes) {
    const nlohmann::json line = {{"step", step},
                                 {"key", c.key},
                                 {"old", c.old_value},
                                 {"new", c.new_value},
                                 {"kind", EnumName(c.kind)},
                                 {"resumed_from", checkpoint_dir},
                                 {"forced", resumed.forced}};
    absl::StrAppend(&kept, line.dump(), "\n");
    last_step = step;
  }
  if (!kept.empty() || PathExists(history)) {
    XLNET_RETURN_IF_ERROR(WriteFileAtomic(history, kept));
  }
  std::string text = config_yaml;
  if (last_step >= 0) {
    // After the "# written by" line, so that stays the first.
    const size_t first_line_end =
        text.rfind('#', 0) == 0 ? text.find('\n') : std::string::npos;
    const size_t at =
        first_line_end == std::string::npos ? 0 : first_line_end + 1;
    text.insert(
        at, absl::StrCat("# the settings of the steps from ", last_step,
                         " on; earlier steps ran with other values of some "
                         "keys: ",
                         kConfigChangesFile,
                         " lists each change, and each checkpoint's ",
                         kRunConfigFile, " holds what it was trained with\n"));
  }
  return WriteFileAtomic(RunPath(run_dir, kRunConfigFile), text);
}

}  // namespace xlnet
