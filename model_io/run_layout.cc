#include "model_io/run_layout.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"

namespace xlnet {
namespace {

// The last `max_bytes` of the file at `path`, from the first whole line in
// them; all of it when it is no longer.
absl::StatusOr<std::string> ReadTail(const std::string& path,
                                     uint64_t max_bytes) {
  uint64_t size = 0;
  XLNET_ASSIGN_OR_RETURN(const int fd,
                         OpenRegularFile(path, kNoSizeLimit, &size));
  const uint64_t start = size > max_bytes ? size - max_bytes : 0;
  std::string text(size - start, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pread(fd, text.data() + done, text.size() - done, start + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status status = absl::DataLossError(
          absl::StrCat(path, ": read failed: ", std::strerror(errno)));
      ::close(fd);
      return status;
    }
    if (n == 0) break;  // the file shrank since fstat
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(done);
  if (start > 0) {
    // The window starts inside a line (or at one we cannot tell is whole).
    const size_t eol = text.find('\n');
    text.erase(0, eol == std::string::npos ? text.size() : eol + 1);
  }
  return text;
}

}  // namespace

std::string RunPath(absl::string_view run_dir, absl::string_view name) {
  return absl::StrCat(run_dir, "/", name);
}

const std::vector<std::string>& RunEntries() {
  static const auto* entries = new std::vector<std::string>{
      kRunConfigFile, kConfigChangesFile, kMetricsFile,   kCheckpointsDir,
      kBestDir,       kEvalResultsFile,   kTensorBoardDir};
  return *entries;
}

absl::Status ReadMetricsLines(const std::string& path, uint64_t max_bytes,
                              MetricsWindow window,
                              const MetricsLineVisitor& visit) {
  XLNET_ASSIGN_OR_RETURN(const std::string text,
                         window == MetricsWindow::kWhole
                             ? ReadFile(path, max_bytes)
                             : ReadTail(path, max_bytes));
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) continue;
    absl::StatusOr<nlohmann::json> record = ParseJson(line, path);
    if (!record.ok() || !record->is_object()) continue;
    visit(line, *record);
  }
  return absl::OkStatus();
}

}  // namespace xlnet
