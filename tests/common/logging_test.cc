// The log format (common/logging.h), and LibTorch's own lines routed into it.
#include "common/logging.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#if defined(XLNET_WITH_GLOG)
#include <glog/logging.h>
#endif

#include "tests/test_util.h"

namespace xlnet {
namespace {

// Everything written to stderr (fd 2) while `fn` runs.
template <typename Fn>
std::string CaptureStderr(Fn&& fn) {
  testing::TempDir dir;
  const std::string path = dir.Join("stderr.txt");
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* file = fopen(path.c_str(), "w");
  dup2(fileno(file), STDERR_FILENO);
  fn();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  fclose(file);
  auto text = ReadFile(path);
  return text.ok() ? *text : "";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "2026-11-22 14:03:01.123 W r3 file.cc:42] message"
const std::regex kOurLine(
    R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [DIWE] r3 [^ :]+:\d+\] .*)");

TEST(LoggingTest, LinesHaveTimeLevelRankAndPlace) {
  SetLogRank(3);
  const std::string text =
      CaptureStderr([] { XLOG(WARNING) << "ours " << 42; });
  SetLogRank(0);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 1u) << text;
  EXPECT_TRUE(std::regex_match(lines[0], kOurLine)) << lines[0];
  EXPECT_NE(lines[0].find(" W r3 logging_test.cc:"), std::string::npos);
  EXPECT_NE(lines[0].find("] ours 42"), std::string::npos);
}

// Debian's LibTorch logs through glog: c10d's messages and TORCH_WARN come
// out in our format, with our rank, and nothing else reaches stderr.
TEST(LoggingTest, LibTorchLinesComeOutInOurFormat) {
#if !defined(XLNET_WITH_GLOG)
  EXPECT_FALSE(RouteLibTorchLogs("xlnet_common_test"));
  GTEST_SKIP() << "this LibTorch does not log through glog";
#else
  ASSERT_TRUE(RouteLibTorchLogs("xlnet_common_test"));
  ASSERT_TRUE(RouteLibTorchLogs("again"));  // idempotent
  const LogLevel before = MinLogLevel();
  SetMinLogLevel(LogLevel::kWarning);
  SetLogRank(3);
  const std::string text = CaptureStderr([] {
    LOG(WARNING) << "from glog";
    LOG(INFO) << "below our level";
    LOG(ERROR) << "glog error";
    TORCH_WARN("from TORCH_WARN");
  });
  SetLogRank(0);
  SetMinLogLevel(before);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;
  for (const auto& line : lines) {
    EXPECT_TRUE(std::regex_match(line, kOurLine)) << line;
  }
  EXPECT_NE(lines[0].find(" W r3 logging_test.cc:"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("] from glog"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" E r3 logging_test.cc:"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("from TORCH_WARN"), std::string::npos) << lines[2];
#endif
}

}  // namespace
}  // namespace xlnet
