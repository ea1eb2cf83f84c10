// An exclusive lock on a file, held while the object lives: flock(2), so
// the kernel releases it when the process ends in any way (SIGKILL too).
// The file records who holds it (pid, host, start time, command line), and
// a process that finds it taken says so.
//
//   XLNET_ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock,
//                          FileLock::Acquire(dir + "/run.lock", dir));
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xlnet {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing) without waiting, then
  // writes this process's description into it. When another process holds
  // it: FailedPrecondition "WHAT is in use by pid N on host H (started T):
  // COMMAND (lock file PATH)". `path` must not be a symbolic link (the lock
  // would be taken, and the description written, wherever it points) nor
  // anything but a regular file: FailedPrecondition naming it. On a
  // filesystem without flock support the lock is not taken (locked() is
  // false) and a warning is logged.
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(
      const std::string& path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::string& path() const { return path_; }
  bool locked() const { return locked_; }

  // Whether the lock still protects: the flock is on the file we opened,
  // so once `path` is removed or names another file, a second process can
  // create and lock a fresh file there while we still hold ours. OK when
  // `path` names the held file (same st_dev and st_ino), and when no lock
  // was taken (locked() false: nothing to lose); otherwise
  // FailedPrecondition "lock file PATH was removed or replaced while this
  // process holds it".
  absl::Status Check() const;

 private:
  FileLock(std::string path, int fd, bool locked)
      : path_(std::move(path)), fd_(fd), locked_(locked) {}
  std::string path_;
  int fd_ = -1;
  bool locked_ = false;
};

}  // namespace xlnet
