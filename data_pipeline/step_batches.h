// The position of a stream of batches, one per step, and its prefetching:
// what every batch source shares, whatever its batch type (BatchSource's
// PlmBatch, batch_source.h; LmStreamSource's LmBatch, lm_stream_source.h).
//
//   StepBatches<LmBatch> batches;
//   batches.Start([this](int64_t step) { return BuildBatch(step, rows); },
//                 options, fingerprint, "data, seed or batch size");
//   LmBatch batch = batches.Next();               // step 0, 1, ...
//   XLNET_RETURN_IF_ERROR(batches.Restore(state));  // exact resume
//
// The build function makes the batch of a step (a pure function of it);
// batches are built ahead on `data.loader_threads` threads up to
// `data.prefetch_batches` ahead (prefetcher.h), in page-locked memory with
// SamplerOptions::pin_memory. The state is the next step and a fingerprint
// of what decides batch contents; Restore refuses another fingerprint. The
// first batch handed out in a process logs the shard bytes read so far
// (ShardBytesRead, shard_reader.h): "rank R read N bytes of shard data to
// start".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/shard_reader.h"

namespace xlnet::data {

template <typename Batch>
class Prefetcher;

// The exact position of a batch source; small and serialisable.
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
  // The data section: batch shapes, masking, loader threads and, for
  // OpenBatchSource, `sources` and `source_block_steps`.
  DataConfig data;
  // Global batch size (all ranks together).
  int64_t batch_size = 16;
  // Seeds the streams' epoch offsets, the masking and the blend draws.
  int64_t seed = 1234;
  // This rank and the number of ranks; rank k takes its slice of the rows.
  int rank = 0;
  int world_size = 1;
  // Which split of every corpus the batches read.
  Split split = Split::kTrain;
  // Verify every shard's content when opening (checksums, ids, flags);
  // otherwise each shard is verified the first time a batch reads it.
  bool verify = false;
  // Build batches in page-locked host memory (needs CUDA at run time), so
  // that a non-blocking copy to the GPU neither waits nor goes through a
  // staging buffer; set by a consumer that trains on CUDA.
  bool pin_memory = false;
  // Build PlmBatch's perm_mask and target_mapping, the fields a step copies
  // to the device in bulk, as bool rather than float: the same 0/1 values
  // in a quarter of the bytes (the model reads either dtype); set by a
  // consumer that feeds the batches to the model. The values, and so the
  // fingerprint, do not depend on it.
  bool compact_masks = false;
};

// Instantiated for PlmBatch and LmBatch (step_batches.cc).
template <typename Batch>
class StepBatches {
 public:
  using BuildFn = std::function<Batch(int64_t step)>;

  StepBatches();
  ~StepBatches();
  StepBatches(const StepBatches&) = delete;
  StepBatches& operator=(const StepBatches&) = delete;

  // Starts handing out batches from step 0. Call once; `what` names the
  // settings the fingerprint covers, for Restore's error.
  void Start(BuildFn build, const SamplerOptions& options,
             std::string fingerprint, std::string what);
  // Stops the prefetching workers (the owner calls it before the members
  // its build function reads go).
  void Stop();
  // The batch of State().step, then advances it.
  Batch Next();
  SamplerState State() const;
  // Continues from `state` (what was built ahead is dropped); refuses a
  // state saved with another fingerprint unless `allow_other_setup`, when
  // the state is taken for its step alone.
  absl::Status Restore(const SamplerState& state, bool allow_other_setup);

 private:
  std::string fingerprint_;
  std::string what_;
  // For the start-up line the first batch of the process logs.
  int rank_ = 0;
  std::unique_ptr<Prefetcher<Batch>> prefetcher_;
};

}  // namespace xlnet::data
