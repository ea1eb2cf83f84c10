#include "train/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace xlnet {
namespace {

std::atomic<int> g_forward_signal{0};
void RememberSignal(int sig) { g_forward_signal = sig; }

}  // namespace

int FreeLocalPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

absl::Status LaunchLocalRanks(int nproc, const std::vector<std::string>& args,
                              int port) {
  if (port == 0) port = FreeLocalPort();
  struct sigaction action = {};
  action.sa_handler = RememberSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  XLOG(INFO) << "launching " << nproc << " local ranks (MASTER_PORT " << port
             << ")";

  std::vector<pid_t> pids;
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      return absl::InternalError("fork failed while launching ranks");
    }
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      // Rank 0 serves the store here, whatever launched this process.
      unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      std::vector<char*> argv;
      static std::string self = "/proc/self/exe";
      argv.push_back(self.data());
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(self.c_str(), argv.data());
      _exit(127);  // exec failed; only the forked child ends here
    }
    pids.push_back(pid);
  }

  std::vector<int> exit_codes(nproc, -1);
  int alive = nproc;
  int failed_rank = -1;
  bool forwarded = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (alive > 0) {
    if (const int sig = g_forward_signal.exchange(0); sig != 0) {
      for (int r = 0; r < nproc; ++r) {
        if (exit_codes[r] < 0) ::kill(pids[r], sig);
      }
      forwarded = true;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nproc; ++r) {
        if (pids[r] != pid) continue;
        exit_codes[r] =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --alive;
        if (exit_codes[r] != 0 && failed_rank < 0) {
          failed_rank = r;
          XLOG(ERROR) << "rank " << r << " exited with code " << exit_codes[r]
                      << "; stopping the other ranks";
          for (int o = 0; o < nproc; ++o) {
            if (exit_codes[o] < 0) ::kill(pids[o], SIGTERM);
          }
          deadline =
              std::chrono::steady_clock::now() + std::chrono::seconds(30);
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int o = 0; o < nproc; ++o) {
        if (exit_codes[o] < 0) ::kill(pids[o], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (failed_rank >= 0) {
    return absl::InternalError(absl::StrCat("rank ", failed_rank,
                                            " failed with exit code ",
                                            exit_codes[failed_rank]));
  }
  if (forwarded) XLOG(INFO) << "all ranks stopped after a signal";
  return absl::OkStatus();
}

}  // namespace xlnet
