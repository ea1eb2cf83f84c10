// The counter-based dropout (model/counter_dropout.h) as a property, not by
// one seed: the vectorised and scalar rows give the same bytes at every
// length and alignment, and the masks that training draws are independent
// across calls (each layer, stream and step draws its own seed), heads,
// batch rows, query rows and neighbouring keys.
#include "model/counter_dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/philox.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::MaskCorrelation;

// KeepRow takes 64 keys per AVX2 step (where the CPU has AVX2) and the
// scalar path 8 per Philox call: rows shorter and longer than a step,
// starting at every offset within a block, must give the same decisions, at
// thresholds near both ends too.
TEST(CounterDropoutTest, VectorisedAndScalarRowsAgree) {
  std::vector<uint8_t> fast(300), slow(300);
  int64_t rows = 0;
  for (double p : {0.0, 0.1, 0.5, 0.9, 1e-5, 0.99999}) {
    AttentionDropout d;
    d.p = p;
    d.seed = 0x9E3779B97F4A7C15ull;
    d.offset = 7;
    const uint32_t threshold = AttentionKeepThreshold(p);
    for (int64_t m : {1, 3, 16, 17, 63, 64, 65, 100, 129, 257}) {
      for (int64_t j0 : {0, 1, 3, 4, 7, 8, 9, 63}) {
        for (int64_t bh : {0, 5, 95}) {
          const int64_t i = 3 * bh + m;
          KeepRow(d, threshold, bh, i, j0, m, fast.data());
          KeepRowPortable(d, threshold, bh, i, j0, m, slow.data());
          ASSERT_EQ(std::vector<uint8_t>(fast.begin(), fast.begin() + m),
                    std::vector<uint8_t>(slow.begin(), slow.begin() + m))
              << "p " << p << ", " << m << " keys from " << j0 << ", row ("
              << bh << ", " << i << ")";
          ++rows;
        }
      }
    }
  }
  EXPECT_EQ(rows, 6 * 10 * 8 * 3);
}

// The decision rule of philox.h, spelled out: key j0 + 2w + h of a block is
// kept iff half h (0 low, 1 high) of Philox word w is below the 16-bit
// threshold, and the threshold is floor((1 - p) 2^16).
TEST(CounterDropoutTest, KeepBitsAreTheDrawsHalvesBelowTheThreshold) {
  EXPECT_EQ(AttentionKeepThreshold(0.1), 58982u);
  EXPECT_EQ(AttentionKeepThreshold(0.5), 32768u);
  EXPECT_EQ(AttentionKeepThreshold(0.0), 65536u);
  const uint64_t seed = 0x0123456789ABCDEFull, offset = 0x0000000500000003ull;
  for (uint32_t threshold : {0u, 1u, 30000u, 58982u, 65535u, 65536u}) {
    for (int64_t j0 : {0, 8, 800}) {
      const int64_t bh = 7, i = 11;
      const Philox4x32 r = Philox4x32_10(
          static_cast<uint32_t>(j0 / 8), static_cast<uint32_t>(i),
          static_cast<uint32_t>(bh), static_cast<uint32_t>(offset),
          static_cast<uint32_t>(seed),
          static_cast<uint32_t>(seed >> 32) ^
              static_cast<uint32_t>(offset >> 32));
      const uint32_t bits =
          AttentionKeepBits8(seed, offset, bh, i, j0, threshold);
      for (int key = 0; key < 8; ++key) {
        const uint32_t half =
            key % 2 == 0 ? r.x[key / 2] & 0xFFFFu : r.x[key / 2] >> 16;
        EXPECT_EQ((bits >> key) & 1u, half < threshold ? 1u : 0u)
            << "threshold " << threshold << ", key " << j0 + key;
      }
    }
  }
}

// The attention op's masks as training draws them: one seed per call from
// the CPU generator (DrawCpuSeed), so two layers, the two streams of a
// layer, and two steps are two calls. Over 2 x 4 x 64 x 96 = 49,152
// decisions a correlation of independent masks has a standard error of
// ~4.5e-3; each bound is 5 of them (the seeds are fixed, so the test is
// deterministic).
TEST(CounterDropoutTest, AttentionMasksAreIndependentAcrossCallsHeadsAndRows) {
  const int64_t b = 2, h = 4, lq = 64, k = 96;
  const double bound = 5 / std::sqrt(double(b * h * lq * k));
  torch::manual_seed(1234);
  std::vector<torch::Tensor> calls;
  for (int c = 0; c < 4; ++c) {
    AttentionDropout d;
    d.p = 0.1;
    d.seed = DrawCpuSeed();
    calls.push_back(AttentionDropoutKeepMask(b, h, lq, k, d));  // [B, H, Lq, K]
  }
  for (size_t c = 0; c < calls.size(); ++c) {
    const torch::Tensor& m = calls[c];
    const double kept = m.to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(kept, 0.9, 5 * std::sqrt(0.09 / m.numel())) << "call " << c;
    for (size_t o = c + 1; o < calls.size(); ++o) {
      EXPECT_LT(std::abs(MaskCorrelation(m, calls[o])), bound)
          << "calls " << c << " and " << o;
    }
    // Heads of one call, batch rows, query rows, neighbouring keys (which
    // share a Philox output 8 at a time, two a 32-bit word).
    EXPECT_LT(std::abs(MaskCorrelation(m.select(1, 0), m.select(1, 1))),
              bound * 2)
        << "heads 0 and 1, call " << c;
    EXPECT_LT(std::abs(MaskCorrelation(m.select(0, 0), m.select(0, 1))),
              bound * std::sqrt(2.0))
        << "batch rows 0 and 1, call " << c;
    EXPECT_LT(
        std::abs(MaskCorrelation(m.slice(2, 0, lq - 1), m.slice(2, 1, lq))),
        bound * 1.1)
        << "neighbouring query rows, call " << c;
    EXPECT_LT(std::abs(MaskCorrelation(m.slice(3, 0, k - 1), m.slice(3, 1, k))),
              bound * 1.1)
        << "neighbouring keys, call " << c;
  }
  // The same seed at another offset (the CUDA kernel's per-launch offset)
  // draws another mask.
  AttentionDropout d;
  d.p = 0.1;
  d.seed = 42;
  const torch::Tensor at0 = AttentionDropoutKeepMask(b, h, lq, k, d);
  d.offset = 1;
  EXPECT_LT(
      std::abs(MaskCorrelation(at0, AttentionDropoutKeepMask(b, h, lq, k, d))),
      bound);
}

// CounterDropout (every backbone dropout with attention 'tiled') uses its
// own Philox stream: with the seed of an attention call it does not repeat
// that call's decisions.
TEST(CounterDropoutTest, BackboneStreamDiffersFromTheAttentionRows) {
  const int64_t cols = 4096;
  AttentionDropout d;
  d.p = 0.5;
  std::vector<uint8_t> attention(cols);
  const uint32_t threshold = AttentionKeepThreshold(d.p);
  torch::manual_seed(0);
  const uint64_t seed = DrawCpuSeed();
  torch::manual_seed(0);
  const torch::Tensor y =
      CounterDropout(torch::ones({cols}), d.p, /*training=*/true);
  d.seed = seed;
  KeepRow(d, threshold, /*bh=*/0, /*i=*/0, 0, cols, attention.data());
  const torch::Tensor kept_backbone = y.ne(0);
  const torch::Tensor kept_attention =
      torch::from_blob(attention.data(), {cols}, torch::kUInt8).ne(0);
  EXPECT_LT(std::abs(MaskCorrelation(kept_backbone, kept_attention)),
            5 / std::sqrt(double(cols)));
}

}  // namespace
}  // namespace xlnet
