// Where pretraining batches come from: one interface for a single prepared
// directory (Sampler, sampler.h) and a weighted blend of several
// (BlendSampler, blend_sampler.h), opened from a config by one factory
// (OpenBatchSource, open_batch_source.h).
//
//   SamplerOptions opts{config.data, config.train.batch_size,
//                       config.train.seed, rank, world_size};
//   XLNET_ASSIGN_OR_RETURN(auto source, OpenBatchSource(data_dir, opts));
//   PlmBatch batch = source->Next();          // [B_local, ...] tensors
//   SamplerState state = source->State();      // save with a checkpoint
//   XLNET_RETURN_IF_ERROR(source->Restore(state));  // exact resume
//
// A source's batch is a pure function of (step, rows): subclasses supply
// BuildBatch and the fingerprint; this class hands out the batches of
// consecutive steps, built ahead on `data.loader_threads` threads up to
// `data.prefetch_batches` ahead (prefetcher.h), and saves and restores the
// position (StepBatches, step_batches.h, which the causal-LM streams of
// lm_stream_source.h share). Restore refuses a state whose fingerprint
// differs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/plm_batch.h"
#include "data_pipeline/plm_sample.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/step_batches.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

class Sampler;

// One corpus the batches are drawn from.
struct SourcePart {
  // Its sampler (owned by the source).
  const Sampler* sampler = nullptr;
  // Its share of the rows: data.sources' weight, normalised to sum to 1.
  double weight = 1.0;
  // data.sources' name; empty for a single --data directory.
  std::string name;
};

// Where one row of one step comes from.
struct RowOrigin {
  // The corpus's sampler, and the step of that sampler whose batch holds
  // the row (the blend's step counted in that source's own stream).
  const Sampler* sampler = nullptr;
  int64_t step = 0;
  // data.sources' name; empty for a single --data directory.
  std::string name;
};

class BatchSource {
 public:
  virtual ~BatchSource();
  BatchSource(const BatchSource&) = delete;
  BatchSource& operator=(const BatchSource&) = delete;

  // The next batch of this rank (BuildBatch(State().step, local_rows())).
  PlmBatch Next();
  SamplerState State() const;
  // Continues from `state` (what was built ahead is dropped); refuses a
  // state saved with other data or settings.
  // With `allow_other_setup` (--allow_changed_settings), a state saved with
  // another fingerprint is taken for its step alone: the batches go on from
  // that step as this setup makes them.
  absl::Status Restore(const SamplerState& state,
                       bool allow_other_setup = false);

  // The batch of `step` for the given global rows (any rows; used by
  // Next, tests and tools). Thread-safe.
  virtual PlmBatch BuildBatch(int64_t step,
                              const std::vector<int64_t>& rows) const = 0;
  // Rows of this rank, in batch order (global row indices).
  virtual const std::vector<int64_t>& local_rows() const = 0;
  // The tokenizer the shards were made with (the same for every corpus).
  virtual const Tokenizer& tokenizer() const = 0;
  // The corpora, in data.sources order (one for a single directory).
  virtual std::vector<SourcePart> Parts() const = 0;
  // Tokens each part contributed to the global batches of steps
  // [0, steps): row-steps read from it times seq_len. Exact for any steps.
  virtual std::vector<int64_t> TokensConsumed(int64_t steps) const = 0;
  // The corpus and its step that global `row` of `step` reads.
  virtual RowOrigin Origin(int64_t step, int64_t row) const = 0;

 protected:
  BatchSource();
  // Starts handing out batches from step 0. Call once, last in a
  // subclass's Create (BuildBatch must work); `what` names the settings
  // the fingerprint covers, for Restore's error.
  void StartBatches(const SamplerOptions& options, std::string fingerprint,
                    std::string what);
  // Stops the prefetching workers. A subclass's destructor calls it first,
  // before the members its BuildBatch reads go.
  void StopBatches();

 private:
  StepBatches<PlmBatch> batches_;
};

}  // namespace xlnet::data
