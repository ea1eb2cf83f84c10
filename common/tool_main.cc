#include "common/tool_main.h"

#include <iostream>

#include "common/logging.h"
#include "common/status.h"
#include "common/version.h"

namespace xlnet {

int RunTool(const std::string& program, int argc, char** argv,
            const ToolFn& fn) {
  // --version, anywhere before "--", prints "PROGRAM VERSION (commit C)".
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--version") {
      std::cout << VersionLine(program) << std::endl;
      return 0;
    }
  }
  RouteLibTorchLogs(argc > 0 ? argv[0] : "xlnet");
  const absl::Status status =
      CatchExceptions(program, [&]() { return fn(argc, argv); });
  if (status.ok()) return 0;
  std::cerr << program << ": error: " << status.message() << std::endl;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 2;
    default:
      return 1;
  }
}

}  // namespace xlnet
