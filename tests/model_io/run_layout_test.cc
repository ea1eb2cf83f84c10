#include "model_io/run_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

// The lines ReadMetricsLines hands its visitor, as written.
absl::StatusOr<std::vector<std::string>> Lines(const std::string& path,
                                               uint64_t max_bytes,
                                               MetricsWindow window) {
  std::vector<std::string> lines;
  absl::Status status = ReadMetricsLines(
      path, max_bytes, window,
      [&](const std::string& line, const nlohmann::json& record) {
        EXPECT_TRUE(record.is_object()) << line;
        lines.push_back(line);
      });
  if (!status.ok()) return status;
  return lines;
}

TEST(RunLayoutTest, NamesOnDisk) {
  // The on-disk contract: runs written before this header keep working.
  EXPECT_EQ(RunPath("RUN", kMetricsFile), "RUN/metrics.jsonl");
  EXPECT_EQ(RunPath("RUN", kBestDir), "RUN/best");
  EXPECT_EQ(RunEntries(),
            (std::vector<std::string>{"config.yaml", "config_changes.jsonl",
                                      "metrics.jsonl", "checkpoints", "best",
                                      "eval_results.json", "tb"}));
}

TEST(RunLayoutTest, WellFormedLinesInOrderWithTheirText) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("metrics.jsonl");
  ASSERT_TRUE(WriteFileAtomic(path,
                              "{\"step\": 1, \"loss\": 2.5}\n"
                              "\n"
                              "{\"step\": 2,\"eval_loss\":1}\n"
                              "[1, 2]\n"
                              "{\"step\": 3}\n")
                  .ok());
  for (MetricsWindow window : {MetricsWindow::kWhole, MetricsWindow::kTail}) {
    auto lines = Lines(path, 1 << 20, window);
    ASSERT_TRUE(lines.ok()) << lines.status();
    // Empty lines and JSON that is not an object are skipped; the others
    // come back byte for byte (the trainer rewrites them so).
    EXPECT_EQ(*lines, (std::vector<std::string>{"{\"step\": 1, \"loss\": 2.5}",
                                                "{\"step\": 2,\"eval_loss\":1}",
                                                "{\"step\": 3}"}));
  }
}

TEST(RunLayoutTest, TruncatedLastLineAndDuplicateKeysAreSkipped) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("metrics.jsonl");
  // A crash mid-write leaves a torn last line without its newline.
  ASSERT_TRUE(WriteFileAtomic(path,
                              "{\"step\": 1}\n"
                              "{\"step\": 2, \"step\": 3}\n"
                              "{\"step\": 4, \"lo")
                  .ok());
  auto lines = Lines(path, 1 << 20, MetricsWindow::kWhole);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(*lines, (std::vector<std::string>{"{\"step\": 1}"}));
  // A last line without its newline that is whole still counts.
  ASSERT_TRUE(WriteFileAtomic(path, "{\"step\": 1}\n{\"step\": 2}").ok());
  lines = Lines(path, 1 << 20, MetricsWindow::kWhole);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(lines->size(), 2u);
}

TEST(RunLayoutTest, TailReadsOnlyTheLastBytesFromAWholeLine) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("metrics.jsonl");
  std::string text;
  for (int step = 1; step <= 100; ++step) {
    text += "{\"step\": " + std::to_string(1000 + step) + "}\n";  // 15 bytes
  }
  ASSERT_TRUE(WriteFileAtomic(path, text).ok());
  // 50 bytes: the end of step 1097's line, then 1098..1100 whole.
  auto lines = Lines(path, 50, MetricsWindow::kTail);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(*lines,
            (std::vector<std::string>{"{\"step\": 1098}", "{\"step\": 1099}",
                                      "{\"step\": 1100}"}));
  // A window inside one line holds no whole line.
  lines = Lines(path, 10, MetricsWindow::kTail);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_TRUE(lines->empty());
  // A file no longer than the bound is read whole.
  lines = Lines(path, text.size(), MetricsWindow::kTail);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(lines->size(), 100u);
}

TEST(RunLayoutTest, WholeFileLongerThanTheBoundIsAnError) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("metrics.jsonl");
  ASSERT_TRUE(WriteFileAtomic(path, "{\"step\": 1}\n{\"step\": 2}\n").ok());
  auto lines = Lines(path, 10, MetricsWindow::kWhole);
  EXPECT_EQ(lines.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lines.status().message().find("larger than the limit of 10 bytes"),
            std::string::npos)
      << lines.status();
}

TEST(RunLayoutTest, MissingFileOrDirectoryIsAnError) {
  testing::TempDir tmp;
  for (MetricsWindow window : {MetricsWindow::kWhole, MetricsWindow::kTail}) {
    auto lines = Lines(tmp.Join("metrics.jsonl"), 1 << 20, window);
    EXPECT_EQ(lines.status().code(), absl::StatusCode::kNotFound);
    EXPECT_NE(lines.status().message().find("metrics.jsonl"),
              std::string::npos);
    lines = Lines(tmp.path(), 1 << 20, window);
    EXPECT_EQ(lines.status().code(), absl::StatusCode::kInvalidArgument)
        << lines.status();
  }
}

}  // namespace
}  // namespace xlnet
