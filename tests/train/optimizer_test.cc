#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "tests/test_util.h"

namespace xlnet {
namespace {

TrainConfig Schedule(int64_t warmup, int64_t steps, LrDecay decay) {
  TrainConfig t;
  t.lr = 1.0;
  t.warmup_steps = warmup;
  t.max_steps = steps;
  t.decay = decay;
  t.min_lr_ratio = 0.1;
  return t;
}

TEST(ScheduleTest, WarmupThenLinearDecay) {
  const TrainConfig t = Schedule(10, 110, LrDecay::kLinear);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 0), 0.0);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 5), 0.5);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 10), 1.0);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 60), 0.55);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 110), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 500), 0.1);
}

TEST(ScheduleTest, Cosine) {
  const TrainConfig t = Schedule(0, 100, LrDecay::kCos);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(t, 0), 1.0);
  EXPECT_NEAR(ScheduledLearningRate(t, 50), 0.55, 1e-12);
  EXPECT_NEAR(ScheduledLearningRate(t, 100), 0.1, 1e-12);
}

TEST(WeightDecayRuleTest, XlnetNames) {
  EXPECT_TRUE(UsesWeightDecay("transformer.word_embedding.weight"));
  EXPECT_TRUE(UsesWeightDecay("transformer.mask_emb"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.0.rel_attn.q"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.0.rel_attn.seg_embed"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.3.rel_attn.r_w_bias"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.3.rel_attn.r_r_bias"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.3.rel_attn.r_s_bias"));
  EXPECT_TRUE(UsesWeightDecay("transformer.layer.1.ff.layer_1.weight"));
  EXPECT_FALSE(UsesWeightDecay("transformer.layer.1.ff.layer_1.bias"));
  EXPECT_FALSE(
      UsesWeightDecay("transformer.layer.0.rel_attn.layer_norm.weight"));
  EXPECT_FALSE(UsesWeightDecay("transformer.layer.0.ff.layer_norm.bias"));
  EXPECT_FALSE(UsesWeightDecay("lm_loss.bias"));
  EXPECT_FALSE(UsesWeightDecay("end_logits.LayerNorm.weight"));
}

TEST(WeightDecayRuleTest, LayerIndex) {
  EXPECT_EQ(LayerIndexOf("transformer.layer.11.ff.layer_2.weight"), 11);
  EXPECT_EQ(LayerIndexOf("layer.2.rel_attn.q"), 2);
  EXPECT_EQ(LayerIndexOf("transformer.layer_norm.weight"), -1);
  EXPECT_EQ(LayerIndexOf("transformer.word_embedding.weight"), -1);
}

// Two parameters, one decayed and one not, with deterministic gradients.
NamedTensors MakeParams() {
  torch::manual_seed(7);
  return {{"transformer.layer.0.ff.layer_1.weight",
           torch::randn({4, 3}, torch::kFloat64).requires_grad_()},
          {"transformer.layer.0.ff.layer_1.bias",
           torch::randn({4}, torch::kFloat64).requires_grad_()},
          {"transformer.layer.1.rel_attn.q",
           torch::randn({3, 2}, torch::kFloat64).requires_grad_()}};
}

void SetGrads(const NamedTensors& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i].second;
    p.mutable_grad() = torch::sin(
        torch::arange(p.numel(), torch::kFloat64).reshape(p.sizes()) *
            (step + 1) +
        static_cast<double>(i));
  }
}

TEST(AdamWTest, MatchesTorchAdamW) {
  TrainConfig t;
  t.weight_decay = 0.01;
  t.adam_beta1 = 0.9;
  t.adam_beta2 = 0.98;
  t.adam_epsilon = 1e-6;
  NamedTensors ours = MakeParams();
  NamedTensors theirs = MakeParams();
  AdamW opt(ours, t);
  EXPECT_EQ(opt.WeightDecay(0), 0.01);
  EXPECT_EQ(opt.WeightDecay(1), 0.0);
  // torch.optim.AdamW with the same per-parameter decay as two groups.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(1e-3)
            .betas({0.9, 0.98})
            .eps(1e-6)
            .weight_decay(wd));
  };
  groups.emplace_back(
      std::vector<torch::Tensor>{theirs[0].second, theirs[2].second},
      options(0.01));
  groups.emplace_back(std::vector<torch::Tensor>{theirs[1].second},
                      options(0.0));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(1e-3));
  for (int step = 0; step < 5; ++step) {
    SetGrads(ours, step);
    SetGrads(theirs, step);
    opt.Step(1e-3);
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::allclose(ours[i].second, theirs[i].second, 0, 1e-12))
        << ours[i].first;
  }
  EXPECT_EQ(opt.steps(), 5);
}

TEST(AdamWTest, LayerDecayScalesLearningRate) {
  TrainConfig t;
  t.layer_decay = 0.5;
  NamedTensors params = MakeParams();
  params.emplace_back("lm_loss.bias",
                      torch::zeros({2}, torch::kFloat64).requires_grad_());
  AdamW opt(params, t);
  EXPECT_DOUBLE_EQ(opt.LrScale(0), 0.5);  // layer 0 of 2
  EXPECT_DOUBLE_EQ(opt.LrScale(2), 1.0);  // top layer
  EXPECT_DOUBLE_EQ(opt.LrScale(3), 1.0);  // outside the layers
}

TEST(AdamWTest, StateRoundTripContinuesExactly) {
  testing::TempDir tmp;
  TrainConfig t;
  t.weight_decay = 0.1;
  NamedTensors a = MakeParams();
  AdamW uninterrupted(a, t);
  NamedTensors b = MakeParams();
  AdamW first_half(b, t);
  for (int step = 0; step < 3; ++step) {
    SetGrads(a, step);
    uninterrupted.Step(1e-2);
    SetGrads(b, step);
    first_half.Step(1e-2);
  }
  const std::string path = tmp.Join("optimizer.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, first_half.StateTensors()).ok());
  // A fresh optimizer over copies of the parameters, restored from disk.
  NamedTensors c;
  for (const auto& [name, p] : b)
    c.emplace_back(name, p.detach().clone().requires_grad_());
  AdamW resumed(c, t);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(resumed.LoadState(*file).ok());
  EXPECT_EQ(resumed.steps(), 3);
  for (int step = 3; step < 6; ++step) {
    SetGrads(a, step);
    uninterrupted.Step(1e-2);
    SetGrads(c, step);
    resumed.Step(1e-2);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].second, c[i].second)) << a[i].first;
  }
}

TEST(AdamWTest, LoadStateReportsAllMismatches) {
  testing::TempDir tmp;
  TrainConfig t;
  NamedTensors params = MakeParams();
  AdamW opt(params, t);
  const std::string path = tmp.Join("bad.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, {{"step", torch::tensor(1)},
                              {"exp_avg.transformer.layer.0.ff.layer_1.weight",
                               torch::zeros({2, 2}, torch::kFloat64)}})
          .ok());
  auto file = SafetensorsFile::Open(path);
  const absl::Status status = opt.LoadState(*file);
  ASSERT_FALSE(status.ok());
  const std::string message(status.message());
  EXPECT_NE(message.find("has shape [2, 2], parameter has [4, 3]"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("missing exp_avg_sq.transformer.layer.1.rel_attn.q"),
            std::string::npos);
}

// The step count is an I64 scalar >= 0: an F64 step was converted by
// item<int64_t>() and a negative one accepted, both silently.
TEST(AdamWTest, LoadStateRefusesBadStep) {
  testing::TempDir tmp;
  TrainConfig t;
  NamedTensors params = MakeParams();
  AdamW opt(params, t);
  std::map<std::string, torch::Tensor> base;
  for (const auto& [name, tensor] : opt.StateTensors()) base[name] = tensor;
  for (const auto& [step, expected] :
       std::vector<std::pair<torch::Tensor, std::string>>{
           {torch::tensor(3.0, torch::kFloat64),
            "step must be an I64 scalar, found Double"},
           {torch::tensor(int64_t{-2}), "step -2 is negative"}}) {
    NamedTensors state;
    for (const auto& [name, tensor] : base) {
      state.emplace_back(name, name == "step" ? step : tensor);
    }
    const std::string path = tmp.Join("opt.safetensors");
    ASSERT_TRUE(WriteSafetensors(path, state).ok());
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const absl::Status status = opt.LoadState(*file);
    ASSERT_FALSE(status.ok()) << expected;
    EXPECT_NE(status.message().find(expected), std::string::npos) << status;
    EXPECT_NE(status.message().find("opt.safetensors"), std::string::npos);
  }
}

TEST(ClipTest, GlobalNorm) {
  NamedTensors params = {{"a", torch::zeros({2}).requires_grad_()},
                         {"b", torch::zeros({1}).requires_grad_()},
                         {"no_grad", torch::zeros({1}).requires_grad_()}};
  params[0].second.mutable_grad() = torch::tensor({3.0f, 0.0f});
  params[1].second.mutable_grad() = torch::tensor({4.0f});
  EXPECT_DOUBLE_EQ(GlobalGradNorm(params), 5.0);
  EXPECT_DOUBLE_EQ(ClipGradNorm(params, 10.0), 5.0);
  EXPECT_FLOAT_EQ(params[1].second.grad().item<float>(), 4.0f);
  EXPECT_DOUBLE_EQ(ClipGradNorm(params, 1.0), 5.0);
  EXPECT_NEAR(GlobalGradNorm(params), 1.0, 1e-5);
}

// The GradScaler arithmetic on fp32 tensors: scaled backward, unscaling in
// ClipGradNorm's multiplier, inf injection -> skip and backoff, growth.
TEST(LossScalerTest, UnscaleSkipOnInfBackoffAndGrowthInterval) {
  LossScalerOptions options;
  options.growth_interval = 3;
  LossScaler scaler(options);
  EXPECT_EQ(scaler.scale(), 65536.0);
  torch::Tensor w = torch::tensor({1.0f, -2.0f, 3.0f}).requires_grad_();
  const torch::Tensor x = torch::tensor({0.5f, 0.25f, -4.0f});
  NamedTensors params = {{"w", w}};
  auto backward = [&]() {
    w.mutable_grad() = torch::Tensor();
    scaler.Scale((w * x).sum()).backward();
  };
  backward();
  EXPECT_TRUE(torch::equal(w.grad(), x * 65536.0f));
  const double norm = ClipGradNorm(params, 0.0, 1.0 / scaler.scale());
  EXPECT_TRUE(torch::allclose(w.grad(), x));  // unscaled
  EXPECT_NEAR(norm, x.norm().item<double>(), 1e-6);
  EXPECT_TRUE(scaler.Update(std::isfinite(norm)));
  EXPECT_EQ(scaler.growth_tracker(), 1);

  backward();
  w.mutable_grad()[1] = std::numeric_limits<float>::infinity();  // overflow
  const double bad_norm = ClipGradNorm(params, 1.0, 1.0 / scaler.scale());
  EXPECT_FALSE(std::isfinite(bad_norm));
  EXPECT_FALSE(scaler.CountsAsBadStep(/*loss_finite=*/true));
  EXPECT_FALSE(scaler.Update(false));  // skip
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  for (int i = 0; i < 2; ++i) EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_TRUE(scaler.Update(true));  // 3rd finite step in a row: grow
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(LossScalerTest, BadStepsOnlyAtMinimumScaleOrNonFiniteLoss) {
  LossScalerOptions options;
  options.init_scale = 4;
  LossScaler scaler(options);
  EXPECT_TRUE(scaler.CountsAsBadStep(/*loss_finite=*/false));
  EXPECT_FALSE(scaler.CountsAsBadStep(true));
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 2);
  EXPECT_FALSE(scaler.CountsAsBadStep(true));
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1);  // min_scale
  EXPECT_TRUE(scaler.CountsAsBadStep(true));
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1);
}

TEST(LossScalerTest, RestoreValidates) {
  LossScaler scaler;
  ASSERT_TRUE(scaler.Restore(512, 7).ok());
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.growth_tracker(), 7);
  EXPECT_FALSE(scaler.Restore(0, 0).ok());
  EXPECT_FALSE(scaler.Restore(std::numeric_limits<double>::infinity(), 0).ok());
  EXPECT_FALSE(scaler.Restore(8, -1).ok());
}

}  // namespace
}  // namespace xlnet
