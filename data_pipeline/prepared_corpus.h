// Opening one split of a prepared directory for a batch source, and what
// every stream reader over it shares: circular reads and the seeded offset
// each epoch rotates the streams by. Used by the permutation-LM Sampler
// (sampler.h) and the causal-LM ordered streams (lm_stream_source.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// A prepared directory's shards, its tokenizer and one split's tokens.
struct PreparedCorpus {
  std::unique_ptr<ShardSet> shards;
  std::unique_ptr<Tokenizer> tokenizer;
  // Reads `shards` (whose address a move keeps).
  Corpus corpus;
};

// Opens `data_dir` (from `xlnet-data prepare`): the tokenizer is
// d.tokenizer or the spiece.model beside the shards, and must be the one
// the shards were made with (hash, vocabulary size and the text rules it
// records); `split` of the documents (d.eval_fraction held out). `verify`
// checks every shard's content now (ShardSet::Open).
absl::StatusOr<PreparedCorpus> OpenPreparedCorpus(const std::string& data_dir,
                                                  const DataConfig& d,
                                                  Split split, bool verify);

// Copies corpus tokens [start, start + n) modulo corpus.size() (n <= size).
void CopyIdsCircular(const Corpus& corpus, int64_t start, int64_t n,
                     int32_t* out);

// Where epoch `epoch`'s streams start in a corpus of `corpus_size` tokens:
// 0 for the first epoch, then a position drawn from (seed, epoch), so every
// epoch cuts the streams at other places.
int64_t EpochOffset(int64_t seed, int64_t epoch, int64_t corpus_size);

}  // namespace xlnet::data
