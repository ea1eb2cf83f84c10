// Fuzz target: the YAML config reader (config/config.h, ParseConfig with
// ValidateConfig); an accepted config is written back with ConfigToYaml and
// read again, which must succeed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = xlnet::ParseConfig(text, "fuzz.yaml");
  if (!config.ok()) return 0;
  (void)xlnet::ValidateConfig(*config);
  const std::string yaml = xlnet::ConfigToYaml(*config);
  xlnet::fuzz::CheckRoundTrip(
      xlnet::ParseConfig(yaml, "fuzz-roundtrip.yaml").status(), yaml);
  return 0;
}
