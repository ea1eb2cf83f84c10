// The permutation-LM sampler: memory-aware streams over prepared shards.
//
//   SamplerOptions opts{config.data, config.train.batch_size,
//                       config.train.seed, rank, world_size};
//   XLNET_ASSIGN_OR_RETURN(auto sampler, Sampler::Create(data_dir, opts));
//   PlmBatch batch = sampler->Next();         // [B_local, ...] tensors
//   SamplerState state = sampler->State();     // save with a checkpoint
//   XLNET_RETURN_IF_ERROR(sampler->Restore(state));  // exact resume
//
// Streams. The corpus (train or eval split) is cut into S contiguous
// streams (S = B, or B/2 with bi_data). Global row r < S reads stream r
// forwards; with bi_data, row S + r reads stream r backwards. At step t a
// row's sample starts at stream position t * reuse_len, so its reuse part
// continues the previous step's (memory stays meaningful). When a stream
// runs out, the next epoch starts over with the streams rotated by a
// seeded offset. A row's content depends only on (seed, row, step), so the
// global batch is the same for any world size; rank k of W takes rows
// [k*B/W, (k+1)*B/W), or with bi_data its slice of the forward rows then
// the matching slice of the backward rows (the official [fwd; bwd] layout).
//
// Batches are built ahead on `data.loader_threads` threads, up to
// `data.prefetch_batches` ahead (0 = built inside Next()); see
// prefetcher.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "data_pipeline/plm_batch.h"
#include "data_pipeline/plm_sample.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

class BatchPrefetcher;

// The exact position of a sampler; small and serialisable.
struct SamplerState {
  // The next step Next() returns.
  int64_t step = 0;
  // Hash of everything that decides batch contents (seed, global batch,
  // data config, corpus); Restore refuses a state from another setup.
  // Rank and world size are not part of it: a state resumes on any world.
  std::string fingerprint;

  std::string ToString() const;  // one JSON object
  static absl::StatusOr<SamplerState> FromString(const std::string& text);
};

struct SamplerOptions {
  DataConfig data;
  // Global batch size (all ranks together).
  int64_t batch_size = 16;
  int64_t seed = 1234;
  int rank = 0;
  int world_size = 1;
  Split split = Split::kTrain;
  // Verify every shard's content when opening (checksums, ids, flags);
  // otherwise each shard is verified the first time a batch reads it.
  bool verify = false;
};

// What a training unit reads batches from: one prepared directory
// (Sampler) or a blend of several (BlendSampler, blend_sampler.h).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch of this rank.
  virtual PlmBatch Next() = 0;
  virtual SamplerState State() const = 0;
  virtual absl::Status Restore(const SamplerState& state) = 0;
  // Rows of this rank, in batch order (global row indices).
  virtual const std::vector<int64_t>& local_rows() const = 0;
  // The tokenizer the shards were made with.
  virtual const Tokenizer& tokenizer() const = 0;
};

class Sampler : public BatchSource {
 public:
  // Opens `data_dir` (from `xlnet-data prepare`). The tokenizer is
  // data.tokenizer or the spiece.model beside the shards; it must be the
  // one the shards were made with.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      const std::string& data_dir, const SamplerOptions& options);
  ~Sampler() override;

  PlmBatch Next() override;
  SamplerState State() const override;
  absl::Status Restore(const SamplerState& state) override;
  const std::vector<int64_t>& local_rows() const override {
    return local_rows_;
  }
  int64_t global_batch_size() const { return options_.batch_size; }
  int64_t num_streams() const { return num_streams_; }
  int64_t stream_length() const { return stream_length_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  const Corpus& corpus() const { return corpus_; }
  const ShardSet& shards() const { return *shards_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const SamplerOptions& options() const { return options_; }

  // The batch of `step` for the given global rows (any rows; used by Next,
  // tests and tools). Thread-safe.
  PlmBatch BuildBatch(int64_t step, const std::vector<int64_t>& rows) const;
  // One row's sample with details (for display and tests).
  PlmBatch BuildRow(int64_t step, int64_t row, SampleDebug* debug) const;
  // Corpus position of stream position `pos` of global `row` at `step`'s
  // epoch (backward rows count from the stream's end).
  int64_t CorpusPosition(int64_t step, int64_t row, int64_t pos) const;

 private:
  class RowStream;
  class BufferPool;
  Sampler();
  int64_t EpochOffset(int64_t epoch) const;

  SamplerOptions options_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<ShardSet> shards_;
  Corpus corpus_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<uint8_t> is_start_piece_;
  std::vector<int64_t> local_rows_;
  int64_t num_streams_ = 0;
  int64_t stream_length_ = 0;
  int64_t stride_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::string fingerprint_;

  // Builds BuildBatch(step, local_rows_) ahead. Last member: it is destroyed
  // (its workers joined) before the state its build function reads.
  std::unique_ptr<BatchPrefetcher> prefetcher_;
};

}  // namespace xlnet::data
