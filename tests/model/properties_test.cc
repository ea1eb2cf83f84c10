// Properties of the model that hold for any weights: two-stream invariants,
// memory, causality, P-target query stream, masking safety, precision, and
// double-precision finite-difference gradient checks of the attention ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "model/attention.h"
#include "model/precision.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::GradCheck;
using testing::LoadGoldenModel;
using testing::MakePlmInputs;
using testing::MakeRandomModel;
using testing::MaxAbsDiff;
using testing::ReadTensors;
using testing::TinyConfig;

TEST(GradCheckTest, RelShift) {
  torch::manual_seed(1);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t lq = 3, klen = 5;
  auto x = torch::randn({2, 2, lq, klen + lq}, opts);
  auto w = torch::randn({2, 2, lq, klen}, opts);
  double diff = GradCheck(
      [&](const std::vector<torch::Tensor>& in) { return (RelShift(in[0], klen) * w).sum(); }, {x});
  EXPECT_LT(diff, 1e-7);
  auto pos = torch::tensor({{2, 0}, {1, 1}}, torch::kLong);
  auto wp = torch::randn({2, 2, 2, klen}, opts);
  double diff_at = GradCheck(
      [&](const std::vector<torch::Tensor>& in) {
        return (RelShiftAt(in[0].narrow(2, 0, 2), pos, lq, klen) * wp).sum();
      },
      {x});
  EXPECT_LT(diff_at, 1e-7);
}

TEST(GradCheckTest, RelShiftDistanceAndGatherAgree) {
  // out[i, j] must hold relative distance (M + i) - j.
  const int64_t l = 4, m = 3, klen = m + l;
  auto pos = torch::arange(klen, -l, -1, torch::kDouble);          // [R]
  auto x = pos.view({1, 1, 1, -1}).expand({1, 1, l, klen + l}).contiguous();
  auto shifted = RelShift(x, klen);                                 // [1, 1, L, K]
  for (int64_t i = 0; i < l; ++i) {
    for (int64_t j = 0; j < klen; ++j) {
      EXPECT_EQ(shifted[0][0][i][j].item<double>(), static_cast<double>(m + i - j));
    }
  }
  auto y = torch::randn({2, 3, l, klen + l});
  auto query_pos = torch::arange(l, torch::kLong).unsqueeze(0).expand({2, l}).contiguous();
  EXPECT_TRUE(torch::equal(RelShift(y, klen), RelShiftAt(y, query_pos, l, klen)));
}

TEST(GradCheckTest, AttentionCore) {
  torch::manual_seed(2);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t b = 2, h = 2, l = 3, m = 2, klen = m + l, dh = 4;
  AttentionBias bias;
  bias.mask = torch::zeros({b, 1, l, klen}, torch::kBool);
  bias.mask[0][0][1][4] = true;
  bias.mask[1][0][0][2] = true;
  bias.seg_diff = torch::randint(0, 2, {b, 1, l, klen}).to(torch::kBool);
  auto w = torch::randn({b, h, l, dh}, opts);
  std::vector<torch::Tensor> in = {
      torch::randn({b, h, l, dh}, opts),    torch::randn({b, h, klen, dh}, opts),
      torch::randn({b, h, klen, dh}, opts), torch::randn({1, h, klen + l, dh}, opts),
      torch::randn({h, dh}, opts),          torch::randn({h, dh}, opts),
      torch::randn({h, dh}, opts),          torch::randn({2, h, dh}, opts)};
  auto f = [&](const std::vector<torch::Tensor>& x) {
    auto out = RelativeAttentionCore(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], bias, l,
                                     0.0, false);
    return (out.to(torch::kDouble) * w).sum();
  };
  EXPECT_LT(GradCheck(f, in), 1e-6);
  // The P-target variant (gather shift) too.
  AttentionBias at = bias;
  at.query_pos = torch::tensor({{2, 0}, {1, 2}}, torch::kLong);
  at.mask = bias.mask.narrow(2, 0, 2);
  at.seg_diff = bias.seg_diff.narrow(2, 0, 2);
  auto wp = w.narrow(2, 0, 2);
  auto fp = [&](const std::vector<torch::Tensor>& x) {
    auto out = RelativeAttentionCore(x[0].narrow(2, 0, 2), x[1], x[2], x[3], x[4], x[5], x[6],
                                     x[7], at, l, 0.0, false);
    return (out.to(torch::kDouble) * wp).sum();
  };
  EXPECT_LT(GradCheck(fp, in), 1e-6);
}

// k_r in groups of consecutive samples (bi_data: two): PositionsPerSample
// gives sample i its group's rows, and every core gives the same output
// and k_r gradient from the groups as from the per-sample copy.
TEST(GradCheckTest, PositionGroupsEqualPerSampleCopies) {
  torch::manual_seed(4);
  const int64_t b = 4, h = 2, l = 3, m = 2, klen = m + l, dh = 4;
  const auto k_r = torch::randn({2, h, klen + l, dh});
  const auto each = PositionsPerSample(k_r, b);  // [B, H, R, Dh]
  ASSERT_EQ(each.size(0), b);
  for (int64_t i = 0; i < b; ++i) {
    EXPECT_TRUE(torch::equal(each[i], k_r[i / 2])) << i;
  }
  const auto shared = k_r.narrow(0, 0, 1);
  EXPECT_TRUE(PositionsPerSample(shared, b).is_same(shared));
  EXPECT_THROW(PositionsPerSample(torch::randn({3, h, klen + l, dh}), b),
               c10::Error);

  AttentionBias bias;
  bias.mask = torch::rand({b, 1, l, klen}) < 0.3;
  bias.seg_diff = torch::rand({b, 1, l, klen}) < 0.5;
  const auto q = torch::randn({b, h, l, dh}),
             k = torch::randn({b, h, klen, dh}),
             v = torch::randn({b, h, klen, dh}),
             w = torch::randn({b, h, l, dh});
  const auto r_w = torch::randn({h, dh}), r_r = torch::randn({h, dh}),
             r_s = torch::randn({h, dh}), seg = torch::randn({2, h, dh});
  AttentionOptions tiled;
  tiled.impl = AttentionImpl::kTiled;
  for (const AttentionOptions& opts : {AttentionOptions(), tiled}) {
    auto run = [&](const torch::Tensor& positions) {
      auto groups = k_r.clone().requires_grad_();
      auto out =
          AttentionCore(opts, q, k, v, positions.defined() ? positions : groups,
                        r_w, r_r, r_s, seg, bias, l, 0.0, false);
      const auto grad =
          positions.defined()
              ? torch::Tensor()
              : torch::autograd::grad({(out * w).sum()}, {groups})[0];
      return std::pair{out.detach(), grad};
    };
    const auto [grouped, grad] = run(torch::Tensor());
    auto copies = PositionsPerSample(k_r, b).clone().requires_grad_();
    auto out = AttentionCore(opts, q, k, v, copies, r_w, r_r, r_s, seg, bias, l,
                             0.0, false);
    const auto grad_copies =
        torch::autograd::grad({(out * w).sum()}, {copies})[0];
    EXPECT_LT(MaxAbsDiff(grouped, out.detach()), 1e-6) << EnumName(opts.impl);
    // The groups' gradient is the sum over their samples' copies.
    EXPECT_LT(
        MaxAbsDiff(grad, grad_copies.view({2, 2, h, klen + l, dh}).sum(1)),
        1e-5)
        << EnumName(opts.impl);
  }
}

TEST(GradCheckTest, FullyMaskedRowAttendsToNothing) {
  torch::manual_seed(3);
  AttentionBias bias;
  bias.mask = torch::zeros({1, 1, 2, 3}, torch::kBool);
  bias.mask[0][0][1].fill_(true);                                  // row 1: no key
  auto q = torch::randn({1, 2, 2, 4}), k = torch::randn({1, 2, 3, 4});
  auto v = torch::randn({1, 2, 3, 4}), k_r = torch::randn({1, 2, 5, 4});
  auto z = torch::zeros({2, 4});
  auto out = RelativeAttentionCore(q, k, v, k_r, z, z, z, torch::zeros({2, 2, 4}), bias,
                                   2, 0.0, false);                 // [1, 2, 2, 4]
  EXPECT_TRUE(torch::equal(out.select(2, 1), torch::zeros({1, 2, 4})));
  EXPECT_GT(out.select(2, 0).abs().sum().item<double>(), 0.0);
}

TEST(GradCheckTest, PositionalEncodingValuesClampAndBiData) {
  const int64_t l = 3, klen = 5, d = 6;
  auto pe = RelativePositionalEncoding(l, klen, d, -1, true, torch::kCPU);  // [2, R, D]
  ASSERT_EQ(pe.sizes(), (std::vector<int64_t>{2, klen + l, d}));
  for (int64_t r = 0; r < klen + l; ++r) {
    const double pos = static_cast<double>(klen - r);
    for (int64_t k = 0; k < d / 2; ++k) {
      const double f = std::pow(10000.0, -2.0 * k / d);
      EXPECT_NEAR(pe[0][r][k].item<double>(), std::sin(pos * f), 1e-6);
      EXPECT_NEAR(pe[0][r][k + d / 2].item<double>(), std::cos(pos * f), 1e-6);
      EXPECT_NEAR(pe[1][r][k].item<double>(), std::sin(-pos * f), 1e-6);
    }
  }
  auto clamped = RelativePositionalEncoding(l, klen, d, 2, false, torch::kCPU);  // [1, R, D]
  EXPECT_TRUE(torch::equal(clamped[0][0], clamped[0][3]));          // 5 and 2 -> 2
  EXPECT_TRUE(torch::equal(clamped[0][3], pe[0][3]));
  EXPECT_TRUE(torch::equal(clamped[0][1], clamped[0][3]));          // 4 and 2 -> 2
  EXPECT_TRUE(torch::equal(clamped[0][7], pe[0][7]));               // -2 unclamped
}

// ------------------------------------------------------------ two streams

TEST(TwoStreamTest, QueryOutputIgnoresItsOwnToken) {
  auto model = LoadGoldenModel();
  auto in = ReadTensors(GoldenDir() + "/inputs.safetensors");
  XLNetInputs x = testing::GoldenLmInputs(in);
  torch::NoGradGuard no_grad;
  auto base = model->forward(x);
  const int64_t b = x.input_ids.size(0), p = x.target_mapping.size(1);
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t k = 0; k < p; ++k) {
      const int64_t pos = x.target_mapping[r][k].argmax().item<int64_t>();
      XLNetInputs y = x;
      y.input_ids = x.input_ids.clone();
      y.input_ids[r][pos] = (y.input_ids[r][pos].item<int64_t>() + 7) % 128;
      auto out = model->forward(y);
      EXPECT_LT(MaxAbsDiff(out.logits[r][k], base.logits[r][k]), 1e-6)
          << "row " << r << " target " << k << " at " << pos;
      // The content stream at that position does see it.
      EXPECT_GT(MaxAbsDiff(out.last_hidden_state[r][pos], base.last_hidden_state[r][pos]), 1e-3);
    }
  }
}

TEST(TwoStreamTest, ZeroPermMaskContentEqualsPlainBidirectional) {
  auto model = MakeRandomModel(TinyConfig(), 3);
  auto x = MakePlmInputs(2, 9, 2, 50, {2, 0}, 4);
  torch::NoGradGuard no_grad;
  XLNetInputs plain = x;
  plain.perm_mask = torch::Tensor();
  plain.target_mapping = torch::Tensor();
  XLNetInputs zero = x;
  zero.perm_mask = torch::zeros_like(x.perm_mask);
  auto a = model->transformer->forward(plain).last_hidden_state;
  auto c = model->transformer->forward(zero).last_hidden_state;
  EXPECT_LT(MaxAbsDiff(a, c), 1e-6);
}

TEST(TwoStreamTest, FineTuningPathEqualsContentStream) {
  auto model = MakeRandomModel(TinyConfig(), 5);
  auto x = MakePlmInputs(2, 9, 3, 50, {0, 3}, 6);
  torch::NoGradGuard no_grad;
  XLNetInputs content_only = x;
  content_only.target_mapping = torch::Tensor();
  auto two = model->transformer->forward(x, {true});
  auto one = model->transformer->forward(content_only, {true});
  EXPECT_TRUE(two.query_hidden_state.defined());
  EXPECT_FALSE(one.query_hidden_state.defined());
  EXPECT_LT(MaxAbsDiff(two.last_hidden_state, one.last_hidden_state), 1e-6);
  for (size_t n = 0; n < one.new_mems.size(); ++n) {
    EXPECT_TRUE(torch::equal(two.new_mems[n], one.new_mems[n]));
  }
}

TEST(TwoStreamTest, TargetQueryStreamEqualsAllPositionQueryStream) {
  for (const char* attn_type : {"bi", "uni"}) {
    SCOPED_TRACE(attn_type);
    auto config = TinyConfig();
    config.attn_type = attn_type;
    auto model = MakeRandomModel(config, 7);
    auto x = MakePlmInputs(2, 11, 4, 50, {3, 0}, 8);
    // Row 1's last target is a padding target (all-zero row).
    x.target_mapping[1][3].zero_();
    // With memory, too.
    x.mems = {torch::randn({4, 2, 32}), torch::randn({4, 2, 32})};
    torch::NoGradGuard no_grad;
    auto p_way = model->forward(x, {true, false});
    auto l_way = model->forward(x, {true, true});
    EXPECT_LT(MaxAbsDiff(p_way.query_hidden_state, l_way.query_hidden_state), 1e-5);
    EXPECT_LT(MaxAbsDiff(p_way.logits, l_way.logits), 1e-5);
    EXPECT_TRUE(torch::equal(p_way.last_hidden_state, l_way.last_hidden_state));
  }
}

// A compact batch's bool perm_mask and target_mapping (what the pretraining
// units feed, SamplerOptions::compact_masks) give the float masks' outputs
// and gradients bit for bit: with and without attention_mask, a padding
// target and memory, over the P targets and over all positions.
TEST(TwoStreamTest, BoolMasksEqualFloatMasks) {
  auto model = MakeRandomModel(TinyConfig(), 21);
  model->eval();
  const auto run = [&](const XLNetInputs& x, bool all_positions) {
    model->zero_grad();
    auto out = model->forward(x, {true, all_positions});
    out.logits.pow(2).sum().backward();
    std::vector<torch::Tensor> got = {out.logits.detach()};
    for (const auto& param : model->parameters()) {
      got.push_back(param.grad().defined() ? param.grad().clone()
                                           : torch::Tensor());
    }
    return got;
  };
  for (bool attention_mask : {true, false}) {
    for (bool all_positions : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "attention_mask " << attention_mask
                                        << ", all positions " << all_positions);
      auto x = MakePlmInputs(2, 11, 4, 50, {3, 0}, 22);
      x.target_mapping[1][3].zero_();
      x.mems = {torch::randn({4, 2, 32}), torch::randn({4, 2, 32})};
      if (!attention_mask) x.attention_mask = torch::Tensor();
      XLNetInputs compact = x;
      compact.perm_mask = x.perm_mask.to(torch::kBool);
      compact.target_mapping = x.target_mapping.to(torch::kBool);
      const auto a = run(x, all_positions), b = run(compact, all_positions);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].defined(), b[i].defined()) << i;
        if (a[i].defined()) {
          EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
        }
      }
    }
  }
}

// ------------------------------------------------------------ memory

TEST(MemoryTest, SegmentsWithMemoryEqualOnePassCausal) {
  // Causal attention: the second segment over the first one's mems sees
  // exactly what it sees in one pass over both (Transformer-XL recurrence).
  auto config = TinyConfig();
  config.attn_type = "uni";
  config.mem_len = 7;
  auto model = MakeRandomModel(config, 9);
  torch::manual_seed(10);
  auto ids = torch::randint(0, 50, {2, 12}, torch::kLong);
  auto types = torch::randint(0, 2, {2, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  XLNetInputs whole;
  whole.input_ids = ids;
  auto full = model->transformer->forward(whole).last_hidden_state;
  XLNetInputs first;
  first.input_ids = ids.narrow(1, 0, 7);
  auto s1 = model->transformer->forward(first, {true});
  XLNetInputs second;
  second.input_ids = ids.narrow(1, 7, 5);
  second.mems = s1.new_mems;
  auto s2 = model->transformer->forward(second, {true});
  EXPECT_LT(MaxAbsDiff(s1.last_hidden_state, full.narrow(1, 0, 7)), 1e-5);
  EXPECT_LT(MaxAbsDiff(s2.last_hidden_state, full.narrow(1, 7, 5)), 1e-5);
  // mems.0 is the word embedding of the last mem_len tokens.
  auto emb = model->transformer->word_embedding(ids).transpose(0, 1);   // [L, B, D]
  EXPECT_TRUE(torch::equal(s2.new_mems[0], emb.narrow(0, 5, 7).contiguous()));
  EXPECT_FALSE(s2.new_mems[0].requires_grad());
}

TEST(MemoryTest, MemsBuiltByHandAndReuseLen) {
  // Bidirectional: mems given by hand equal the layer inputs of the first
  // segment computed by hand (embedding, then layer 0 on its own).
  auto config = TinyConfig();
  config.mem_len = 10;
  config.reuse_len = 4;
  auto model = MakeRandomModel(config, 11);
  torch::manual_seed(12);
  auto ids = torch::randint(0, 50, {2, 6}, torch::kLong);
  torch::NoGradGuard no_grad;
  XLNetInputs seg;
  seg.input_ids = ids;
  auto out = model->transformer->forward(seg, {true});
  // Layer inputs by hand: a one-layer model with layer 0's weights gives
  // layer 1's input.
  auto one_cfg = config;
  one_cfg.n_layer = 1;
  XLNetLMHeadModel one(one_cfg);
  one->eval();
  {
    auto src = model->named_parameters();
    for (auto& item : one->named_parameters()) item.value().copy_(src[item.key()]);
  }
  auto h1 = one->transformer->forward(seg).last_hidden_state;            // [B, L, D]
  auto emb = model->transformer->word_embedding(ids);                    // [B, L, D]
  ASSERT_EQ(out.new_mems[0].size(0), 4);                                 // reuse_len
  EXPECT_TRUE(torch::equal(out.new_mems[0], emb.narrow(1, 0, 4).transpose(0, 1).contiguous()));
  EXPECT_LT(MaxAbsDiff(out.new_mems[1], h1.narrow(1, 0, 4).transpose(0, 1)), 1e-6);
  // Next segment: old mems first, then the new reuse_len rows, last 10 kept.
  XLNetInputs next;
  next.input_ids = torch::randint(0, 50, {2, 6}, torch::kLong);
  next.mems = {torch::randn({8, 2, 32}), torch::randn({8, 2, 32})};
  auto out2 = model->transformer->forward(next, {true});
  ASSERT_EQ(out2.new_mems[0].size(0), 10);
  EXPECT_TRUE(torch::equal(out2.new_mems[0].narrow(0, 0, 6), next.mems[0].narrow(0, 2, 6)));
}

// CacheMem against its definition, HF's cache_mem: the last mem_len rows of
// cat(prev, cur[:reuse_len]) (every row when mem_len is unset or 0), with
// cur a transposed view as the model passes it, cast to the asked dtype,
// contiguous; also when cur alone fills the memory and with no prev.
TEST(MemoryTest, CacheMemIsTheLastRowsOfTheConcatenation) {
  torch::manual_seed(13);
  const auto cur_bl = torch::randn({2, 7, 5});  // [B, L, D]
  const auto cur = cur_bl.transpose(0, 1);      // [L, B, D] view
  for (const int64_t prev_rows : {-1, 0, 3, 9}) {
    for (const int64_t reuse : {0, 4, 7}) {
      for (const int64_t mem_len : {0, 2, 4, 6, 10, 20}) {
        for (const bool bf16 : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "prev " << prev_rows << " reuse " << reuse
                       << " mem_len " << mem_len << " bf16 " << bf16);
          XLNetConfig config = TinyConfig();
          config.mem_len = mem_len;
          config.reuse_len = reuse;
          const torch::Tensor prev =
              prev_rows < 0 ? torch::Tensor() : torch::randn({prev_rows, 2, 5});
          const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
          const auto got = CacheMem(cur, prev, config, type);
          auto want = reuse > 0 ? cur.narrow(0, 0, reuse) : cur;
          if (prev.defined()) want = torch::cat({prev, want}, 0);
          if (mem_len > 0 && want.size(0) > mem_len) {
            want = want.narrow(0, want.size(0) - mem_len, mem_len);
          }
          EXPECT_EQ(got.scalar_type(), type);
          EXPECT_TRUE(got.is_contiguous());
          EXPECT_FALSE(got.requires_grad());
          EXPECT_TRUE(torch::equal(got, want.to(type)));
        }
      }
    }
  }
}

// The memory a forward returns is a view of each layer's key/value input
// without activation checkpointing and CacheMem's copy with it: the same
// values, over two segments (memory then present), for reuse_len and
// mem_len shorter, equal to and longer than what they cut, in fp32 and
// under bf16 autocast with the fused element-wise ops.
TEST(MemoryTest, MemoryViewsEqualCacheMemCopies) {
  for (const int64_t reuse : {0, 3, 6}) {
    for (const int64_t mem_len : {0, 4, 6, 9, 20}) {
      for (const bool bf16 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "reuse " << reuse << " mem_len "
                                          << mem_len << " bf16 " << bf16);
        auto config = TinyConfig();
        config.mem_len = mem_len;
        config.reuse_len = reuse;
        auto model = MakeRandomModel(config, 21);
        model->train();  // dropout 0; checkpointing needs grad mode
        model->transformer->SetFusedElementwise(bf16);
        torch::manual_seed(22);
        const auto ids1 = torch::randint(0, 50, {2, 6}, torch::kLong);
        const auto ids2 = torch::randint(0, 50, {2, 6}, torch::kLong);
        std::vector<std::vector<torch::Tensor>> mems(2);
        for (const bool checkpoint : {false, true}) {
          model->transformer->SetActivationCheckpointing(checkpoint);
          AutocastGuard autocast(torch::kCPU,
                                 bf16 ? torch::kBFloat16 : torch::kFloat);
          XLNetInputs x;
          x.input_ids = ids1;
          const auto first = model->transformer->forward(x, {true});
          x.input_ids = ids2;
          x.mems = first.new_mems;
          const auto second = model->transformer->forward(x, {true});
          for (const auto* out : {&first, &second}) {
            for (const auto& m : out->new_mems) {
              EXPECT_FALSE(m.requires_grad());
              mems[checkpoint].push_back(m);
            }
          }
        }
        ASSERT_EQ(mems[0].size(), 4u);
        ASSERT_EQ(mems[1].size(), 4u);
        for (size_t i = 0; i < 4; ++i) {
          EXPECT_EQ(mems[0][i].sizes(), mems[1][i].sizes()) << i;
          EXPECT_EQ(mems[0][i].scalar_type(),
                    bf16 ? torch::kBFloat16 : torch::kFloat)
              << i;
          EXPECT_TRUE(torch::equal(mems[0][i], mems[1][i])) << i;
        }
      }
    }
  }
}

// ------------------------------------------------------------ causal, masks

TEST(UniAttentionTest, PaddingAndPermMaskRunAndAreCausal) {
  for (bool same_length : {false, true}) {
    auto config = TinyConfig();
    config.attn_type = "uni";
    config.same_length = same_length;
    auto model = MakeRandomModel(config, 13);
    auto x = MakePlmInputs(3, 10, 3, 50, {2, 0, 4}, 14);
    x.mems = {torch::randn({3, 3, 32}), torch::randn({3, 3, 32})};
    torch::NoGradGuard no_grad;
    auto base = model->forward(x);
    const int64_t t = 6;  // change every token after t
    XLNetInputs y = x;
    y.input_ids = x.input_ids.clone();
    y.input_ids.narrow(1, t + 1, 3).random_(10, 50);
    auto out = model->forward(y);
    EXPECT_LT(MaxAbsDiff(out.last_hidden_state.narrow(1, 0, t + 1),
                         base.last_hidden_state.narrow(1, 0, t + 1)), 1e-6);
    EXPECT_GT(MaxAbsDiff(out.last_hidden_state, base.last_hidden_state), 1e-3);
    // Query stream of targets at positions <= t is unchanged too.
    auto pos = x.target_mapping.argmax(2);                             // [B, P]
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t k = 0; k < 3; ++k) {
        if (pos[r][k].item<int64_t>() <= t) {
          EXPECT_LT(MaxAbsDiff(out.query_hidden_state[r][k], base.query_hidden_state[r][k]), 1e-6)
              << "same_length " << same_length << " row " << r << " target " << k << " pos " << pos[r][k].item<int64_t>() << "\n" << x.perm_mask[r] << x.target_mapping[r];
        }
      }
    }
  }
}

TEST(MaskingTest, FullyMaskedRowsStayFiniteInBf16AndFp32) {
  auto model = MakeRandomModel(TinyConfig(), 15);
  auto x = MakePlmInputs(2, 8, 2, 50, {0, 0}, 16);
  x.attention_mask[1].zero_();               // a fully padded row
  x.perm_mask.fill_(1);                      // every query row fully masked
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::NoGradGuard no_grad;
    AutocastGuard autocast(torch::kCPU, dtype);
    auto out = model->forward(x, {true});
    EXPECT_TRUE(torch::isfinite(out.logits).all().item<bool>()) << c10::toString(dtype);
    EXPECT_TRUE(torch::isfinite(out.last_hidden_state).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(out.query_hidden_state).all().item<bool>());
  }
  EXPECT_EQ(MaskedScoreValue(torch::kHalf), -65000.0);
}

// ------------------------------------------------------------ precision

TEST(PrecisionTest, Bf16AutocastCloseToFp32) {
  auto model = LoadGoldenModel();
  auto in = ReadTensors(GoldenDir() + "/inputs.safetensors");
  XLNetInputs x = testing::GoldenLmInputs(in);
  torch::NoGradGuard no_grad;
  auto fp32 = model->forward(x);
  torch::Tensor bf16;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    bf16 = model->forward(x).logits;
  }
  EXPECT_TRUE(torch::equal(model->forward(x).logits, fp32.logits)) << "autocast not restored";
  const double scale = fp32.logits.abs().max().item<double>();
  const double diff = MaxAbsDiff(bf16, fp32.logits);
  std::printf("[ diff     ] bf16 autocast vs fp32 golden logits max_abs_diff=%.3g "
              "(max |logit| %.3g)\n", diff, scale);
  EXPECT_GT(diff, 0.0) << "autocast did not change anything";
  EXPECT_LT(diff, 0.05 * scale) << "bf16 logits must be within 5% of max |logit|";
  auto loss32 = PartialPredictionLoss(fp32.logits, in.at("labels")).item<double>();
  auto loss16 = PartialPredictionLoss(bf16, in.at("labels")).item<double>();
  EXPECT_NEAR(loss16, loss32, 0.02 * std::abs(loss32) + 0.02);
  EXPECT_FALSE(CheckPrecision(torch::kCPU, torch::kHalf).ok());
}

TEST(ModelTest, DropoutOnlyInTraining) {
  auto config = TinyConfig();
  config.dropout = 0.3;
  auto model = MakeRandomModel(config, 17);
  auto x = MakePlmInputs(2, 8, 2, 50, {}, 18);
  torch::NoGradGuard no_grad;
  auto e1 = model->forward(x).logits;
  auto e2 = model->forward(x).logits;
  EXPECT_TRUE(torch::equal(e1, e2));
  model->train();
  auto t1 = model->forward(x).logits;
  EXPECT_GT(MaxAbsDiff(t1, e1), 1e-4);
}

TEST(ModelTest, FeedForwardActivations) {
  auto config = TinyConfig();
  torch::manual_seed(23);
  auto x = torch::randn({2, 3, 32});
  for (const char* act : {"gelu", "gelu_new", "relu"}) {
    config.ff_activation = act;
    FeedForward ff(config);
    torch::NoGradGuard no_grad;
    for (auto& p : ff->parameters()) p.normal_(0.0, 0.3);
    auto h = ff->layer_1(x);
    torch::Tensor a;
    if (std::string(act) == "gelu") {
      a = 0.5 * h * (1 + torch::erf(h / std::sqrt(2.0)));
    } else if (std::string(act) == "gelu_new") {
      a = 0.5 * h * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (h + 0.044715 * h.pow(3))));
    } else {
      a = h.clamp_min(0);
    }
    auto want = ff->layer_norm(ff->layer_2(a) + x);
    EXPECT_LT(MaxAbsDiff(ff->forward(x), want), 1e-5) << act;
  }
}

TEST(PrecisionTest, Bf16BackwardIsFinite) {
  auto model = MakeRandomModel(TinyConfig(), 24);
  model->train();
  auto x = MakePlmInputs(2, 8, 2, 50, {3, 0}, 25);
  torch::Tensor loss;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    auto out = model->forward(x);
    loss = PartialPredictionLoss(out.logits, x.input_ids.gather(1, x.target_mapping.argmax(2)));
  }
  loss.backward();
  for (const auto& item : model->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_EQ(item.value().grad().scalar_type(), torch::kFloat) << item.key();
    EXPECT_TRUE(torch::isfinite(item.value().grad()).all().item<bool>()) << item.key();
  }
}

TEST(ModelTest, InitAndNames) {
  auto config = TinyConfig();
  config.untie_r = false;
  torch::manual_seed(19);
  XLNetLMHeadModel model(config);
  auto params = model->named_parameters();
  EXPECT_EQ(params.size(), 3u + 2u * 17u);
  EXPECT_TRUE(params.contains("transformer.layer.1.rel_attn.seg_embed"));
  EXPECT_TRUE(params.contains("transformer.layer.0.ff.layer_norm.weight"));
  EXPECT_TRUE(params.contains("lm_loss.bias"));
  EXPECT_TRUE(torch::equal(params["lm_loss.bias"], torch::zeros({50})));
  EXPECT_NEAR(params["transformer.layer.0.rel_attn.q"].std().item<double>(), 0.02, 0.005);
  EXPECT_TRUE(torch::equal(params["transformer.layer.0.ff.layer_1.bias"], torch::zeros({64})));
  EXPECT_TRUE(torch::equal(params["transformer.layer.1.rel_attn.layer_norm.weight"], torch::ones({32})));
  // untie_r=false: per-layer biases (HF names) start identical.
  EXPECT_TRUE(torch::equal(params["transformer.layer.0.rel_attn.r_w_bias"],
                           params["transformer.layer.1.rel_attn.r_w_bias"]));
  EXPECT_FALSE(torch::equal(params["transformer.layer.0.rel_attn.q"],
                            params["transformer.layer.1.rel_attn.q"]));
}

}  // namespace
}  // namespace xlnet
