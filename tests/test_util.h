// Helpers shared by every test suite: a scratch directory and a way to run
// the real command-line tools.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/safetensors.h"

// Skips a test that needs Gloo (CPU data parallel) in builds without it
// (LibTorch without gloo headers, e.g. pip wheels; see CMakeLists.txt).
#if defined(XLNET_WITH_GLOO)
#define XLNET_SKIP_WITHOUT_GLOO() (void)0
#else
#define XLNET_SKIP_WITHOUT_GLOO() \
  GTEST_SKIP() << "this build has no Gloo (no gloo headers in LibTorch)"
#endif

namespace xlnet::testing {

// A fresh directory under /tmp, removed (with its contents) on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/xlnet_test_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() { RemoveAll(path_).IgnoreError(); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The JSON in `path`; a test failure (and null) when it cannot be read.
// Malformed JSON throws, which fails the test that reads it.
inline nlohmann::json ReadJsonFile(const std::string& path) {
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

struct CommandResult {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh, capturing stdout and stderr.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0)
    result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A shell prefix that bounds the memory of the command after it to `kib`
// KiB: `ulimit -v` (address space). AddressSanitizer reserves terabytes of
// address space for its shadow at start, so under ASan the bound is ASan's
// own instead: no single allocation above `kib` (it returns null, which
// LibTorch and operator new turn into an error). Either way a tool that
// allocates before checking sizes fails instead of taking the machine.
inline std::string MemoryCap(int64_t kib) {
#if defined(__SANITIZE_ADDRESS__)
  return "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
         "allocator_may_return_null=1:max_allocation_size_mb=" +
         std::to_string(kib / 1024) + "\"; ";
#else
  return "ulimit -v " + std::to_string(kib) + "; ";
#endif
}

// Starts `command` with /bin/sh in its own process group, output appended
// to `log_path`; returns its pid (kill with KillGroup, reap with WaitPid).
inline pid_t SpawnCommand(const std::string& command,
                          const std::string& log_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    // exec: the pid is the command itself, so signals and exit codes are its.
    const std::string full = "exec " + command + " >> '" + log_path + "' 2>&1";
    execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Sends `sig` to the process group started by SpawnCommand.
inline void KillGroup(pid_t pid, int sig) { kill(-pid, sig); }

// Waits for `pid`; returns its exit code, or 128 + signal.
inline int WaitPid(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Path of a built tool: ToolPath("inspect") -> build/bin/xlnet-inspect.
inline std::string ToolPath(const std::string& verb) {
  return std::string(XLNET_BINARY_DIR) + "/bin/xlnet-" + verb;
}

// Path of a file in the source tree: SourcePath("configs/tiny.yaml").
inline std::string SourcePath(const std::string& relative) {
  return std::string(XLNET_SOURCE_DIR) + "/" + relative;
}

// The JSON lines of the file at `path` (none when it is missing). Lines
// that do not parse (empty, or the half-written last line of a running
// trainer) are skipped.
inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// The JSON lines of RUN/metrics.jsonl.
inline std::vector<nlohmann::json> ReadMetrics(const std::string& run_dir) {
  return ReadJsonLines(run_dir + "/metrics.jsonl");
}

// A python3 that imports google.protobuf (python3-protobuf), for
// tests/train/read_tfevents.py; "" when there is none.
inline std::string PythonWithProtobuf() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = std::string(py) + " -c 'import google.protobuf'";
    if (RunCommand(cmd).exit_code == 0) return py;
  }
  return "";
}

// Declares `python` = PythonWithProtobuf(), skipping the test when empty.
#define XLNET_PYTHON_PROTOBUF_OR_SKIP(python)                             \
  const std::string python = ::xlnet::testing::PythonWithProtobuf();      \
  if (python.empty()) {                                                   \
    GTEST_SKIP() << "needs python3 with google.protobuf (Debian: "        \
                    "python3-protobuf) for tests/train/read_tfevents.py"; \
  }                                                                       \
  (void)0

// The events of every RUN/tb/events.out.tfevents.* file (in name order),
// as tests/train/read_tfevents.py prints them (it checks both CRCs of each
// record); a test failure and null when the reader fails.
inline nlohmann::json ReadTfEvents(const std::string& python,
                                   const std::string& tb_dir) {
  const CommandResult r =
      RunCommand(python + " " + SourcePath("tests/train/read_tfevents.py") +
                 " $(ls -d '" + tb_dir + "'/events.out.tfevents.* | sort)");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.output, nullptr, false);
}

// The simple_value of every scalar `tag` in `events`, with its step.
inline std::vector<std::pair<int64_t, double>> TfScalars(
    const nlohmann::json& events, const std::string& tag) {
  std::vector<std::pair<int64_t, double>> out;
  if (!events.is_array()) return out;
  for (const auto& e : events) {
    if (!e.contains("values")) continue;
    for (const auto& v : e["values"]) {
      if (v["tag"] == tag && v.contains("simple_value")) {
        out.emplace_back(e["step"].get<int64_t>(),
                         v["simple_value"].get<double>());
      }
    }
  }
  return out;
}

// The logged training losses of RUN/metrics.jsonl, in order.
inline std::vector<double> LoggedLosses(const std::string& run_dir) {
  std::vector<double> out;
  for (const auto& m : ReadMetrics(run_dir)) {
    if (m.contains("loss")) out.push_back(m["loss"].get<double>());
  }
  return out;
}

// Every tensor of DIR/model.safetensors (a checkpoint or model directory).
inline NamedTensors LoadModelWeights(const std::string& dir) {
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *file->LoadAll() : NamedTensors{};
}

// The largest |a - b| over two lists of the same tensors.
inline double MaxAbsDiff(const NamedTensors& a, const NamedTensors& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    worst =
        std::max(worst, (a[i].second - b[i].second).abs().max().item<double>());
  }
  return worst;
}

// With the real xlnet-data: a 1000-piece tokenizer of the bundled Brown
// sample in DIR/spiece.model and its shards in DIR/data.
inline void PrepareSampleData(const std::string& dir) {
  const std::string corpus = SourcePath("data/sample/brown_sample.txt");
  CommandResult r =
      RunCommand(ToolPath("data") + " tokenizer --input " + corpus +
                 " --vocab_size 1000 --out " + dir + "/spiece.model");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(ToolPath("data") + " prepare --input " + corpus +
                 " --tokenizer " + dir + "/spiece.model --out " + dir +
                 "/data --workers 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace xlnet::testing
