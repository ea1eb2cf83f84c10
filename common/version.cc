#include "common/version.h"

#include "absl/strings/str_cat.h"
// Generated into the build directory by cmake/XlnetVersion.cmake.
#include "xlnet_version_info.h"

namespace xlnet {

const char* ProjectVersion() { return XLNET_VERSION; }

const char* GitCommit() { return XLNET_GIT_COMMIT; }

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", ProjectVersion(), " (commit ", GitCommit(),
                      ")");
}

}  // namespace xlnet
