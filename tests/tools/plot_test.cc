// xlnet-plot (tools/xlnet_plot.py) through its command line: the PNG it
// writes and its one-line errors with exit code 2 for bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::RunCommand;
using testing::TempDir;
using testing::ToolPath;

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

// The chunk types of a PNG file, in order; fails the test on a bad layout.
std::vector<std::string> ChunkTypes(const std::string& png) {
  std::vector<std::string> types;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t length = BigEndian32(png, at);
    types.push_back(png.substr(at + 4, 4));
    at += 12 + length;
  }
  EXPECT_EQ(at, png.size());
  return types;
}

std::string Plot(const std::string& args) {
  return ToolPath("plot") + " " + args;
}

TEST(PlotToolTest, DrawsTrainingAndEvalLoss) {
  TempDir dir;
  std::string text;
  for (int step = 10; step <= 400; step += 10) {
    text += "{\"step\": " + std::to_string(step) +
            ", \"loss\": " + std::to_string(6.0 - std::log(step) / 2) +
            ", \"lr\": 0.001}\n";
    if (step % 100 == 0) {
      text += "{\"step\": " + std::to_string(step) +
              ", \"eval_loss\": " + std::to_string(6.2 - std::log(step) / 2.5) +
              "}\n";
    }
  }
  text += "\n{\"step\": 410, \"loss\": null}\n";  // NaN is logged as null
  ASSERT_TRUE(WriteFileAtomic(dir.Join("metrics.jsonl"), text).ok());
  const std::string out = dir.Join("loss.png");

  // A run directory stands for its metrics.jsonl.
  const auto run =
      RunCommand(Plot(dir.path() + " --out " + out +
                      " --width 641 --height 401 " + "--title 'test run'"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "wrote " + out + "\n");
  auto png = ReadFile(out);
  ASSERT_TRUE(png.ok()) << png.status();
  const std::vector<std::string> types = ChunkTypes(*png);
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types.front(), "IHDR");
  EXPECT_EQ(types.back(), "IEND");
  EXPECT_EQ(BigEndian32(*png, 8), 13u);  // IHDR length
  EXPECT_EQ(BigEndian32(*png, 16), 641u);
  EXPECT_EQ(BigEndian32(*png, 20), 401u);
  EXPECT_EQ((*png)[24], 8);  // bit depth
  EXPECT_GT(png->size(), 5000u);

  // The metrics file itself, default size.
  const auto again =
      RunCommand(Plot(dir.Join("metrics.jsonl") + " --out " + out));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  png = ReadFile(out);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(BigEndian32(*png, 16), 900u);
  EXPECT_EQ(BigEndian32(*png, 20), 560u);
  EXPECT_EQ(*CleanStaleTemps(dir.path()), 0);  // written atomically

  const auto help = RunCommand(Plot("--help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--out"), std::string::npos) << help.output;
}

TEST(PlotToolTest, BadMetricsExitTwoNamingTheFileAndLine) {
  TempDir dir;
  const std::string metrics = dir.Join("metrics.jsonl");
  const std::string out = dir.Join("loss.png");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"step\": 1, \"loss\": 5.0}\n{\"step\": 2, \"loss\": 4.\n",
       ":2: not a JSON object"},
      {"{\"step\": 1, \"loss\": \"high\"}\n", ":1: 'loss' is not a number"},
      {"\n{\"loss\": 3}\n", ":2: a loss without a numeric 'step'"},
      {"{\"step\": true, \"eval_loss\": 3}\n",
       ":1: a loss without a numeric 'step'"},
      {"[1, 2]\n", ":1: not a JSON object"},
      {"{\"step\": 1, \"loss\": NaN}\n", ":1: not a JSON object"},
      {"{\"step\": 1, \"lr\": 0.1}\n", ": no line has 'loss' or 'eval_loss'"},
      {"{\"step\": 1, \"loss\": null}\n",
       ": every logged loss is NaN or infinite"},
  };
  for (const auto& [text, error] : cases) {
    ASSERT_TRUE(WriteFileAtomic(metrics, text).ok());
    const auto r = RunCommand(Plot(metrics + " --out " + out));
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(r.output.rfind("xlnet-plot: error: " + metrics + error, 0), 0u)
        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  }
  EXPECT_FALSE(PathExists(out));

  const auto missing =
      RunCommand(Plot(dir.Join("nope.jsonl") + " --out " + out));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find(dir.Join("nope.jsonl") + ": cannot open"),
            std::string::npos)
      << missing.output;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto special = RunCommand(Plot(fifo + " --out " + out));
  EXPECT_EQ(special.exit_code, 2);
  EXPECT_NE(special.output.find(fifo + ": not a regular file (a FIFO)"),
            std::string::npos)
      << special.output;
}

TEST(PlotToolTest, UsageErrorsExitTwoAndWriteFailuresOne) {
  TempDir dir;
  const std::string metrics = dir.Join("metrics.jsonl");
  ASSERT_TRUE(WriteFileAtomic(metrics, "{\"step\": 1, \"loss\": 5}\n").ok());
  const std::string out = dir.Join("loss.png");
  for (const std::string& args :
       {metrics, metrics + " --out " + out + " --width 100",
        metrics + " --out " + out + " --height 9000",
        metrics + " --out " + out + " --width x",
        metrics + " --out " + out + " --wdth 500",
        metrics + " x --out " + out}) {
    const auto r = RunCommand(Plot(args));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("xlnet-plot: error: ", 0), 0u) << r.output;
  }
  EXPECT_FALSE(PathExists(out));
  const auto unwritable =
      RunCommand(Plot(metrics + " --out " + dir.Join("no/such/dir/loss.png")));
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_NE(unwritable.output.find(dir.Join("no/such/dir/loss.png")),
            std::string::npos)
      << unwritable.output;
}

}  // namespace
}  // namespace xlnet
