// Text as Python's `str` sees it, on ICU: the one place for the Unicode
// rules that the tokenizer (XLNet's `preprocess_text`), shard preparation
// and SQuAD (reading, windows, the official evaluation) share.
//
// Positions are byte offsets into UTF-8 or code-point indices (Python
// string indices). Invalid UTF-8 decodes as U+FFFD per maximal ill-formed
// subsequence, as Python's `bytes.decode("utf-8", "replace")` does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xlnet::data {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Python's str.isspace(): bidirectional class WS, B or S, or general
// category Zs (29 code points; not U+200B or U+FEFF). What str.split() and
// str.strip() remove.
bool IsPythonSpace(char32_t cp);

// Python's str.isdigit(): numeric type decimal or digit.
bool IsPythonDigit(char32_t cp);

// Whether `text` is well-formed UTF-8 (no overlongs, surrogates, values
// above U+10FFFF or truncated sequences).
bool IsValidUtf8(std::string_view text);

// Decodes the code point at byte `*pos` of `text` (< text.size()) and
// advances `*pos` past it; an ill-formed sequence gives U+FFFD.
char32_t NextCodePoint(std::string_view text, size_t* pos);

// The last code point of `text` before byte `end` (U+FFFD if ill-formed);
// `*start` is where it begins.
char32_t LastCodePoint(std::string_view text, size_t end, size_t* start);

// Appends the UTF-8 encoding of `cp` (a scalar value).
void AppendUtf8(char32_t cp, std::string* out);

// The code points of `text`.
std::u32string DecodeUtf8(std::string_view text);
// The UTF-8 encoding of `cps`.
std::string EncodeUtf8(std::u32string_view cps);

// The byte offset where each code point of `text` starts, then text.size()
// (so code point k is bytes [offsets[k], offsets[k + 1])).
std::vector<size_t> CodePointOffsets(std::string_view text);

// len(text) in Python: the number of code points.
int64_t CodePointLength(std::string_view text);

// Python's text[begin:end] on code-point indices, for 0 <= begin (indices
// are clamped to the text).
std::string SubstrByChars(std::string_view text, int64_t begin, int64_t end);

// Python's str.split() with no argument: the pieces between runs of
// whitespace, none empty.
std::vector<std::string> SplitPythonWhitespace(std::string_view text);

// Python's str.strip() with no argument.
std::string StripPythonWhitespace(std::string_view text);

// `not text.strip()`: whether `text` holds only Python whitespace.
bool IsPythonBlank(std::string_view text);

}  // namespace xlnet::data
