// A small leveled logger: one line per message with timestamp, level, rank
// and source location, written to stderr.
//
//   XLOG(INFO) << "step " << step << " loss " << loss;
//   -> 2026-11-22 14:03:01.123 I r0 trainer.cc:42] step 10 loss 3.2
//
// The minimum level comes from XLNET_LOG_LEVEL (debug|info|warning|error),
// default info. Thread-safe: each message is written with one call.
#pragma once

#include <sstream>
#include <string>

namespace xlnet {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Rank shown in every line (set once distributed setup knows it).
void SetLogRank(int rank);

// Routes LibTorch's own log lines into this format and rank: Debian's
// LibTorch logs through glog (c10d's rendezvous and Gloo messages, TORCH_WARN),
// which would otherwise write its own "I1123 03:43:00.123 ..." lines (and,
// before InitGoogleLogging, a warning about it) between ours. glog is
// initialised with stderr and log files off and a sink that forwards each
// message to LogMessage. Idempotent; RunTool calls it first. Returns false
// (and does nothing) where LibTorch does not log through glog (pip wheels:
// c10's own logging, which has no hook; its lines stay unformatted).
bool RouteLibTorchLogs(const char* program);
// Messages below `level` are dropped.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows a stream expression when a level is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace xlnet

#define XLNET_LOG_LEVEL_DEBUG ::xlnet::LogLevel::kDebug
#define XLNET_LOG_LEVEL_INFO ::xlnet::LogLevel::kInfo
#define XLNET_LOG_LEVEL_WARNING ::xlnet::LogLevel::kWarning
#define XLNET_LOG_LEVEL_ERROR ::xlnet::LogLevel::kError

#define XLOG(level)                                                          \
  (XLNET_LOG_LEVEL_##level < ::xlnet::MinLogLevel())                         \
      ? (void)0                                                              \
      : ::xlnet::LogVoidify() &                                              \
            ::xlnet::LogMessage(XLNET_LOG_LEVEL_##level, __FILE__, __LINE__) \
                .stream()
