// Loss curves from a run's metrics.jsonl as a PNG, with no plotting
// library: a small RGB canvas (lines, rectangles, a built-in 5x7 bitmap
// font) and a PNG encoder over zlib. Used by xlnet-plot.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet::plot {

// One curve: (step, value) points in file order.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  uint32_t rgb = 0;  // 0xRRGGBB
};

// Reads metrics.jsonl: "loss" of the training lines and, when present,
// "eval_loss" of the evaluation lines, each against "step". Errors name
// the file and line (bad JSON, a non-numeric step or loss) or say that no
// line has a loss.
absl::StatusOr<std::vector<Series>> ReadLossCurves(const std::string& path);

// An RGB image, row-major, 3 bytes a pixel.
class Canvas {
 public:
  Canvas(int width, int height, uint32_t background = 0xFFFFFF);
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& pixels() const { return pixels_; }
  uint32_t Pixel(int x, int y) const;
  // Drawing clips to the canvas, or to the clip rectangle when set.
  void SetClip(int x0, int y0, int x1, int y1);
  void ClearClip();
  void SetPixel(int x, int y, uint32_t rgb);
  void FillRect(int x0, int y0, int x1, int y1, uint32_t rgb);
  // A line `thickness` pixels wide (Bresenham with a square pen).
  void Line(double x0, double y0, double x1, double y1, uint32_t rgb,
            int thickness = 1);
  // Text in the built-in 5x7 font (digits, letters (drawn upper case) and
  // . , - + _ / : ( ) % = and space; others draw as '?'), each font pixel
  // `scale` x `scale`, top-left at (x, y).
  void Text(int x, int y, const std::string& text, uint32_t rgb, int scale = 1);
  // Width in pixels of Text(text) at `scale`.
  static int TextWidth(const std::string& text, int scale = 1);

 private:
  int width_, height_;
  int clip_x0_, clip_y0_, clip_x1_, clip_y1_;
  std::vector<uint8_t> pixels_;
};

// PNG bytes of `canvas` (8-bit RGB, no interlace, zlib level 9, filter 0).
std::string EncodePng(const Canvas& canvas);

struct PlotOptions {
  int width = 900;
  int height = 560;
  std::string title;
};

// Draws the series against step: axes with "nice" tick values and labels,
// a legend. At least one series must have a point.
Canvas DrawLossPlot(const std::vector<Series>& series,
                    const PlotOptions& options);

// metrics.jsonl -> PNG file (written atomically).
absl::Status PlotMetricsFile(const std::string& metrics_path,
                             const std::string& png_path,
                             const PlotOptions& options);

// Tick values covering [lo, hi] at a 1/2/5 x 10^k spacing, about `target`
// of them.
std::vector<double> NiceTicks(double lo, double hi, int target);
// Short tick label: "0.5", "1200", "1.5e+05".
std::string TickLabel(double value, double spacing);

}  // namespace xlnet::plot
