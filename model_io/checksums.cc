#include "model_io/checksums.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "model_io/state_json.h"

namespace xlnet {
namespace {

constexpr int kChecksumsVersion = 1;

std::atomic<int64_t> verified_bytes{0};

}  // namespace

absl::StatusOr<std::vector<std::string>> ListDirectoryFiles(
    const std::string& dir) {
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

absl::StatusOr<ChecksumEntries> ComputeChecksums(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> files,
                         ListDirectoryFiles(dir));
  ChecksumEntries entries;
  for (const auto& name : files) {
    if (name == kChecksumsFile) continue;
    const std::string path = dir + "/" + name;
    XLNET_ASSIGN_OR_RETURN(uint32_t crc, FileCrc32(path));
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot stat"));
    }
    entries[name] = {crc, static_cast<int64_t>(st.st_size)};
  }
  return entries;
}

absl::Status WriteChecksumsFile(const std::string& dir,
                                const ChecksumEntries& entries) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, entry] : entries) {
    files[name] = {{"crc32", entry.crc32}, {"bytes", entry.bytes}};
  }
  return WriteStateJson(dir + "/" + kChecksumsFile, "checksums",
                        kChecksumsVersion, {{"files", files}});
}

absl::Status WriteChecksums(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(const ChecksumEntries entries, ComputeChecksums(dir));
  return WriteChecksumsFile(dir, entries);
}

namespace {

// DIR/checksums.json, read, with its "files" object.
absl::StatusOr<nlohmann::json> ReadManifest(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(nlohmann::json manifest,
                         ReadStateJson(dir + "/" + kChecksumsFile, "checksums",
                                       kChecksumsVersion));
  if (!manifest.contains("files") || !manifest["files"].is_object()) {
    return absl::DataLossError(
        absl::StrCat(dir, "/", kChecksumsFile, ": no files"));
  }
  return manifest;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListedFiles(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(const nlohmann::json manifest, ReadManifest(dir));
  std::vector<std::string> names;
  for (const auto& item : manifest["files"].items()) {
    names.push_back(item.key());
  }
  return names;
}

absl::Status VerifyChecksums(const std::string& dir) {
  return VerifyChecksums(dir, ChecksumScope()).status();
}

absl::StatusOr<int64_t> VerifyChecksums(const std::string& dir,
                                        const ChecksumScope& scope) {
  XLNET_ASSIGN_OR_RETURN(nlohmann::json manifest, ReadManifest(dir));
  int64_t read_bytes = 0;
  for (const auto& [name, entry] : manifest["files"].items()) {
    const bool read = !scope.read || scope.read(name);
    if (!scope.listing && !read) continue;
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
      return absl::DataLossError(absl::StrCat(dir, "/", kChecksumsFile, ": '",
                                              name, "' needs bytes and crc32"));
    }
    // Range-checked, not cast: crc32 2^32 + c must not pass for c.
    absl::StatusOr<int64_t> bytes = JsonInteger(
        entry["bytes"], absl::StrCat(path, ": bytes"), 0, INT64_MAX);
    absl::StatusOr<int64_t> want_crc = JsonInteger(
        entry["crc32"], absl::StrCat(path, ": crc32"), 0, UINT32_MAX);
    if (!bytes.ok()) return absl::DataLossError(bytes.status().message());
    if (!want_crc.ok()) return absl::DataLossError(want_crc.status().message());
    if (*bytes != static_cast<int64_t>(st.st_size)) {
      return absl::DataLossError(absl::StrCat(path, ": size ", st.st_size,
                                              " does not match the manifest"));
    }
    if (!read) continue;
    XLNET_ASSIGN_OR_RETURN(uint32_t crc, FileCrc32(path));
    verified_bytes.fetch_add(st.st_size, std::memory_order_relaxed);
    read_bytes += st.st_size;
    if (crc != *want_crc) {
      return absl::DataLossError(absl::StrCat(path, ": checksum mismatch"));
    }
  }
  // The manifest covers the whole directory: a file it does not list (the
  // weights under a manifest of "{}", a tokenizer copied in afterwards) was
  // never checked, so the directory is not what its writer left.
  if (!scope.listing) return read_bytes;
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> files,
                         ListDirectoryFiles(dir));
  for (const auto& name : files) {
    if (name != kChecksumsFile && !manifest["files"].contains(name)) {
      return absl::DataLossError(absl::StrCat(
          dir, "/", name, ": not listed in ", kChecksumsFile,
          " (every file of the directory must be; rewrite it with the tool "
          "that wrote the directory)"));
    }
  }
  return read_bytes;
}

int64_t VerifiedBytes() {
  return verified_bytes.load(std::memory_order_relaxed);
}

}  // namespace xlnet
