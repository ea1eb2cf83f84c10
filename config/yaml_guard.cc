// The guards of yaml_guard.h. Our own code: the loops are in the yaml-cpp
// that Debian 12 ships (0.7), which the project builds against.
#include "config/yaml_guard.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace xlnet::config_internal {
namespace {

// Where the content of each YAML document starts: the mark of its first
// event that is not a null (an empty document, or "~", has none).
class DocumentContent : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> first;
  void OnDocumentStart(const YAML::Mark&) override { first.reset(); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { See(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    See(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t, YAML::EmitterStyle::value) override {
    See(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    See(mark);
  }
  void OnMapEnd() override {}

 private:
  void See(const YAML::Mark& mark) {
    if (!first) first = mark;
  }
};

}  // namespace

// Refuses a second YAML document with content. Not YAML::LoadAll: in
// yaml-cpp 0.7 it loops forever, allocating a document per turn, when the
// parser stops advancing on some malformed inputs (upstream
// jbeder/yaml-cpp#1319; fuzz/config_yaml_fuzzer.cc ran out of memory on
// them). Documents are walked one by one instead, at most one more than
// the text has "---"/"..." markers (every document after the first follows
// one), so a parser that does not advance ends in an error.
absl::Status CheckOneDocument(const std::string& yaml_text,
                              const std::string& source) {
  size_t markers = 0;
  for (const char* marker : {"---", "..."}) {
    for (size_t at = yaml_text.find(marker); at != std::string::npos;
         at = yaml_text.find(marker, at + 1)) {
      ++markers;
    }
  }
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  DocumentContent content;
  size_t documents = 0;
  while (parser.HandleNextDocument(content)) {
    if (++documents > markers + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": invalid YAML: it reads as ", documents,
                       " or more documents but has ", markers,
                       " document markers ('---', '...')"));
    }
    if (documents > 1 && content.first) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", content.first->line + 1,
                       ": a second YAML document; a config file holds one"));
    }
  }
  return absl::OkStatus();
}

// yaml-cpp 0.7 (Debian 12) loops forever, allocating, on a ',' that starts
// a token outside [] and {} (",", "- a\n,", "\"x\" ,", "&a,", "[a],",
// "\"$x\"!,", and "&a\rb," with a lone carriage return; found by
// fuzz/config_yaml_fuzzer.cc), so such a comma (and a lone CR) is
// refused before yaml-cpp sees the text. A small scan of YAML's tokens:
// quoted scalars, anchors/aliases/tags, comments, flow brackets, indicators
// and plain scalars (which may hold commas: "a, b", "a: b ,"). It is
// stricter than YAML only for a line starting with ',' inside a block
// scalar or a multi-line plain scalar.
absl::Status CheckNoTokenStartingWithComma(const std::string& text,
                                           const std::string& source) {
  enum class State { kTokenStart, kPlain, kWord, kQuoted, kComment };
  State state = State::kTokenStart;
  char quote = 0;
  int depth = 0;  // [] and {} nesting
  int line = 1;
  auto blank = [&](size_t i) {
    return i >= text.size() || text[i] == ' ' || text[i] == '\t' ||
           text[i] == '\r' || text[i] == '\n';
  };
  // yaml-cpp decodes UTF-16 (a BOM, or NULs) and skips a UTF-8 BOM: the
  // scan below must read what it reads, so control characters (which YAML
  // forbids anyway) and UTF-16 are refused.
  if (text.compare(0, 2, "\xff\xfe") == 0 ||
      text.compare(0, 2, "\xfe\xff") == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid YAML: UTF-16 (write UTF-8)"));
  }
  const size_t start = text.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    // A carriage return not followed by a line feed is a line break to
    // yaml-cpp, but not to this scan (and "&a\rb," sends yaml-cpp 0.7 into
    // the same endless allocation): refused, CRLF stays accepted.
    if (c == '\r' && (i + 1 >= text.size() || text[i + 1] != '\n')) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line,
          ": invalid YAML: a carriage return without a line feed (use \\n "
          "or \\r\\n line endings)"));
    }
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' &&
         c != '\r') ||
        c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line, ": invalid YAML: control character ",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2)));
    }
    if (c == '\n') {
      ++line;
      if (state != State::kQuoted) state = State::kTokenStart;
      continue;
    }
    switch (state) {
      case State::kComment:
        break;
      case State::kQuoted:
        if (c == '\\' && quote == '"') {
          ++i;
        } else if (c == quote) {
          state = State::kTokenStart;
        }
        break;
      case State::kWord:  // &anchor, *alias, !tag
        if (blank(i) || c == ',' || c == '[' || c == ']' || c == '{' ||
            c == '}') {
          state = State::kTokenStart;
          --i;  // the character starts the next token
        }
        break;
      case State::kPlain:
        if (c == ':' && blank(i + 1)) {
          state = State::kTokenStart;
        } else if (c == '#' && blank(i - 1)) {
          state = State::kComment;
        } else if (depth > 0 &&
                   (c == ',' || c == ']' || c == '}' || c == '[' || c == '{')) {
          state = State::kTokenStart;
          --i;
        }
        break;
      case State::kTokenStart:
        if (c == ' ' || c == '\t' || c == '\r') break;
        if (c == ',') {
          if (depth == 0) {
            return absl::InvalidArgumentError(
                absl::StrCat(source, ":", line,
                             ": invalid YAML: ',' outside a [] or {} "
                             "collection"));
          }
        } else if (c == '[' || c == '{') {
          ++depth;
        } else if (c == ']' || c == '}') {
          if (depth > 0) --depth;
        } else if (c == '"' || c == '\'') {
          quote = c;
          state = State::kQuoted;
        } else if (c == '&' || c == '*' || c == '!') {
          state = State::kWord;
        } else if (c == '#') {
          state = State::kComment;
        } else if ((c == '-' || c == '?' || c == ':') && blank(i + 1)) {
          // An indicator; the token after it starts fresh.
        } else if ((i == start || text[i - 1] == '\n') &&
                   (text.compare(i, 3, "---") == 0 ||
                    text.compare(i, 3, "...") == 0) &&
                   blank(i + 3)) {
          i += 2;
        } else {
          state = State::kPlain;
        }
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace xlnet::config_internal
