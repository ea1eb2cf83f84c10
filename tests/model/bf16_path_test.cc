// The compute-dtype path under bf16 autocast (model/xlnet.cc RunLayer,
// relative_attention.cc): each stream cast once to bf16 before its
// projections, memory joined and kept in bf16, keys and values from one
// product, the r_*_bias added in q's dtype. Checked against a copy of the
// layer as it was before (fp32 concatenation, one autocast cast per
// projection, separate key and value products, fp32 bias sums), and bf16
// gradients against fp32 ones.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "config/settings.h"
#include "model/attention.h"
#include "model/precision.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::MakeRandomModel;
using testing::MaxAbsDiff;
using testing::TinyConfig;

// RelativeAttentionCore with the sums q + r_*_bias in fp32 under autocast
// (an fp32 [H, Dh] bias promotes a bf16 q), or with the bias first rounded
// to q's dtype (`round_bias`, what the model does now).
torch::Tensor ReferenceCore(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& k_r,
                            const RelativeAttentionImpl& attn,
                            const AttentionBias& bias, int64_t qlen,
                            bool round_bias) {
  const int64_t h = q.size(1), dh = q.size(3), klen = k.size(2);
  const auto hd = [&](const torch::Tensor& t) {
    return (round_bias ? t.to(q.scalar_type()) : t).view({1, h, 1, dh});
  };
  auto score = torch::matmul(q + hd(attn.r_w_bias), k.transpose(2, 3));
  auto bd = torch::matmul(q + hd(attn.r_r_bias), k_r.transpose(2, 3));
  score = score + RelShift(bd, klen);  // [B, H, Lq, K]
  if (bias.seg_diff.defined()) {
    auto e = torch::matmul(q + hd(attn.r_s_bias),
                           attn.seg_embed.permute({1, 2, 0}));  // [B, H, Lq, 2]
    score = score +
            torch::where(bias.seg_diff, e.narrow(3, 1, 1), e.narrow(3, 0, 1));
  }
  score = score.to(torch::kFloat) * (1.0 / std::sqrt(static_cast<double>(dh)));
  if (bias.mask.defined()) score = score.masked_fill(bias.mask, -1e30);
  auto out = torch::matmul(torch::softmax(score, 3).to(v.scalar_type()), v);
  if (bias.mask.defined()) {
    out = out.masked_fill(bias.mask.all(3, /*keepdim=*/true), 0.0);
  }
  return out;
}

// The layer loop as it was: memory and the content stream concatenated in
// the stream's dtype (fp32), keys, values and queries each projected from
// fp32 (autocast casts per product). Query stream at all L positions.
XLNetLMOutputs ReferenceForward(XLNetLMHeadModel& model, const XLNetInputs& x,
                                bool round_bias) {
  auto& tr = *model->transformer;
  const XLNetConfig& config = tr.config();
  const int64_t b = x.input_ids.size(0), l = x.input_ids.size(1);
  const int64_t d = config.d_model, p = x.target_mapping.size(1);
  const int64_t mlen = x.mems.empty() ? 0 : x.mems[0].size(0);
  const StreamMasks masks =
      BuildStreamMasks(x, mlen, config.attn_type, config.same_length);
  const torch::Tensor seg = BuildSegmentDiff(x.token_type_ids, mlen);
  AttentionBias content, query;
  if (masks.content.defined()) content.mask = masks.content.unsqueeze(1);
  if (masks.query.defined()) query.mask = masks.query.unsqueeze(1);
  if (seg.defined()) content.seg_diff = query.seg_diff = seg.unsqueeze(1);
  auto h = tr.word_embedding(x.input_ids);  // [B, L, D]
  auto g = tr.mask_emb.expand({b, p, d});   // [B, P, D]
  const auto pos_emb = RelativePositionalEncoding(
      l, mlen + l, d, config.clamp_len, false, torch::kCPU);  // [1, R, D]
  for (int64_t n = 0; n < config.n_layer; ++n) {
    auto& lay = *tr.layer->ptr<XLNetLayerImpl>(n);
    auto& attn = *lay.rel_attn;
    auto cat =
        mlen > 0
            ? torch::cat({x.mems[n].transpose(0, 1).to(h.scalar_type()), h},
                         1)
            : h;  // [B, K, D]
    auto k = attn.Project(cat, attn.k);
    auto v = attn.Project(cat, attn.v);
    auto k_r = attn.ProjectPositions(pos_emb);
    auto vec_h = ReferenceCore(attn.Project(h, attn.q), k, v, k_r, attn,
                               content, l, round_bias);
    auto q_g = attn.Project(g, attn.q);  // [B, H, P, Dh]
    auto tmq = x.target_mapping.to(q_g.scalar_type()).unsqueeze(1);
    auto vec_all = ReferenceCore(torch::matmul(tmq.transpose(2, 3), q_g), k, v,
                                 k_r, attn, query, l, round_bias);
    auto vec_g = torch::matmul(tmq.to(vec_all.scalar_type()), vec_all);
    g = lay.ff(attn.PostAttention(g, vec_g));
    h = lay.ff(attn.PostAttention(h, vec_h));
  }
  XLNetLMOutputs out;
  out.last_hidden_state = h;
  out.query_hidden_state = g;
  out.logits = model->Logits(g);
  return out;
}

struct PathRun {
  XLNetLMOutputs out;
  std::map<std::string, torch::Tensor> grads;
};

// Forward (the model's or the reference's) and backward of the sum of the
// logits times fixed weights, under CPU autocast at `dtype`.
PathRun ForwardBackward(XLNetLMHeadModel& model, const XLNetInputs& x,
                        torch::ScalarType dtype, int reference) {
  model->zero_grad();
  PathRun r;
  torch::Tensor loss;
  {
    AutocastGuard autocast(torch::kCPU, dtype);
    if (reference < 0) {
      XLNetForwardOptions options;
      options.query_all_positions = true;
      r.out = model->forward(x, options);
    } else {
      r.out = ReferenceForward(model, x, /*round_bias=*/reference == 1);
    }
    torch::manual_seed(5);
    const auto w = torch::randn(r.out.logits.sizes());
    loss = (r.out.logits.to(torch::kFloat) * w).sum() +
           r.out.last_hidden_state.to(torch::kFloat).sum();
  }
  loss.backward();
  for (const auto& item : model->named_parameters()) {
    if (item.value().grad().defined()) {
      r.grads[item.key()] = item.value().grad().clone();
    }
  }
  return r;
}

XLNetInputs InputsWithMems(const XLNetConfig& config, int64_t b, int64_t l,
                           int64_t p, int64_t mlen, uint64_t seed) {
  XLNetInputs x =
      testing::MakePlmInputs(b, l, p, config.vocab_size, {2, 0}, seed);
  torch::manual_seed(seed + 1);
  for (int64_t n = 0; n < config.n_layer; ++n) {
    x.mems.push_back(torch::randn({mlen, b, config.d_model}));
  }
  return x;
}

constexpr int kModel = -1, kBefore = 0, kBeforeBiasRounded = 1;

// Casting each stream once, memory in bf16 and the joint key/value product
// change no bit of the bf16 forward: against the old layer with the bias
// rounded as the model now does, outputs are equal. In fp32 only the joint
// product's summation order differs. Rounding the bias to bf16 before the
// sum moves bf16 results by less than bf16 itself does from fp32.
TEST(Bf16PathTest, ForwardBitEqualToThePathBeforeExceptBiasRounding) {
  auto model = MakeRandomModel(TinyConfig(), 31);
  const XLNetInputs x =
      InputsWithMems(model->transformer->config(), 2, 8, 3, 5, 32);
  const PathRun exact = ForwardBackward(model, x, torch::kFloat, kBefore);
  for (auto dtype : {torch::kBFloat16, torch::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const PathRun now = ForwardBackward(model, x, dtype, kModel);
    const PathRun rounded =
        ForwardBackward(model, x, dtype, kBeforeBiasRounded);
    const PathRun before = ForwardBackward(model, x, dtype, kBefore);
    for (const auto& [name, a, b2, c, f] :
         {std::make_tuple("logits", now.out.logits, rounded.out.logits,
                          before.out.logits, exact.out.logits),
          std::make_tuple("content", now.out.last_hidden_state,
                          rounded.out.last_hidden_state,
                          before.out.last_hidden_state,
                          exact.out.last_hidden_state),
          std::make_tuple("query", now.out.query_hidden_state,
                          rounded.out.query_hidden_state,
                          before.out.query_hidden_state,
                          exact.out.query_hidden_state)}) {
      const double scale = f.abs().max().item<double>();
      const double to_rounded = MaxAbsDiff(a, b2), to_before = MaxAbsDiff(a, c);
      const auto mean_err = [&](const torch::Tensor& t) {
        return (t.to(torch::kDouble) - f.to(torch::kDouble))
            .abs()
            .mean()
            .item<double>();
      };
      const double now_err = mean_err(a), before_err = mean_err(c);
      std::printf(
          "[ diff     ] %-8s %-7s max vs before with rounded bias "
          "%.3g, vs before %.3g; mean vs fp32: now %.3g, before %.3g "
          "(max |x| %.3g)\n",
          c10::toString(dtype), name, to_rounded, to_before, now_err,
          before_err, scale);
      if (dtype == torch::kFloat) {
        EXPECT_LT(to_before, 1e-5 * scale) << name;
      } else {
        EXPECT_EQ(to_rounded, 0.0) << name;
        EXPECT_LT(to_before, 0.05 * scale) << name;
        EXPECT_LT(now_err, 1.3 * before_err) << name;
      }
    }
  }
}

// Gradients through the joint key/value product and the bf16 bias sums:
// every parameter's gradient close to the old path's.
TEST(Bf16PathTest, GradientsCloseToThePathBefore) {
  auto model = MakeRandomModel(TinyConfig(), 33);
  model->train();  // dropout is 0 in TinyConfig
  const XLNetInputs x =
      InputsWithMems(model->transformer->config(), 2, 8, 3, 5, 34);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const PathRun now = ForwardBackward(model, x, dtype, kModel);
    const PathRun before = ForwardBackward(
        model, x, dtype, dtype == torch::kFloat ? kBefore : kBeforeBiasRounded);
    ASSERT_EQ(now.grads.size(), before.grads.size());
    double worst = 0;
    for (const auto& [name, g] : before.grads) {
      const double scale = g.abs().max().item<double>();
      const double rel = MaxAbsDiff(now.grads.at(name), g) / scale;
      worst = std::max(worst, rel);
      // fp32: summation order only. bf16: products rounded to bf16, in a
      // different grouping (one key/value product).
      EXPECT_LT(rel, dtype == torch::kFloat ? 1e-5 : 0.02)
          << c10::toString(dtype) << " " << name;
    }
    std::printf("[ diff     ] %s gradients, worst relative difference %.3g\n",
                c10::toString(dtype), worst);
  }
}

// Memory is kept in bf16 under autocast and gives the same bits as fp32
// memory: it only feeds the key/value product, which casts it to bf16.
TEST(Bf16PathTest, MemoryInBf16GivesTheSameResultsAsFp32Memory) {
  auto model = MakeRandomModel(TinyConfig(), 35);
  const XLNetConfig& config = model->transformer->config();
  const XLNetInputs x = InputsWithMems(config, 2, 8, 3, 5, 36);
  torch::NoGradGuard no_grad;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    const auto first = model->forward(x, {/*use_mems=*/true});
    ASSERT_EQ(first.new_mems.size(), static_cast<size_t>(config.n_layer));
    for (const auto& m : first.new_mems) {
      EXPECT_EQ(m.scalar_type(), torch::kBFloat16);
      EXPECT_EQ(m.sizes(), torch::IntArrayRef({*config.mem_len, 2, 32}));
      // A view of the layer's batch-major key/value input: each sample's
      // rows are contiguous.
      EXPECT_EQ(m.stride(2), 1);
      EXPECT_EQ(m.stride(0), 32);
    }
  }
  XLNetInputs bf16 = x;
  for (auto& m : bf16.mems) m = m.to(torch::kBFloat16);
  XLNetOutputs a, b;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    a = model->transformer->forward(x, {/*use_mems=*/true});
    b = model->transformer->forward(bf16, {/*use_mems=*/true});
  }
  EXPECT_TRUE(torch::equal(a.last_hidden_state, b.last_hidden_state));
  EXPECT_TRUE(torch::equal(a.query_hidden_state, b.query_hidden_state));
  for (size_t n = 0; n < a.new_mems.size(); ++n) {
    EXPECT_TRUE(torch::equal(a.new_mems[n], b.new_mems[n])) << n;
  }
  // Without autocast memory stays fp32 and bf16 memory is widened.
  const auto f = model->transformer->forward(bf16, {/*use_mems=*/true});
  EXPECT_EQ(f.new_mems[0].scalar_type(), torch::kFloat);
  EXPECT_EQ(f.last_hidden_state.scalar_type(), torch::kFloat);
}

// Forward on the PLM targets and backward of the logits times fixed
// weights plus the content stream, under bf16 autocast on `device`;
// gradients copied to the CPU.
PathRun PlmRunOn(XLNetLMHeadModel& model, XLNetInputs x,
                 const torch::Device& device) {
  for (torch::Tensor* t : {&x.input_ids, &x.token_type_ids, &x.attention_mask,
                           &x.perm_mask, &x.target_mapping}) {
    if (t->defined()) *t = t->to(device);
  }
  for (auto& m : x.mems) m = m.to(device);
  model->zero_grad();
  PathRun r;
  torch::Tensor loss;
  {
    AutocastGuard autocast(device, torch::kBFloat16);
    r.out = model->forward(x);
    torch::manual_seed(5);
    const auto w = torch::randn(r.out.logits.sizes()).to(device);
    loss = (r.out.logits.to(torch::kFloat) * w).sum() +
           r.out.last_hidden_state.to(torch::kFloat).sum();
  }
  loss.backward();
  r.out.logits = r.out.logits.cpu();
  r.out.last_hidden_state = r.out.last_hidden_state.cpu();
  if (r.out.query_hidden_state.defined()) {
    r.out.query_hidden_state = r.out.query_hidden_state.cpu();
  }
  for (const auto& item : model->named_parameters()) {
    if (item.value().grad().defined()) {
      r.grads[item.key()] = item.value().grad().cpu();
    }
  }
  return r;
}

// The layers' product weights cast together (WeightCasts) give the bits
// that autocast's casts one per use give: outputs and every parameter's
// gradient (each stream's cast back to fp32, then summed), with both
// streams and the content stream alone, with and without the fused
// element-wise tails, with the unfused attention core
// and the fused one ('tiled' on the CPU, 'cuda' with XLNET_TEST_DEVICE=
// cuda); afterwards the modules hold their fp32 parameters again.
TEST(Bf16PathTest, WeightsCastTogetherGiveTheBitsOfCastsOneAtATime) {
  const torch::Device device = testing::TestDevice();
  for (const bool fused : {false, true}) {
    for (const AttentionImpl impl :
         {AttentionImpl::kUnfused,
          device.is_cuda() ? AttentionImpl::kCuda : AttentionImpl::kTiled}) {
      SCOPED_TRACE(::testing::Message()
                   << "fused " << fused << ", " << EnumName(impl));
      auto model = MakeRandomModel(TinyConfig(), 37);
      model->to(device);
      model->train();  // dropout is 0 in TinyConfig
      auto& tr = *model->transformer;
      tr.SetFusedElementwise(fused);
      AttentionOptions options;
      options.impl = impl;
      tr.SetAttention(options);
      XLNetInputs two = InputsWithMems(tr.config(), 2, 8, 3, 5, 38);
      XLNetInputs one = two;  // the content stream alone
      one.perm_mask = one.target_mapping = torch::Tensor();
      for (const XLNetInputs& x : {two, one}) {
        // The reference: autocast's casts, one per use (its cache off: with
        // it, a weight a product reads in both streams may share one cast,
        // whose gradient sums the streams in bf16).
        tr.SetCastWeightsTogether(false);
        at::autocast::set_autocast_cache_enabled(false);
        const PathRun apart = PlmRunOn(model, x, device);
        at::autocast::set_autocast_cache_enabled(true);
        tr.SetCastWeightsTogether(true);
        const PathRun together = PlmRunOn(model, x, device);
        EXPECT_TRUE(torch::equal(apart.out.logits, together.out.logits));
        EXPECT_TRUE(torch::equal(apart.out.last_hidden_state,
                                 together.out.last_hidden_state));
        if (x.target_mapping.defined()) {
          EXPECT_TRUE(torch::equal(apart.out.query_hidden_state,
                                   together.out.query_hidden_state));
        }
        ASSERT_EQ(apart.grads.size(), together.grads.size());
        for (const auto& [name, g] : apart.grads) {
          EXPECT_TRUE(torch::equal(together.grads.at(name), g)) << name;
        }
      }
      const auto params = tr.named_parameters();
      const auto& attn = *tr.layer->ptr<XLNetLayerImpl>(0)->rel_attn;
      EXPECT_TRUE(attn.q.is_same(params["layer.0.rel_attn.q"]));
      EXPECT_EQ(attn.q.scalar_type(), torch::kFloat);
    }
  }
}

// bf16 autocast against fp32 on the golden model: every parameter gradient
// relative to that gradient's largest magnitude, for the model and for the
// path before (bias sums in fp32).
TEST(Bf16PathTest, GoldenGradientsCloseToFp32) {
  auto model = testing::LoadGoldenModel();
  // CPU autocast (ForwardBackward), whatever XLNET_TEST_DEVICE says.
  model->to(torch::kCPU);
  model->transformer->SetAttention({});
  const auto in =
      testing::ReadTensors(testing::GoldenDir() + "/inputs.safetensors");
  const XLNetInputs x = testing::GoldenLmInputs(in);
  const PathRun fp32 = ForwardBackward(model, x, torch::kFloat, kModel);
  const PathRun now = ForwardBackward(model, x, torch::kBFloat16, kModel);
  const PathRun before = ForwardBackward(model, x, torch::kBFloat16, kBefore);
  ASSERT_EQ(fp32.grads.size(), now.grads.size());
  ASSERT_EQ(fp32.grads.size(), before.grads.size());
  double worst[2] = {0, 0}, mean[2] = {0, 0};
  for (const auto& [name, g] : fp32.grads) {
    const double scale = g.abs().max().item<double>();
    int i = 0;
    for (const PathRun* run : {&now, &before}) {
      const torch::Tensor& low = run->grads.at(name);
      EXPECT_EQ(low.scalar_type(), torch::kFloat) << name;
      const double rel = MaxAbsDiff(low, g) / scale;
      worst[i] = std::max(worst[i], rel);
      mean[i] += rel / fp32.grads.size();
      ++i;
    }
    EXPECT_LT(MaxAbsDiff(now.grads.at(name), g), 0.1 * scale) << name;
  }
  std::printf(
      "[ diff     ] bf16 vs fp32 golden gradients (relative to each "
      "one's max): now worst %.3g mean %.3g; before worst %.3g mean "
      "%.3g\n",
      worst[0], mean[0], worst[1], mean[1]);
  EXPECT_LT(mean[0], 1.3 * mean[1]);
}

}  // namespace
}  // namespace xlnet
