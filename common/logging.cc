#include "common/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#if defined(XLNET_WITH_GLOG)
#include <glog/logging.h>
#endif

namespace xlnet {
namespace {

std::atomic<int> g_rank{0};

LogLevel LevelFromEnv() {
  const char* env = std::getenv("XLNET_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int> g_min_level{static_cast<int>(LevelFromEnv())};

char LevelChar(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

#if defined(XLNET_WITH_GLOG)
// Forwards glog messages (LibTorch's) to LogMessage, dropping those below
// our level.
class GlogSink : public google::LogSink {
 public:
  using google::LogSink::send;
#if defined(XLNET_GLOG_HAS_LOGMESSAGETIME)
  void send(google::LogSeverity severity, const char* full_filename,
            const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message,
            size_t message_len) override {
    Forward(severity, base_filename, line, message, message_len);
  }
#else
  void send(google::LogSeverity severity, const char* full_filename,
            const char* base_filename, int line, const std::tm* time,
            const char* message, size_t message_len) override {
    Forward(severity, base_filename, line, message, message_len);
  }
#endif

 private:
  static void Forward(google::LogSeverity severity, const char* file, int line,
                      const char* message, size_t message_len) {
    const LogLevel level = severity == google::GLOG_INFO ? LogLevel::kInfo
                           : severity == google::GLOG_WARNING
                               ? LogLevel::kWarning
                               : LogLevel::kError;
    if (level < MinLogLevel()) return;
    LogMessage(level, file, line).stream().write(message, message_len);
  }
};
#endif

}  // namespace

bool RouteLibTorchLogs(const char* program) {
#if defined(XLNET_WITH_GLOG)
  static std::once_flag once;
  std::call_once(once, [program]() {
    if (!google::IsGoogleLoggingInitialized()) {
      google::InitGoogleLogging(program);
    }
    FLAGS_logtostderr = false;
    FLAGS_alsologtostderr = false;
    FLAGS_stderrthreshold = google::NUM_SEVERITIES;  // nothing to stderr
    for (int s = 0; s < google::NUM_SEVERITIES; ++s) {
      google::SetLogDestination(s, "");  // "" = no log file
    }
    // Leaked on purpose: LibTorch may log during static destruction.
    google::AddLogSink(new GlogSink());
  });
  return true;
#else
  (void)program;
  return false;
#endif
}

void SetLogRank(int rank) { g_rank = rank; }
void SetMinLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }
LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load()); }

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03d", static_cast<int>(tv.tv_usec / 1000));
  stream_ << stamp << ms << ' ' << LevelChar(level_) << " r" << g_rank.load()
          << ' ' << base << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write call keeps lines from different threads and ranks whole.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace xlnet
