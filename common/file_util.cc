#include "common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet {
namespace {

std::atomic<int> g_temp_counter{0};

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(path, ": ", what, " failed: ", std::strerror(errno)));
}

std::string DirName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string StripTrailingSlash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string TempSibling(const std::string& path) {
  return absl::StrCat(DirName(path), "/.", BaseName(path), ".tmp-", getpid(),
                      "-", g_temp_counter++);
}

absl::Status TooLarge(const std::string& path, uint64_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes"));
}

}  // namespace

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

absl::StatusOr<int> OpenRegularFile(const std::string& path, uint64_t max_bytes,
                                    uint64_t* size) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer before the check.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const absl::Status status = ErrnoStatus("stat", path);
    ::close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a regular file (", FileKind(st.st_mode), ")"));
  }
  // Regular files ignore O_NONBLOCK; clear it all the same.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *size = static_cast<uint64_t>(st.st_size);
  if (*size > max_bytes) {
    ::close(fd);
    return TooLarge(path, max_bytes);
  }
  return fd;
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     uint64_t max_bytes) {
  uint64_t size = 0;
  XLNET_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, max_bytes, &size));
  std::string contents;
  // The size is a hint: files under /proc report 0, others may grow.
  contents.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const absl::Status status = absl::DataLossError(
          absl::StrCat(path, ": read failed: ", std::strerror(errno)));
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > max_bytes - contents.size()) {
      ::close(fd);
      return TooLarge(path, max_bytes);
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

absl::Status WriteAll(int fd, const void* data, size_t size,
                      const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return ErrnoStatus("open", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync", dir);
  return absl::OkStatus();
}

absl::Status WriteFileAtomicWith(
    const std::string& path,
    const std::function<absl::Status(int fd, const std::string& tmp)>&
        write_fn) {
  const std::string tmp = TempSibling(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return ErrnoStatus("create", tmp);
  absl::Status status = write_fn(fd, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus("fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus("close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus("rename to " + path, tmp);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return SyncDir(DirName(path));
}

absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& contents) {
  return WriteFileAtomicWith(path, [&](int fd, const std::string& tmp) {
    return WriteAll(fd, contents.data(), contents.size(), tmp);
  });
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty() || IsDirectory(dir)) return absl::OkStatus();
  const std::string parent = DirName(StripTrailingSlash(dir));
  if (parent != dir) XLNET_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir", dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FreeBytes(const std::string& path) {
  struct statvfs fs;
  if (::statvfs(path.c_str(), &fs) != 0) return ErrnoStatus("statvfs", path);
  return static_cast<uint64_t>(fs.f_bavail) *
         static_cast<uint64_t>(fs.f_frsize);
}

absl::Status RemoveAll(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus("stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus("opendir", path);
    std::vector<std::string> children;
    while (struct dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") children.push_back(path + "/" + name);
    }
    ::closedir(dir);
    for (const auto& child : children) XLNET_RETURN_IF_ERROR(RemoveAll(child));
    if (::rmdir(path.c_str()) != 0) return ErrnoStatus("rmdir", path);
    return absl::OkStatus();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus("unlink", path);
  }
  return absl::OkStatus();
}

absl::Status RemoveAllAtomically(const std::string& path_in) {
  const std::string path = StripTrailingSlash(path_in);
  if (!PathExists(path)) return absl::OkStatus();
  const std::string hidden = TempSibling(path);
  if (::rename(path.c_str(), hidden.c_str()) != 0) {
    return ErrnoStatus("rename to " + hidden, path);
  }
  XLNET_RETURN_IF_ERROR(SyncDir(DirName(path)));
  return RemoveAll(hidden);
}

absl::StatusOr<AtomicDirWriter> AtomicDirWriter::Begin(
    const std::string& final_dir_in) {
  const std::string final_dir = StripTrailingSlash(final_dir_in);
  XLNET_RETURN_IF_ERROR(MakeDirs(DirName(final_dir)));
  const std::string temp = TempSibling(final_dir);
  XLNET_RETURN_IF_ERROR(RemoveAll(temp));
  if (::mkdir(temp.c_str(), 0755) != 0) return ErrnoStatus("mkdir", temp);
  return AtomicDirWriter(final_dir, temp);
}

AtomicDirWriter::AtomicDirWriter(AtomicDirWriter&& other) noexcept
    : final_dir_(std::move(other.final_dir_)),
      temp_dir_(std::move(other.temp_dir_)),
      done_(other.done_) {
  other.done_ = true;
}

AtomicDirWriter::~AtomicDirWriter() {
  if (!done_) RemoveAll(temp_dir_).IgnoreError();
}

std::string AtomicDirWriter::Path(const std::string& name) const {
  return temp_dir_ + "/" + name;
}

absl::Status AtomicDirWriter::Commit() {
  if (done_) {
    return absl::FailedPreconditionError(
        absl::StrCat(final_dir_, ": directory already committed"));
  }
  XLNET_RETURN_IF_ERROR(SyncDir(temp_dir_));
  const std::string parent = DirName(final_dir_);
  if (!PathExists(final_dir_)) {
    if (::rename(temp_dir_.c_str(), final_dir_.c_str()) != 0) {
      return ErrnoStatus("rename to " + final_dir_, temp_dir_);
    }
    done_ = true;
    return SyncDir(parent);
  }
  // Swap both names in one step; the old directory ends up at temp_dir_.
  if (::renameat2(AT_FDCWD, temp_dir_.c_str(), AT_FDCWD, final_dir_.c_str(),
                  RENAME_EXCHANGE) == 0) {
    done_ = true;
    XLNET_RETURN_IF_ERROR(SyncDir(parent));
    return RemoveAll(temp_dir_);
  }
  if (errno != EINVAL && errno != ENOSYS) {
    return ErrnoStatus("renameat2(RENAME_EXCHANGE) with " + final_dir_,
                       temp_dir_);
  }
  // Filesystems without RENAME_EXCHANGE: move the old one aside first. A
  // crash between the two renames leaves both complete copies under hidden
  // names and no final directory, never a partial one.
  const std::string aside = TempSibling(final_dir_);
  if (::rename(final_dir_.c_str(), aside.c_str()) != 0) {
    return ErrnoStatus("rename aside", final_dir_);
  }
  if (::rename(temp_dir_.c_str(), final_dir_.c_str()) != 0) {
    const absl::Status status =
        ErrnoStatus("rename to " + final_dir_, temp_dir_);
    ::rename(aside.c_str(), final_dir_.c_str());
    return status;
  }
  done_ = true;
  XLNET_RETURN_IF_ERROR(SyncDir(parent));
  return RemoveAll(aside);
}

absl::StatusOr<int> CleanStaleTemps(const std::string& parent) {
  DIR* dir = ::opendir(parent.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return 0;
    return ErrnoStatus("opendir", parent);
  }
  std::vector<std::string> stale;
  while (struct dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() > 1 && name[0] == '.' &&
        name.find(".tmp-") != std::string::npos) {
      stale.push_back(parent + "/" + name);
    }
  }
  ::closedir(dir);
  for (const auto& path : stale) XLNET_RETURN_IF_ERROR(RemoveAll(path));
  return static_cast<int>(stale.size());
}

}  // namespace xlnet
