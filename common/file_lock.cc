#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"

namespace xlnet {
namespace {

// The lock file is a few hundred bytes; anything larger is not ours.
constexpr uint64_t kMaxLockFileBytes = 64 << 10;
// Command lines are cut to this many bytes in the lock file.
constexpr size_t kMaxCommandBytes = 2000;

// This process's command line, arguments separated by spaces.
std::string CommandLine() {
  auto text = ReadFile("/proc/self/cmdline", kMaxLockFileBytes);
  if (!text.ok()) return "?";
  std::string command = *text;
  while (!command.empty() && command.back() == '\0') command.pop_back();
  for (char& c : command) {
    if (c == '\0') c = ' ';
  }
  if (command.size() > kMaxCommandBytes) {
    command.resize(kMaxCommandBytes);
    command += " ...";
  }
  return command;
}

std::string NowUtc() {
  const time_t now = ::time(nullptr);
  struct tm tm = {};
  ::gmtime_r(&now, &tm);
  char text[64];
  ::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

// "pid N on host H (started T): COMMAND" from a holder's lock file.
std::string DescribeHolder(const std::string& path) {
  auto text = ReadFile(path, kMaxLockFileBytes);
  if (!text.ok() || text->empty()) return "another process (it is starting)";
  auto holder = ParseJson(*text, path);
  if (!holder.ok() || !holder->is_object()) {
    return "another process (unreadable lock file)";
  }
  const auto field = [&](const char* key) -> std::string {
    if (!holder->contains(key)) return "?";
    const nlohmann::json& v = (*holder)[key];
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  return absl::StrCat("pid ", field("pid"), " on host ", field("host"),
                      " (started ", field("started"), "): ", field("command"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(
    const std::string& path, const std::string& what) {
  // O_NOFOLLOW: a link planted at the lock's name would lock (and write
  // our description into) whatever file it points to, outside the
  // directory the lock is meant to protect.
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": the lock file of ", what,
          " is a symbolic link; remove it (a lock is only taken on a "
          "regular file)"));
    }
    return absl::InternalError(
        absl::StrCat(path, ": cannot open the lock file: ", strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat(path, ": cannot stat the lock file: ", strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the lock file of ", what,
                     " is not a regular file (", FileKind(st.st_mode), ")"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(what, " is in use by ", DescribeHolder(path),
                       " (lock file ", path, ")"));
    }
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
      XLOG(WARNING) << path << ": this filesystem does not support flock ("
                    << strerror(err) << "); " << what
                    << " is not protected against a second process";
      ::close(fd);
      return std::unique_ptr<FileLock>(new FileLock(path, -1, false));
    }
    ::close(fd);
    return absl::InternalError(
        absl::StrCat(path, ": flock failed: ", strerror(err)));
  }
  // Ours now: say who we are (the lock is what protects; this is for the
  // message another process prints).
  const std::string holder =
      nlohmann::json{{"pid", static_cast<int64_t>(::getpid())},
                     {"host", HostName()},
                     {"started", NowUtc()},
                     {"command", CommandLine()}}
          .dump() +
      "\n";
  absl::Status status;
  if (::ftruncate(fd, 0) != 0) {
    status = absl::InternalError(
        absl::StrCat(path, ": truncate failed: ", strerror(errno)));
  } else if (::lseek(fd, 0, SEEK_SET) == 0) {
    status = WriteAll(fd, holder.data(), holder.size(), path);
  }
  if (!status.ok()) {
    ::close(fd);
    return status;
  }
  return std::unique_ptr<FileLock>(new FileLock(path, fd, true));
}

absl::Status FileLock::Check() const {
  if (fd_ < 0) return absl::OkStatus();
  struct stat held;
  if (::fstat(fd_, &held) != 0) {
    return absl::InternalError(absl::StrCat(
        path_, ": cannot stat the held lock file: ", strerror(errno)));
  }
  struct stat named;
  if (::lstat(path_.c_str(), &named) != 0) {
    if (errno != ENOENT) {
      return absl::InternalError(
          absl::StrCat(path_, ": cannot stat: ", strerror(errno)));
    }
  } else if (named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("lock file ", path_,
                   " was removed or replaced while this process holds it"));
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace xlnet
