// XLNet's tokenizer: a SentencePiece unigram model with the special pieces
// at fixed ids, XLNet's text rules (`preprocess_text`), the digit-comma
// re-encoding of `encode_pieces`, and offsets of every piece back into the
// original text.
//
//   XLNET_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load("spiece.model", rules));
//   XLNET_ASSIGN_OR_RETURN(Encoding enc, tok->Encode("The ``quick'' fox"));
//   // enc.ids, enc.pieces, enc.begin/end (bytes), enc.char_begin/char_end
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet::data {

namespace spm {
class BridgeProcessor;
}  // namespace spm

// XLNet's special ids (official data_utils.py `special_symbols`).
inline constexpr int32_t kUnkId = 0;
inline constexpr int32_t kBosId = 1;
inline constexpr int32_t kEosId = 2;
inline constexpr int32_t kClsId = 3;
inline constexpr int32_t kSepId = 4;
inline constexpr int32_t kPadId = 5;
inline constexpr int32_t kMaskId = 6;
inline constexpr int32_t kEodId = 7;
inline constexpr int32_t kEopId = 8;
// A .model file is read whole; the released 32k XLNet model is 0.8 MB, so
// this bounds the read generously.
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t{256} << 20;
// The pieces at ids 0..8, in id order.
const std::vector<std::string>& SpecialPieces();

// Options of XLNet's `preprocess_text`.
struct TextRules {
  // Lowercase (official `uncased`).
  bool uncased = false;
  // Keep accents; otherwise NFKD and drop combining marks.
  bool keep_accents = false;
};

// Text after `preprocess_text`, with where each of its bytes came from.
struct PreprocessedText {
  std::string text;
  // For byte k of `text`: the byte range [src_begin[k], src_end[k]) of the
  // original character it was produced from (filled only when asked).
  std::vector<uint32_t> src_begin;
  std::vector<uint32_t> src_end;
};

// XLNet's `preprocess_text`: strip and collapse whitespace (Python's
// str.split() set) to single spaces; `` and '' -> "; unless keep_accents,
// NFKD and drop combining marks; lowercase if uncased. Processing is per
// character, which equals the official whole-string result except for the
// context-dependent Greek final sigma when lowercasing. Invalid UTF-8
// decodes as U+FFFD (text.h; callers validate first with IsValidUtf8).
PreprocessedText PreprocessText(std::string_view original,
                                const TextRules& rules, bool with_offsets);

// One encoded text.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;
  // Byte range [begin, end) of each piece in the ORIGINAL text, leading
  // whitespace excluded (a lone "▁" gets an empty range).
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
  // The same ranges in Unicode code points (Python string indices).
  std::vector<int64_t> char_begin;
  std::vector<int64_t> char_end;
};

// Options of `TrainTokenizer`.
struct TokenizerTrainOptions {
  // Corpus files as prepare reads them (input_reader.h): plain text, one
  // sentence a line, or JSON Lines (`*.jsonl`, `*.json`), each record's
  // `json_key` text split into sentences; either may be `.gz` or `.zst`.
  std::vector<std::string> inputs;
  // The text field of JSON Lines records (prepare's --json_key).
  std::string json_key = "text";
  int vocab_size = 32000;
  // The casing, chosen here once: the sample is preprocessed with it and the
  // .model records it (tokenizer_rules.h).
  TextRules rules;
  // SentencePiece trainer threads; a fixed count gives a fixed model.
  int threads = 1;
  // Seeds the sentence sample and the trainer.
  uint32_t seed = 42;
  // Sentences sampled for training (official: 10M). Training memory grows
  // with the sample, not with the input: see EstimateTokenizerTrainingBytes.
  int64_t max_sentences = 10000000;
  // Longer lines are skipped.
  int64_t max_line_bytes = 1 << 20;
  // TrainTokenizerFile refuses a sample whose EstimateTokenizerTrainingBytes
  // exceeds this many bytes; 0 = the memory available now.
  uint64_t memory_limit_bytes = 0;
  // TrainTokenizerFile: train even when the estimate exceeds the limit.
  bool ignore_memory_estimate = false;
  // When set, called with the progress of each phase: the pass over the
  // inputs (bytes of the total, %, rate, ETA and sentences, every
  // `progress_seconds`), then SentencePiece's phases with their counts
  // (tokenizer_progress.h). Unset: training is silent.
  std::function<void(const std::string& line)> progress;
  double progress_seconds = 5;
};

// Statistics of one training run.
struct TokenizerTrainStats {
  // Sentences trained on (the sample).
  int64_t sentences = 0;
  // Non-empty, valid lines read (what the sample was drawn from).
  int64_t sentences_seen = 0;
  // Bytes of the sampled sentences after preprocessing.
  int64_t sample_bytes = 0;
  int64_t skipped_invalid_utf8 = 0;
  int64_t skipped_overlong = 0;
  // JSON Lines records without a string `json_key` field.
  int64_t skipped_records = 0;
};

// A uniform sample of the inputs' preprocessed sentences.
struct TokenizerSample {
  std::vector<std::string> sentences;
  TokenizerTrainStats stats;
};

// One streaming pass over the inputs (read once): keeps a
// uniform random sample of at most max_sentences preprocessed non-empty
// lines (reservoir sampling, Algorithm R, seeded by `seed`), so memory is
// bounded by the sample whatever the input size. Deterministic for given
// inputs and options.
absl::StatusOr<TokenizerSample> SampleTokenizerSentences(
    const TokenizerTrainOptions& options);

// Estimated peak resident memory of training on a sample of `sample_bytes`
// bytes in `sentences` sentences, the sample itself included. SentencePiece's
// unigram trainer builds a suffix array over every character of the sample
// (several 4-byte arrays per character) plus the seed-piece tables; the
// factors are measured (data_pipeline/README.md, "Tokenizer memory").
uint64_t EstimateTokenizerTrainingBytes(int64_t sample_bytes,
                                        int64_t sentences);

// Trains the official recipe on `sample` (consumed: each sentence is freed
// as SentencePiece copies it): unigram, character_coverage 0.99995, control
// symbols <cls> <sep> <pad> <mask> <eod>, user-defined <eop> . ( ) " - – £ €,
// so <unk> 0 <s> 1 </s> 2 <cls> 3 <sep> 4 <pad> 5 <mask> 6 <eod> 7 <eop> 8.
// Returns the bytes of the .model file, options.rules recorded in it
// (RecordTextRules).
absl::StatusOr<std::string> TrainTokenizerOnSample(
    TokenizerSample sample, const TokenizerTrainOptions& options);

// The error of a failed SentencePiece training run (`spm_error`, its raw
// message) asked for `vocab_size` pieces. SentencePiece's "Vocabulary size
// too high (N). Please set it to a value <= M." becomes an InvalidArgument
// error saying that the corpus fits at most M pieces and to rerun with
// --vocab_size M or less (or to lower --vocab_size when the message has no
// maximum); any other message is passed on.
absl::Status TokenizerTrainingError(const std::string& spm_error,
                                    int vocab_size);

// SampleTokenizerSentences, then TrainTokenizerOnSample.
absl::StatusOr<std::string> TrainTokenizer(
    const TokenizerTrainOptions& options, TokenizerTrainStats* stats = nullptr);

class Tokenizer {
 public:
  // Loads a .model file (a regular file of at most kMaxTokenizerBytes) and
  // checks XLNet's special ids; a model whose special pieces sit elsewhere
  // is refused with an error naming the file.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(
      const std::string& path, const TextRules& rules = {});
  // The same from the file's bytes; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromBytes(
      const std::string& model_bytes, const std::string& source,
      const TextRules& rules = {});
  ~Tokenizer();

  // Applies the text rules, then SentencePiece and the digit-comma fix;
  // with offsets into `text`. Invalid UTF-8 is an InvalidArgument error.
  absl::StatusOr<Encoding> Encode(std::string_view text) const;
  // Ids only (the fast path used for shards; the caller validates UTF-8,
  // invalid bytes would be encoded as U+FFFD).
  absl::Status EncodeIds(std::string_view text,
                         std::vector<int32_t>* ids) const;

  int vocab_size() const;
  const std::string& IdToPiece(int32_t id) const;
  int32_t PieceToId(const std::string& piece) const;
  // The official `_is_start_piece`: starts with "▁" or "<", or is a single
  // ASCII punctuation character of its list.
  bool IsStartPiece(int32_t id) const;
  // Pieces joined with "▁" shown as spaces (for display).
  std::string DecodeForDisplay(const std::vector<int32_t>& ids) const;

  // FNV-1a 64 of the model bytes, as 16 hex digits.
  const std::string& hash() const { return hash_; }
  const std::string& model_bytes() const { return model_bytes_; }
  const TextRules& rules() const { return rules_; }

 private:
  Tokenizer() = default;
  // The official `encode_pieces` over preprocessed text; byte offsets into
  // `processed` when `begin`/`end` are given (nullptr: pieces only).
  absl::Status EncodeProcessed(const std::string& processed,
                               std::vector<std::string>* pieces,
                               std::vector<uint32_t>* begin,
                               std::vector<uint32_t>* end) const;

  std::unique_ptr<spm::BridgeProcessor> processor_;
  std::string model_bytes_;
  std::string hash_;
  TextRules rules_;
  std::vector<uint8_t> is_start_piece_;
};

// FNV-1a 64-bit hash (used for checksums and document hashes).
uint64_t Fnv1a64(const void* data, size_t size,
                 uint64_t seed = 0xcbf29ce484222325ULL);
// 16 lowercase hex digits.
std::string HexU64(uint64_t value);

}  // namespace xlnet::data
