// The one place where errors become messages and exit codes. Each
// `*_main.cc` is:
//
//   int main(int argc, char** argv) {
//     return xlnet::RunTool("xlnet-inspect", argc, argv, &Run);
//   }
//
// where Run returns absl::Status. Exit codes: 0 success, 1 runtime failure,
// 2 bad usage or bad input (InvalidArgument, NotFound, FailedPrecondition).
// The message is one line on stderr: "xlnet-inspect: error: <message>".
// `--version` prints "PROGRAM VERSION (commit C)" (common/version.h) and
// exits 0 without running the tool. RunTool then routes LibTorch's own log
// lines into our format (RouteLibTorchLogs in common/logging.h).
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace xlnet {

using ToolFn = std::function<absl::Status(int argc, char** argv)>;

int RunTool(const std::string& program, int argc, char** argv,
            const ToolFn& fn);

}  // namespace xlnet
