#include "tools/loss_plot.h"

#include <c10/util/Exception.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"

namespace xlnet::plot {
namespace {

// 5x7 glyphs, one string per row, '#' = ink.
struct Glyph {
  char c;
  const char* rows[7];
};

constexpr Glyph kFont[] = {
    {' ', {".....", ".....", ".....", ".....", ".....", ".....", "....."}},
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
    {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
    {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
    {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
    {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
    {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
    {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
    {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
    {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
    {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
    {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
    {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
    {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
    {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
    {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
    {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
    {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
    {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
    {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
    {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
};

const Glyph& GlyphFor(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const Glyph& g : kFont) {
    if (g.c == c) return g;
  }
  for (const Glyph& g : kFont) {
    if (g.c == '?') return g;
  }
  return kFont[0];
}

constexpr int kGlyphAdvance = 6;  // 5 columns + 1 of spacing

void AppendBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

void AppendChunk(std::string* png, const char type[4],
                 const std::string& data) {
  AppendBigEndian32(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  png->append(body);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(body.data()),
              static_cast<uInt>(body.size()));
  AppendBigEndian32(png, static_cast<uint32_t>(crc));
}

// A metrics value: a number, or null (NaN/inf are written as null).
absl::StatusOr<double> NumberAt(const nlohmann::json& j, const char* key,
                                const std::string& where) {
  const nlohmann::json& v = j.at(key);
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", key, "' is not a number: ", v.dump()));
  }
  return v.get<double>();
}

}  // namespace

absl::StatusOr<std::vector<Series>> ReadLossCurves(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Series train{"training loss", {}, 0x1F77B4};
  Series eval{"eval loss", {}, 0xE6550D};
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat(path, ":", number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a JSON object (", e.what(), ")"));
    }
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a JSON object"));
    }
    const bool has_loss = j.contains("loss"),
               has_eval = j.contains("eval_loss");
    if (!has_loss && !has_eval) continue;
    if (!j.contains("step") || !j["step"].is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a loss without a numeric 'step'"));
    }
    const double step = j["step"].get<double>();
    if (has_loss) {
      XLNET_ASSIGN_OR_RETURN(double v, NumberAt(j, "loss", where));
      train.points.emplace_back(step, v);
    }
    if (has_eval) {
      XLNET_ASSIGN_OR_RETURN(double v, NumberAt(j, "eval_loss", where));
      eval.points.emplace_back(step, v);
    }
  }
  if (train.points.empty() && eval.points.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no line has 'loss' or 'eval_loss' (", number,
                     " lines); is this a run's metrics.jsonl?"));
  }
  std::vector<Series> out;
  if (!train.points.empty()) out.push_back(std::move(train));
  if (!eval.points.empty()) out.push_back(std::move(eval));
  return out;
}

// --------------------------------------------------------------------- canvas

Canvas::Canvas(int width, int height, uint32_t background)
    : width_(width), height_(height) {
  pixels_.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = (background >> 16) & 0xFF;
    pixels_[i + 1] = (background >> 8) & 0xFF;
    pixels_[i + 2] = background & 0xFF;
  }
  ClearClip();
}

uint32_t Canvas::Pixel(int x, int y) const {
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return (uint32_t{pixels_[i]} << 16) | (uint32_t{pixels_[i + 1]} << 8) |
         pixels_[i + 2];
}

void Canvas::SetClip(int x0, int y0, int x1, int y1) {
  clip_x0_ = std::max(0, x0);
  clip_y0_ = std::max(0, y0);
  clip_x1_ = std::min(width_ - 1, x1);
  clip_y1_ = std::min(height_ - 1, y1);
}

void Canvas::ClearClip() { SetClip(0, 0, width_ - 1, height_ - 1); }

void Canvas::SetPixel(int x, int y, uint32_t rgb) {
  if (x < clip_x0_ || x > clip_x1_ || y < clip_y0_ || y > clip_y1_) return;
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  pixels_[i] = (rgb >> 16) & 0xFF;
  pixels_[i + 1] = (rgb >> 8) & 0xFF;
  pixels_[i + 2] = rgb & 0xFF;
}

void Canvas::FillRect(int x0, int y0, int x1, int y1, uint32_t rgb) {
  for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y) {
    for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) {
      SetPixel(x, y, rgb);
    }
  }
}

void Canvas::Line(double fx0, double fy0, double fx1, double fy1, uint32_t rgb,
                  int thickness) {
  // Keep far-off coordinates in int range; clipping does the rest.
  auto clamp = [](double v) {
    return static_cast<int>(std::lround(std::clamp(v, -1e6, 1e6)));
  };
  int x0 = clamp(fx0), y0 = clamp(fy0);
  const int x1 = clamp(fx1), y1 = clamp(fy1);
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  int err = dx + dy;
  while (true) {
    FillRect(x0 + lo, y0 + lo, x0 + hi, y0 + hi, rgb);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::Text(int x, int y, const std::string& text, uint32_t rgb,
                  int scale) {
  for (size_t k = 0; k < text.size(); ++k) {
    const Glyph& g = GlyphFor(text[k]);
    const int gx = x + static_cast<int>(k) * kGlyphAdvance * scale;
    for (int row = 0; row < 7; ++row) {
      for (int col = 0; col < 5; ++col) {
        if (g.rows[row][col] != '#') continue;
        FillRect(gx + col * scale, y + row * scale, gx + (col + 1) * scale - 1,
                 y + (row + 1) * scale - 1, rgb);
      }
    }
  }
}

int Canvas::TextWidth(const std::string& text, int scale) {
  if (text.empty()) return 0;
  return (static_cast<int>(text.size()) * kGlyphAdvance - 1) * scale;
}

// ------------------------------------------------------------------------ png

std::string EncodePng(const Canvas& canvas) {
  const int w = canvas.width(), h = canvas.height();
  // Scanlines, each prefixed with filter type 0 (none).
  std::string raw;
  raw.reserve(static_cast<size_t>(h) * (1 + 3 * w));
  const auto& px = canvas.pixels();
  for (int y = 0; y < h; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(px.data()) +
                   static_cast<size_t>(y) * w * 3,
               static_cast<size_t>(w) * 3);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  const int rc =
      compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
                reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 9);
  TORCH_CHECK(rc == Z_OK, "zlib compress2 failed (", rc, ") on ", raw.size(),
              " bytes");
  packed.resize(packed_size);

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  AppendBigEndian32(&ihdr, static_cast<uint32_t>(w));
  AppendBigEndian32(&ihdr, static_cast<uint32_t>(h));
  ihdr.push_back(8);  // bit depth
  ihdr.push_back(2);  // colour type: RGB
  ihdr.push_back(0);  // compression: deflate
  ihdr.push_back(0);  // filter method 0
  ihdr.push_back(0);  // no interlace
  AppendChunk(&png, "IHDR", ihdr);
  AppendChunk(&png, "IDAT", packed);
  AppendChunk(&png, "IEND", "");
  return png;
}

// ----------------------------------------------------------------------- plot

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || target < 1) {
    return ticks;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5   ? 1.0
                       : norm < 3.0 ? 2.0
                       : norm < 7.0 ? 5.0
                                    : 10.0) *
                      mag;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9;
       k += 1) {
    const double v = k * step;
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

std::string TickLabel(double value, double spacing) {
  const double a = std::abs(value);
  if (a >= 1e6 || (a > 0 && a < 1e-3)) return absl::StrFormat("%.3g", value);
  int decimals = 0;
  if (spacing > 0 && spacing < 1) {
    decimals = static_cast<int>(std::ceil(-std::log10(spacing) - 1e-9));
  }
  return absl::StrFormat("%.*f", decimals, value);
}

Canvas DrawLossPlot(const std::vector<Series>& series,
                    const PlotOptions& options) {
  constexpr uint32_t kInk = 0x222222, kGrid = 0xE4E4E4, kFrame = 0x888888;
  constexpr int kScale = 2;  // font pixels are 2x2
  const int char_h = 7 * kScale;
  Canvas c(options.width, options.height);
  const int left = 100, right = options.width - 24;
  const int top = 56, bottom = options.height - 72;

  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  double ymin = xmin, ymax = -xmin;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  TORCH_CHECK(std::isfinite(xmin), "DrawLossPlot: no finite point in ",
              series.size(), " series");
  if (xmax == xmin) {
    xmin -= 1;
    xmax += 1;
  }
  if (ymax == ymin) {
    const double pad = std::max(0.5, std::abs(ymin) * 0.1);
    ymin -= pad;
    ymax += pad;
  } else {
    const double pad = 0.05 * (ymax - ymin);
    ymin -= pad;
    ymax += pad;
  }
  auto px = [&](double x) {
    return left + (x - xmin) / (xmax - xmin) * (right - left);
  };
  auto py = [&](double y) {
    return bottom - (y - ymin) / (ymax - ymin) * (bottom - top);
  };

  // Grid, ticks and tick labels.
  const std::vector<double> xt = NiceTicks(xmin, xmax, 8);
  const std::vector<double> yt = NiceTicks(ymin, ymax, 6);
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1;
  const double ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double x : xt) {
    const int X = static_cast<int>(std::lround(px(x)));
    c.FillRect(X, top, X, bottom, kGrid);
    c.FillRect(X, bottom, X, bottom + 5, kInk);
    const std::string label = TickLabel(x, xs);
    c.Text(X - Canvas::TextWidth(label, kScale) / 2, bottom + 10, label, kInk,
           kScale);
  }
  for (double y : yt) {
    const int Y = static_cast<int>(std::lround(py(y)));
    c.FillRect(left, Y, right, Y, kGrid);
    c.FillRect(left - 5, Y, left, Y, kInk);
    const std::string label = TickLabel(y, ys);
    c.Text(left - 10 - Canvas::TextWidth(label, kScale), Y - char_h / 2, label,
           kInk, kScale);
  }
  // Frame and axis titles.
  c.FillRect(left, top, right, top, kFrame);
  c.FillRect(right, top, right, bottom, kFrame);
  c.FillRect(left, bottom, right, bottom, kInk);
  c.FillRect(left, top, left, bottom, kInk);
  const std::string xlabel = "step";
  c.Text((left + right - Canvas::TextWidth(xlabel, kScale)) / 2,
         bottom + 20 + char_h, xlabel, kInk, kScale);
  c.Text(left - 10 - Canvas::TextWidth("loss", kScale), top - char_h - 12,
         "loss", kInk, kScale);
  if (!options.title.empty()) {
    c.Text(
        std::max(
            4, (options.width - Canvas::TextWidth(options.title, kScale)) / 2),
        12, options.title, kInk, kScale);
  }

  // Curves, clipped to the plot area; a non-finite value breaks the line.
  c.SetClip(left + 1, top + 1, right - 1, bottom - 1);
  for (const Series& s : series) {
    const bool markers = s.points.size() <= 60;
    bool have_prev = false;
    double prev_x = 0, prev_y = 0;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        have_prev = false;
        continue;
      }
      const double X = px(x), Y = py(y);
      if (have_prev) c.Line(prev_x, prev_y, X, Y, s.rgb, 2);
      if (markers) {
        const int ix = static_cast<int>(std::lround(X)),
                  iy = static_cast<int>(std::lround(Y));
        c.FillRect(ix - 3, iy - 3, ix + 3, iy + 3, s.rgb);
      }
      prev_x = X;
      prev_y = Y;
      have_prev = true;
    }
  }
  c.ClearClip();

  // Legend, top right inside the plot.
  int legend_w = 0;
  for (const Series& s : series) {
    legend_w = std::max(legend_w, Canvas::TextWidth(s.name, kScale));
  }
  legend_w += 3 * 12 + 28;
  const int row_h = char_h + 10;
  const int lx1 = right - 10, lx0 = lx1 - legend_w;
  const int ly0 = top + 10,
            ly1 = ly0 + static_cast<int>(series.size()) * row_h + 8;
  c.FillRect(lx0, ly0, lx1, ly1, 0xFFFFFF);
  c.FillRect(lx0, ly0, lx1, ly0, kFrame);
  c.FillRect(lx0, ly1, lx1, ly1, kFrame);
  c.FillRect(lx0, ly0, lx0, ly1, kFrame);
  c.FillRect(lx1, ly0, lx1, ly1, kFrame);
  for (size_t i = 0; i < series.size(); ++i) {
    const int y = ly0 + 8 + static_cast<int>(i) * row_h;
    c.Line(lx0 + 10, y + char_h / 2, lx0 + 38, y + char_h / 2, series[i].rgb,
           3);
    c.Text(lx0 + 48, y, series[i].name, kInk, kScale);
  }
  return c;
}

absl::Status PlotMetricsFile(const std::string& metrics_path,
                             const std::string& png_path,
                             const PlotOptions& options) {
  XLNET_ASSIGN_OR_RETURN(std::vector<Series> series,
                         ReadLossCurves(metrics_path));
  bool finite = false;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      finite = finite || (std::isfinite(x) && std::isfinite(y));
    }
  }
  if (!finite) {
    return absl::InvalidArgumentError(
        absl::StrCat(metrics_path, ": every logged loss is NaN or infinite"));
  }
  if (options.width < 320 || options.height < 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", options.width, "x", options.height,
                     " is too small (at least 320x200)"));
  }
  const Canvas canvas = DrawLossPlot(series, options);
  return WriteFileAtomic(png_path, EncodePng(canvas));
}

}  // namespace xlnet::plot
