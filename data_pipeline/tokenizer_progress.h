// The tokenizer's training phases, as the user reads them, from
// SentencePiece's own log: the sentences it loaded, the alphabet, the seed
// pieces, then each EM step with the vocabulary shrinking towards its
// target, and the round it is in out of about how many.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace xlnet::data {

// Reads SentencePiece's (0.1.9x) unigram training log, one line at a time.
class SentencePiecePhases {
 public:
  // `vocab_size`: the pieces asked for (--vocab_size).
  explicit SentencePiecePhases(int vocab_size) : vocab_size_(vocab_size) {}

  // The phase line for one of SentencePiece's log lines ("trainer_interface
  // .cc(409) LOG(INFO) Loaded all 57340 sentences"), or "" for a line that
  // says nothing new (per-piece lines, the settings dump, parts of a phase
  // shown together with a later line). Lines it does not know are shown as
  // "SentencePiece: <message>" (warnings as "SentencePiece warning: ..."),
  // so nothing SentencePiece reports is lost.
  std::string Describe(std::string_view line);

  // EM rounds done so far (a round is the EM steps at one vocabulary size).
  int rounds() const { return round_; }

 private:
  int vocab_size_;
  // Inside the multi-line settings dump ("Starts training with : ...").
  bool in_settings_ = false;
  int64_t all_chars_ = -1;
  int64_t alphabet_ = -1;
  // What SentencePiece calls its EM "sentences": the distinct
  // whitespace-separated words of the sample, each with its count.
  int64_t em_words_ = -1;
  // The current round (1-based; 0 before the first).
  int round_ = 0;
  // Rounds expected, from the first round's size; 0 before it.
  int expected_rounds_ = 0;
};

// Rounds the unigram trainer runs from `seed_size` pieces to `vocab_size`:
// it stops at 1.1 x vocab_size, pruning to max(that, 0.75 x size) between
// rounds (SentencePiece's defaults, which the tokenizer keeps).
int ExpectedEmRounds(int64_t seed_size, int vocab_size);

}  // namespace xlnet::data
