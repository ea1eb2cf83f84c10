// xlnet-plot's library: metrics.jsonl parsing (errors name the line), the
// PNG container (signature, IHDR, CRCs, IEND) and that the image data
// inflates to the declared size with the curves' colours in it.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <fstream>

#include "common/file_util.h"
#include "tests/test_util.h"
#include "tools/loss_plot.h"

namespace xlnet::plot {
namespace {

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

struct Chunk {
  std::string type;
  std::string data;
};

// Splits a PNG into chunks, checking every CRC.
std::vector<Chunk> ParsePng(const std::string& png) {
  std::vector<Chunk> chunks;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t length = BigEndian32(png, at);
    EXPECT_LE(at + 12 + length, png.size());
    if (at + 12 + length > png.size()) break;
    Chunk c{png.substr(at + 4, 4), png.substr(at + 8, length)};
    const std::string body = png.substr(at + 4, 4 + length);
    const uLong crc =
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()),
              static_cast<uInt>(body.size()));
    EXPECT_EQ(BigEndian32(png, at + 8 + length), crc) << c.type;
    chunks.push_back(std::move(c));
    at += 12 + length;
  }
  EXPECT_EQ(at, png.size());
  return chunks;
}

std::string WriteMetrics(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.Join("metrics.jsonl");
  std::ofstream(path) << text;
  return path;
}

TEST(PlotTest, PngContainerAndPixels) {
  testing::TempDir dir;
  std::string text;
  for (int step = 10; step <= 400; step += 10) {
    text += "{\"step\": " + std::to_string(step) +
            ", \"loss\": " + std::to_string(6.0 - std::log(step) / 2) +
            ", \"lr\": 0.001}\n";
    if (step % 100 == 0) {
      text += "{\"step\": " + std::to_string(step) +
              ", \"eval_loss\": " + std::to_string(6.2 - std::log(step) / 2.5) +
              ", \"eval_accuracy\": 0.1}\n";
    }
  }
  const std::string metrics = WriteMetrics(dir, text);
  PlotOptions options;
  options.width = 640;
  options.height = 400;
  options.title = "test run";
  const std::string out = dir.Join("loss.png");
  ASSERT_TRUE(PlotMetricsFile(metrics, out, options).ok());
  auto png = ReadFile(out);
  ASSERT_TRUE(png.ok()) << png.status();

  const std::vector<Chunk> chunks = ParsePng(*png);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks.front().type, "IHDR");
  EXPECT_EQ(chunks.back().type, "IEND");
  EXPECT_TRUE(chunks.back().data.empty());
  const std::string& ihdr = chunks.front().data;
  ASSERT_EQ(ihdr.size(), 13u);
  EXPECT_EQ(BigEndian32(ihdr, 0), 640u);
  EXPECT_EQ(BigEndian32(ihdr, 4), 400u);
  EXPECT_EQ(ihdr[8], 8);  // bit depth
  EXPECT_EQ(ihdr[9], 2);  // RGB
  EXPECT_EQ(ihdr.substr(10), std::string(3, '\0'));

  std::string idat;
  for (const Chunk& c : chunks) {
    if (c.type == "IDAT") idat += c.data;
  }
  const size_t row = 1 + 3 * 640;
  std::string raw(400 * row + 1, '\0');  // one spare byte: must stay unused
  uLongf raw_size = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                       reinterpret_cast<const Bytef*>(idat.data()),
                       static_cast<uLong>(idat.size())),
            Z_OK);
  ASSERT_EQ(raw_size, 400 * row);
  std::map<uint32_t, int> colours;
  for (size_t y = 0; y < 400; ++y) {
    EXPECT_EQ(raw[y * row], 0) << "row " << y << " filter";
    for (size_t x = 0; x < 640; ++x) {
      const size_t i = y * row + 1 + 3 * x;
      const uint32_t rgb = (uint32_t{static_cast<uint8_t>(raw[i])} << 16) |
                           (uint32_t{static_cast<uint8_t>(raw[i + 1])} << 8) |
                           uint32_t{static_cast<uint8_t>(raw[i + 2])};
      ++colours[rgb];
    }
  }
  EXPECT_EQ(raw[0 * row + 1], '\xff');  // white corner
  EXPECT_GT(colours[0xFFFFFF], 640 * 400 / 2);
  // Both curves (and their legend samples) and dark text/axes are drawn.
  EXPECT_GT(colours[0x1F77B4], 200);
  EXPECT_GT(colours[0xE6550D], 100);
  EXPECT_GT(colours[0x222222], 500);
}

TEST(PlotTest, ReadsTrainingAndEvalCurves) {
  testing::TempDir dir;
  const std::string metrics = WriteMetrics(
      dir,
      "{\"step\": 1, \"loss\": 5.0}\n\n{\"step\": 2, \"loss\": null}\n"
      "{\"step\": 2, \"eval_loss\": 4.5, \"eval_unigram_loss\": 5.5}\n");
  auto series = ReadLossCurves(metrics);
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->size(), 2u);
  EXPECT_EQ((*series)[0].name, "training loss");
  ASSERT_EQ((*series)[0].points.size(), 2u);
  EXPECT_TRUE(std::isnan((*series)[0].points[1].second));  // NaN logged as null
  EXPECT_EQ((*series)[1].points,
            (std::vector<std::pair<double, double>>{{2.0, 4.5}}));
}

TEST(PlotTest, ErrorsNameTheFileAndLine) {
  testing::TempDir dir;
  const std::string missing = dir.Join("nope/metrics.jsonl");
  auto a = PlotMetricsFile(missing, dir.Join("a.png"), {});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find(missing), std::string::npos) << a;

  const std::string bad = WriteMetrics(
      dir, "{\"step\": 1, \"loss\": 5.0}\n{\"step\": 2, \"loss\": 4.\n");
  auto b = ReadLossCurves(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(bad + ":2: not a JSON object"),
            std::string::npos)
      << b.status();

  WriteMetrics(dir, "{\"step\": 1, \"loss\": \"high\"}\n");
  auto c = ReadLossCurves(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(bad + ":1: 'loss' is not a number"),
            std::string::npos)
      << c.status();

  WriteMetrics(dir, "{\"loss\": 3}\n");
  auto d = ReadLossCurves(bad);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(":1: a loss without a numeric 'step'"),
            std::string::npos)
      << d.status();

  WriteMetrics(dir, "{\"step\": 1, \"lr\": 0.1}\n");
  auto e = ReadLossCurves(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no line has 'loss'"), std::string::npos)
      << e.status();
  EXPECT_FALSE(PathExists(dir.Join("a.png")));
}

TEST(PlotTest, NiceTicksAndLabels) {
  EXPECT_EQ(
      NiceTicks(0, 4000, 8),
      (std::vector<double>{0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000}));
  const std::vector<double> y = NiceTicks(4.62, 5.81, 6);
  ASSERT_EQ(y.size(), 6u);  // 4.8, 5.0, ..., 5.8
  EXPECT_NEAR(y.front(), 4.8, 1e-12);
  EXPECT_NEAR(y.back(), 5.8, 1e-12);
  EXPECT_EQ(TickLabel(5.2, 0.2), "5.2");
  EXPECT_EQ(TickLabel(1500, 500), "1500");
  EXPECT_EQ(TickLabel(0.05, 0.05), "0.05");
  EXPECT_EQ(TickLabel(2.5e6, 5e5), "2.5e+06");
  EXPECT_TRUE(NiceTicks(1, 1, 5).empty());
}

TEST(PlotTest, TextUsesTheBuiltInFont) {
  Canvas c(40, 10);
  c.Text(0, 0, "1", 0x000000);
  // '1' row 0 is "..#..": only column 2 inked.
  EXPECT_EQ(c.Pixel(2, 0), 0x000000u);
  EXPECT_EQ(c.Pixel(1, 0), 0xFFFFFFu);
  EXPECT_EQ(c.Pixel(3, 0), 0xFFFFFFu);
  EXPECT_EQ(Canvas::TextWidth("ab", 2), 22);
}

}  // namespace
}  // namespace xlnet::plot
