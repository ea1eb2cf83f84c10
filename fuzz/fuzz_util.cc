#include "fuzz/fuzz_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace xlnet::fuzz {
namespace {

std::string* scratch_dir = nullptr;

void RemoveScratchDir() {
  if (scratch_dir == nullptr) return;
  std::error_code ignored;
  std::filesystem::remove_all(*scratch_dir, ignored);
}

}  // namespace

const std::string& ScratchDir() {
  if (scratch_dir == nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
        "/xlnet_fuzz.XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::perror("xlnet fuzz: mkdtemp");
      std::abort();
    }
    scratch_dir = new std::string(buf.data());
    std::atexit(RemoveScratchDir);
  }
  return *scratch_dir;
}

void WriteBytes(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  WriteBytes(path, reinterpret_cast<const uint8_t*>(bytes.data()),
             bytes.size());
}

void CheckRoundTrip(const absl::Status& status, const std::string& text) {
  if (status.ok()) return;
  std::fprintf(stderr, "round trip failed: %s\n%s\n",
               std::string(status.message()).c_str(), text.c_str());
  std::abort();
}

}  // namespace xlnet::fuzz
