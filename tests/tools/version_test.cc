// --version on every C++ tool (RunTool, common/tool_main.h): one line
// "xlnet-VERB VERSION (commit C)" on stdout, exit 0, nothing else run.
#include "common/version.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::RunCommand;
using testing::ToolPath;

TEST(VersionTest, EveryToolPrintsItsNameAndVersion) {
  for (const char* verb : {"data", "pretrain", "finetune", "export", "inspect",
                           "run", "baseline", "squad-eval", "lm"}) {
    const std::string program = std::string("xlnet-") + verb;
    // Other flags, even required ones missing, do not matter.
    const auto r = RunCommand(ToolPath(verb) + " --version");
    EXPECT_EQ(r.exit_code, 0) << program << ": " << r.output;
    EXPECT_EQ(r.output, program + " " + ProjectVersion() + " (commit " +
                            GitCommit() + ")\n");
    EXPECT_TRUE(absl::StartsWith(r.output, program + " "));
  }
  // --help lists it.
  const auto help = RunCommand(ToolPath("export") + " --help");
  EXPECT_TRUE(absl::StrContains(help.output, "--version")) << help.output;
}

}  // namespace
}  // namespace xlnet
