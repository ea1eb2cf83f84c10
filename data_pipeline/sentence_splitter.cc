#include "data_pipeline/sentence_splitter.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <array>

#include "data_pipeline/text.h"

namespace xlnet::data {
namespace {

// Words after which a single "." does not end a sentence (case-sensitive).
constexpr std::array<std::string_view, 52> kAbbreviations = {
    "Mr",  "Mrs",    "Ms",  "Dr",   "Prof", "St",   "Jr",     "Sr",  "Gen",
    "Gov", "Sen",    "Rep", "Rev",  "Col",  "Capt", "Lt",     "Sgt", "Mt",
    "Hon", "Messrs", "Fig", "Figs", "No",   "Nos",  "Vol",    "vs",  "etc",
    "Inc", "Ltd",    "Co",  "Corp", "Bros", "Ave",  "approx", "cf",  "al",
    "Jan", "Feb",    "Mar", "Apr",  "Jun",  "Jul",  "Aug",    "Sep", "Sept",
    "Oct", "Nov",    "Dec", "ca",   "ed",   "eds",  "p"};

bool IsTerminator(char32_t cp) {
  return cp == '.' || cp == '!' || cp == '?' || cp == 0x2026 || cp == 0xFF0E ||
         cp == 0xFF01 || cp == 0xFF1F;
}

bool IsClosing(char32_t cp) {
  return cp == '"' || cp == '\'' || cp == ')' || cp == ']' || cp == 0x201D ||
         cp == 0x2019 || cp == 0x00BB;
}

bool IsOpening(char32_t cp) {
  return cp == '"' || cp == '\'' || cp == '(' || cp == '[' || cp == 0x201C ||
         cp == 0x2018 || cp == 0x00AB;
}

bool StartsSentence(char32_t cp) {
  return u_isupper(static_cast<UChar32>(cp)) ||
         u_istitle(static_cast<UChar32>(cp)) || IsPythonDigit(cp) ||
         IsOpening(cp);
}

// Whether the "." at byte `dot` of `line` ends a word that keeps it: an
// abbreviation, a single letter, or a word with a period inside.
bool KeepsPeriod(std::string_view line, size_t dot) {
  size_t begin = dot;
  while (begin > 0) {
    size_t start;
    const char32_t cp = LastCodePoint(line, begin, &start);
    if (IsPythonSpace(cp)) break;
    begin = start;
  }
  std::string_view word = line.substr(begin, dot - begin);
  // Leading opening quotes and brackets are not part of the word.
  while (!word.empty()) {
    size_t pos = 0;
    const char32_t cp = NextCodePoint(word, &pos);
    if (!IsOpening(cp)) break;
    word.remove_prefix(pos);
  }
  if (word.empty()) return false;
  if (word.find('.') != std::string_view::npos) return true;
  size_t pos = 0;
  const char32_t first = NextCodePoint(word, &pos);
  if (pos == word.size() && u_isalpha(static_cast<UChar32>(first))) {
    return true;
  }
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), word) !=
         kAbbreviations.end();
}

void AddStripped(std::string_view text, std::vector<std::string_view>* out) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!IsPythonSpace(NextCodePoint(text, &next))) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start;
    if (!IsPythonSpace(LastCodePoint(text, end, &start))) break;
    end = start;
  }
  if (end > begin) out->push_back(text.substr(begin, end - begin));
}

void SplitLine(std::string_view line, std::vector<std::string_view>* out) {
  size_t start = 0;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t term_begin = pos;
    const char32_t cp = NextCodePoint(line, &pos);
    if (!IsTerminator(cp)) continue;
    // The run of terminators, then closing quotes and brackets.
    size_t term_end = pos;
    size_t count = 1;
    while (term_end < line.size()) {
      size_t next = term_end;
      if (!IsTerminator(NextCodePoint(line, &next))) break;
      term_end = next;
      ++count;
    }
    size_t end = term_end;
    while (end < line.size()) {
      size_t next = end;
      if (!IsClosing(NextCodePoint(line, &next))) break;
      end = next;
    }
    pos = end;
    // Whitespace, then the start of a sentence.
    size_t next_start = end;
    bool space = false;
    while (next_start < line.size()) {
      size_t next = next_start;
      if (!IsPythonSpace(NextCodePoint(line, &next))) break;
      next_start = next;
      space = true;
    }
    if (!space || next_start >= line.size()) continue;
    size_t probe = next_start;
    if (!StartsSentence(NextCodePoint(line, &probe))) continue;
    if (count == 1 && line[term_begin] == '.' &&
        KeepsPeriod(line, term_begin)) {
      continue;
    }
    AddStripped(line.substr(start, end - start), out);
    start = next_start;
    pos = next_start;
  }
  AddStripped(line.substr(start), out);
}

}  // namespace

void SplitSentences(std::string_view text, std::vector<std::string_view>* out) {
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    SplitLine(text.substr(begin, end - begin), out);
    begin = end + 1;
  }
}

}  // namespace xlnet::data
