// xlnet-plot: a run's loss curves (training loss, and eval_loss when
// logged) against step, drawn to a PNG.
//
//   build/bin/xlnet-plot RUN/metrics.jsonl --out loss.png
//   build/bin/xlnet-plot RUN --out loss.png        # RUN/metrics.jsonl
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "tools/loss_plot.h"

namespace {

absl::Status Run(int argc, char** argv) {
  std::string out, title;
  int64_t width = 900, height = 560;
  xlnet::FlagParser flags("xlnet-plot",
                          "RUN/metrics.jsonl|RUN --out loss.png [--title T]");
  flags.AddString("out", &out, "PNG file to write");
  flags.AddString("title", &title, "title (default: the metrics path)");
  flags.AddInt("width", &width, "image width in pixels");
  flags.AddInt("height", &height, "image height in pixels");
  flags.AllowPositional();
  flags.Require("out");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  if (flags.positional().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one metrics file (RUN/metrics.jsonl or RUN), got ",
        flags.positional().size(), " arguments; see --help"));
  }
  std::string metrics = flags.positional()[0];
  if (xlnet::IsDirectory(metrics)) metrics += "/metrics.jsonl";
  if (width > 8000 || height > 8000) {
    return absl::InvalidArgumentError("--width and --height must be <= 8000");
  }
  xlnet::plot::PlotOptions options;
  options.width = static_cast<int>(width);
  options.height = static_cast<int>(height);
  options.title = title.empty() ? metrics : title;
  XLNET_RETURN_IF_ERROR(xlnet::plot::PlotMetricsFile(metrics, out, options));
  std::cout << "wrote " << out << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-plot", argc, argv, &Run);
}
