// Helpers shared by the fuzz targets: a per-process scratch directory for
// readers that take a path, and a deterministic byte splitter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace xlnet::fuzz {

// A directory under $TMPDIR (or /tmp) created once per process and removed
// at exit; readers that only take a path read files written here.
const std::string& ScratchDir();

// Writes `size` bytes to `path` (truncating); aborts on an I/O error of the
// scratch directory itself (not a finding).
void WriteBytes(const std::string& path, const uint8_t* data, size_t size);
void WriteBytes(const std::string& path, const std::string& bytes);

// A round trip that must succeed: aborts (a finding) printing `status` and
// the text that failed to read back.
void CheckRoundTrip(const absl::Status& status, const std::string& text);

}  // namespace xlnet::fuzz
