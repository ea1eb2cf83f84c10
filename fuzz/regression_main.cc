// The fuzz targets' regression test (ctest xlnet_fuzz_regression), built in
// the normal build without libFuzzer: feeds every file of
// fuzz/corpus/<target>/ to that target's LLVMFuzzerTestOneInput (each
// target is compiled with the function renamed XlnetFuzz_<target>, see
// fuzz/CMakeLists.txt). A crash or sanitizer report fails the test; inputs
// found by fuzzing stay fixed.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define XLNET_FUZZ_TARGET(name) \
  extern "C" int XlnetFuzz_##name(const uint8_t* data, size_t size);
#include "fuzz/targets.inc"
#undef XLNET_FUZZ_TARGET

namespace {

struct Target {
  const char* name;
  int (*fn)(const uint8_t*, size_t);
};

const Target kTargets[] = {
#define XLNET_FUZZ_TARGET(name) {#name, &XlnetFuzz_##name},
#include "fuzz/targets.inc"
#undef XLNET_FUZZ_TARGET
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (holding one dir a target)\n",
                 argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  int failures = 0;
  for (const Target& target : kTargets) {
    const auto start = std::chrono::steady_clock::now();
    const std::filesystem::path dir = root / target.name;
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (ec || files.empty()) {
      std::fprintf(stderr, "%s: no inputs in %s\n", target.name, dir.c_str());
      ++failures;
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      target.fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("%-20s %4zu inputs  %.2f s\n", target.name, files.size(),
                seconds);
  }
  return failures == 0 ? 0 : 1;
}
