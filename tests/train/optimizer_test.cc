#include "train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

// Step(lr, skip) on `device` (fp32 parameters): a zero skip is Step(lr); a
// nonzero one leaves the weights, moments and count as they were, so later
// steps match a run that never saw the skipped step.
void ExpectSkipLeavesEverythingAsItWas(const torch::Device& device,
                                       bool decides_on_device) {
  TrainConfig t;
  t.weight_decay = 0.1;
  const auto on_device = [&](const NamedTensors& params) {
    NamedTensors out;
    for (const auto& [name, p] : params) {
      out.emplace_back(
          name,
          p.detach().to(device, torch::kFloat).contiguous().requires_grad_());
    }
    return out;
  };
  NamedTensors a = on_device(MakeParams());
  AdamW plain(a, t);
  NamedTensors b = on_device(MakeParams());
  AdamW flagged(b, t);
  const auto set_grads = [&](const NamedTensors& params, int step) {
    SetGrads(params, step);
    for (const auto& [name, p] : params) {
      p.mutable_grad() = p.grad().to(device, torch::kFloat);
    }
  };
  const auto go = torch::zeros({}, torch::TensorOptions().device(device));
  const auto skip = torch::ones({1}, torch::TensorOptions().device(device));
  for (int step = 0; step < 4; ++step) {
    set_grads(a, step);
    plain.Step(1e-2);
    if (step == 2) {
      // A skipped step: NaN gradients, which must touch nothing.
      set_grads(b, step);
      for (auto& [name, p] : b) p.mutable_grad().fill_(NAN);
      EXPECT_EQ(flagged.DecidesOnDevice(), decides_on_device);
      flagged.Step(1e-2, skip);
      flagged.Settle(true);
      flagged.ZeroGrad();
      EXPECT_EQ(flagged.steps(), 2);
    }
    set_grads(b, step);
    flagged.Step(1e-2, go);
    flagged.Settle(false);
  }
  EXPECT_EQ(flagged.steps(), plain.steps());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  }
  const NamedTensors x = plain.StateTensors(), y = flagged.StateTensors();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(torch::equal(x[i].second, y[i].second)) << x[i].first;
  }
  EXPECT_THROW(flagged.Settle(false), c10::Error);  // nothing unsettled
}

// On the CPU the skip is read at once (the multi-tensor ops).
TEST(AdamWTest, SkipFlagLeavesEverythingAsItWas) {
  ExpectSkipLeavesEverythingAsItWas(torch::kCPU, /*decides_on_device=*/false);
}

// On CUDA with LibTorch >= 2 the fused kernel takes it as found_inf and the
// step count advances by 1 - skip on the device; Settle books it.
TEST(AdamWCudaTest, SkipFlagLeavesEverythingAsItWas) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ExpectSkipLeavesEverythingAsItWas(
      torch::Device(torch::kCUDA, 0),
      /*decides_on_device=*/TORCH_VERSION_MAJOR >= 2);
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

// A model-like set of fp32 parameters: three layers (so layer_decay gives
// three rates), decayed weights and undecayed biases/LayerNorms, and
// parameters outside the layers.
NamedTensors MakeLayeredParams() {
  torch::manual_seed(11);
  NamedTensors out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    out.emplace_back(name, torch::randn(shape).requires_grad_());
  };
  add("transformer.word_embedding.weight", {10, 4});
  for (int l = 0; l < 3; ++l) {
    const std::string layer = "transformer.layer." + std::to_string(l);
    add(layer + ".rel_attn.q", {4, 2, 2});
    add(layer + ".rel_attn.r_w_bias", {2, 2});
    add(layer + ".rel_attn.layer_norm.weight", {4});
    add(layer + ".ff.layer_1.weight", {4, 8});
    add(layer + ".ff.layer_1.bias", {8});
  }
  add("lm_loss.bias", {10});
  return out;
}

// Gradients of a step that differ per parameter and step; parameter
// `skip` (if any) gets none, as a parameter unused by a step would.
void SetLayeredGrads(const NamedTensors& params, int step, int skip = -1) {
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor& p = const_cast<torch::Tensor&>(params[i].second);
    if (static_cast<int>(i) == skip) {
      p.mutable_grad() = torch::Tensor();
      continue;
    }
    p.mutable_grad() =
        torch::cos(torch::arange(p.numel(), torch::kFloat).reshape(p.sizes()) *
                       (0.3 * step + 1) +
                   static_cast<float>(i)) *
        (1.0f + static_cast<float>(i % 3));
  }
}

// The update tensor by tensor, as AdamW::Step did before it was grouped:
// the reference the multi-tensor ops must equal bit for bit.
struct PerTensorAdamW {
  PerTensorAdamW(const NamedTensors& params, const AdamW& like,
                 const TrainConfig& t)
      : params(params),
        beta1(t.adam_beta1),
        beta2(t.adam_beta2),
        eps(t.adam_epsilon) {
    for (size_t i = 0; i < params.size(); ++i) {
      m.push_back(torch::zeros_like(params[i].second));
      v.push_back(torch::zeros_like(params[i].second));
      lr_scale.push_back(like.LrScale(i));
      wd.push_back(like.WeightDecay(i));
    }
  }
  void Step(double lr) {
    torch::NoGradGuard no_grad;
    ++steps;
    const double bias1 = 1.0 - std::pow(beta1, steps);
    const double bias2 = 1.0 - std::pow(beta2, steps);
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor p = params[i].second;
      const torch::Tensor& g = p.grad();
      if (!g.defined()) continue;
      const double step_lr = lr * lr_scale[i];
      m[i].mul_(beta1).add_(g, 1.0 - beta1);
      v[i].mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      if (wd[i] != 0.0) p.mul_(1.0 - step_lr * wd[i]);
      const torch::Tensor denom = (v[i].sqrt() / std::sqrt(bias2)).add_(eps);
      p.addcdiv_(m[i], denom, -step_lr / bias1);
    }
  }
  NamedTensors params;
  double beta1, beta2, eps;
  std::vector<torch::Tensor> m, v;
  std::vector<double> lr_scale, wd;
  int64_t steps = 0;
};

NamedTensors CloneParams(const NamedTensors& params) {
  NamedTensors out;
  for (const auto& [name, p] : params) {
    out.emplace_back(name, p.detach().clone().requires_grad_());
  }
  return out;
}

TEST(AdamWTest, GroupedStepEqualsPerTensorLoopBitForBit) {
  testing::TempDir tmp;
  TrainConfig t;
  t.weight_decay = 0.05;
  t.layer_decay = 0.75;
  t.adam_beta1 = 0.9;
  t.adam_beta2 = 0.98;
  t.adam_epsilon = 1e-6;
  NamedTensors ours = MakeLayeredParams();
  NamedTensors theirs = CloneParams(ours);
  NamedTensors resumed = CloneParams(ours);
  AdamW opt(ours, t);
  // Groups: 3 rates (layers 0 and 1; the top layer's rate 1 is that of the
  // parameters outside the layers) x (decayed, undecayed), all fp32 on the
  // CPU.
  EXPECT_EQ(opt.num_groups(), 6u);
  PerTensorAdamW reference(theirs, opt, t);
  std::unique_ptr<AdamW> second;
  for (int step = 0; step < 6; ++step) {
    // Step 2 leaves one parameter without a gradient.
    const int skip = step == 2 ? 4 : -1;
    const double lr = 1e-2 * (step + 1);
    SetLayeredGrads(ours, step, skip);
    SetLayeredGrads(theirs, step, skip);
    opt.Step(lr);
    reference.Step(lr);
    for (size_t i = 0; i < ours.size(); ++i) {
      ASSERT_TRUE(torch::equal(ours[i].second, theirs[i].second))
          << "step " << step << " " << ours[i].first;
    }
    if (step == 2) {
      // Resume from the state after 3 steps into copies of the weights.
      const std::string path = tmp.Join("optimizer.safetensors");
      ASSERT_TRUE(WriteSafetensors(path, opt.StateTensors()).ok());
      for (size_t i = 0; i < ours.size(); ++i) {
        torch::NoGradGuard no_grad;
        resumed[i].second.copy_(ours[i].second);
      }
      second = std::make_unique<AdamW>(resumed, t);
      auto file = SafetensorsFile::Open(path);
      ASSERT_TRUE(file.ok());
      ASSERT_TRUE(second->LoadState(*file).ok());
    } else if (second) {
      SetLayeredGrads(resumed, step, skip);
      second->Step(lr);
    }
  }
  EXPECT_EQ(opt.steps(), 6);
  EXPECT_EQ(second->steps(), 6);
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::equal(ours[i].second, resumed[i].second))
        << ours[i].first;
    EXPECT_FALSE(torch::equal(ours[i].second, MakeLayeredParams()[i].second))
        << ours[i].first << " never moved";
  }
}

// The global norm and clip as they were computed before the multi-tensor
// ops: each gradient's norm in fp64 summed in fp64, and a host factor.
double PerTensorNorm(const NamedTensors& params) {
  double sum = 0;
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    const double n = p.grad().to(torch::kFloat64).norm().item<double>();
    sum += n * n;
  }
  return std::sqrt(sum);
}

TEST(ClipTest, ForeachNormAndClipMatchPerTensor) {
  NamedTensors params = MakeLayeredParams();
  // A bf16 gradient group beside the fp32 ones.
  params.emplace_back("bf16",
                      torch::zeros({300}, torch::kBFloat16).requires_grad_());
  SetLayeredGrads(params, 1, /*skip=*/2);
  params.back().second.mutable_grad() =
      torch::linspace(-3, 5, 300).to(torch::kBFloat16);
  const double old_norm = PerTensorNorm(params);
  const double norm = GlobalGradNorm(params);
  EXPECT_NEAR(norm, old_norm, 1e-6 * old_norm);

  std::vector<torch::Tensor> before;
  for (const auto& [name, p] : params) {
    before.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  const double scale = 0.25, max_norm = 0.5 * scale * old_norm;
  const double returned = ClipGradNorm(params, max_norm, scale);
  EXPECT_NEAR(returned, scale * old_norm, 1e-6 * scale * old_norm);
  const double factor = scale * max_norm / (scale * old_norm + 1e-6);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!before[i].defined()) {
      EXPECT_FALSE(params[i].second.grad().defined());
      continue;
    }
    const torch::Tensor expected =
        before[i].to(torch::kFloat64) * factor;  // the old host factor
    const double tol =
        params[i].second.scalar_type() == torch::kBFloat16 ? 1e-2 : 1e-6;
    EXPECT_TRUE(torch::allclose(params[i].second.grad().to(torch::kFloat64),
                                expected, tol, 1e-12))
        << params[i].first;
  }
  EXPECT_NEAR(GlobalGradNorm(params), max_norm, 1e-5 * max_norm);
}

// The trainer's former host rule for the clip factor, the reference of the
// device one.
double HostClipFactor(double scaled_norm, double scale, double max_norm) {
  if (max_norm > 0 && std::isfinite(scaled_norm) && scaled_norm > max_norm) {
    return scale * (max_norm / (scaled_norm + 1e-6));
  }
  return scale;
}

TEST(ClipTest, DeviceFactorEqualsHostFactor) {
  for (const double norm : {0.5, 2.0, 1e30, std::nan(""),
                            std::numeric_limits<double>::infinity()}) {
    for (const double max_norm : {0.0, 1.0}) {
      const double host = HostClipFactor(norm, 0.125, max_norm);
      const double device =
          ClipFactor(torch::tensor(norm, torch::kFloat64),
                     torch::tensor(0.125, torch::kFloat64), max_norm)
              .item<double>();
      EXPECT_EQ(host, device) << norm << " " << max_norm;
    }
  }
  EXPECT_EQ(HostClipFactor(2.0, 0.125, 1.0), 0.125 * (1.0 / (2.0 + 1e-6)));
  EXPECT_EQ(HostClipFactor(std::numeric_limits<double>::infinity(), 0.125, 1.0),
            0.125);
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
