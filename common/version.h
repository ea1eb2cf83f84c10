// The version of this build: the project version (CMake project() VERSION)
// and the source tree's git commit at build time (`git describe --always
// --dirty`, "unknown" when built without git or .git). Every tool prints it
// for --version (RunTool), and every run's config.yaml starts with it.
#pragma once

#include <string>

namespace xlnet {

// e.g. "0.1.0".
const char* ProjectVersion();

// e.g. "d3ac391" or "d3ac391-dirty"; "unknown" without git.
const char* GitCommit();

// "PROGRAM 0.1.0 (commit d3ac391)".
std::string VersionLine(const std::string& program);

}  // namespace xlnet
