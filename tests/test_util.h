// Helpers shared by every test suite: a scratch directory and a way to run
// the real command-line tools.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "common/file_util.h"

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

}  // namespace xlnet::testing
