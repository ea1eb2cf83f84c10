// Launching xlnet-pretrain the way clusters do, with the real binaries:
// Debian's torchrun (PyTorch 1.13) with its static rendezvous (the agent
// serves the store), 2 nodes x 1 rank over c10d on localhost, a worker
// killed under --max_restarts, srun's variables set by hand, and one of 4 such
// ranks SIGKILLed. Every
// launch is compared with a 1-rank run (dropout 0): parameters within 1e-6.
// The torchrun tests are skipped, saying so, where torchrun is absent.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "tests/test_util.h"
#include "train/launcher.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::LoadModelWeights;
using testing::LoggedLosses;
using testing::MaxAbsDiff;
using testing::ReadMetrics;
using testing::RunCommand;
using testing::SourcePath;
using testing::ToolPath;

// The uninterrupted runs every launch is compared with.
constexpr int kSteps = 24;
constexpr char kFinal[] = "checkpoints/step_24";

// torchrun (XLNET_TORCHRUN, else the one on PATH); "" when there is none.
std::string Torchrun() {
  if (const char* path = std::getenv("XLNET_TORCHRUN")) return path;
  CommandResult r = RunCommand("command -v torchrun");
  if (r.exit_code != 0) return "";
  while (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
  return r.output;
}

#define SKIP_WITHOUT_TORCHRUN()                                            \
  if (Torchrun().empty())                                                  \
  GTEST_SKIP() << "no torchrun (install python3-torch, scripts/setup.sh, " \
                  "or set XLNET_TORCHRUN)"

class LaunchE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    testing::PrepareSampleData(tmp_->path());
  }
  static void TearDownTestSuite() { delete tmp_; }

  // xlnet-pretrain's arguments for a tiny run into `run_dir`.
  static std::string PretrainArgs(const std::string& run_dir) {
    return absl::StrCat(" --config ", SourcePath("configs/tiny.yaml"),
                        " --data ", tmp_->Join("data"), " --out ", run_dir,
                        " --set train.threads=1 --set train.eval_steps=0 --set "
                        "model.dropout=0 --set train.max_steps=",
                        kSteps,
                        " --set train.save_steps=4 --set train.log_steps=1 "
                        "--set train.keep_checkpoints=0 --resume latest");
  }

  // torchrun as docs/distributed.md spells it; stdout teed (Python 3.11 needs
  // --redirects with 1.13), logs under the test's directory. Through env(1),
  // so SpawnCommand's "exec" runs it (sh cannot exec "VAR=value cmd").
  static std::string TorchrunCommand(const std::string& launch,
                                     const std::string& run_dir,
                                     const std::string& log_dir) {
    return absl::StrCat("env XLNET_LOG_LEVEL=info ", Torchrun(), " ", launch,
                        " --redirects 1 --tee 1 --log_dir ", log_dir,
                        " --no_python ", ToolPath("pretrain"),
                        PretrainArgs(run_dir));
  }

  // The reference: one rank, uninterrupted (run once per suite).
  static const std::string& OneRank() {
    static const std::string* dir = [] {
      auto* path = new std::string(tmp_->Join("one_rank"));
      CommandResult r = RunCommand(ToolPath("pretrain") + PretrainArgs(*path));
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return path;
    }();
    return *dir;
  }

  // Parameters at the last step within 1e-6 of the 1-rank run, and the
  // same logged losses within 1e-6 relative (each step logged once). The
  // losses are float32 means near 7 (an ulp is 4.8e-7) that 2 ranks sum in
  // another order, so an absolute 1e-6 would be 2 ulp; 1e-6 relative is 8.
  static void ExpectMatchesOneRank(const std::string& run_dir) {
    const double diff = MaxAbsDiff(LoadModelWeights(OneRank() + "/" + kFinal),
                                   LoadModelWeights(run_dir + "/" + kFinal));
    EXPECT_LE(diff, 1e-6) << run_dir;
    ::testing::Test::RecordProperty("max_abs_param_diff", std::to_string(diff));
    const std::vector<double> want = LoggedLosses(OneRank());
    const std::vector<double> got = LoggedLosses(run_dir);
    ASSERT_EQ(got.size(), want.size()) << run_dir;
    double worst_loss = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]))
          << "step " << i + 1;
      worst_loss = std::max(worst_loss, std::abs(got[i] - want[i]));
    }
    std::cout << "vs 1 rank: max |parameter diff| " << diff
              << ", max |loss diff| " << worst_loss << std::endl;
  }

  // Starts `tasks` ranks of xlnet-pretrain with srun's variables set by
  // hand (one node, task i = rank i), rendezvous on `port`, each logging to
  // RUN/task<i>.log; returns their pids.
  static std::vector<pid_t> SpawnSlurmTasks(int tasks, int port,
                                            const std::string& run_dir,
                                            const std::string& extra_args) {
    std::vector<pid_t> pids;
    for (int task = 0; task < tasks; ++task) {
      const std::string vars = absl::StrCat(
          "env -u RANK -u WORLD_SIZE -u LOCAL_RANK XLNET_LOG_LEVEL=info "
          "SLURM_PROCID=",
          task, " SLURM_LOCALID=", task, " SLURM_NTASKS=", tasks,
          " SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=", tasks,
          " SLURM_JOB_ID=4242 SLURM_JOB_NODELIST=localhost MASTER_PORT=", port,
          " ");
      pids.push_back(testing::SpawnCommand(
          vars + ToolPath("pretrain") + PretrainArgs(run_dir) + extra_args,
          absl::StrCat(run_dir, "/task", task, ".log")));
    }
    return pids;
  }

  static testing::TempDir* tmp_;
};

testing::TempDir* LaunchE2ETest::tmp_ = nullptr;

std::string ReadText(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : "";
}

// Pids of the direct children of `parent` that run `exe`.
std::vector<pid_t> ChildrenRunning(pid_t parent, const std::string& exe) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces.
    const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    char target[4096];
    const ssize_t n =
        readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), target,
                 sizeof(target) - 1);
    if (n > 0 && std::string(target, n) == exe) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

// The README's command: torchrun's default static rendezvous, where its
// agent serves the store on MASTER_PORT (this died with "Address already in
// use" before the ranks connected as clients).
TEST_F(LaunchE2ETest, TorchrunStaticTwoRanksMatchOneRank) {
  XLNET_SKIP_WITHOUT_GLOO();
  SKIP_WITHOUT_TORCHRUN();
  testing::TempDir run, logs;
  CommandResult r = RunCommand(TorchrunCommand(
      absl::StrCat("--nnodes 1 --nproc_per_node 2 --master_port ",
                   FreeLocalPort()),
      run.path(), logs.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("using torchrun's store at"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("under /worker/attempt_0"), std::string::npos);
  ExpectMatchesOneRank(run.path());
  EXPECT_TRUE(PathExists(
      run.Join(std::string(kFinal) + "/plm_state.rank1.safetensors")));
}

// Two "nodes" of one rank each, as two torchrun agents meeting over the
// c10d rendezvous backend (rank 0 serves the store), sharing the run
// directory as nodes share a filesystem.
TEST_F(LaunchE2ETest, TorchrunC10dTwoNodesMatchOneRank) {
  XLNET_SKIP_WITHOUT_GLOO();
  SKIP_WITHOUT_TORCHRUN();
  testing::TempDir run, logs0, logs1;
  const std::string launch = absl::StrCat(
      "--nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_id e2e "
      "--rdzv_endpoint 127.0.0.1:",
      FreeLocalPort());
  const pid_t node0 = testing::SpawnCommand(
      TorchrunCommand(launch, run.path(), logs0.path()), run.Join("node0.log"));
  const pid_t node1 = testing::SpawnCommand(
      TorchrunCommand(launch, run.path(), logs1.path()), run.Join("node1.log"));
  const int code0 = testing::WaitPid(node0);
  const int code1 = testing::WaitPid(node1);
  const std::string log =
      ReadText(run.Join("node0.log")) + ReadText(run.Join("node1.log"));
  ASSERT_EQ(code0, 0) << log;
  ASSERT_EQ(code1, 0) << log;
  EXPECT_NE(log.find("rank 1 of 2 joined"), std::string::npos) << log;
  ExpectMatchesOneRank(run.path());
}

// torchrun --max_restarts: a killed worker makes the agent restart both;
// with --resume latest on the command line they continue from the newest
// valid checkpoint and end with the parameters of an uninterrupted run.
TEST_F(LaunchE2ETest, KilledWorkerRestartsAndResumes) {
  XLNET_SKIP_WITHOUT_GLOO();
  SKIP_WITHOUT_TORCHRUN();
  testing::TempDir run, logs;
  const pid_t agent = testing::SpawnCommand(
      TorchrunCommand(
          absl::StrCat("--nnodes 1 --nproc_per_node 2 --max_restarts 1 "
                       "--master_port ",
                       FreeLocalPort()),
          run.path(), logs.path()),
      run.Join("torchrun.log"));
  // After step 6 (step_4 saved), SIGKILL one worker.
  for (int i = 0; i < 6000 && ReadMetrics(run.path()).size() < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<pid_t> workers = ChildrenRunning(agent, ToolPath("pretrain"));
  ASSERT_EQ(workers.size(), 2u) << ReadText(run.Join("torchrun.log"));
  const size_t logged_at_kill = ReadMetrics(run.path()).size();
  ASSERT_EQ(kill(workers[0], SIGKILL), 0);
  const int code = testing::WaitPid(agent);
  const std::string log = ReadText(run.Join("torchrun.log"));
  ASSERT_EQ(code, 0) << log;
  ASSERT_LT(logged_at_kill, static_cast<size_t>(kSteps))
      << "the run finished before the kill; nothing was tested";
  // The second attempt used its own store prefix and resumed.
  EXPECT_NE(log.find("under /worker/attempt_1"), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("resumed from \\S+/step_\\d+")))
      << log;
  ExpectMatchesOneRank(run.path());
}

// srun's variables (one task per GPU), set by hand for 2 tasks on this
// machine: rank and world from SLURM_PROCID/SLURM_NTASKS, the master from
// the node list. Every line each rank writes (stderr; stdout is empty) has
// our log format with its rank (the next test has LibTorch's own lines).
TEST_F(LaunchE2ETest, SlurmTasksMatchOneRankAndLogInOurFormat) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir run;
  const std::vector<pid_t> tasks =
      SpawnSlurmTasks(2, FreeLocalPort(), run.path(), "");
  for (int task = 0; task < 2; ++task) {
    const int code = testing::WaitPid(tasks[task]);
    EXPECT_EQ(code, 0) << ReadText(
        run.Join(absl::StrCat("task", task, ".log")));
  }
  ExpectMatchesOneRank(run.path());
  for (int task = 0; task < 2; ++task) {
    const std::string log =
        ReadText(run.Join(absl::StrCat("task", task, ".log")));
    const std::regex ours(
        absl::StrCat(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [DIWE] r)", task,
                     R"( [^ :]+:\d+\] .*)"));
    std::istringstream in(log);
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines) {
      EXPECT_TRUE(std::regex_match(line, ours))
          << "task " << task << ": " << line;
    }
    EXPECT_GE(lines, 1) << log;
    EXPECT_NE(log.find(absl::StrCat("rank ", task,
                                    " of 2 joined (gloo on cpu, "
                                    "launched by slurm)")),
              std::string::npos)
        << log;
  }
}

// One of 4 ranks SIGKILLed mid-run (no agent to restart it): the 3 others
// notice the lost peer in their next collective and exit non-zero well
// within train.dist_timeout_s, rather than hanging; the 4 ranks started
// again with --resume latest continue from the newest valid checkpoint and
// end with the parameters of an uninterrupted 1-rank run.
TEST_F(LaunchE2ETest, OneOfFourRanksKilledOthersExitAndResumeIsExact) {
  XLNET_SKIP_WITHOUT_GLOO();
  constexpr int kTimeoutS = 60;
  const std::string timeout =
      absl::StrCat(" --set train.dist_timeout_s=", kTimeoutS);
  testing::TempDir run;
  std::vector<pid_t> tasks =
      SpawnSlurmTasks(4, FreeLocalPort(), run.path(), timeout);
  // After step 6 (step_4 saved), SIGKILL rank 2.
  for (int i = 0; i < 12000 && ReadMetrics(run.path()).size() < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const size_t logged_at_kill = ReadMetrics(run.path()).size();
  ASSERT_EQ(kill(tasks[2], SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  std::string logs;
  for (int task = 0; task < 4; ++task) {
    const int code = testing::WaitPid(tasks[task]);
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - killed_at)
                               .count();
    const std::string log =
        ReadText(run.Join(absl::StrCat("task", task, ".log")));
    logs += log;
    if (task == 2) {
      EXPECT_EQ(code, 128 + SIGKILL);
      continue;
    }
    EXPECT_NE(code, 0) << "rank " << task << " went on without rank 2\n" << log;
    EXPECT_NE(log.find("another rank exited or lost its connection"),
              std::string::npos)
        << log;
    // The peer's death is seen at once (its sockets close); the timeout is
    // the bound for a peer that hangs instead.
    EXPECT_LT(seconds, kTimeoutS) << "rank " << task << "\n" << log;
    const size_t last = log.find_last_of('\n', log.size() - 2);
    std::cout << "rank " << task << " exited " << code << " after " << seconds
              << " s: " << log.substr(last == std::string::npos ? 0 : last + 1);
  }
  ASSERT_LT(logged_at_kill, static_cast<size_t>(kSteps))
      << "the run finished before the kill; nothing was tested";
  ASSERT_FALSE(PathExists(run.Join(kFinal))) << logs;
  tasks = SpawnSlurmTasks(4, FreeLocalPort(), run.path(), timeout);
  for (int task = 0; task < 4; ++task) {
    const int code = testing::WaitPid(tasks[task]);
    ASSERT_EQ(code, 0) << ReadText(
        run.Join(absl::StrCat("task", task, ".log")));
  }
  EXPECT_TRUE(std::regex_search(ReadText(run.Join("task0.log")),
                                std::regex("resumed from \\S+/step_\\d+")));
  ExpectMatchesOneRank(run.path());
}

// LibTorch's own lines in our format, deterministically: a task whose master
// never comes up gets c10d's connect error, which Debian's LibTorch logs
// through glog, as "E r1 socket.cpp:N] [c10d] ..."; then the tool's one-line
// error (common/tool_main.h), the only other line.
TEST_F(LaunchE2ETest, LibTorchLinesOfARankComeOutInOurFormat) {
#if !defined(XLNET_WITH_GLOG)
  GTEST_SKIP() << "this LibTorch does not log through glog";
#endif
  testing::TempDir run;
  const CommandResult r = RunCommand(absl::StrCat(
      "env -u RANK -u WORLD_SIZE -u LOCAL_RANK SLURM_PROCID=1 SLURM_LOCALID=1 "
      "SLURM_NTASKS=2 SLURM_JOB_NODELIST=localhost MASTER_PORT=",
      FreeLocalPort(), " ", ToolPath("pretrain"), PretrainArgs(run.path()),
      " --set train.startup_timeout_s=1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::regex ours(
      R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [DIWE] r1 [^ :]+:\d+\] .*)");
  std::istringstream in(r.output);
  int libtorch_lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("xlnet-pretrain: error: rendezvous at localhost:", 0) == 0) {
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, ours)) << line;
    if (line.find("] [c10d] ") != std::string::npos) ++libtorch_lines;
  }
  EXPECT_GE(libtorch_lines, 1) << r.output;
}

}  // namespace
}  // namespace xlnet
