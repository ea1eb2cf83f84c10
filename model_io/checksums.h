// The checksum manifest of every directory we write (checkpoints, RUN/best,
// fine-tuned models, exports): checksums.json, the CRC-32 and size of every
// other file, written last. VerifyChecksums refuses a directory whose files
// do not match it or that holds a file it does not list.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet {

inline constexpr char kChecksumsFile[] = "checksums.json";

// The regular files of `dir` (names starting with '.' skipped), sorted.
absl::StatusOr<std::vector<std::string>> ListDirectoryFiles(
    const std::string& dir);

// CRC-32 (zlib polynomial) of a file, streamed.
absl::StatusOr<uint32_t> FileCrc32(const std::string& path);

// One entry of checksums.json.
struct FileChecksum {
  uint32_t crc32 = 0;
  int64_t bytes = 0;
};
// File name (in its directory) -> its checksum.
using ChecksumEntries = std::map<std::string, FileChecksum>;

// The checksum of every regular file in `dir` except checksums.json (names
// starting with '.' are not the directory's files and are skipped).
absl::StatusOr<ChecksumEntries> ComputeChecksums(const std::string& dir);
// Writes `entries` as DIR/checksums.json (atomically).
absl::Status WriteChecksumsFile(const std::string& dir,
                                const ChecksumEntries& entries);
// Writes checksums.json for every regular file in `dir` except itself
// (ComputeChecksums, then WriteChecksumsFile).
absl::Status WriteChecksums(const std::string& dir);

// The names DIR/checksums.json lists (read and parsed, nothing verified):
// a reader that verifies only some files picks them from these.
absl::StatusOr<std::vector<std::string>> ListedFiles(const std::string& dir);

// Which files VerifyChecksums checks.
struct ChecksumScope {
  // The whole listing, by stat only: every listed file present, regular and
  // of its listed size, and no regular file unlisted. false: only the files
  // `read` selects are stat'ed.
  bool listing = true;
  // The files whose CRC is read (after the same stat checks); null: every
  // listed file.
  std::function<bool(const std::string& name)> read;
};

// Verifies checksums.json against the files in `dir`: DataLoss naming the
// file when one it lists is missing, of another size or changed, and when a
// regular file of `dir` (other than itself and '.' names) is not listed, so
// that a manifest of "{}" or one omitting the weights does not verify.
absl::Status VerifyChecksums(const std::string& dir);
// The same, limited to `scope` (the per-rank share of a checkpoint: rank 0
// the listing and the shared files, each rank the files it loads). Returns
// the bytes read to verify CRCs.
absl::StatusOr<int64_t> VerifyChecksums(const std::string& dir,
                                        const ChecksumScope& scope);

// Bytes VerifyChecksums has read in this process, over all calls: tests
// check with it that one load of a directory reads its files once to verify
// them.
int64_t VerifiedBytes();

}  // namespace xlnet
