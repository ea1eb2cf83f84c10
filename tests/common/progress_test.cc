#include "common/progress.h"

#include <gtest/gtest.h>

namespace xlnet {
namespace {

TEST(FormatDurationTest, PicksTheLargestUnits) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(59.9), "59s");
  EXPECT_EQ(FormatDuration(187), "3m07s");
  EXPECT_EQ(FormatDuration(7500), "2h05m");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(1.0 / 0.0), "?");
}

TEST(ProgressMeterTest, RateAndEtaFromTheSamples) {
  ProgressMeter meter(1000, /*window_seconds=*/30);
  EXPECT_EQ(meter.Rate(), 0);
  EXPECT_EQ(meter.EtaSeconds(), -1);
  meter.Add(0, 0);
  meter.Add(10, 100);
  EXPECT_DOUBLE_EQ(meter.Rate(), 10);
  EXPECT_DOUBLE_EQ(meter.EtaSeconds(), 90);
  EXPECT_EQ(meter.done(), 100);
}

TEST(ProgressMeterTest, AStallWeighsOnlyWhileInTheWindow) {
  ProgressMeter meter(10000, /*window_seconds=*/30);
  // 10 units/s for 100 s, a 60 s stall, then 10 units/s again.
  for (int t = 0; t <= 100; t += 5) meter.Add(t, 10 * t);
  EXPECT_DOUBLE_EQ(meter.Rate(), 10);
  for (int t = 105; t <= 160; t += 5) meter.Add(t, 1000);
  EXPECT_EQ(meter.Rate(), 0);
  EXPECT_EQ(meter.EtaSeconds(), -1);
  int64_t done = 1000;
  for (int t = 165; t <= 200; t += 5) meter.Add(t, done += 50);
  // The window (30 s) no longer holds the stall: the rate is the recent one.
  EXPECT_DOUBLE_EQ(meter.Rate(), 10);
  // A since-start average would say (1400 / 200) = 7 units/s.
  EXPECT_DOUBLE_EQ(meter.EtaSeconds(), (10000 - 1400) / 10.0);
}

TEST(ProgressMeterTest, TheWindowSpansAtLeastItsLength) {
  ProgressMeter meter(0, /*window_seconds=*/30);
  meter.Add(0, 0);
  meter.Add(20, 200);
  meter.Add(40, 600);
  // The oldest sample at least 30 s old (t = 0) still starts the window.
  EXPECT_DOUBLE_EQ(meter.Rate(), 15);
  meter.Add(50, 700);
  // Now t = 20 is the newest sample at least 30 s old.
  EXPECT_DOUBLE_EQ(meter.Rate(), 500.0 / 30);
}

TEST(ProgressMeterTest, BytesLine) {
  ProgressMeter meter(4LL << 30);
  meter.Add(0, 0);
  meter.Add(10, 1LL << 30);
  EXPECT_EQ(meter.BytesLine(),
            "1.0 GiB of 4.0 GiB (25%), 102.4 MiB/s, ETA 30s");
  ProgressMeter unknown(0);
  unknown.Add(0, 0);
  unknown.Add(2, 2048);
  EXPECT_EQ(unknown.BytesLine(), "2.0 KiB, 1.0 KiB/s");
}

TEST(ProgressMeterTest, FrequentCallsKeepAFewSamplesAndTheLatestValue) {
  ProgressMeter meter(0, /*window_seconds=*/32);
  // 10 units/s sampled every millisecond for 100 s.
  for (int ms = 0; ms <= 100000; ++ms) meter.Add(ms / 1000.0, ms / 100);
  EXPECT_EQ(meter.done(), 1000);
  EXPECT_NEAR(meter.Rate(), 10, 0.05);
  EXPECT_LE(meter.samples(), 40u);
}

}  // namespace
}  // namespace xlnet
