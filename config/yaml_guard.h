// Guards in front of yaml-cpp 0.7 (Debian 12), which loops forever,
// allocating, on some malformed inputs (found by fuzz/config_yaml_fuzzer.cc):
// the text is checked before yaml-cpp parses it. Internal to config/.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace xlnet::config_internal {

// Refuses a token starting with ',' outside [] and {}, a lone carriage
// return, control characters and UTF-16 (yaml_guard.cc says why).
absl::Status CheckNoTokenStartingWithComma(const std::string& text,
                                           const std::string& source);

// Refuses a second YAML document with content, without YAML::LoadAll.
absl::Status CheckOneDocument(const std::string& yaml_text,
                              const std::string& source);

}  // namespace xlnet::config_internal
