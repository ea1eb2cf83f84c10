// What the xlnet-pretrain end-to-end tests of both objectives share: a
// SIGKILL in the middle of a run then --resume latest, and two runs'
// final weights compared.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet::testing {

// The command line of a pretraining run into a run directory with extra
// flags (e.g. "--set train.max_steps=30").
using PretrainCommand = std::function<std::string(const std::string& run_dir,
                                                  const std::string& extra)>;

// 30 steps, each logged, a checkpoint every 4: for
// ExpectSigkillThenResumeIsExact.
inline constexpr char kKillAndResumeSettings[] =
    "--set train.max_steps=30 --set train.save_steps=4 --set "
    "train.log_steps=1";

// `steps` steps without dropout, saved at the end: two runs of it that
// should agree (ranks, accumulation) are compared with FinalWeightDiff.
inline std::string NoDropoutRun(int64_t steps) {
  return "--set train.max_steps=" + std::to_string(steps) +
         " --set train.save_steps=0 --set model.dropout=0";
}

// Runs `settings` (which log every step and save now and then) to the end
// in one directory; in another, the same run killed with SIGKILL at a
// (seeded) random moment after 6..20 logged steps and then resumed with
// --resume latest. Expects the same `steps` logged losses, bit for bit, and
// the same weights at checkpoints/step_<steps>.
inline void ExpectSigkillThenResumeIsExact(const PretrainCommand& command,
                                           const std::string& settings,
                                           size_t steps) {
  TempDir full, killed;
  CommandResult r = RunCommand(command(full.path(), settings));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> expected = LoggedLosses(full.path());
  ASSERT_EQ(expected.size(), steps);

  std::mt19937 rng(20261122);
  const size_t kill_after = std::uniform_int_distribution<size_t>(6, 20)(rng);
  const pid_t pid =
      SpawnCommand(command(killed.path(), settings), killed.Join("log.txt"));
  for (int i = 0; i < 1200 && ReadMetrics(killed.path()).size() < kill_after;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  KillGroup(pid, SIGKILL);
  EXPECT_EQ(WaitPid(pid), 128 + SIGKILL);
  r = RunCommand(command(killed.path(), settings + " --resume latest"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> got = LoggedLosses(killed.path());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "step " << i + 1;
  const std::string last = "checkpoints/step_" + std::to_string(steps);
  EXPECT_EQ(MaxAbsDiff(LoadModelWeights(full.Join(last)),
                       LoadModelWeights(killed.Join(last))),
            0.0);
}

// Runs `command` with `settings + extra_a` and with `settings + extra_b`
// (both ending at `step`, saving at the end) and returns the largest
// absolute difference of their weights at checkpoints/step_<step>; every
// file of the second run's checkpoint named in `expect_files` must exist.
inline double FinalWeightDiff(
    const PretrainCommand& command, const std::string& settings,
    const std::string& extra_a, const std::string& extra_b, int64_t step,
    const std::vector<std::string>& expect_files = {}) {
  TempDir a, b;
  CommandResult r = RunCommand(command(a.path(), settings + " " + extra_a));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(command(b.path(), settings + " " + extra_b));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string last = "checkpoints/step_" + std::to_string(step);
  for (const std::string& file : expect_files) {
    EXPECT_TRUE(PathExists(b.Join(last + "/" + file))) << file;
  }
  return MaxAbsDiff(LoadModelWeights(a.Join(last)),
                    LoadModelWeights(b.Join(last)));
}

}  // namespace xlnet::testing
