// Status helpers used at I/O and user-input boundaries.
//
// Abseil 2022 (Debian 12) has absl::Status/StatusOr but no propagation
// macros; ours live here and nowhere else:
//
//   XLNET_RETURN_IF_ERROR(WriteFile(path, bytes));
//   XLNET_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
//
// Internal invariants use TORCH_CHECK (which throws c10::Error) instead.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define XLNET_STATUS_CONCAT_INNER_(a, b) a##b
#define XLNET_STATUS_CONCAT_(a, b) XLNET_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the caller if not OK.
#define XLNET_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status xlnet_status_ = (expr);         \
    if (!xlnet_status_.ok()) return xlnet_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the caller, otherwise moves the value into `lhs` (which may declare it).
#define XLNET_ASSIGN_OR_RETURN(lhs, rexpr) \
  XLNET_ASSIGN_OR_RETURN_IMPL_(            \
      XLNET_STATUS_CONCAT_(xlnet_statusor_, __LINE__), lhs, rexpr)

#define XLNET_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace xlnet {

// Adds context in front of a status message, keeping its code:
// Annotate(s, "reading ", path) -> "reading PATH: <original message>".
template <typename... Args>
absl::Status Annotate(const absl::Status& status, const Args&... context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context..., ": ", status.message()));
}

// Runs `fn` and turns any exception it throws (c10::Error from LibTorch,
// std::exception) into an Internal status with `context` in front. Used at
// boundaries where LibTorch calls may throw on bad input.
template <typename Fn>
absl::Status CatchExceptions(const std::string& context, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::string what = e.what();
    // c10::Error appends a C++ backtrace after the message ("Exception
    // raised from ..." or, for enforce failures such as an allocation,
    // "frame #0: ..."); keep the message.
    for (const char* backtrace : {"\nException raised from", "\nframe #"}) {
      auto pos = what.find(backtrace);
      if (pos != std::string::npos) what.resize(pos);
    }
    return absl::InternalError(absl::StrCat(context, ": ", what));
  }
}

}  // namespace xlnet
