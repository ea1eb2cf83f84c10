// Files and directories that are written atomically.
//
// A file is written to a temporary name beside it, fsynced and renamed over
// the target. A directory is built under a temporary name and swapped into
// place with one rename (renameat2 RENAME_EXCHANGE when the target exists),
// so readers see either the old complete directory or the new complete one,
// never a half-written one, even if the writer is killed at any point.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet {

// No bound on the size of a file that is read whole.
inline constexpr uint64_t kNoSizeLimit = std::numeric_limits<uint64_t>::max();

// The bound on configs and JSON state files read whole (YAML configs,
// config.json, trainer_state.json, checksums.json, best.json, ...): far
// above any real one, far below what would exhaust memory.
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{64} << 20;

// What kind of file a non-regular `mode` (st_mode) is, for messages: "a
// directory", "a FIFO", "a symbolic link", ...
const char* FileKind(mode_t mode);

// Opens `path` read-only to read it whole: refuses anything but a regular
// file (a FIFO or device such as /dev/zero would block or never end, a
// directory is no file) and a file of more than `max_bytes` bytes. Returns
// the descriptor (the caller closes it) and sets `*size`. Errors name the
// file: NotFound when it cannot be opened, InvalidArgument otherwise.
absl::StatusOr<int> OpenRegularFile(const std::string& path, uint64_t max_bytes,
                                    uint64_t* size);

// Reads a whole regular file of at most `max_bytes` bytes (see
// OpenRegularFile).
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     uint64_t max_bytes = kNoSizeLimit);

// Writes `contents` to `path` atomically (temp file, fsync, rename, fsync dir).
absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& contents);

// Writes an unnamed buffer through `write_fn(fd)` into `path` atomically.
// `write_fn` writes the whole file to the descriptor.
absl::Status WriteFileAtomicWith(
    const std::string& path,
    const std::function<absl::Status(int fd, const std::string& tmp)>&
        write_fn);

// Writes all of `size` bytes to `fd`, retrying short writes.
absl::Status WriteAll(int fd, const void* data, size_t size,
                      const std::string& path);

// fsyncs a directory so a rename inside it is durable.
absl::Status SyncDir(const std::string& dir);

bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);

// Creates `dir` and its parents.
absl::Status MakeDirs(const std::string& dir);

// The bytes an unprivileged process may still write to the file system that
// holds `path` (statvfs: f_bavail * f_frsize). Errors name the path.
absl::StatusOr<uint64_t> FreeBytes(const std::string& path);

// Removes a file or a directory tree; a missing path is not an error.
absl::Status RemoveAll(const std::string& path);

// Removes a directory tree so that no reader ever sees it half removed: it is
// first renamed to a hidden temporary sibling (which CleanStaleTemps removes
// if this process dies before it has). A missing path is not an error.
absl::Status RemoveAllAtomically(const std::string& path);

// Builds a directory atomically:
//
//   XLNET_ASSIGN_OR_RETURN(auto writer, AtomicDirWriter::Begin(final_dir));
//   XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path("config.json"), json));
//   XLNET_RETURN_IF_ERROR(writer.Commit());
//
// Until Commit(), files go to a hidden sibling `.<name>.tmp-<pid>-<n>`; an
// uncommitted writer removes it on destruction. A writer killed mid-way
// leaves only that hidden sibling, which CleanStaleTemps() removes later.
class AtomicDirWriter {
 public:
  static absl::StatusOr<AtomicDirWriter> Begin(const std::string& final_dir);
  AtomicDirWriter(AtomicDirWriter&& other) noexcept;
  AtomicDirWriter& operator=(AtomicDirWriter&& other) = delete;
  ~AtomicDirWriter();

  // The temporary directory being filled.
  const std::string& temp_dir() const { return temp_dir_; }
  // `temp_dir()/name`.
  std::string Path(const std::string& name) const;
  // fsyncs the temporary directory and swaps it into `final_dir`; an old
  // directory at that name is removed afterwards.
  absl::Status Commit();

 private:
  AtomicDirWriter(std::string final_dir, std::string temp_dir)
      : final_dir_(std::move(final_dir)), temp_dir_(std::move(temp_dir)) {}
  std::string final_dir_;
  std::string temp_dir_;
  bool done_ = false;
};

// Removes leftovers of killed AtomicDirWriters/WriteFileAtomic calls in
// `parent` (hidden `.*.tmp-*` entries). Returns how many were removed.
absl::StatusOr<int> CleanStaleTemps(const std::string& parent);

}  // namespace xlnet
