// The checksum manifest of every directory we write (checkpoints, RUN/best,
// fine-tuned models, exports): checksums.json, the CRC-32 and size of every
// other file, written last. VerifyChecksums refuses a directory whose files
// do not match it or that holds a file it does not list.
#pragma once

#include <cstdint>
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

// Writes checksums.json for every regular file in `dir` except itself
// (names starting with '.' are not the directory's files and are skipped).
absl::Status WriteChecksums(const std::string& dir);
// Verifies checksums.json against the files in `dir`: DataLoss naming the
// file when one it lists is missing, of another size or changed, and when a
// regular file of `dir` (other than itself and '.' names) is not listed, so
// that a manifest of "{}" or one omitting the weights does not verify.
absl::Status VerifyChecksums(const std::string& dir);

// Bytes VerifyChecksums has read in this process, over all calls: tests
// check with it that one load of a directory reads its files once to verify
// them.
int64_t VerifiedBytes();

}  // namespace xlnet
