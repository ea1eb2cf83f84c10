// The fused attention's CPU path (model/tiled_attention.h) against the
// unfused RelativeAttentionCore: forward within 1e-5 and gradients of q, k,
// v, k_r, the three biases and seg_embed within 1e-4 (fp32), for both
// streams, with memory, masks (fully masked rows included), with and
// without the segment term, k_r batch 1 and B, and tile sizes that do and
// do not divide Lq and K; bf16 within a stated tolerance of fp32; fp64
// finite differences with and without dropout; the dropout stream's
// determinism and its Philox known-answer vectors. Attention 'sdpa'
// (model/sdpa_attention.h): its bias reproduces the unfused score exactly,
// the CUDA bias kernel matches the LibTorch ops, and the whole core matches
// the unfused one (where LibTorch has SDPA, >= 2.1).
#include "model/tiled_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "model/attention.h"
#include "model/counter_dropout.h"
#include "model/philox.h"
#include "model/precision.h"
#include "model/relative_attention.h"
#include "model/sdpa_attention.h"
#include "tests/model/attention_problems.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GradCheck;
using testing::MaxAbsDiff;

// Random inputs of the attention core (one stream).
struct Case {
  int64_t b = 2, h = 3, lq = 7, l = 7, mlen = 4, dh = 8, kr_batch = 1;
  bool seg = true, mask = true, query_stream = false, masked_rows = true;
};

struct CoreInputs {
  // q, k, v, k_r, r_w_bias, r_r_bias, r_s_bias, seg_embed
  std::vector<torch::Tensor> x;
  AttentionBias bias;
  int64_t qlen = 0;
};

CoreInputs MakeCore(const Case& c, uint64_t seed,
                    torch::ScalarType dtype = torch::kFloat) {
  torch::manual_seed(seed);
  const int64_t klen = c.mlen + c.l, rlen = klen + c.l;
  const auto o = torch::TensorOptions().dtype(dtype);
  CoreInputs in;
  in.qlen = c.l;
  in.x = {torch::randn({c.b, c.h, c.lq, c.dh}, o),         // q
          torch::randn({c.b, c.h, klen, c.dh}, o),         // k
          torch::randn({c.b, c.h, klen, c.dh}, o),         // v
          torch::randn({c.kr_batch, c.h, rlen, c.dh}, o),  // k_r
          torch::randn({c.h, c.dh}, o) * 0.5,              // r_w_bias
          torch::randn({c.h, c.dh}, o) * 0.5,              // r_r_bias
          torch::randn({c.h, c.dh}, o) * 0.5,              // r_s_bias
          torch::randn({2, c.h, c.dh}, o)};                // seg_embed
  if (c.query_stream) {
    // Arbitrary positions: unsorted, with a repeat.
    in.bias.query_pos = torch::randint(0, c.l, {c.b, c.lq}, torch::kLong);
    in.bias.query_pos[0][0] = c.l - 1;
    in.bias.query_pos[0][c.lq - 1] = 0;
  }
  if (c.mask) {
    auto m = torch::rand({c.b, 1, c.lq, klen}) < 0.3;  // [B, 1, Lq, K]
    if (c.masked_rows) {
      m[0][0][1].fill_(true);  // every key masked
      m[c.b - 1][0][c.lq - 1].fill_(true);
    }
    in.bias.mask = m;
  }
  if (c.seg) in.bias.seg_diff = torch::rand({c.b, 1, c.lq, klen}) < 0.5;
  return in;
}

torch::Tensor RunCore(const CoreInputs& in, const std::vector<torch::Tensor>& x,
                      const AttentionOptions& opts, double dropout = 0,
                      bool training = false) {
  if (opts.impl == AttentionImpl::kUnfused) {
    return RelativeAttentionCore(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                                 in.bias, in.qlen, dropout, training);
  }
  if (opts.impl == AttentionImpl::kSdpa) {
    return SdpaRelativeAttentionCore(x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                                     x[7], in.bias, in.qlen, dropout, training);
  }
  return FusedRelativeAttentionCore(x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                                    x[7], in.bias, in.qlen, dropout, training,
                                    opts);
}

// Output and the gradients of sum(out * w) w.r.t. every input.
std::vector<torch::Tensor> ForwardBackward(const CoreInputs& in,
                                           const AttentionOptions& opts,
                                           const torch::Tensor& w) {
  std::vector<torch::Tensor> x;
  for (const auto& t : in.x) x.push_back(t.detach().clone().requires_grad_());
  auto out = RunCore(in, x, opts);
  auto grads = torch::autograd::grad({(out.to(w.scalar_type()) * w).sum()}, x,
                                     {}, false, false, /*allow_unused=*/true);
  std::vector<torch::Tensor> all = {out.detach()};
  for (size_t i = 0; i < grads.size(); ++i) {
    all.push_back(grads[i].defined() ? grads[i] : torch::zeros_like(x[i]));
  }
  return all;
}

AttentionOptions Tiled(int64_t query, int64_t key) {
  AttentionOptions o;
  o.impl = AttentionImpl::kTiled;
  o.tiles.query = query;
  o.tiles.key = key;
  return o;
}

const char* kNames[] = {"out",      "q",        "k",        "v",        "k_r",
                        "r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"};

// Tiled (several tilings) vs unfused: forward <= 1e-5, gradients <= 1e-4.
void ExpectMatchesUnfused(const Case& c, uint64_t seed) {
  const CoreInputs in = MakeCore(c, seed);
  auto w = torch::randn({c.b, c.h, c.lq, c.dh});
  const auto ref = ForwardBackward(in, AttentionOptions(), w);
  EXPECT_TRUE(torch::isfinite(ref[0]).all().item<bool>());
  const int64_t klen = c.mlen + c.l;
  for (auto [tq, tk] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 5}, {4, 0}, {64, 0}, {c.lq, klen}, {2, 3}}) {
    SCOPED_TRACE(::testing::Message() << "tiles " << tq << " x " << tk);
    const auto got = ForwardBackward(in, Tiled(tq, tk), w);
    for (size_t i = 0; i < got.size(); ++i) {
      const double tol = i == 0 ? 1e-5 : 1e-4;
      EXPECT_LT(MaxAbsDiff(got[i], ref[i]), tol) << kNames[i];
    }
  }
}

TEST(TiledAttentionTest, ContentStreamWithMemoryMasksAndSegments) {
  ExpectMatchesUnfused(Case{}, 1);
}

TEST(TiledAttentionTest, ContentStreamVariants) {
  Case c;
  c.seg = false;
  ExpectMatchesUnfused(c, 2);  // no segment term
  c = Case{};
  c.mask = false;
  ExpectMatchesUnfused(c, 3);  // no mask
  c = Case{};
  c.mlen = 0;
  c.kr_batch = 2;  // bi_data: one k_r row per sample
  ExpectMatchesUnfused(c, 4);
  c = Case{};
  c.l = c.lq = 13;
  c.mlen = 9;
  c.b = 1;
  ExpectMatchesUnfused(c, 5);
}

TEST(TiledAttentionTest, QueryStreamAtArbitraryPositions) {
  Case c;
  c.query_stream = true;
  c.lq = 5;  // P targets of L = 7 positions
  ExpectMatchesUnfused(c, 6);
  c.kr_batch = 2;
  c.seg = false;
  ExpectMatchesUnfused(c, 7);
}

TEST(TiledAttentionTest, FullyMaskedRowsGiveZerosNotNan) {
  Case c;
  const CoreInputs in = MakeCore(c, 8);
  auto w = torch::randn({c.b, c.h, c.lq, c.dh});
  for (auto tiles : {Tiled(2, 3), Tiled(64, 0)}) {
    const auto got = ForwardBackward(in, tiles, w);
    for (const auto& t : got)
      EXPECT_TRUE(torch::isfinite(t).all().item<bool>());
    EXPECT_EQ(got[0][0].select(1, 1).abs().max().item<double>(), 0.0);
    EXPECT_EQ(got[0][c.b - 1].select(1, c.lq - 1).abs().max().item<double>(),
              0.0);
    // Nothing flows back through a row that sees nothing.
    EXPECT_EQ(got[1][0].select(1, 1).abs().max().item<double>(), 0.0);
  }
}

TEST(TiledAttentionTest, Bf16WithinToleranceOfFp32) {
  // Both paths in bf16 against the fp32 unfused result. The tiled path
  // computes scores and softmax in fp32 from bf16 inputs (the unfused one
  // rounds the scores to bf16 first), so it is at least as close.
  Case c;
  c.query_stream = true;
  c.lq = 5;
  const CoreInputs in = MakeCore(c, 9);
  auto w = torch::randn({c.b, c.h, c.lq, c.dh});
  const auto ref = ForwardBackward(in, AttentionOptions(), w);
  CoreInputs low = in;
  for (auto& t : low.x) t = t.to(torch::kBFloat16);
  const auto tiled = ForwardBackward(low, Tiled(2, 3), w);
  const auto unfused = ForwardBackward(low, AttentionOptions(), w);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double scale = ref[i].abs().max().item<double>() + 1e-12;
    const double e_tiled = MaxAbsDiff(tiled[i].to(torch::kFloat), ref[i]);
    const double e_unfused = MaxAbsDiff(unfused[i].to(torch::kFloat), ref[i]);
    std::printf(
        "[ bf16     ] %-9s max|x| %.3g  tiled err %.3g  unfused err %.3g\n",
        kNames[i], scale, e_tiled, e_unfused);
    // Stated tolerance: 3% of the largest magnitude (bf16 has 8 bits).
    EXPECT_LT(e_tiled, 0.03 * scale) << kNames[i];
    EXPECT_EQ(tiled[i].scalar_type(), torch::kBFloat16) << kNames[i];
  }
}

TEST(TiledAttentionTest, AutocastBf16MatchesUnfusedWithinTolerance) {
  // As the model runs it: fp32 parameters, bf16 projections under autocast.
  Case c;
  const CoreInputs in = MakeCore(c, 10);
  torch::Tensor ref, got;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    std::vector<torch::Tensor> x = in.x;
    for (int i : {0, 1, 2, 3}) x[i] = x[i].to(torch::kBFloat16);
    ref = RunCore(in, x, AttentionOptions()).to(torch::kFloat);
    got = RunCore(in, x, Tiled(3, 5)).to(torch::kFloat);
  }
  const double scale = ref.abs().max().item<double>();
  EXPECT_LT(MaxAbsDiff(got, ref), 0.03 * scale);
}

// fp64 finite differences of the fused op itself (inputs qw, qr, k, v, k_r,
// seg), without and with dropout at a fixed seed: the backward's
// recomputation must see the forward's dropout mask.
TEST(TiledAttentionTest, Fp64GradCheckWithAndWithoutDropout) {
  Case c;
  c.b = 2;
  c.h = 1;
  c.lq = 3;
  c.l = 4;
  c.mlen = 2;
  c.dh = 2;
  c.query_stream = true;
  const CoreInputs in = MakeCore(c, 11, torch::kDouble);
  const int64_t klen = c.mlen + c.l;
  auto seg = torch::randn({c.b, c.h, c.lq, 2}, torch::kDouble);
  auto w = torch::randn({c.b, c.h, c.lq, c.dh}, torch::kDouble);
  for (double p : {0.0, 0.3}) {
    AttentionDropout d;
    d.p = p;
    d.seed = 1234;
    d.offset = 5;
    const double worst = GradCheck(
        [&](const std::vector<torch::Tensor>& x) {
          return (FusedRelativeAttention(x[0], x[1], x[2], x[3], x[4], x[5],
                                         in.bias, in.qlen, 0.7, d, {2, 4}) *
                  w)
              .sum();
        },
        {in.x[0], in.x[0] * 0.5 + 0.1, in.x[1], in.x[2], in.x[3], seg});
    std::printf("[ gradcheck] dropout %.1f worst |analytic - numeric| %.3g\n",
                p, worst);
    EXPECT_LT(worst, 1e-7) << "dropout " << p;
  }
  (void)klen;
}

TEST(TiledAttentionTest, DropoutIsDeterministicAndMatchesItsMask) {
  Case c;
  c.b = 2;
  c.h = 2;
  c.lq = c.l = 9;
  c.mlen = 5;
  const CoreInputs in = MakeCore(c, 12);
  const int64_t klen = c.mlen + c.l;
  const auto& x = in.x;
  auto qw = x[0] + x[4].view({1, c.h, 1, c.dh});
  auto qr = x[0] + x[5].view({1, c.h, 1, c.dh});
  auto seg = torch::matmul(x[0] + x[6].view({1, c.h, 1, c.dh}),
                           x[7].permute({1, 2, 0}));
  const double scale = 1 / std::sqrt(double(c.dh));
  AttentionDropout d;
  d.p = 0.25;
  d.seed = 42;
  auto run = [&](const AttentionDropout& drop, AttentionTiles tiles) {
    return FusedRelativeAttention(qw, qr, x[1], x[2], x[3], seg, in.bias,
                                  in.qlen, scale, drop, tiles);
  };
  const auto a = run(d, {3, 4});
  EXPECT_TRUE(torch::equal(a, run(d, {3, 4})));     // same seed: same bits
  EXPECT_LT(MaxAbsDiff(a, run(d, {64, 0})), 1e-5);  // any tiling
  AttentionDropout other = d;
  other.seed = 43;
  EXPECT_GT(MaxAbsDiff(a, run(other, {3, 4})), 1e-3);
  other = d;
  other.offset = 1;
  EXPECT_GT(MaxAbsDiff(a, run(other, {3, 4})), 1e-3);

  // The reference: the unfused formula with the keep mask materialised.
  auto keep =
      AttentionDropoutKeepMask(c.b, c.h, c.lq, klen, d);  // [B, H, Lq, K]
  auto score =
      torch::matmul(qw, x[1].transpose(2, 3)) +
      RelShift(torch::matmul(qr, x[3].transpose(2, 3)), klen) +
      torch::where(in.bias.seg_diff, seg.narrow(3, 1, 1), seg.narrow(3, 0, 1));
  score = (score * scale).masked_fill(in.bias.mask, -1e30);
  auto prob = torch::softmax(score, 3) * keep.to(torch::kFloat) / (1 - d.p);
  auto ref =
      torch::matmul(prob, x[2]).masked_fill(in.bias.mask.all(3, true), 0.0);
  EXPECT_LT(MaxAbsDiff(a, ref), 1e-5);
  // Key tiles starting anywhere inside a Philox group of 8 keys.
  for (AttentionTiles tiles :
       {AttentionTiles{2, 5}, AttentionTiles{4, 7}, AttentionTiles{1, 13}}) {
    EXPECT_LT(MaxAbsDiff(run(d, tiles), ref), 1e-5)
        << tiles.query << " x " << tiles.key;
  }
  const double kept = keep.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 1 - d.p, 0.05);
}

TEST(TiledAttentionTest, CoreDrawsItsSeedFromTheGlobalGenerator) {
  Case c;
  const CoreInputs in = MakeCore(c, 13);
  auto run = [&](uint64_t seed) {
    torch::manual_seed(seed);
    return RunCore(in, in.x, Tiled(3, 5), 0.2, /*training=*/true);
  };
  EXPECT_TRUE(torch::equal(run(7), run(7)));
  EXPECT_FALSE(torch::equal(run(7), run(8)));
  // Not training: no dropout, no draw.
  torch::manual_seed(7);
  auto eval = RunCore(in, in.x, Tiled(3, 5), 0.2, /*training=*/false);
  EXPECT_LT(MaxAbsDiff(eval, RunCore(in, in.x, AttentionOptions())), 1e-5);
}

// The whole model: logits, loss and every parameter gradient with the
// tiled core equal the unfused model's (two streams, memory, padding,
// segments, bi_data, clamp_len; P targets and HF's all-L query stream).
TEST(TiledAttentionTest, WholeModelMatchesUnfused) {
  XLNetConfig config = testing::TinyConfig();
  config.bi_data = true;
  config.clamp_len = 5;
  auto model = testing::MakeRandomModel(config, 21);
  model->train();  // dropout 0: training mode only records the graph
  XLNetInputs x =
      testing::MakePlmInputs(4, 11, 3, config.vocab_size, {0, 2, 0, 3}, 22);
  x.mems = {torch::randn({6, 4, config.d_model}),
            torch::randn({6, 4, config.d_model})};
  const auto labels = torch::randint(0, config.vocab_size, {4, 3});
  auto step = [&](const AttentionOptions& attention, bool all_positions) {
    model->zero_grad();
    model->transformer->SetAttention(attention);
    auto out = model->forward(x, {/*use_mems=*/true, all_positions});
    auto loss = PartialPredictionLoss(out.logits, labels);
    loss.backward();
    std::vector<torch::Tensor> r = {out.logits.detach(), loss.detach()};
    for (const auto& p : model->parameters()) {
      r.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    }
    return r;
  };
  for (bool all_positions : {false, true}) {
    const auto ref = step(AttentionOptions(), all_positions);
    const auto got = step(Tiled(4, 6), all_positions);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, MaxAbsDiff(got[i], ref[i]));
    }
    std::printf("[ diff     ] %s whole model tiled vs unfused worst %.3g\n",
                all_positions ? "[all-L]" : "[P]", worst);
    EXPECT_LT(MaxAbsDiff(got[0], ref[0]), 1e-4);
    EXPECT_LT(worst, 1e-4);
  }
}

TEST(TiledAttentionTest, CounterDropoutKeepsOneMinusPScaledAndReplays) {
  auto x = torch::ones({3, 5001}).requires_grad_();
  auto run = [&](uint64_t seed) {
    torch::manual_seed(seed);
    return CounterDropout(x, 0.2, /*training=*/true);
  };
  const auto y = run(3);
  EXPECT_TRUE(torch::equal(y, run(3)));
  EXPECT_FALSE(torch::equal(y, run(4)));
  const auto kept = y.detach() > 0;
  EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 0.8, 0.02);
  EXPECT_LT(MaxAbsDiff(y.detach().masked_select(kept),
                       torch::full({kept.sum().item<int64_t>()}, 1.25)),
            1e-6);
  y.sum().backward();  // d(x * mask)/dx = mask
  EXPECT_TRUE(torch::equal(x.grad(), y.detach()));
  EXPECT_TRUE(CounterDropout(x, 0.2, /*training=*/false).is_same(x));
  const auto low = CounterDropout(x.detach().to(torch::kBFloat16), 0.5, true);
  EXPECT_EQ(low.scalar_type(), torch::kBFloat16);
}

// Statistically, the fused op's dropout must be the unfused core's: over
// many draws, the mean output and the mean of the gradients (w.r.t. q and
// v) equal the unfused core's, and so does the per-element variance of the
// output. (Training with 'tiled' or 'cuda' ended with a higher held-out
// loss than 'unfused' in 4 of 4 tiny 2000-step runs; this checks the op.)
TEST(TiledAttentionTest, DropoutMatchesTheUnfusedCoreInDistribution) {
  Case c;
  c.b = 1;
  c.h = 2;
  c.lq = c.l = 6;
  c.mlen = 3;
  c.dh = 4;
  const CoreInputs in = MakeCore(c, 21);
  const auto w = torch::randn({c.b, c.h, c.lq, c.dh});
  constexpr int kDraws = 3000;
  constexpr double kP = 0.3;
  auto moments = [&](const AttentionOptions& opts) {
    torch::manual_seed(5);
    torch::Tensor sum, sum_sq, gq, gv;
    for (int n = 0; n < kDraws; ++n) {
      std::vector<torch::Tensor> x;
      for (const auto& t : in.x) x.push_back(t.detach().requires_grad_());
      auto out = RunCore(in, x, opts, kP, /*training=*/true);
      auto g = torch::autograd::grad({(out * w).sum()}, {x[0], x[2]});
      out = out.detach();
      sum = n ? sum + out : out;
      sum_sq = n ? sum_sq + out * out : out * out;
      gq = n ? gq + g[0] : g[0];
      gv = n ? gv + g[1] : g[1];
    }
    const auto mean = sum / kDraws;
    return std::vector<torch::Tensor>{mean, sum_sq / kDraws - mean * mean,
                                      gq / kDraws, gv / kDraws};
  };
  const auto unfused = moments(AttentionOptions());
  const auto tiled = moments(Tiled(3, 5));
  const char* names[] = {"mean output", "output variance", "mean dq",
                         "mean dv"};
  for (int i = 0; i < 4; ++i) {
    // Both are estimates from kDraws samples: compare relative to the
    // tensor's scale with a tolerance well above the sampling error
    // (about 1 / sqrt(3000) = 1.8% of the spread).
    const double scale = unfused[i].abs().max().item<double>();
    const double diff = MaxAbsDiff(tiled[i], unfused[i]);
    std::printf(
        "[ diff     ] dropout %s: max |tiled - unfused| %.3g (scale %.3g)\n",
        names[i], diff, scale);
    EXPECT_LT(diff, 0.08 * scale) << names[i];
  }
}

// FusedRelativeAttention's inputs for the CUDA tests: b 2, h 3, head size
// 64, a query stream of lq rows when lq < l.
Case FusedCase(int64_t l, int64_t lq, int64_t mlen) {
  Case c;
  c.b = 2;
  c.h = 3;
  c.l = l;
  c.lq = lq;
  c.mlen = mlen;
  c.dh = 64;
  c.query_stream = lq < l;
  return c;
}

// The masks, segment relation and positions of `bias` on `device`.
AttentionBias BiasOn(const AttentionBias& bias, torch::Device device) {
  AttentionBias out;
  for (auto [dst, src] : {std::pair{&out.mask, &bias.mask},
                          std::pair{&out.seg_diff, &bias.seg_diff},
                          std::pair{&out.query_pos, &bias.query_pos}}) {
    if (src->defined()) *dst = src->to(device);
  }
  return out;
}

// FusedRelativeAttention(x..., in's masks, scale 0.125, d) on `device` in
// `dtype`: the output, then the gradients of sum(out * w) w.r.t. the six
// inputs x (five without seg), as fp32 CPU tensors. With `heads_last` the op
// sees qw, k and v as the model's projections give them: qw the head-split view
// of a [B, Lq, H, Dh] tensor, k and v those of one [B, K, 2H, Dh] buffer.
std::vector<torch::Tensor> FusedOutputAndGrads(
    const std::vector<torch::Tensor>& x, const CoreInputs& in,
    const torch::Tensor& w, const AttentionDropout& d, torch::Device device,
    torch::ScalarType dtype, bool pack_once = false, bool heads_last = false) {
  std::vector<torch::Tensor> xs;
  for (const auto& t : x) {
    xs.push_back(t.defined() ? t.to(device, dtype).detach().requires_grad_()
                             : t);
  }
  if (heads_last) {
    const int64_t h = x[0].size(1);
    auto q = xs[0].detach().transpose(1, 2).contiguous().requires_grad_();
    auto kv = torch::cat({xs[2].detach(), xs[3].detach()}, 1)
                  .transpose(1, 2)
                  .contiguous()
                  .requires_grad_();             // [B, K, 2H, Dh]
    xs[0] = q.transpose(1, 2);                   // [B, H, Lq, Dh]
    xs[2] = kv.narrow(2, 0, h).transpose(1, 2);  // [B, H, K, Dh]
    xs[3] = kv.narrow(2, h, h).transpose(1, 2);  // [B, H, K, Dh]
    // (Unless a dimension of 1 makes the views contiguous anyway.)
    if (h > 1 && x[0].size(2) > 1 && x[2].size(2) > 1) {
      EXPECT_FALSE(xs[0].is_contiguous() || xs[2].is_contiguous());
    }
  }
  AttentionBias bias = BiasOn(in.bias, device);
  // As the model does for all layers of a forward.
  if (pack_once) PackAttentionBias(AttentionImpl::kCuda, &bias);
  auto out = FusedRelativeAttention(xs[0], xs[1], xs[2], xs[3], xs[4], xs[5],
                                    bias, in.qlen, 0.125, d);
  std::vector<torch::Tensor> inputs;  // seg may be undefined
  for (const auto& t : xs) {
    if (t.defined()) inputs.push_back(t);
  }
  auto grads = torch::autograd::grad(
      {(out.to(torch::kFloat) * w.to(device)).sum()}, inputs);
  std::vector<torch::Tensor> r = {out.to(torch::kCPU, torch::kFloat)};
  for (auto& g : grads) r.push_back(g.to(torch::kCPU, torch::kFloat));
  return r;
}

// The CUDA kernel against the CPU path, same seeds (so the same dropout
// masks): skipped unless this build has the kernel (-DXLNET_CUDA_ATTENTION)
// and a GPU is present.
TEST(CudaAttentionTest, MatchesTheCpuPath) {
  if (!CudaAttentionCompiled() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA attention kernel in this build or no GPU";
  }
  for (bool query_stream : {false, true}) {
    for (double p : {0.0, 0.2}) {
      SCOPED_TRACE(::testing::Message()
                   << "query stream " << query_stream << ", dropout " << p);
      const Case c = FusedCase(37, query_stream ? 11 : 37, 20);
      const CoreInputs in = MakeCore(c, 15);
      auto seg = torch::randn({c.b, c.h, c.lq, 2});
      auto w = torch::randn({c.b, c.h, c.lq, c.dh});
      AttentionDropout d;
      d.p = p;
      d.seed = 99;
      std::vector<torch::Tensor> x = {in.x[0], in.x[0] * 0.5, in.x[1],
                                      in.x[2], in.x[3],       seg};
      auto run = [&](torch::Device device, torch::ScalarType dtype) {
        return FusedOutputAndGrads(x, in, w, d, device, dtype);
      };
      const auto cpu = run(torch::kCPU, torch::kFloat);
      const auto gpu = run(torch::kCUDA, torch::kFloat);
      const auto gpu_bf16 = run(torch::kCUDA, torch::kBFloat16);
      for (size_t i = 0; i < cpu.size(); ++i) {
        const double scale = cpu[i].abs().max().item<double>() + 1e-12;
        EXPECT_LT(MaxAbsDiff(gpu[i], cpu[i]), i == 0 ? 1e-5 : 1e-4) << i;
        EXPECT_LT(MaxAbsDiff(gpu_bf16[i], cpu[i]), 0.03 * scale) << i;
      }
    }
  }
}

// The tensor-core kernels (attention 'cuda' in fp16/bf16 with head size 64)
// against the CPU path in fp32 with the same seeds, so the same dropout
// decisions: output and every input's gradient, several query and key
// tiles with ragged ends, both streams, k_r shared, in two groups of two
// samples (bi_data) and per sample, fully masked rows (zeros), no NaN,
// and two runs bit-identical
// (no atomics), the second with the masks packed once beforehand (as the
// model packs them for all layers), which the kernels are shown to read.
// Needs -DXLNET_CUDA_TC_ATTENTION=ON and a GPU.
TEST(CudaAttentionTest, TensorCoreKernelsMatchTheCpuPath) {
  if (!CudaTensorCoreAttentionCompiled() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "no tensor-core attention kernels in this build or no GPU";
  }
  for (bool query_stream : {false, true}) {
    for (double p : {0.0, 0.2}) {
      SCOPED_TRACE(::testing::Message()
                   << "query stream " << query_stream << ", dropout " << p);
      Case c = FusedCase(150, query_stream ? 45 : 150, 70);
      c.b = 4;
      c.kr_batch = query_stream ? 2 : (p > 0 ? 4 : 1);
      const CoreInputs in = MakeCore(c, 16);
      auto seg = torch::randn({c.b, c.h, c.lq, 2});
      auto w = torch::randn({c.b, c.h, c.lq, c.dh});
      AttentionDropout d;
      d.p = p;
      d.seed = 7;
      d.offset = 3;
      const std::vector<torch::Tensor> x = {in.x[0], in.x[0] * 0.5, in.x[1],
                                            in.x[2], in.x[3],       seg};
      // Output, then the gradients of sum(out * w) w.r.t. the six inputs.
      auto run = [&](torch::Device device, torch::ScalarType dtype) {
        return FusedOutputAndGrads(x, in, w, d, device, dtype);
      };
      const auto cpu = run(torch::kCPU, torch::kFloat);
      for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
        const char* name = dtype == torch::kHalf ? "fp16" : "bf16";
        const auto gpu = run(torch::kCUDA, dtype);
        const double tol = dtype == torch::kHalf ? 0.01 : 0.03;
        for (size_t i = 0; i < cpu.size(); ++i) {
          const double scale = cpu[i].abs().max().item<double>() + 1e-12;
          EXPECT_TRUE(torch::isfinite(gpu[i]).all().item<bool>())
              << name << " " << i;
          EXPECT_LT(MaxAbsDiff(gpu[i], cpu[i]), tol * scale)
              << name << " " << i;
          std::printf("[ diff     ] %s %zu: max |tc - cpu| %.3g (scale %.3g)\n",
                      name, i, MaxAbsDiff(gpu[i], cpu[i]), scale);
        }
        // Rows with every key masked are zeros, as on the CPU.
        EXPECT_EQ(gpu[0][0][0][1].abs().max().item<float>(), 0.f) << name;
        EXPECT_EQ(gpu[0][c.b - 1][0][c.lq - 1].abs().max().item<float>(), 0.f)
            << name;
        // Again, with the masks packed once beforehand as the model packs
        // them, and with qw, k and v read in place from the projections'
        // layouts: the same bits.
        const auto again = FusedOutputAndGrads(x, in, w, d, torch::kCUDA, dtype,
                                               /*pack_once=*/true);
        const auto in_place =
            FusedOutputAndGrads(x, in, w, d, torch::kCUDA, dtype,
                                /*pack_once=*/false, /*heads_last=*/true);
        for (size_t i = 0; i < gpu.size(); ++i) {
          EXPECT_TRUE(torch::equal(gpu[i], again[i])) << name << " " << i;
          EXPECT_TRUE(torch::equal(gpu[i], in_place[i])) << name << " " << i;
        }
      }
    }
  }
  // The kernels read the prepacked bits: with every key's bit set in them,
  // every output row is zero.
  const Case c = FusedCase(70, 70, 40);
  const CoreInputs in = MakeCore(c, 17);
  AttentionBias bias = BiasOn(in.bias, torch::kCUDA);
  PackAttentionBias(AttentionImpl::kCuda, &bias);
  ASSERT_TRUE(bias.blocked_bits.defined());
  bias.blocked_bits.fill_(-1);
  auto on = [](const torch::Tensor& t) {
    return t.to(torch::kCUDA, torch::kBFloat16);
  };
  const auto out = FusedRelativeAttention(
      on(in.x[0]), on(in.x[0]), on(in.x[1]), on(in.x[2]), on(in.x[3]),
      on(torch::randn({c.b, c.h, c.lq, 2})), bias, in.qlen, 0.125, {});
  EXPECT_EQ(out.abs().max().item<float>(), 0.f);
}

// The tensor-core kernels on problems drawn at random (DrawAttentionProblem:
// 1-160 rows, either stream, k_r in groups, with or without the segment
// term, dropout and mask, fp16 or bf16; XLNET_TC_RANDOM_PROBLEMS sets how
// many, default 24): the output and every input's gradient within the
// bounds of the CPU path in fp32 (bf16 3%, fp16 1% of each tensor's largest
// value, at least 1e-3), finite, the fully masked row zeros, and with qw,
// k and v read in place from the projections' layouts the same bits. The
// GPU twin of TcAttentionKernelsTest.RandomProblemsMatchTheCpuPath. Needs
// -DXLNET_CUDA_TC_ATTENTION=ON and a GPU.
TEST(CudaAttentionTest, TensorCoreKernelsOnDrawnProblems) {
  using testing::DrawAttentionProblem;
  using testing::DrawnAttentionProblem;
  if (!CudaTensorCoreAttentionCompiled() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "no tensor-core attention kernels in this build or no GPU";
  }
  const int n = testing::DrawnProblemCount();
  ASSERT_GT(n, 0) << "XLNET_TC_RANDOM_PROBLEMS";
  for (int i = 0; i < n; ++i) {
    const DrawnAttentionProblem d = DrawAttentionProblem(2000 + i);
    SCOPED_TRACE(d.name);
    CoreInputs in;
    in.bias = d.pr.bias;
    in.qlen = d.pr.qlen;
    auto run = [&](torch::Device device, torch::ScalarType dtype,
                   bool heads_last) {
      return FusedOutputAndGrads(d.pr.x, in, d.pr.w, d.pr.dropout, device,
                                 dtype, /*pack_once=*/false, heads_last);
    };
    const auto cpu = run(torch::kCPU, torch::kFloat, false);
    const auto gpu = run(torch::kCUDA, d.dtype, false);
    const auto in_place = run(torch::kCUDA, d.dtype, true);
    testing::ExpectWithinCpuPath(gpu, cpu,
                                 d.dtype == torch::kHalf ? 0.01 : 0.03, "tc");
    ASSERT_EQ(in_place.size(), gpu.size());
    for (size_t t = 0; t < gpu.size(); ++t) {
      EXPECT_TRUE(torch::equal(gpu[t], in_place[t]))
          << "in place " << testing::kAttentionOutputNames[t];
    }
    testing::ExpectMaskedRowZero(d, gpu[0]);
  }
}

TEST(TiledAttentionTest, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  auto check = [](uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                  uint32_t k0, uint32_t k1, std::vector<uint32_t> want) {
    const Philox4x32 r = Philox4x32_10(c0, c1, c2, c3, k0, k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.x[i], want[i]) << i;
  };
  check(0, 0, 0, 0, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  check(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
        {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  check(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
        {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST(TiledAttentionTest, RejectsBadUse) {
  Case c;
  const CoreInputs in = MakeCore(c, 14);
  AttentionOptions cuda;
  cuda.impl = AttentionImpl::kCuda;
  EXPECT_THROW(RunCore(in, in.x, cuda), c10::Error);  // CPU tensors
  AttentionBias no_seg = in.bias;
  no_seg.seg_diff = torch::Tensor();
  EXPECT_THROW(FusedRelativeAttention(in.x[0], in.x[0], in.x[1], in.x[2],
                                      in.x[3], torch::ones({2, 3, 7, 2}),
                                      no_seg, in.qlen, 1.0, {}),
               c10::Error);
  EXPECT_TRUE(ParseEnum<AttentionImpl>("tiled") == AttentionImpl::kTiled);
  EXPECT_FALSE(ParseEnum<AttentionImpl>("flash").has_value());
  // 'auto' is resolved before a model runs.
  AttentionOptions unresolved;
  unresolved.impl = AttentionImpl::kAuto;
  EXPECT_THROW(RunCore(in, in.x, unresolved), c10::Error);
  EXPECT_FALSE(CheckAttentionAvailable(AttentionImpl::kAuto, torch::kCPU).ok());
}

// train.attention: auto runs the tensor-core kernels where they take the
// model (CUDA, bf16/fp16, head size 64, a build with them), else unfused;
// an explicit setting stays. No device is touched: a CUDA device object
// is enough.
TEST(AttentionSettingTest, AutoResolvesToTensorCoresOrUnfused) {
  EXPECT_TRUE(ParseEnum<AttentionImpl>("auto") == AttentionImpl::kAuto);
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  const AttentionImpl tc = CudaTensorCoreAttentionCompiled()
                               ? AttentionImpl::kCuda
                               : AttentionImpl::kUnfused;
  auto resolve = [](torch::Device device, torch::ScalarType dtype,
                    int64_t d_head) {
    return ResolveAttention(AttentionImpl::kAuto, device, dtype, d_head);
  };
  EXPECT_EQ(resolve(cuda, torch::kBFloat16, 64), tc);
  EXPECT_EQ(resolve(cuda, torch::kHalf, 64), tc);
  EXPECT_EQ(resolve(cuda, torch::kFloat, 64), AttentionImpl::kUnfused);
  EXPECT_EQ(resolve(cuda, torch::kBFloat16, 32), AttentionImpl::kUnfused);
  EXPECT_EQ(resolve(cpu, torch::kBFloat16, 64), AttentionImpl::kUnfused);
  EXPECT_EQ(resolve(cpu, torch::kFloat, 64), AttentionImpl::kUnfused);
  for (auto impl : {AttentionImpl::kUnfused, AttentionImpl::kTiled,
                    AttentionImpl::kCuda, AttentionImpl::kSdpa}) {
    EXPECT_EQ(ResolveAttention(impl, cpu, torch::kFloat, 8), impl);
  }
}

}  // namespace
}  // namespace xlnet

namespace xlnet {
namespace {

// Inputs of MakeCore moved to `device` in `dtype` (masks and positions
// too).
CoreInputs OnDevice(const CoreInputs& in, torch::Device device,
                    torch::ScalarType dtype) {
  CoreInputs out = in;
  for (auto& t : out.x) t = t.to(device, dtype);
  for (auto* t : {&out.bias.mask, &out.bias.seg_diff, &out.bias.query_pos}) {
    if (t->defined()) *t = t->to(device);
  }
  return out;
}

// The sdpa split of the score, in fp64 with LibTorch ops: content term
// times scale plus RelativePositionBias, then the unfused path's masked
// softmax and zero rows, equals RelativeAttentionCore.
TEST(SdpaAttentionTest, PositionBiasGivesTheUnfusedScore) {
  for (bool query_stream : {false, true}) {
    for (bool seg : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "query stream " << query_stream
                                        << ", segment term " << seg);
      Case c;
      c.query_stream = query_stream;
      c.lq = query_stream ? 5 : 7;
      c.seg = seg;
      const CoreInputs in = MakeCore(c, 21, torch::kDouble);
      const auto& x = in.x;
      const int64_t h = c.h, dh = c.dh, klen = c.mlen + c.l;
      const double scale = 1.0 / std::sqrt(double(dh));
      auto hd = [&](const torch::Tensor& t) { return t.view({1, h, 1, dh}); };
      auto bd = torch::matmul(x[0] + hd(x[5]), x[3].transpose(2, 3));
      torch::Tensor e;
      if (seg) {
        e = torch::matmul(x[0] + hd(x[6]), x[7].permute({1, 2, 0}));
      }
      auto bias = RelativePositionBias(bd, e, in.bias, in.qlen, klen, scale);
      ASSERT_EQ(bias.sizes(), (std::vector<int64_t>{c.b, h, c.lq, klen}));
      auto score =
          torch::matmul(x[0] + hd(x[4]), x[1].transpose(2, 3)) * scale + bias;
      auto out = torch::matmul(torch::softmax(score, 3), x[2]);
      out = out.masked_fill(in.bias.mask.all(3, true), 0.0);
      auto ref = RelativeAttentionCore(x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                                       x[7], in.bias, in.qlen, 0, false);
      EXPECT_LT(MaxAbsDiff(out, ref), 1e-12);
      // Masked keys hold the mask value, nothing else does.
      auto masked = in.bias.mask.expand_as(bias);
      EXPECT_TRUE((bias.masked_select(masked) == -1e30).all().item<bool>());
      EXPECT_TRUE((bias.masked_select(~masked) > -1e29).all().item<bool>());
    }
  }
}

// The CUDA bias kernel against the LibTorch ops (CPU, fp32): forward and
// the gradients of bd and seg, fp32 within 1e-6 and bf16 within 1% of each
// tensor's scale. Needs -DXLNET_CUDA_ATTENTION=ON and a GPU.
TEST(SdpaAttentionTest, CudaBiasKernelMatchesLibTorchOps) {
  if (!CudaAttentionCompiled() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA kernels in this build or no GPU";
  }
  for (bool query_stream : {false, true}) {
    for (bool seg : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "query stream " << query_stream
                                        << ", segment term " << seg);
      Case c;
      c.b = 2;
      c.h = 3;
      c.l = 37;
      c.lq = query_stream ? 11 : 37;
      c.mlen = 20;
      c.query_stream = query_stream;
      c.seg = seg;
      const CoreInputs in = MakeCore(c, 22);
      const int64_t klen = c.mlen + c.l, rlen = klen + c.l;
      auto bd = torch::randn({c.b, c.h, c.lq, rlen});
      auto e = seg ? torch::randn({c.b, c.h, c.lq, 2}) : torch::Tensor();
      auto w = torch::randn({c.b, c.h, c.lq, klen});
      auto run = [&](torch::Device device, torch::ScalarType dtype) {
        const CoreInputs d = OnDevice(in, device, dtype);
        auto bd_d = bd.to(device, dtype).requires_grad_();
        std::vector<torch::Tensor> xs = {bd_d};
        torch::Tensor e_d;
        if (seg) {
          e_d = e.to(device, dtype).requires_grad_();
          xs.push_back(e_d);
        }
        auto bias =
            RelativePositionBias(bd_d, e_d, d.bias, d.qlen, klen, 0.125);
        auto grads = torch::autograd::grad(
            {(bias.to(torch::kFloat) * w.to(device)).sum()}, xs);
        std::vector<torch::Tensor> r = {
            bias.detach().to(torch::kCPU, torch::kFloat)};
        for (auto& g : grads) r.push_back(g.to(torch::kCPU, torch::kFloat));
        return r;
      };
      const auto cpu = run(torch::kCPU, torch::kFloat);
      const auto gpu = run(torch::kCUDA, torch::kFloat);
      const auto gpu_bf16 = run(torch::kCUDA, torch::kBFloat16);
      for (size_t i = 0; i < cpu.size(); ++i) {
        // The forward's masked entries are -1e30 on both sides: compare
        // the others.
        auto keep =
            i == 0 ? cpu[0] > -1e29 : torch::ones_like(cpu[i]).to(torch::kBool);
        auto a = cpu[i].masked_select(keep), g = gpu[i].masked_select(keep);
        auto g16 = gpu_bf16[i].masked_select(keep);
        const double scale = a.abs().max().item<double>() + 1e-12;
        EXPECT_LT(MaxAbsDiff(g, a), 1e-6 * scale) << i;
        EXPECT_LT(MaxAbsDiff(g16, a), 0.01 * scale) << i;
        if (i == 0) {
          EXPECT_TRUE(((gpu[0] > -1e29) == keep).all().item<bool>());
        }
      }
    }
  }
}

// The whole sdpa core against the unfused one on TestDevice(): fp32
// forward within 1e-5 and gradients within 1e-4 for both streams, with
// memory, masks (fully masked rows included), segments, k_r batch 1 and B;
// on CUDA bf16 within 3% of each tensor's scale. Skipped where LibTorch has
// no SDPA (< 2.1), where RefusedWithoutSdpa runs instead.
TEST(SdpaAttentionTest, MatchesTheUnfusedCore) {
  if (!SdpaAvailable()) GTEST_SKIP() << "LibTorch < 2.1: no SDPA";
  const torch::Device device = testing::TestDevice();
  if (device.is_cuda() && !torch::cuda::is_available()) {
    GTEST_SKIP() << "XLNET_TEST_DEVICE=cuda but no CUDA device";
  }
  AttentionOptions sdpa;
  sdpa.impl = AttentionImpl::kSdpa;
  for (bool query_stream : {false, true}) {
    for (int64_t kr_batch : {int64_t{1}, int64_t{2}}) {
      SCOPED_TRACE(::testing::Message() << "query stream " << query_stream
                                        << ", k_r batch " << kr_batch);
      Case c;
      c.l = 37;
      c.lq = query_stream ? 11 : 37;
      c.mlen = 20;
      c.dh = 64;
      c.kr_batch = kr_batch;
      c.query_stream = query_stream;
      const CoreInputs in = OnDevice(MakeCore(c, 23), device, torch::kFloat);
      auto w = torch::randn({c.b, c.h, c.lq, c.dh}).to(device);
      const auto ref = ForwardBackward(in, AttentionOptions(), w);
      const auto got = ForwardBackward(in, sdpa, w);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_LT(MaxAbsDiff(got[i], ref[i]), i == 0 ? 1e-5 : 1e-4)
            << kNames[i];
      }
      if (!device.is_cuda()) continue;
      const auto bf16 =
          ForwardBackward(OnDevice(in, device, torch::kBFloat16), sdpa, w);
      for (size_t i = 0; i < bf16.size(); ++i) {
        const double scale = ref[i].abs().max().item<double>() + 1e-12;
        EXPECT_LT(MaxAbsDiff(bf16[i].to(torch::kFloat), ref[i]), 0.03 * scale)
            << kNames[i];
      }
    }
  }
}

TEST(SdpaAttentionTest, RefusedWithoutSdpa) {
  EXPECT_TRUE(ParseEnum<AttentionImpl>("sdpa") == AttentionImpl::kSdpa);
  EXPECT_STREQ(EnumName(AttentionImpl::kSdpa), "sdpa");
  if (SdpaAvailable()) GTEST_SKIP() << "this LibTorch has SDPA";
  Case c;
  const CoreInputs in = MakeCore(c, 24);
  AttentionOptions sdpa;
  sdpa.impl = AttentionImpl::kSdpa;
  try {
    RunCore(in, in.x, sdpa);
    ADD_FAILURE() << "sdpa ran without SDPA";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs LibTorch >= 2.1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace xlnet
