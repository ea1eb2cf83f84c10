// xlnet-inspect: prints what a safetensors file, model directory or YAML
// config holds.
#include <iostream>

#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "model_io/inspect.h"

namespace {

absl::Status Run(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;
  xlnet::FlagParser flags(
      "xlnet-inspect",
      "PATH | --config FILE.yaml [--set section.key=value ...]\n\n"
      "  PATH.safetensors  each tensor's name, dtype, shape and size\n"
      "  MODEL_DIR         config.json summary and parameter count\n"
      "  FILE.yaml         the fully resolved, validated config");
  bool runtime = false;
  flags.AddConfigFlags(&config_path, &overrides);
  flags.AddBool(
      "runtime", &runtime,
      "print LibTorch version, threads and the BLAS in use, then exit");
  flags.AllowPositional();  // PATH
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  if (runtime) {
    xlnet::ConfigureThreads(0);
    std::cout << xlnet::RuntimeSummary() << "\n";
    return absl::OkStatus();
  }
  std::vector<std::string> paths = flags.positional();
  if (!config_path.empty()) paths.push_back(config_path);
  if (paths.size() != 1) {
    return absl::InvalidArgumentError(
        "expected exactly one PATH or --config FILE; see xlnet-inspect --help");
  }
  if (!overrides.empty() && config_path.empty() &&
      paths[0].find(".yaml") == std::string::npos &&
      paths[0].find(".yml") == std::string::npos) {
    return absl::InvalidArgumentError("--set applies only to a YAML config");
  }
  return xlnet::InspectPath(paths[0], overrides, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-inspect", argc, argv, &Run);
}
