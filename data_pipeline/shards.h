// Corpus shards: tokenized text in binary, memory-mappable files plus a
// manifest, and the corpus view the sampler reads from them.
//
// Writing (`PrepareShards`): input files are cut into chunks of about
// `shard_bytes` at document boundaries (blank lines); each chunk becomes one
// shard, tokenized on a pool of workers. The plan depends only on the input
// bytes and options, so the output is byte-identical for any worker count.
// A shard already on disk with the same key (hash of its chunk, tokenizer
// and rules) and a valid checksum is kept, so a re-run skips finished work.
//
// Shard file `shard-NNNNN.bin` (little-endian, format version 1):
//   [0,128)   header: "XLNSHARD", u32 version, u32 header bytes (128),
//             u64 num_tokens, u64 num_docs, u64 key, u64 checksum (FNV-1a 64
//             of every byte after the header), u64 lines, u64 invalid UTF-8
//             lines, u64 over-long lines, u64 blank lines, zero padding
//   int32  ids[num_tokens]         token ids, <eod> at document ends
//   uint8  sent_flags[num_tokens]  alternating sentence flag (0/1) per token;
//                                  the chunk's first sentence has flag 0
//   zero padding to a multiple of 8
//   u64    doc_begin[num_docs]     first token of each document
//   u64    doc_hash[num_docs]      FNV-1a 64 of the document's ids
//
// Sentence flags follow the official data_utils.py: every line flips the
// flag; <eod> keeps the flag of the sentence it ends. When shards (or
// document runs) are concatenated, a piece whose first flag equals the
// previous piece's last flag is inverted, keeping the alternation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

inline constexpr uint32_t kShardFormatVersion = 1;

struct PrepareOptions {
  // Files or glob patterns (each pattern's matches in sorted order).
  std::vector<std::string> inputs;
  // spiece.model; copied into the output directory.
  std::string tokenizer_path;
  std::string out_dir;
  int workers = 1;
  // Fail on the first invalid UTF-8 line, over-long line or empty file
  // instead of counting and skipping it.
  bool strict = false;
  TextRules rules;
  // Append <eod> at every document end.
  bool use_eod = true;
  // Target text bytes per shard (a shard ends at the next blank line).
  int64_t shard_bytes = 16 << 20;
  // Lines longer than this are skipped (or fail with strict).
  int64_t max_line_bytes = 1 << 20;
  // Log a progress line about once a second.
  bool progress = true;
};

struct PrepareReport {
  int64_t files = 0;
  int64_t empty_files = 0;
  int64_t shards = 0;
  int64_t shards_skipped = 0;  // already finished by an earlier run
  int64_t lines = 0;
  int64_t invalid_utf8_lines = 0;
  int64_t overlong_lines = 0;
  int64_t tokens = 0;
  int64_t docs = 0;
  double seconds = 0;
  // One-line summary.
  std::string Summary() const;
};

// Tokenizes `options.inputs` into `options.out_dir` (shards, manifest.json,
// spiece.model). Every file is written atomically; manifest.json last.
absl::StatusOr<PrepareReport> PrepareShards(const PrepareOptions& options);

// Expands files and glob patterns; a pattern that matches nothing or a
// missing file is an error.
absl::StatusOr<std::vector<std::string>> ExpandInputs(
    const std::vector<std::string>& patterns);

// A document of a shard.
struct DocEntry {
  int64_t begin = 0;  // token offset in the shard
  int64_t end = 0;
  uint64_t hash = 0;
};

// One memory-mapped shard.
struct ShardView {
  std::string path;
  const int32_t* ids = nullptr;
  const uint8_t* flags = nullptr;
  int64_t num_tokens = 0;
  std::vector<DocEntry> docs;
};

// The shards of a prepared directory, memory-mapped.
class ShardSet {
 public:
  // Reads manifest.json and maps every shard, checking headers and sizes;
  // `verify` also checks checksums and token ids against the vocabulary.
  static absl::StatusOr<std::unique_ptr<ShardSet>> Open(const std::string& dir,
                                                        bool verify = false);
  ~ShardSet();

  const std::string& dir() const { return dir_; }
  const std::vector<ShardView>& shards() const { return shards_; }
  int64_t num_tokens() const { return num_tokens_; }
  // What the manifest records.
  const std::string& tokenizer_file() const { return tokenizer_file_; }
  const std::string& tokenizer_hash() const { return tokenizer_hash_; }
  int64_t vocab_size() const { return vocab_size_; }
  const TextRules& rules() const { return rules_; }
  bool use_eod() const { return use_eod_; }

 private:
  ShardSet() = default;
  struct Mapping;
  std::string dir_;
  std::vector<std::unique_ptr<Mapping>> mappings_;
  std::vector<ShardView> shards_;
  int64_t num_tokens_ = 0;
  std::string tokenizer_file_;
  std::string tokenizer_hash_;
  int64_t vocab_size_ = 0;
  TextRules rules_;
  bool use_eod_ = true;
};

enum class Split { kTrain, kEval };

// The token sequence of one split: the concatenation of runs of whole
// documents ("segments") of the shards, in shard order, with sentence flags
// kept alternating across segments. A document is held out for evaluation
// when its content hash falls below `eval_fraction` (at least one document
// when eval_fraction > 0 and there are two or more).
class Corpus {
 public:
  static absl::StatusOr<Corpus> Create(const ShardSet& shards, Split split,
                                       double eval_fraction);

  int64_t size() const { return size_; }
  int64_t num_docs() const { return num_docs_; }
  // Copies tokens [begin, begin + n) (n > 0, within size()).
  void CopyIds(int64_t begin, int64_t n, int32_t* out) const;
  void CopyFlags(int64_t begin, int64_t n, uint8_t* out) const;
  int32_t Id(int64_t pos) const;

 private:
  struct Segment {
    int64_t start = 0;  // position in the corpus
    const int32_t* ids = nullptr;
    const uint8_t* flags = nullptr;
    int64_t length = 0;
    uint8_t invert = 0;
  };
  size_t FindSegment(int64_t pos) const;

  std::vector<Segment> segments_;
  int64_t size_ = 0;
  int64_t num_docs_ = 0;
};

}  // namespace xlnet::data
