// Fuzz target: the HuggingFace config.json reader (config/config.h,
// ParseModelConfigJson with ValidateModelConfig); an accepted config is
// written back with ModelConfigToJson and read again, which must succeed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = xlnet::ParseModelConfigJson(text, "config.json");
  if (!config.ok()) return 0;
  (void)xlnet::ValidateModelConfig(*config);
  const std::string json = xlnet::ModelConfigToJson(*config);
  xlnet::fuzz::CheckRoundTrip(
      xlnet::ParseModelConfigJson(json, "roundtrip.json").status(), json);
  return 0;
}
