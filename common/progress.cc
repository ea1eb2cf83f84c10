#include "common/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "common/strings.h"

namespace xlnet {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

void ProgressMeter::Add(double seconds, int64_t done) {
  // Callers may add often (every few hundred lines); samples closer than
  // 1/32 of the window to the previous one replace the newest, so the
  // window holds about 32 whatever the rate of calls.
  const size_t n = samples_.size();
  if (n >= 2 && seconds - samples_[n - 2].first < window_seconds_ / 32) {
    samples_.back() = {seconds, done};
  } else {
    samples_.emplace_back(seconds, done);
  }
  // Keep the newest sample at least a window old as the window's start.
  while (samples_.size() > 2 &&
         seconds - samples_[1].first >= window_seconds_) {
    samples_.pop_front();
  }
}

double ProgressMeter::Rate() const {
  if (samples_.size() < 2) return 0;
  const double dt = samples_.back().first - samples_.front().first;
  if (dt <= 0) return 0;
  return static_cast<double>(samples_.back().second - samples_.front().second) /
         dt;
}

double ProgressMeter::EtaSeconds() const {
  const double rate = Rate();
  if (total_ <= 0 || rate <= 0) return -1;
  return static_cast<double>(std::max<int64_t>(0, total_ - done())) / rate;
}

std::string ProgressMeter::BytesLine() const {
  std::string line = HumanBytes(static_cast<double>(done()));
  if (total_ > 0) {
    const double percent = 100.0 *
                           static_cast<double>(std::min(done(), total_)) /
                           static_cast<double>(total_);
    absl::StrAppendFormat(&line, " of %s (%.0f%%)",
                          HumanBytes(static_cast<double>(total_)), percent);
  }
  absl::StrAppend(&line, ", ", HumanBytes(Rate()), "/s");
  if (total_ > 0)
    absl::StrAppend(&line, ", ETA ", FormatDuration(EtaSeconds()));
  return line;
}

}  // namespace xlnet
