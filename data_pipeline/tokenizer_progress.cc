#include "data_pipeline/tokenizer_progress.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "common/strings.h"

namespace xlnet::data {
namespace {

// Debian's Abseil has its own string_view, so std::string_view is handled
// with these.
bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Splits "file.cc(123) LOG(INFO) message" into its severity ("INFO") and
// message; false for a line without that prefix (a continuation line).
bool SplitLogLine(std::string_view line, std::string_view* severity,
                  std::string_view* message) {
  const size_t log = line.find(") LOG(");
  if (log == std::string_view::npos) return false;
  const size_t open = line.rfind('(', log);
  if (open == std::string_view::npos || open == 0) return false;
  const size_t sev_begin = log + 6;
  const size_t sev_end = line.find(')', sev_begin);
  if (sev_end == std::string_view::npos) return false;
  *severity = line.substr(sev_begin, sev_end - sev_begin);
  size_t text = sev_end + 1;
  while (text < line.size() && line[text] == ' ') ++text;
  *message = line.substr(text);
  return true;
}

// The integer after `key` in `text` ("size=1234 obj=..." with key "size="),
// or -1.
int64_t IntAfter(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  size_t end = at + key.size();
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  if (end == at + key.size()) return -1;
  return std::strtoll(std::string(text.substr(at + key.size())).c_str(),
                      nullptr, 10);
}

// The text after `key` up to the next space.
std::string_view WordAfter(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return {};
  const size_t begin = at + key.size();
  const size_t end = text.find(' ', begin);
  return text.substr(begin, end == std::string_view::npos ? end : end - begin);
}

}  // namespace

int ExpectedEmRounds(int64_t seed_size, int vocab_size) {
  const int64_t desired = static_cast<int64_t>(vocab_size * 1.1);
  int rounds = 1;
  for (int64_t size = seed_size; size > desired && rounds < 1000; ++rounds) {
    size = std::max<int64_t>(desired, static_cast<int64_t>(0.75 * size));
  }
  return rounds;
}

std::string SentencePiecePhases::Describe(std::string_view line) {
  std::string_view severity, message;
  if (!SplitLogLine(line, &severity, &message)) {
    // The settings dump's lines, or something else written to the stream.
    if (in_settings_ || line.empty()) return "";
    return "SentencePiece: " + std::string(line);
  }
  in_settings_ = false;
  // Sentences over SentencePiece's max_sentence_length (4192 bytes) are
  // skipped; its advice names a flag of spm_train that xlnet-data has not.
  if (StartsWith(message, "Found too long line (")) {
    return absl::StrFormat(
        "SentencePiece skips sentences over %s bytes (the first has %s)",
        WithCommas(IntAfter(message, " > ")),
        WithCommas(IntAfter(message, "line (")));
  }
  if (StartsWith(message, "Too long lines are skipped") ||
      StartsWith(message, "The maximum length can be changed")) {
    return "";
  }
  if (StartsWith(message, "Skipped ") && Contains(message, "too long")) {
    return "SentencePiece skipped " +
           WithCommas(IntAfter(message, "Skipped ")) +
           " sentences over its maximum length";
  }
  if (severity != "INFO") {
    return std::string("SentencePiece ") +
           (severity == "WARNING" ? "warning" : "error") + ": " +
           std::string(message);
  }
  if (StartsWith(message, "Starts training with")) {
    in_settings_ = true;
    return "";
  }
  if (StartsWith(message, "Loaded all ")) {
    return "loaded " + WithCommas(IntAfter(message, "Loaded all ")) +
           " sentences into SentencePiece";
  }
  if (StartsWith(message, "all chars count=")) {
    all_chars_ = IntAfter(message, "all chars count=");
    return "";
  }
  if (StartsWith(message, "Alphabet size=")) {
    alphabet_ = IntAfter(message, "Alphabet size=");
    return "";
  }
  if (StartsWith(message, "Final character coverage=")) {
    const double coverage = std::strtod(
        std::string(WordAfter(message, "coverage=")).c_str(), nullptr);
    return absl::StrFormat(
        "alphabet: %s characters cover %.3f%% of the sample's %s",
        WithCommas(alphabet_), 100 * coverage, WithCommas(all_chars_));
  }
  if (StartsWith(message, "Normalizing sentences")) {
    return "normalising the sentences";
  }
  if (StartsWith(message, "Making suffix array")) {
    return "seed pieces: building the suffix array";
  }
  if (StartsWith(message, "Extracting frequent")) {
    return "seed pieces: extracting frequent substrings";
  }
  if (StartsWith(message, "Initialized ") &&
      Contains(message, "seed sentencepieces")) {
    return "seed pieces: " + WithCommas(IntAfter(message, "Initialized ")) +
           " candidates";
  }
  if (StartsWith(message, "Using ") &&
      Contains(message, "sentences for EM training")) {
    em_words_ = IntAfter(message, "Using ");
    return "";
  }
  if (StartsWith(message, "EM sub_iter=")) {
    const int64_t sub_iter = IntAfter(message, "sub_iter=");
    const int64_t size = IntAfter(message, "size=");
    // A round's first step is sub_iter 0 (its M steps may drop pieces, so
    // the size can change within a round).
    if (sub_iter == 0 || round_ == 0) {
      ++round_;
      if (expected_rounds_ == 0) {
        expected_rounds_ = ExpectedEmRounds(size, vocab_size_);
      }
    }
    // Later rounds than expected (another SentencePiece's schedule) are
    // counted on.
    const int of = std::max(expected_rounds_, round_);
    return absl::StrFormat(
        "EM round %d of %s%d, step %d: %s pieces (target %s), objective %s, "
        "%s tokens over %s distinct words",
        round_, of == round_ ? "" : "about ", of, sub_iter + 1,
        WithCommas(size), WithCommas(vocab_size_),
        std::string(WordAfter(message, "obj=")),
        WithCommas(IntAfter(message, "num_tokens=")), WithCommas(em_words_));
  }
  if (StartsWith(message, "Adding meta_piece") || StartsWith(message, "Done") ||
      StartsWith(message, "Tokenizing input sentences") ||
      StartsWith(message, "SentenceIterator") ||
      StartsWith(message, "Saving")) {
    return "";
  }
  return "SentencePiece: " + std::string(message);
}

}  // namespace xlnet::data
