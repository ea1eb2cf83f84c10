// The permutation-LM sampler: memory-aware streams over prepared shards.
//
//   SamplerOptions opts{config.data, config.train.batch_size,
//                       config.train.seed, rank, world_size};
//   XLNET_ASSIGN_OR_RETURN(auto sampler, Sampler::Create(data_dir, opts));
//   PlmBatch batch = sampler->Next();         // [B_local, ...] tensors
//
// A BatchSource (batch_source.h), which hands out, saves and restores the
// batches; OpenBatchSource picks this or a blend from the config.
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
// batch_source.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/batch_source.h"
#include "data_pipeline/plm_batch.h"
#include "data_pipeline/plm_sample.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

class Sampler : public BatchSource {
 public:
  // Opens `data_dir` (from `xlnet-data prepare`). The tokenizer is
  // data.tokenizer or the spiece.model beside the shards; it must be the
  // one the shards were made with.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      const std::string& data_dir, const SamplerOptions& options);
  ~Sampler() override;

  PlmBatch BuildBatch(int64_t step,
                      const std::vector<int64_t>& rows) const override;
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
  // This one corpus, unnamed.
  std::vector<SourcePart> Parts() const override;
  // steps * batch_size * seq_len.
  std::vector<int64_t> TokensConsumed(int64_t steps) const override;
  // This sampler at `step`.
  RowOrigin Origin(int64_t step, int64_t row) const override;

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
};

}  // namespace xlnet::data
