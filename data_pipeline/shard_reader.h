// Reading a prepared directory (format in shard_format.h): its shards,
// memory-mapped, and the corpus view of one split that the sampler reads.
//
// ShardSet::Open maps every shard and checks its header against the
// manifest but reads no shard body. ShardSet::OpenLazy reads the manifest
// alone: a shard is mapped, header-checked and its document table decoded
// the first time it is needed (Load). A Corpus over a lazy set whose
// manifest records the split (ManifestSplit, for the same eval_fraction)
// loads a shard only when a read reaches it, so a rank whose rows read a
// few shards touches only those; otherwise (an older manifest, another
// eval_fraction) it loads every shard's document table to form the split.
// A shard's content (its checksum, token ids within the vocabulary,
// sentence flags) is verified once, the first time a Corpus reads from it;
// a shard that fails makes the read throw CorruptShardError naming the
// file.
//
// ShardBytesRead() counts, process-wide, the shard bytes these checks read:
// the header and document table when a shard is loaded, the rest of the
// file (ids, flags) when it is verified. Every byte a Corpus hands out is
// verified first, so the count bounds what was read of the shards (the
// manifest and tokenizer are not counted).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
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
  // Token ids of id_bytes bytes each (uint16 or int32).
  const uint8_t* ids = nullptr;
  uint32_t id_bytes = 4;
  const uint8_t* flags = nullptr;
  int64_t num_tokens = 0;
  std::vector<DocEntry> docs;
};

// What a Corpus read throws when a shard fails verification (the sampler's
// Next() passes it on); what() names the shard file.
class CorruptShardError : public std::runtime_error {
 public:
  explicit CorruptShardError(const absl::Status& status)
      : std::runtime_error(std::string(status.message())), status_(status) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Shard file bytes read by shard loads (header and document table) and
// verifications (ids and sentence flags) in this process, over all sets.
int64_t ShardBytesRead();

// The shards of a prepared directory, memory-mapped.
class ShardSet {
 public:
  // Reads manifest.json and maps every shard, checking headers and sizes
  // against the manifest; `verify` also verifies every shard's content now
  // (otherwise each is verified on first use, see Verify).
  static absl::StatusOr<std::unique_ptr<ShardSet>> Open(const std::string& dir,
                                                        bool verify = false);
  // Reads manifest.json only; each shard is loaded by Load when needed.
  static absl::StatusOr<std::unique_ptr<ShardSet>> OpenLazy(
      const std::string& dir);
  // A set over `manifest` (not read from `dir`), every shard loaded: what
  // prepare and combine use to record the split before writing it.
  static absl::StatusOr<std::unique_ptr<ShardSet>> OpenWithManifest(
      const std::string& dir, const ShardManifest& manifest);
  ~ShardSet();

  // Maps shard `index`, checks its header against the manifest and
  // decodes its document table, the first time it is asked; later calls
  // return the remembered result. Thread-safe.
  absl::StatusOr<const ShardView*> Load(size_t index) const;
  // Loads shard `index`, then verifies it (checksum, ids in
  // [0, vocab_size), flags) the first time it is asked, one pass over the
  // file; later calls return the remembered result at once. Thread-safe.
  // Errors are DataLoss naming the shard file.
  absl::Status Verify(size_t index) const;

  const std::string& dir() const { return dir_; }
  size_t size() const { return manifest_.shards.size(); }
  // The views of the loaded shards (every one after Open; an entry not
  // yet loaded in a lazy set is empty).
  const std::vector<ShardView>& shards() const { return shards_; }
  // Tokens of all shards (as the manifest records and headers confirm).
  int64_t num_tokens() const { return num_tokens_; }
  // What the manifest records.
  const std::string& tokenizer_file() const { return tokenizer_file_; }
  const std::string& tokenizer_hash() const { return manifest_.tokenizer_hash; }
  int64_t vocab_size() const { return manifest_.vocab_size; }
  const TextRules& rules() const { return manifest_.rules; }
  bool use_eod() const { return manifest_.use_eod; }
  const std::optional<ManifestSplit>& split() const { return manifest_.split; }
  const std::vector<ManifestShard>& manifest_shards() const {
    return manifest_.shards;
  }

 private:
  // Load and verification state of one shard.
  struct Slot {
    std::atomic<bool> loaded{false};
    std::atomic<bool> passed{false};
    std::mutex mu;
    std::optional<absl::Status> load_result;
    std::optional<absl::Status> verify_result;
  };
  ShardSet() = default;
  static absl::StatusOr<std::unique_ptr<ShardSet>> Make(const std::string& dir,
                                                        ShardManifest manifest);
  absl::Status LoadLocked(size_t index) const;

  std::string dir_;
  ShardManifest manifest_;
  std::string tokenizer_file_;
  // Filled by Load, entry by entry.
  mutable std::vector<std::unique_ptr<MappedFile>> files_;
  mutable std::vector<ShardView> shards_;
  mutable std::vector<ShardHeader> headers_;
  std::unique_ptr<Slot[]> slots_;
  int64_t num_tokens_ = 0;
};

enum class Split { kTrain, kEval };

// The token sequence of one split: the concatenation of runs of whole
// documents ("segments") of the shards, in shard order, with sentence flags
// kept alternating across segments. A document is held out for evaluation
// when its content hash falls below `eval_fraction` (at least one document
// when eval_fraction > 0 and there are two or more).
//
// When the set's manifest records the split for `eval_fraction`, the
// corpus is placed from it (tokens per shard) and a shard's segments are
// formed the first time a read reaches it (loading and verifying it; a
// shard that disagrees with the record throws CorruptShardError). Otherwise
// every shard is loaded and the segments formed at once. The tokens are
// the same either way.
class Corpus {
 public:
  static absl::StatusOr<Corpus> Create(const ShardSet& shards, Split split,
                                       double eval_fraction);
  Corpus();
  ~Corpus();
  Corpus(Corpus&&) noexcept;
  Corpus& operator=(Corpus&&) noexcept;

  int64_t size() const { return size_; }
  int64_t num_docs() const { return num_docs_; }
  // Whether shards are loaded as reads reach them (the manifest records
  // this split).
  bool per_slice() const { return per_slice_; }
  // Occurrences of every id in this split as the manifest records them
  // (the training split placed per slice); null otherwise.
  const std::vector<int64_t>* recorded_unigram() const;
  // Copies tokens [begin, begin + n) (n > 0, within size()). Reading a
  // shard for the first time verifies it (ShardSet::Verify); a shard that
  // fails throws CorruptShardError.
  void CopyIds(int64_t begin, int64_t n, int32_t* out) const;
  void CopyFlags(int64_t begin, int64_t n, uint8_t* out) const;
  int32_t Id(int64_t pos) const;

 private:
  struct Segment {
    int64_t start = 0;             // position in the corpus
    const uint8_t* ids = nullptr;  // id_bytes bytes per id
    const uint8_t* flags = nullptr;
    int64_t length = 0;
    uint8_t id_bytes = 4;
    uint8_t invert = 0;
  };
  // The split's tokens in one shard.
  struct Part;
  // Which documents of a shard the split holds.
  struct Selection {
    bool want_eval = false;
    double eval_fraction = 0;
    // The held-out document of the at-least-one rule in this shard, or -1.
    int64_t forced_doc = -1;
  };
  friend absl::StatusOr<ManifestSplit> RecordSplit(const ShardSet& shards,
                                                   double eval_fraction);
  // Create; `use_record` false forms the split from the document tables
  // even when the manifest records it, and allows an empty split.
  static absl::StatusOr<Corpus> Build(const ShardSet& shards, Split split,
                                      double eval_fraction, bool use_record);
  // Forms `part`'s segments from its shard's documents (loaded).
  static void FormSegments(const ShardView& view, const Selection& selection,
                           Part* part, int64_t* docs, uint8_t* last_flag);
  // `part`'s segments, formed (and its shard loaded and verified) on first
  // use; throws CorruptShardError.
  const std::vector<Segment>& Segments(const Part& part) const;
  size_t FindPart(int64_t pos) const;
  // Calls fn(segment, offset in it, count, offset in the output) for each
  // piece of [begin, begin + n); `caller` names the caller in range errors.
  template <typename Fn>
  void ForEachPiece(int64_t begin, int64_t n, const char* caller,
                    Fn&& fn) const;

  const ShardSet* shards_ = nullptr;
  Split split_ = Split::kTrain;
  double eval_fraction_ = 0;
  bool per_slice_ = false;
  // The shards holding tokens of the split, in order.
  std::vector<std::unique_ptr<Part>> parts_;
  int64_t size_ = 0;
  int64_t num_docs_ = 0;
};

// The split of `shards` for `eval_fraction` as the manifest records it
// (ManifestSplit): placement per shard and the training split's token
// counts. Loads and reads every shard (prepare and combine call it).
absl::StatusOr<ManifestSplit> RecordSplit(const ShardSet& shards,
                                          double eval_fraction);

}  // namespace xlnet::data
