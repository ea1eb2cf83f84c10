#include "model_io/checkpoint_manager.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "model_io/run_layout.h"

namespace xlnet {
namespace {

constexpr int kChecksumsVersion = 1;

absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return absl::NotFoundError(absl::StrCat(dir, ": cannot list"));
  std::vector<std::string> files;
  while (struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    struct stat st;
    if (name[0] == '.' || ::stat((dir + "/" + name).c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    files.push_back(name);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

absl::StatusOr<uint32_t> FileCrc32(const std::string& path) {
  // Only regular files: a FIFO or device named here would block or never end.
  uint64_t size = 0;
  XLNET_ASSIGN_OR_RETURN(const int fd,
                         OpenRegularFile(path, kNoSizeLimit, &size));
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed"));
    }
    if (n == 0) break;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()),
                static_cast<uInt>(n));
  }
  ::close(fd);
  return static_cast<uint32_t>(crc);
}

absl::Status WriteChecksums(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> files, ListFiles(dir));
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& name : files) {
    if (name == kChecksumsFile) continue;
    const std::string path = dir + "/" + name;
    XLNET_ASSIGN_OR_RETURN(uint32_t crc, FileCrc32(path));
    struct stat st;
    ::stat(path.c_str(), &st);
    entries[name] = {{"crc32", crc},
                     {"bytes", static_cast<int64_t>(st.st_size)}};
  }
  return WriteStateJson(dir + "/" + kChecksumsFile, "checksums",
                        kChecksumsVersion, {{"files", entries}});
}

absl::Status VerifyChecksums(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(nlohmann::json manifest,
                         ReadStateJson(dir + "/" + kChecksumsFile, "checksums",
                                       kChecksumsVersion));
  if (!manifest.contains("files") || !manifest["files"].is_object()) {
    return absl::DataLossError(
        absl::StrCat(dir, "/", kChecksumsFile, ": no files"));
  }
  for (const auto& [name, entry] : manifest["files"].items()) {
    // Names come from a file: they must name a file of this directory, never
    // a path out of it.
    if (name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      return absl::DataLossError(
          absl::StrCat(dir, "/", kChecksumsFile, ": '", name,
                       "' is not a file name in the checkpoint"));
    }
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      return absl::DataLossError(absl::StrCat(path, ": missing"));
    }
    // We write regular files only; a link could lead out of the directory.
    if (!S_ISREG(st.st_mode)) {
      return absl::DataLossError(absl::StrCat(path, ": not a regular file (",
                                              FileKind(st.st_mode), ")"));
    }
    if (!entry.is_object() || !entry.contains("bytes") ||
        !entry.contains("crc32")) {
      return absl::DataLossError(absl::StrCat(
          dir, "/", kChecksumsFile, ": '", name, "' needs bytes and crc32"));
    }
    // Range-checked, not cast: crc32 2^32 + c must not pass for c.
    absl::StatusOr<int64_t> bytes =
        JsonInteger(entry["bytes"], absl::StrCat(path, ": bytes"), 0, INT64_MAX);
    absl::StatusOr<int64_t> want_crc = JsonInteger(
        entry["crc32"], absl::StrCat(path, ": crc32"), 0, UINT32_MAX);
    if (!bytes.ok()) return absl::DataLossError(bytes.status().message());
    if (!want_crc.ok()) return absl::DataLossError(want_crc.status().message());
    if (*bytes != static_cast<int64_t>(st.st_size)) {
      return absl::DataLossError(absl::StrCat(path, ": size ", st.st_size,
                                              " does not match the manifest"));
    }
    XLNET_ASSIGN_OR_RETURN(uint32_t crc, FileCrc32(path));
    if (crc != *want_crc) {
      return absl::DataLossError(absl::StrCat(path, ": checksum mismatch"));
    }
  }
  // The manifest covers the whole directory: a file it does not list (the
  // weights under a manifest of "{}", a tokenizer copied in afterwards) was
  // never checked, so the directory is not what its writer left.
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> files, ListFiles(dir));
  for (const auto& name : files) {
    if (name != kChecksumsFile && !manifest["files"].contains(name)) {
      return absl::DataLossError(absl::StrCat(
          dir, "/", name, ": not listed in ", kChecksumsFile,
          " (every file of the directory must be; rewrite it with the tool "
          "that wrote the directory)"));
    }
  }
  return absl::OkStatus();
}

CheckpointManager::CheckpointManager(std::string run_dir, int64_t keep)
    : checkpoints_dir_(RunPath(run_dir, kCheckpointsDir)),
      keep_(keep),
      free_bytes_(FreeBytes) {}

std::string CheckpointManager::StepDir(int64_t step) const {
  return absl::StrCat(checkpoints_dir_, "/step_", step);
}

absl::Status CheckpointManager::Save(int64_t step,
                                     const XLNetConfig& model_config,
                                     const CheckpointContents& contents) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(model_config));
  return Save(step, ModelConfigToJson(model_config), contents);
}

absl::Status CheckpointManager::Save(int64_t step,
                                     const std::string& config_json,
                                     const CheckpointContents& contents) {
  XLNET_RETURN_IF_ERROR(MakeDirs(checkpoints_dir_));
  // A save killed mid-way (on a full disk, say) left its temporary behind;
  // it goes first, or this save would run short of the same space.
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(checkpoints_dir_).status());
  XLNET_RETURN_IF_ERROR(CheckFreeSpace(step));
  XLNET_RETURN_IF_ERROR(WriteModelDir(
      StepDir(step), config_json, contents.model,
      [&](const AtomicDirWriter& writer) -> absl::Status {
        for (const auto& [name, tensors] : contents.tensor_files) {
          XLNET_RETURN_IF_ERROR(WriteSafetensors(writer.Path(name), tensors));
        }
        for (const auto& [name, text] : contents.text_files) {
          XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(name), text));
        }
        if (!contents.moved_files_dir.empty() &&
            IsDirectory(contents.moved_files_dir)) {
          XLNET_ASSIGN_OR_RETURN(std::vector<std::string> staged,
                                 ListFiles(contents.moved_files_dir));
          for (const auto& name : staged) {
            const std::string from = contents.moved_files_dir + "/" + name;
            if (::rename(from.c_str(), writer.Path(name).c_str()) != 0) {
              return absl::InternalError(
                  absl::StrCat(from, ": cannot move into ", writer.temp_dir()));
            }
          }
        }
        // WriteModelDir writes checksums.json last.
        return absl::OkStatus();
      }));
  if (keep_ > 0) {
    std::vector<int64_t> steps = ListSteps();
    const std::optional<int64_t> last_good =
        keep_newest_before_ ? NewestBefore(*keep_newest_before_) : std::nullopt;
    for (size_t i = 0; i + keep_ < steps.size(); ++i) {
      if (steps[i] == last_good) continue;
      XLNET_RETURN_IF_ERROR(RemoveAllAtomically(StepDir(steps[i])));
    }
  }
  return absl::OkStatus();
}

std::optional<int64_t> CheckpointManager::NewestBefore(int64_t step) const {
  std::optional<int64_t> newest;
  for (int64_t s : ListSteps()) {
    if (s < step) newest = s;
  }
  return newest;
}

absl::Status CheckpointManager::CheckFreeSpace(int64_t step) const {
  const std::vector<int64_t> steps = ListSteps();
  if (steps.empty()) return absl::OkStatus();
  // The next checkpoint holds the same tensors as the newest one; the old
  // ones are removed only after it is complete, so all of it must fit.
  const std::string newest = StepDir(steps.back());
  XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                         ListFiles(newest));
  uint64_t needed = 0;
  for (const std::string& name : files) {
    struct stat st;
    if (::stat((newest + "/" + name).c_str(), &st) == 0) needed += st.st_size;
  }
  XLNET_ASSIGN_OR_RETURN(const uint64_t free, free_bytes_(checkpoints_dir_));
  if (free >= needed) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      checkpoints_dir_, ": not enough free space for checkpoint step_", step,
      ": it needs about ", needed, " bytes (the size of step_", steps.back(),
      ") but the file system has ", free, " bytes free; nothing was written"));
}

std::vector<int64_t> CheckpointManager::ListSteps() const {
  std::vector<int64_t> steps;
  DIR* d = ::opendir(checkpoints_dir_.c_str());
  if (d == nullptr) return steps;
  while (struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    int64_t step;
    if (name.rfind("step_", 0) == 0 &&
        absl::SimpleAtoi(name.substr(5), &step) &&
        IsDirectory(checkpoints_dir_ + "/" + name)) {
      steps.push_back(step);
    }
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::StatusOr<std::optional<std::string>> CheckpointManager::LatestValid()
    const {
  const std::vector<int64_t> steps = ListSteps();
  std::vector<std::string> problems;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string dir = StepDir(*it);
    const absl::Status status = VerifyChecksums(dir);
    if (status.ok()) {
      for (const std::string& problem : problems) {
        XLOG(WARNING) << "skipping checkpoint " << problem;
      }
      return std::optional<std::string>(dir);
    }
    problems.push_back(absl::StrCat("step_", *it, ": ", status.message()));
  }
  if (problems.empty()) return std::optional<std::string>();
  return absl::DataLossError(absl::StrCat(
      "no checkpoint in ", checkpoints_dir_, " verifies (",
      absl::StrJoin(problems, "; "), "); nothing was loaded or removed"));
}

}  // namespace xlnet
