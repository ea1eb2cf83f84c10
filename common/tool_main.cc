#include "common/tool_main.h"

#include <iostream>

#include "common/logging.h"
#include "common/status.h"

namespace xlnet {

int RunTool(const std::string& program, int argc, char** argv,
            const ToolFn& fn) {
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
