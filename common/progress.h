// Progress of long jobs as people read it: done of total, percent, a rate
// over the recent past and the ETA at that rate. The rate is measured over a
// moving window, not since the start, so one stall weighs on the ETA only
// while it is in the window.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

namespace xlnet {

// "45s", "3m07s", "2h05m"; "?" for a negative or non-finite value.
std::string FormatDuration(double seconds);

// The progress of a job of `total` units (0 = unknown total).
class ProgressMeter {
 public:
  explicit ProgressMeter(int64_t total, double window_seconds = 30)
      : total_(total), window_seconds_(window_seconds) {}

  // Records that `done` units were done `seconds` after the start; times are
  // non-decreasing. Samples older than the window are dropped, except the
  // newest of them, so the rate always spans at least the window once the
  // job has run that long; samples are kept about window / 32 apart (a
  // closer one replaces the newest), so frequent calls cost no memory.
  void Add(double seconds, int64_t done);

  int64_t total() const { return total_; }
  int64_t done() const { return samples_.empty() ? 0 : samples_.back().second; }
  // Samples held (the window's, about 32).
  size_t samples() const { return samples_.size(); }
  // Units per second over the window; 0 before two samples.
  double Rate() const;
  // Seconds to finish at Rate(); -1 when unknown (no total, or no progress
  // in the window).
  double EtaSeconds() const;
  // For a job counted in bytes: "1.2 GiB of 4.0 GiB (30%), 85.0 MiB/s,
  // ETA 33s" (without "of ..." and the percent when the total is unknown).
  std::string BytesLine() const;

 private:
  int64_t total_;
  double window_seconds_;
  // (seconds, done), oldest first.
  std::deque<std::pair<double, int64_t>> samples_;
};

}  // namespace xlnet
