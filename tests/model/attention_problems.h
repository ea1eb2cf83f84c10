// Problems for the fused attention's kernel tests, shared by the emulated
// tensor-core tests (cuda/tc_attention_kernels_test.cc) and the GPU ones
// (tiled_attention_test.cc): fixed shapes (MakeAttentionProblem), problems
// drawn from a seed (DrawAttentionProblem) and the checks both apply.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "model/attention_types.h"
#include "tests/model/test_util.h"

namespace xlnet::testing {

struct AttentionShape {
  int64_t b = 2, h = 2, l = 100, lq = 100, mlen = 40, groups = 1;
  bool seg = true, query_stream = false;
  double dropout = 0;
};

struct AttentionProblem {
  // qw, qr, k, v, k_r, seg in fp32 (head size 64; k_r [groups, H, R, 64],
  // seg [B, H, Lq, 2] or undefined); the output's gradient w.
  std::vector<torch::Tensor> x;
  torch::Tensor w;
  AttentionBias bias;
  int64_t qlen = 0;
  AttentionDropout dropout;
};

// The inputs of shape s from `seed`: a mask of 30% density with rows 1 of
// sample 0 and Lq - 1 of the last sample fully masked, random segment
// relations, and on the query stream arbitrary positions (unsorted, with a
// repeat).
inline AttentionProblem MakeAttentionProblem(const AttentionShape& s,
                                             uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t klen = s.mlen + s.l, rlen = klen + s.l, dh = 64;
  AttentionProblem pr;
  pr.qlen = s.l;
  const auto q = torch::randn({s.b, s.h, s.lq, dh});
  pr.x = {q,
          q * 0.5,
          torch::randn({s.b, s.h, klen, dh}),
          torch::randn({s.b, s.h, klen, dh}),
          torch::randn({s.groups, s.h, rlen, dh}),
          s.seg ? torch::randn({s.b, s.h, s.lq, 2}) : torch::Tensor()};
  pr.w = torch::randn({s.b, s.h, s.lq, dh});
  auto m = torch::rand({s.b, 1, s.lq, klen}) < 0.3;  // [B, 1, Lq, K]
  if (s.lq > 1) m[0][0][1].fill_(true);              // every key masked
  m[s.b - 1][0][s.lq - 1].fill_(true);
  pr.bias.mask = m;
  if (s.seg) pr.bias.seg_diff = torch::rand({s.b, 1, s.lq, klen}) < 0.5;
  if (s.query_stream) {
    pr.bias.query_pos = torch::randint(0, s.l, {s.b, s.lq}, torch::kLong);
    pr.bias.query_pos[0][0] = s.l - 1;
    pr.bias.query_pos[0][s.lq - 1] = 0;
  }
  pr.dropout.p = s.dropout;
  pr.dropout.seed = 7;
  pr.dropout.offset = 3;
  return pr;
}

// A problem drawn from a seed: sizes (ragged tiles from 1 row up), the
// stream, k_r's groups (shared, bi_data-like groups, per sample), the
// segment term, dropout, the mask (none on the content stream, shared by
// the batch or per sample, 5% to 95% dense, with a fully masked row), and
// how to run it: the dtype, the operands' layouts (0 contiguous, 1 heads
// last; k and v also 2: interleaved in one [B, K, 2, H, Dh] buffer as the
// key/value projection hands them over) and, for the emulation, a warp
// order and cp.async timing.
struct DrawnAttentionProblem {
  AttentionShape shape;
  AttentionProblem pr;
  int64_t masked_b = -1, masked_row = -1;  // the fully masked row, if any
  torch::ScalarType dtype = torch::kBFloat16;
  int q_layout = 0, kv_layout = 0, out_layout = 0;
  int schedule = 0;  // cuda_emulation::Schedule's order, 0-2
  bool copies_at_issue = false;
  std::string name;  // all of the above, for the test log
};

inline DrawnAttentionProblem DrawAttentionProblem(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo +
           static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  const auto chance = [&](int percent) { return pick(0, 99) < percent; };
  DrawnAttentionProblem r;
  AttentionShape& s = r.shape;
  s.b = pick(1, 3);
  s.h = pick(1, 2);
  s.query_stream = chance(35);
  s.l = pick(1, 160);
  s.lq = s.query_stream ? pick(1, 90) : s.l;
  s.mlen = chance(25) ? 0 : pick(1, 100);
  std::vector<int64_t> divisors;
  for (int64_t g = 1; g <= s.b; ++g) {
    if (s.b % g == 0) divisors.push_back(g);
  }
  s.groups = divisors[pick(0, static_cast<int64_t>(divisors.size()) - 1)];
  s.seg = chance(70);
  s.dropout = chance(50) ? 0.15 : 0;
  AttentionProblem& pr = r.pr;
  pr = MakeAttentionProblem(s, seed);
  const int64_t klen = s.mlen + s.l;
  const int mask_kind = static_cast<int>(pick(0, 3));  // none, shared, each
  const double density = std::vector<double>{0.05, 0.5, 0.95}[pick(0, 2)];
  if (mask_kind == 0 && !s.query_stream) {
    pr.bias.mask = torch::Tensor();
  } else {
    const int64_t rows = mask_kind == 1 ? 1 : s.b;
    pr.bias.mask = torch::rand({rows, 1, s.lq, klen}) < density;
    r.masked_b = pick(0, rows - 1);
    r.masked_row = pick(0, s.lq - 1);
    pr.bias.mask[r.masked_b][0][r.masked_row].fill_(true);
  }
  r.dtype = chance(50) ? torch::kBFloat16 : torch::kHalf;
  r.q_layout = static_cast<int>(pick(0, 1));
  r.kv_layout = static_cast<int>(pick(0, 2));
  r.out_layout = static_cast<int>(pick(0, 1));
  r.schedule = static_cast<int>(pick(0, 2));
  r.copies_at_issue = chance(50);
  r.name = absl::StrFormat(
      "seed %d: %s, %s stream, b %d h %d l %d lq %d mlen %d groups %d seg %d "
      "dropout %g mask %d (density %g), layouts q %d kv %d dout %d, "
      "schedule %d copies at issue %d",
      seed, r.dtype == torch::kHalf ? "fp16" : "bf16",
      s.query_stream ? "query" : "content", s.b, s.h, s.l, s.lq, s.mlen,
      s.groups, s.seg, s.dropout, mask_kind, density, r.q_layout, r.kv_layout,
      r.out_layout, r.schedule, r.copies_at_issue);
  return r;
}

// How many drawn problems a test runs: XLNET_TC_RANDOM_PROBLEMS, default 24
// (0 for a value that is not a positive number).
inline int DrawnProblemCount() {
  const char* env = std::getenv("XLNET_TC_RANDOM_PROBLEMS");
  return env != nullptr ? std::max(std::atoi(env), 0) : 24;
}

// The output and the gradients of qw, qr, k, v, k_r and seg, in that order.
inline constexpr const char* kAttentionOutputNames[] = {
    "out", "dqw", "dqr", "dk", "dv", "dk_r", "dseg"};

// Each of got finite and within tol of its reference's largest value. A
// gradient that is zero in exact arithmetic (one key: the probability is 1
// whatever the score) is rounding noise of ~1e-7 on both sides, so the
// scale is at least 1e-3 (the inputs are of order 1).
inline void ExpectWithinCpuPath(const std::vector<torch::Tensor>& got,
                                const std::vector<torch::Tensor>& ref,
                                double tol, const std::string& name) {
  ASSERT_EQ(got.size(), ref.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    const char* what = kAttentionOutputNames[i];
    const auto g = got[i].to(torch::kFloat);
    const double scale = std::max(ref[i].abs().max().item<double>(), 1e-3);
    const double diff = MaxAbsDiff(g, ref[i]);
    EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << name << " " << what;
    EXPECT_LT(diff, tol * scale) << name << " " << what;
    std::printf("[ diff     ] %s %s: max |got - cpu| %.3g (scale %.3g)\n",
                name.c_str(), what, diff, scale);
  }
}

// The drawn problem's fully masked row is zeros in out [B, H, Lq, Dh] (in
// every sample where the mask is shared by the batch).
inline void ExpectMaskedRowZero(const DrawnAttentionProblem& d,
                                const torch::Tensor& out) {
  if (d.masked_b < 0) return;
  for (int64_t b = 0; b < d.shape.b; ++b) {
    if (d.pr.bias.mask.size(0) > 1 && b != d.masked_b) continue;
    EXPECT_EQ(out[b].select(1, d.masked_row).abs().max().item<float>(), 0.f)
        << "sample " << b << " row " << d.masked_row;
  }
}

}  // namespace xlnet::testing
