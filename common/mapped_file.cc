#include "common/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(
    const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  XLNET_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, max_bytes, &size));
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(size);
  if (size > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat(path, ": mmap failed: ", std::strerror(err)));
    }
    file->data_ = static_cast<const char*>(p);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace xlnet
