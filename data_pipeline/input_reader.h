// Corpus files, streamed: plain text, gzip (zlib) and zstd (libzstd), as
// lines; JSON Lines records as text. Memory does not depend on a file's size
// (a block buffer plus one line of at most max_line_bytes), so prepare
// reads any corpus, decompression bombs included, in a bounded footprint.
//
// A file's kind comes from its name:
//   - compression: `*.gz` (zlib, concatenated members too), `*.zst`
//     (zstd, several frames too), anything else uncompressed;
//   - format: `*.jsonl` or `*.json` before the compression suffix is JSON
//     Lines (one document per record, its text in a string field, see
//     RecordText), anything else plain text: one sentence a line, a blank
//     line between documents.
// Only regular files are read (FIFOs and devices are refused, see
// OpenRegularFile). Errors name the file (and line).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet::data {

enum class Compression { kNone, kGzip, kZstd };
enum class TextFormat { kPlain, kJsonLines };

struct InputKind {
  Compression compression = Compression::kNone;
  TextFormat format = TextFormat::kPlain;
};
InputKind KindOfInput(const std::string& path);

// A file's decompressed bytes, read in blocks.
class ByteReader {
 public:
  static absl::StatusOr<std::unique_ptr<ByteReader>> Open(
      const std::string& path);
  virtual ~ByteReader() = default;
  // Reads up to `n` bytes; 0 at the end. Corrupt or truncated compressed
  // data is a DataLoss error naming the file.
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t n) = 0;
};

// The total size of `paths` when none is compressed (then what reading
// them counts); 0, i.e. unknown, when one is compressed (its decompressed
// size is known only once read) or cannot be sized. For progress lines.
int64_t PlainInputBytes(const std::vector<std::string>& paths);

// One line of a file, without its '\n' ('\r' is kept: text rules treat it
// as whitespace).
struct Line {
  // The line's text; empty when `overlong`. Valid until the next Next().
  std::string_view text;
  // 1-based line number.
  int64_t number = 0;
  // The line's length in bytes (also when overlong), without the '\n'.
  uint64_t bytes = 0;
  // Whether a '\n' ended it (the last line of a file may have none).
  bool newline = false;
  // Longer than max_line_bytes: its text was read past, not kept.
  bool overlong = false;
  // FNV-1a 64 of an overlong line's bytes (so a content key still covers
  // it); 0 otherwise.
  uint64_t overlong_hash = 0;
};

class LineReader {
 public:
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      const std::string& path, int64_t max_line_bytes);
  // Reads the next line; false at the end of the file.
  absl::StatusOr<bool> Next(Line* line);
  const std::string& path() const { return path_; }

 private:
  LineReader() = default;
  // Reads more bytes after end_; false at the end of the file.
  absl::StatusOr<bool> Fill();

  std::string path_;
  std::unique_ptr<ByteReader> bytes_;
  size_t max_line_ = 0;
  std::string buffer_;
  size_t begin_ = 0;  // start of unread data in buffer_
  size_t end_ = 0;    // end of valid data in buffer_
  bool eof_ = false;
  int64_t line_number_ = 0;
};

// The string field `key` of one JSON Lines record. Errors (not JSON, not an
// object, no such string field) are InvalidArgument messages without a
// location; callers prefix FILE:LINE.
absl::Status RecordText(std::string_view record, const std::string& key,
                        std::string* text);

// Reads the JSON Lines file `path` until a record has the field `key`
// (string or not); if none has, an InvalidArgument error naming the file,
// the key (--json_key) and the fields (sorted) of the file's first object
// record.
// Prepare calls it for a file none of whose records gave text, so a
// misspelt --json_key fails instead of writing an empty corpus.
absl::Status CheckJsonKeyPresent(const std::string& path,
                                 const std::string& key,
                                 int64_t max_line_bytes);

}  // namespace xlnet::data
