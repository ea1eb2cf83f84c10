// A read-only memory mapping of a whole regular file (shards, safetensors).
//
//   XLNET_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
//                          MappedFile::Open(path));
//   Parse(file->data(), file->size());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/file_util.h"

namespace xlnet {

class MappedFile {
 public:
  // Maps `path` privately and read-only. Refuses what OpenRegularFile
  // refuses (non-regular files such as FIFOs and devices, files over
  // `max_bytes`); errors name the file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path, uint64_t max_bytes = kNoSizeLimit);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // The file's bytes; never null ("" for an empty file).
  const char* data() const { return data_ != nullptr ? data_ : ""; }
  const uint8_t* bytes() const {
    return reinterpret_cast<const uint8_t*>(data());
  }
  size_t size() const { return size_; }
  std::string_view view() const { return {data(), size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace xlnet
