// Reading a prepared directory (format in shard_format.h): its shards,
// memory-mapped, and the corpus view of one split that the sampler reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mapped_file.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

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
  std::string dir_;
  std::vector<std::unique_ptr<MappedFile>> files_;
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
  // Calls fn(segment, offset in it, count, offset in the output) for each
  // piece of [begin, begin + n); `caller` names the caller in range errors.
  template <typename Fn>
  void ForEachPiece(int64_t begin, int64_t n, const char* caller,
                    Fn&& fn) const;

  std::vector<Segment> segments_;
  int64_t size_ = 0;
  int64_t num_docs_ = 0;
};

}  // namespace xlnet::data
