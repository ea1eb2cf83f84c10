// A text file as the token ids `xlnet-data prepare` would write for it: the
// same reader (data_pipeline/input_reader.h: plain text, JSON Lines, .gz,
// .zst), the same tokenizer and text rules, one sentence a line, a blank
// line ending a document, <eod> after every document; lines prepare skips
// (invalid UTF-8, longer than max_line_bytes, JSON records without text)
// are skipped and counted here too. The file is streamed, and reading stops
// at max_tokens, so the work done for a file is bounded by the tokens
// asked for, whatever its size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet {

// Tokens read at most when no max_tokens is given (64 MiB of ids).
inline constexpr int64_t kMaxTextTokens = int64_t{1} << 24;

struct TextIdsOptions {
  // Keep the first max_tokens tokens and stop reading; 0 = the whole file,
  // which must then hold at most kMaxTextTokens.
  int64_t max_tokens = 0;
  // Longer lines are skipped (prepare's --max_line_bytes default).
  int64_t max_line_bytes = 1 << 20;
  // <eod> at every document end (prepare's data.use_eod default).
  bool use_eod = true;
  // The text field of JSON Lines records (prepare's --json_key).
  std::string json_key = "text";
};

struct TextIds {
  std::vector<int32_t> ids;
  int64_t lines = 0;
  // Lines or records skipped as prepare skips them.
  int64_t skipped_lines = 0;
  // Reading stopped at max_tokens before the end of the file.
  bool truncated = false;
};

// Errors name the file: missing or unreadable, no tokens at all, more
// than kMaxTextTokens tokens without max_tokens, corrupt compression.
absl::StatusOr<TextIds> TokenizeTextFile(const std::string& path,
                                         const data::Tokenizer& tokenizer,
                                         const TextIdsOptions& options = {});

}  // namespace xlnet
