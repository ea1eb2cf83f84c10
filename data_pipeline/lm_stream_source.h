// Causal-LM batches: Transformer-XL's ordered iterator over prepared shards.
//
//   SamplerOptions opts{config.data, config.train.batch_size,
//                       config.train.seed, rank, world_size};
//   XLNET_ASSIGN_OR_RETURN(auto source, LmStreamSource::Create(dir, opts));
//   LmBatch batch = source->Next();         // [B_local, L] inputs, targets
//   SamplerState state = source->State();   // save with a checkpoint
//   XLNET_RETURN_IF_ERROR(source->Restore(state));  // exact resume
//
// Streams. The split's tokens (documents in shard order, each ending with
// <eod> when the shards were prepared with use_eod) are cut into B
// contiguous streams of S = N / B tokens (B = global batch, N = the split's
// tokens). Global row r at step t reads stream r's tokens
// [t*L, t*L + L + 1): the inputs are the first L, the targets the next
// token at every position (the last L). So row r of step t+1 starts where
// row r of step t ended (step t's last target is step t+1's first input),
// and memory carried from one step to the next is the text just before.
//
// Epochs. A stream holds steps_per_epoch = (S - 1) / L windows; the last
// S - 1 - steps_per_epoch * L tokens of each stream go unread that epoch.
// Epoch e = t / steps_per_epoch starts the streams at a corpus position
// rotated by EpochOffset(seed, e) (0 for the first epoch; prepared_corpus.h,
// as the permutation-LM Sampler rotates its streams), reading around the
// corpus end, so each epoch cuts the text at other places.
//
// A row's content is a pure function of (seed, row, step): the global batch
// is the same for any world size, rank k of W takes rows
// [k*B/W, (k+1)*B/W), and a restored state continues exactly. Batches are
// built ahead on `data.loader_threads` threads, up to
// `data.prefetch_batches` ahead, in page-locked memory with
// SamplerOptions::pin_memory (StepBatches, step_batches.h). The PLM keys of
// the data section (reuse_len, masks, permutations, bi_data) are not read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/lm_batch.h"
#include "data_pipeline/prepared_corpus.h"
#include "data_pipeline/step_batches.h"

namespace xlnet::data {

class LmStreamSource {
 public:
  // Opens `data_dir` (from `xlnet-data prepare`; tokenizer as for the
  // Sampler, prepared_corpus.h) and its options.split. Needs batch_size a
  // multiple of world_size and streams of at least seq_len + 1 tokens.
  static absl::StatusOr<std::unique_ptr<LmStreamSource>> Create(
      const std::string& data_dir, const SamplerOptions& options);
  ~LmStreamSource();
  LmStreamSource(const LmStreamSource&) = delete;
  LmStreamSource& operator=(const LmStreamSource&) = delete;

  // The next batch of this rank (BuildBatch(State().step, local_rows())).
  LmBatch Next() { return batches_.Next(); }
  SamplerState State() const { return batches_.State(); }
  // As BatchSource::Restore (batch_source.h).
  absl::Status Restore(const SamplerState& state,
                       bool allow_other_setup = false) {
    return batches_.Restore(state, allow_other_setup);
  }

  // The batch of `step` for the given global rows. Thread-safe.
  LmBatch BuildBatch(int64_t step, const std::vector<int64_t>& rows) const;
  // Corpus position of token `pos` (0..seq_len, the last being the final
  // target) of global `row` at `step`.
  int64_t CorpusPosition(int64_t step, int64_t row, int64_t pos) const;

  // Rows of this rank, in batch order (global row indices).
  const std::vector<int64_t>& local_rows() const { return local_rows_; }
  const Tokenizer& tokenizer() const { return *prepared_.tokenizer; }
  const Corpus& corpus() const { return prepared_.corpus; }
  int64_t num_streams() const { return options_.batch_size; }
  int64_t stream_length() const { return stream_length_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  LmStreamSource() = default;

  SamplerOptions options_;
  PreparedCorpus prepared_;
  std::vector<int64_t> local_rows_;
  int64_t stream_length_ = 0;
  int64_t steps_per_epoch_ = 0;
  // Declared last: its workers read the members above.
  StepBatches<LmBatch> batches_;
};

}  // namespace xlnet::data
