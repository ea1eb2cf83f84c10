#include "data_pipeline/text.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>

namespace xlnet::data {

bool IsPythonSpace(char32_t cp) {
  // ASCII without a table lookup (the tokenizer's hot path): \t \n \v \f \r,
  // the separators \x1c-\x1f and space, as ICU gives them below.
  if (cp < 0x80) {
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) ||
           (cp >= 0x1C && cp <= 0x1F);
  }
  if (cp > 0x10FFFF) return false;
  const auto c = static_cast<UChar32>(cp);
  if (u_charType(c) == U_SPACE_SEPARATOR) return true;
  const UCharDirection d = u_charDirection(c);
  return d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR ||
         d == U_SEGMENT_SEPARATOR;
}

bool IsPythonDigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  if (cp > 0x10FFFF) return false;
  const int type =
      u_getIntPropertyValue(static_cast<UChar32>(cp), UCHAR_NUMERIC_TYPE);
  return type == U_NT_DECIMAL || type == U_NT_DIGIT;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = *pos;
  UChar32 c;
  U8_NEXT(s, i, n, c);
  *pos = i;
  return c < 0 ? kReplacementChar : static_cast<char32_t>(c);
}

bool IsValidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) return false;
  }
  return true;
}

char32_t LastCodePoint(std::string_view text, size_t end, size_t* start) {
  if (end == 0) {
    *start = 0;
    return kReplacementChar;
  }
  // Back over at most three continuation bytes to the sequence's start.
  size_t i = end;
  while (i > 0) {
    --i;
    if (!U8_IS_TRAIL(static_cast<uint8_t>(text[i])) || end - i == 4) break;
  }
  *start = i;
  size_t next = i;
  const char32_t cp = NextCodePoint(text.substr(0, end), &next);
  return next == end ? cp : kReplacementChar;
}

void AppendUtf8(char32_t cp, std::string* out) {
  char buf[U8_MAX_LENGTH];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, static_cast<UChar32>(cp));
  out->append(buf, static_cast<size_t>(len));
}

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) out.push_back(NextCodePoint(text, &i));
  return out;
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

std::vector<size_t> CodePointOffsets(std::string_view text) {
  std::vector<size_t> offsets;
  offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    offsets.push_back(i);
    NextCodePoint(text, &i);
  }
  offsets.push_back(text.size());
  return offsets;
}

int64_t CodePointLength(std::string_view text) {
  int64_t n = 0;
  for (size_t i = 0; i < text.size(); ++n) NextCodePoint(text, &i);
  return n;
}

std::string SubstrByChars(std::string_view text, int64_t begin, int64_t end) {
  const std::vector<size_t> offsets = CodePointOffsets(text);
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, begin, n);
  return std::string(
      text.substr(offsets[begin], offsets[end] - offsets[begin]));
}

std::vector<std::string> SplitPythonWhitespace(std::string_view text) {
  std::vector<std::string> out;
  size_t piece = std::string_view::npos;  // start of the current piece
  for (size_t i = 0; i < text.size();) {
    const size_t here = i;
    if (IsPythonSpace(NextCodePoint(text, &i))) {
      if (piece != std::string_view::npos) {
        out.emplace_back(text.substr(piece, here - piece));
        piece = std::string_view::npos;
      }
    } else if (piece == std::string_view::npos) {
      piece = here;
    }
  }
  if (piece != std::string_view::npos) out.emplace_back(text.substr(piece));
  return out;
}

std::string StripPythonWhitespace(std::string_view text) {
  size_t begin = text.size();
  size_t end = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t here = i;
    if (!IsPythonSpace(NextCodePoint(text, &i))) {
      begin = std::min(begin, here);
      end = i;
    }
  }
  return begin < end ? std::string(text.substr(begin, end - begin))
                     : std::string();
}

bool IsPythonBlank(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (!IsPythonSpace(NextCodePoint(text, &i))) return false;
  }
  return true;
}

}  // namespace xlnet::data
