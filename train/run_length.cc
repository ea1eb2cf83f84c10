#include "train/run_length.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "config/config_keys.h"

namespace xlnet {

absl::Status ApplyNumEpochs(TrainUnit& unit, const std::string& config_path,
                            const std::vector<std::string>& overrides, int rank,
                            TrainConfig* train) {
  if (train->num_epochs <= 0) return absl::OkStatus();
  const std::optional<double> per_epoch = unit.StepsPerEpoch();
  if (!per_epoch || !(*per_epoch > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.num_epochs ", train->num_epochs,
        ": this run's training data has no single epoch (a blend of "
        "data.sources runs one per source); set train.max_steps instead"));
  }
  // The product's rounding error must not add a step: 3 x 33.333...
  // is 100 steps, not 101.
  const double exact = train->num_epochs * *per_epoch;
  // At least one step: a started step counts.
  const int64_t steps = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(exact - 1e-9 * exact)));
  XLNET_ASSIGN_OR_RETURN(
      const std::optional<std::string> max_steps_at,
      ConfigKeyLocation(config_path, overrides, "train.max_steps"));
  XLNET_ASSIGN_OR_RETURN(
      const std::optional<std::string> num_epochs_at,
      ConfigKeyLocation(config_path, overrides, "train.num_epochs"));
  std::string replaced;
  if (max_steps_at && train->max_steps != steps) {
    // --set train.num_epochs over a config file's max_steps is an override
    // like any other; the two set side by side disagree.
    const auto is_override = [](const std::optional<std::string>& at) {
      return at && at->rfind("--set", 0) == 0;
    };
    if (is_override(max_steps_at) || !is_override(num_epochs_at)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "train.max_steps %d (%s) and train.num_epochs %g (%s: %d steps of "
          "this data, %g per epoch) disagree: set one of them",
          train->max_steps, *max_steps_at, train->num_epochs,
          num_epochs_at.value_or("the config"), steps, *per_epoch));
    }
    replaced = absl::StrFormat(", replacing train.max_steps %d (%s)",
                               train->max_steps, *max_steps_at);
  }
  train->max_steps = steps;
  if (rank == 0) {
    XLOG(INFO) << absl::StrFormat(
        "train.num_epochs %g: %d optimizer steps (%g per epoch)%s",
        train->num_epochs, steps, *per_epoch, replaced);
  }
  return absl::OkStatus();
}

}  // namespace xlnet
