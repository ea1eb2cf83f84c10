// Blending several prepared corpora by weight (#17).
//
//   std::vector<BlendSource> sources = {{"wiki_dir", 0.75, "wiki"},
//                                       {"books_dir", 0.25, "books"}};
//   XLNET_ASSIGN_OR_RETURN(auto blend,
//       BlendSampler::Create(sources, sampler_options, /*block_steps=*/100));
//   PlmBatch batch = blend->Next();
//
// Each source is a Sampler of its own (its own corpus, streams and epochs).
// Time is cut into blocks of `block_steps` steps. For global row r and block
// b a weighted draw seeded by (seed, stream of r, b) picks the source; inside
// the block the row reads that source's stream contiguously, so the memory
// stays meaningful except where a block switches source. The row's step in
// source s at global step t is
//   block_steps * (blocks of r before b assigned to s) + t mod block_steps,
// so a source's stream only advances while the row reads it, and a source
// wraps into its next epoch when its own stream runs out. A forward row and
// its bi_data backward row share the draw (they read the same stream).
// With one source every draw returns it and the source step equals t: the
// batches are exactly those of the single-directory Sampler.
//
// Content depends only on (seed, row, step), so rank slicing and exact
// resume work as for Sampler; the fingerprint covers every source's
// fingerprint, the weights, names and block size. The blend is the
// BatchSource that builds ahead (batch_source.h); its per-source Samplers
// never prefetch (the blend only calls their BuildBatch).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data_pipeline/sampler.h"

namespace xlnet::data {

// One corpus of a blend: {path, weight, name} (config.h, data.sources).
using BlendSource = ::xlnet::DataSource;

class BlendSampler : public BatchSource {
 public:
  // Opens every source with `options`, less prefetching: the blend itself
  // prefetches with options.data's loader_threads and prefetch_batches. All
  // sources must share the tokenizer (manifest hash) and text rules; the
  // error names the source that differs.
  static absl::StatusOr<std::unique_ptr<BlendSampler>> Create(
      std::vector<BlendSource> sources, const SamplerOptions& options,
      int64_t block_steps);
  ~BlendSampler() override;

  PlmBatch BuildBatch(int64_t step,
                      const std::vector<int64_t>& rows) const override;
  // The source global `row` reads at `step`, and its step inside that
  // source (what that source's Sampler would be asked for).
  int SourceOf(int64_t step, int64_t row, int64_t* source_step) const;
  // Tokens each source contributed to the global batch over steps
  // [0, steps): row-steps read from the source times seq_len (every row
  // of every step is one seq_len-token sample). Exact for any `steps`.
  std::vector<int64_t> TokensConsumed(int64_t steps) const override;
  // Every source with its normalised weight and name.
  std::vector<SourcePart> Parts() const override;
  // The source's sampler and step (SourceOf).
  RowOrigin Origin(int64_t step, int64_t row) const override;

  const std::vector<BlendSource>& sources() const { return sources_; }
  const Sampler& source(int i) const { return *samplers_[i]; }
  const std::vector<int64_t>& local_rows() const override {
    return samplers_[0]->local_rows();
  }
  // The first source's (every source has the same, checked by Create).
  const Tokenizer& tokenizer() const override {
    return samplers_[0]->tokenizer();
  }
  int64_t block_steps() const { return block_steps_; }

 private:
  BlendSampler();
  // The source stream `stream` reads in `block`.
  int Draw(int64_t stream, int64_t block) const;
  // Blocks of `stream` before `block` assigned to each source (exact).
  std::vector<int64_t> BlockCounts(int64_t stream, int64_t block) const;

  // Prefix counts are memoised every kCheckpointBlocks blocks per stream, so
  // a lookup redoes at most kCheckpointBlocks draws.
  static constexpr int64_t kCheckpointBlocks = 64;

  std::vector<BlendSource> sources_;
  std::vector<std::unique_ptr<Sampler>> samplers_;
  std::vector<double> cumulative_;  // normalised cumulative weights
  int64_t block_steps_ = 100;
  int64_t seed_ = 0;
  int64_t num_streams_ = 0;
  int64_t batch_size_ = 0;
  int64_t seq_len_ = 0;

  mutable std::mutex memo_mu_;
  // memo_[stream][c]: per-source counts of blocks [0, c * kCheckpointBlocks).
  mutable std::vector<std::vector<std::vector<int64_t>>> memo_;
};

}  // namespace xlnet::data
