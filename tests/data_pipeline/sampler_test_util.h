// Helpers shared by the sampler tests of xlnet_data_test.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/config.h"
#include "data_pipeline/sampler.h"

namespace xlnet::data::testing {

// A small data config for the Brown sample: 64-token samples, 2 loader
// threads prefetching 2 batches.
inline DataConfig TinyData() {
  DataConfig d;
  d.seq_len = 64;
  d.reuse_len = 32;
  d.perm_size = 16;
  d.num_predict = 10;
  d.bi_data = false;
  d.eval_fraction = 0.05;
  d.prefetch_batches = 2;
  d.loader_threads = 2;
  return d;
}

// Every tensor of `a` equals the one of `b`.
inline void ExpectBatchesEqual(const PlmBatch& a, const PlmBatch& b) {
  const auto na = a.Named();
  const auto nb = b.Named();
  ASSERT_EQ(na.size(), nb.size());
  for (size_t i = 0; i < na.size(); ++i) {
    EXPECT_TRUE(torch::equal(na[i].second, nb[i].second)) << na[i].first;
  }
}

// `compact` is `plain` built with SamplerOptions::compact_masks: perm_mask
// and target_mapping are bool with the same values, every other field is
// equal.
inline void ExpectCompactOf(const PlmBatch& compact, const PlmBatch& plain) {
  const auto nc = compact.Named();
  const auto np = plain.Named();
  ASSERT_EQ(nc.size(), np.size());
  for (size_t i = 0; i < nc.size(); ++i) {
    const std::string name = nc[i].first;
    const torch::Tensor& c = nc[i].second;
    const torch::Tensor& p = np[i].second;
    if (name == "perm_mask" || name == "target_mapping") {
      EXPECT_EQ(c.scalar_type(), torch::kBool) << name;
      EXPECT_EQ(p.scalar_type(), torch::kFloat) << name;
      EXPECT_TRUE(torch::equal(c.to(p.scalar_type()), p)) << name;
    } else {
      EXPECT_TRUE(torch::equal(c, p)) << name;
    }
  }
}

}  // namespace xlnet::data::testing
