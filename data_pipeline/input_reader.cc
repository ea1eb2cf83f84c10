#include "data_pipeline/input_reader.h"

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {
namespace {

constexpr size_t kBlockBytes = 1 << 18;

class PlainReader : public ByteReader {
 public:
  PlainReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PlainReader() override { ::close(fd_); }
  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    while (true) {
      const ssize_t got = ::read(fd_, buffer, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) {
        return absl::DataLossError(
            absl::StrCat(path_, ": read failed: ", std::strerror(errno)));
      }
    }
  }

 private:
  std::string path_;
  int fd_;
};

class GzipReader : public ByteReader {
 public:
  GzipReader(std::string path, gzFile file)
      : path_(std::move(path)), file_(file) {}
  ~GzipReader() override { gzclose(file_); }
  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    const unsigned want = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    const int got = gzread(file_, buffer, want);
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (got < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      return absl::DataLossError(absl::StrCat(
          path_, ": corrupt or truncated gzip data (", message, ")"));
    }
    if (!checked_ && got > 0) {
      checked_ = true;
      if (gzdirect(file_)) {
        return absl::DataLossError(
            absl::StrCat(path_, ": not gzip data (the name ends in .gz)"));
      }
    }
    return static_cast<size_t>(got);
  }

 private:
  std::string path_;
  gzFile file_;
  bool checked_ = false;
};

class ZstdReader : public ByteReader {
 public:
  ZstdReader(std::string path, int fd)
      : path_(std::move(path)),
        fd_(fd),
        stream_(ZSTD_createDStream()),
        in_buffer_(ZSTD_DStreamInSize(), '\0') {}
  ~ZstdReader() override {
    ZSTD_freeDStream(stream_);
    ::close(fd_);
  }
  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    ZSTD_outBuffer out{buffer, n, 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size) {
        if (eof_) {
          if (pending_ != 0) {
            return absl::DataLossError(
                absl::StrCat(path_, ": truncated zstd data"));
          }
          return size_t{0};
        }
        ssize_t got;
        do {
          got = ::read(fd_, in_buffer_.data(), in_buffer_.size());
        } while (got < 0 && errno == EINTR);
        if (got < 0) {
          return absl::DataLossError(
              absl::StrCat(path_, ": read failed: ", std::strerror(errno)));
        }
        if (got == 0) {
          eof_ = true;
          continue;
        }
        in_ = ZSTD_inBuffer{in_buffer_.data(), static_cast<size_t>(got), 0};
      }
      const size_t ret = ZSTD_decompressStream(stream_, &out, &in_);
      if (ZSTD_isError(ret)) {
        return absl::DataLossError(absl::StrCat(path_, ": corrupt zstd data (",
                                                ZSTD_getErrorName(ret), ")"));
      }
      pending_ = ret;
    }
    return out.pos;
  }

 private:
  std::string path_;
  int fd_;
  ZSTD_DStream* stream_;
  std::string in_buffer_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  size_t pending_ = 0;  // 0 once a frame is complete
  bool eof_ = false;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string_view WithoutCompressionSuffix(std::string_view name) {
  for (std::string_view suffix : {".gz", ".zst"}) {
    if (EndsWith(name, suffix)) {
      name.remove_suffix(suffix.size());
      break;
    }
  }
  return name;
}

// The keys of the JSON object `json`, comma-separated (nlohmann::json
// keeps them sorted), or "(none)".
std::string KeysOf(const nlohmann::json& json) {
  std::string keys;
  for (const auto& item : json.items()) {
    absl::StrAppend(&keys, keys.empty() ? "" : ", ", item.key());
  }
  return keys.empty() ? "(none)" : keys;
}

}  // namespace

InputKind KindOfInput(const std::string& path) {
  InputKind kind;
  if (EndsWith(path, ".gz")) kind.compression = Compression::kGzip;
  if (EndsWith(path, ".zst")) kind.compression = Compression::kZstd;
  const std::string_view base = WithoutCompressionSuffix(path);
  if (EndsWith(base, ".jsonl") || EndsWith(base, ".json")) {
    kind.format = TextFormat::kJsonLines;
  }
  return kind;
}

absl::StatusOr<std::unique_ptr<ByteReader>> ByteReader::Open(
    const std::string& path) {
  uint64_t size = 0;
  XLNET_ASSIGN_OR_RETURN(const int fd,
                         OpenRegularFile(path, kNoSizeLimit, &size));
  switch (KindOfInput(path).compression) {
    case Compression::kNone:
      return std::unique_ptr<ByteReader>(new PlainReader(path, fd));
    case Compression::kGzip: {
      gzFile file = gzdopen(fd, "rb");
      if (file == nullptr) {
        ::close(fd);
        return absl::InternalError(absl::StrCat(path, ": gzdopen failed"));
      }
      gzbuffer(file, kBlockBytes);
      return std::unique_ptr<ByteReader>(new GzipReader(path, file));
    }
    case Compression::kZstd:
      return std::unique_ptr<ByteReader>(new ZstdReader(path, fd));
  }
  return absl::InternalError("unknown compression");
}

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(
    const std::string& path, int64_t max_line_bytes) {
  if (max_line_bytes < 1) {
    return absl::InvalidArgumentError("max_line_bytes must be positive");
  }
  std::unique_ptr<LineReader> reader(new LineReader());
  reader->path_ = path;
  XLNET_ASSIGN_OR_RETURN(reader->bytes_, ByteReader::Open(path));
  reader->max_line_ = static_cast<size_t>(max_line_bytes);
  // One whole line of max_line_ bytes plus its '\n' fits next to a block.
  reader->buffer_.resize(reader->max_line_ + 1 + kBlockBytes);
  return reader;
}

absl::StatusOr<bool> LineReader::Fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  XLNET_ASSIGN_OR_RETURN(const size_t got, bytes_->Read(buffer_.data() + end_,
                                                        buffer_.size() - end_));
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

absl::StatusOr<bool> LineReader::Next(Line* line) {
  size_t scanned = begin_;  // bytes before this are known not to be '\n'
  while (true) {
    const char* nl = static_cast<const char*>(
        std::memchr(buffer_.data() + scanned, '\n', end_ - scanned));
    if (nl != nullptr || (eof_ && begin_ < end_)) {
      const size_t stop = nl ? static_cast<size_t>(nl - buffer_.data()) : end_;
      *line = Line();
      line->number = ++line_number_;
      line->bytes = stop - begin_;
      line->newline = nl != nullptr;
      if (line->bytes > max_line_) {
        line->overlong = true;
        line->overlong_hash = Fnv1a64(buffer_.data() + begin_, line->bytes);
      } else {
        line->text = std::string_view(buffer_.data() + begin_, line->bytes);
      }
      begin_ = nl ? stop + 1 : end_;
      return true;
    }
    if (eof_) return false;
    if (end_ - begin_ > max_line_) {
      // Overlong: hash and drop what is buffered, keep reading to its end.
      *line = Line();
      line->number = ++line_number_;
      line->overlong = true;
      uint64_t hash = Fnv1a64(nullptr, 0);
      while (true) {
        const char* end_of_line = static_cast<const char*>(
            std::memchr(buffer_.data() + begin_, '\n', end_ - begin_));
        const size_t stop =
            end_of_line ? static_cast<size_t>(end_of_line - buffer_.data())
                        : end_;
        hash = Fnv1a64(buffer_.data() + begin_, stop - begin_, hash);
        line->bytes += stop - begin_;
        if (end_of_line != nullptr) {
          begin_ = stop + 1;
          line->newline = true;
          break;
        }
        begin_ = end_ = 0;
        XLNET_ASSIGN_OR_RETURN(const bool more, Fill());
        if (!more) break;
      }
      line->overlong_hash = hash;
      return true;
    }
    scanned = end_;
    const size_t offset = begin_;
    XLNET_ASSIGN_OR_RETURN(const bool more, Fill());
    scanned -= offset;  // Fill moved the data to the front
    if (!more && begin_ == end_) return false;
  }
}

absl::Status RecordText(std::string_view record, const std::string& key,
                        std::string* text) {
  // A repeated key (which "text" wins?) is an error like bad JSON.
  XLNET_ASSIGN_OR_RETURN(const nlohmann::json json,
                         ParseJson(std::string(record), "JSON record"));
  if (!json.is_object()) {
    return absl::InvalidArgumentError("a JSON record must be an object");
  }
  const auto it = json.find(key);
  if (it == json.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the record has no field '", key,
                     "' (--json_key); its fields: ", KeysOf(json)));
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", key, "' is not a string"));
  }
  *text = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status CheckJsonKeyPresent(const std::string& path,
                                 const std::string& key,
                                 int64_t max_line_bytes) {
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader,
                         LineReader::Open(path, max_line_bytes));
  std::string first_keys;  // of the first object record
  Line line;
  while (true) {
    XLNET_ASSIGN_OR_RETURN(const bool more, reader->Next(&line));
    if (!more) break;
    if (line.overlong || line.text.empty()) continue;
    const nlohmann::json json =
        nlohmann::json::parse(line.text, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) continue;
    if (json.contains(key)) return absl::OkStatus();
    if (first_keys.empty()) first_keys = KeysOf(json);
  }
  std::string message = absl::StrCat(path, ": no JSON record has the field '",
                                     key, "' (--json_key)");
  if (!first_keys.empty()) {
    absl::StrAppend(&message, "; the first record's fields: ", first_keys);
  } else {
    absl::StrAppend(&message, "; no line is a JSON object");
  }
  return absl::InvalidArgumentError(message);
}

int64_t PlainInputBytes(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error || KindOfInput(path).compression != Compression::kNone) return 0;
    total += static_cast<int64_t>(size);
  }
  return total;
}

}  // namespace xlnet::data
