// Fuzz target: the safetensors reader (common/safetensors.h,
// SafetensorsFile::Open, Load/LoadAll) on a whole file of fuzzed bytes, and
// ParseSafetensorsHeader on the same bytes taken as a header.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "common/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = xlnet::fuzz::ScratchDir() + "/model.safetensors";
  xlnet::fuzz::WriteBytes(path, data, size);
  auto file = xlnet::SafetensorsFile::Open(path);
  if (file.ok()) {
    for (const auto& entry : file->entries()) {
      (void)file->Find(entry.name);
      (void)entry.numel();
    }
    (void)file->data_bytes();
    (void)file->LoadAll();
  }
  std::map<std::string, std::string> metadata;
  (void)xlnet::ParseSafetensorsHeader(
      std::string(reinterpret_cast<const char*>(data), size), 1 << 20, "header",
      &metadata);
  return 0;
}
