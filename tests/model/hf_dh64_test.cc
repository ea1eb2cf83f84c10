// XLNet with head size 64 against HuggingFace (tests/fixtures/hf_dh64, see
// its README): a random 2-layer model with 2 heads of 64, 80 tokens (more
// than one 64-row tile of the tensor-core kernels), 20 targets, memory of
// 40, padding, a permutation mask and bi_data.
//
// In fp32 on TestDevice() with TestAttention() every output and gradient is
// within 1e-4 of HF's relative to its largest value. On a GPU with the
// tensor-core kernels (attention `cuda`, bf16 and fp16 under autocast) the
// same comparisons hold at the precision of the compute dtype: each within
// a fixed bound, and within twice the error of LibTorch's own products in
// the same dtype (attention `unfused`) plus a small floor, so the kernels
// lose no more accuracy than the matrix products around them.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/attention.h"
#include "model/precision.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::ReadTensors;
using testing::TestAttention;
using testing::TestDevice;

std::string FixtureDir() {
  return std::string(XLNET_SOURCE_DIR) + "/tests/fixtures/hf_dh64";
}

// The bounds on any value's relative error under autocast: a few units of
// the dtype's rounding (2^-8 for bf16, 2^-11 for fp16) times the depth of
// the computation.
constexpr double kBf16Bound = 0.05;
constexpr double kFp16Bound = 0.01;

using Named = std::map<std::string, torch::Tensor>;

// Max |a - b| over max |b| (b the reference; 1 where b is all zeros).
double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (!a.sizes().equals(b.sizes())) return 1e30;
  const torch::Tensor x = a.to(torch::kCPU, torch::kDouble);
  const torch::Tensor y = b.to(torch::kCPU, torch::kDouble);
  const double scale = y.abs().max().item<double>();
  return (x - y).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

class HfDh64Test : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = ReadTensors(FixtureDir() + "/ref.safetensors");
    auto model = LoadPretrained(FixtureDir());
    ASSERT_TRUE(model.ok()) << model.status();
    weights_ = *model;
  }

  torch::Tensor In(const std::string& name, const torch::Device& device) {
    return ref_.at("in." + name).to(device);
  }

  // The fixture's weights in a model on `device` with `attention`.
  XLNetLMHeadModel Model(bool bi_data, const torch::Device& device,
                         const AttentionOptions& attention) {
    XLNetConfig config = weights_->config();
    config.bi_data = bi_data;
    XLNetLMHeadModel model(config);
    EXPECT_TRUE(LoadStateDict(*model, HfStateDict(*weights_), "hf_dh64").ok());
    model->to(device);
    model->transformer->SetAttention(attention);
    return model;
  }

  XLNetInputs Lm(const torch::Device& device, bool targets) {
    XLNetInputs x;
    x.input_ids = In("input_ids", device);
    x.token_type_ids = In("token_type_ids", device);
    x.attention_mask = In("attention_mask", device);
    x.perm_mask = In("perm_mask", device);
    if (targets) x.target_mapping = In("target_mapping", device);
    return x;
  }

  // Every compared value, under the reference's names, computed on `device`
  // with `attention` under autocast at `dtype` (none for fp32), in fp32 on
  // the CPU.
  Named Run(const torch::Device& device, const AttentionOptions& attention,
            torch::ScalarType dtype) {
    Named ours;
    const auto keep = [&](const std::string& name, const torch::Tensor& t) {
      ours[name] = t.detach().to(torch::kCPU, torch::kFloat);
    };
    auto model = Model(/*bi_data=*/false, device, attention);
    // The training path (dropout is 0): query stream, loss, memory and
    // every parameter's gradient.
    model->train();
    {
      torch::Tensor loss;
      {
        AutocastGuard autocast(device, dtype);
        const auto out = model->forward(Lm(device, true), {/*use_mems=*/true});
        keep("lm.logits", out.logits);
        for (size_t n = 0; n < out.new_mems.size(); ++n) {
          keep(absl::StrCat("lm.mems.", n), out.new_mems[n]);
        }
        loss = PartialPredictionLoss(out.logits, In("labels", device));
      }
      keep("lm.loss", loss);
      loss.backward();
      for (const auto& item : model->named_parameters()) {
        EXPECT_TRUE(item.value().grad().defined()) << item.key();
        if (item.value().grad().defined()) {
          keep("grad." + item.key(), item.value().grad());
        }
      }
    }
    model->eval();
    torch::NoGradGuard no_grad;
    AutocastGuard autocast(device, dtype);
    keep("content.logits", model->forward(Lm(device, false)).logits);
    XLNetInputs seg1;
    seg1.input_ids = In("input_ids", device);
    seg1.token_type_ids = In("token_type_ids", device);
    seg1.attention_mask = In("attention_mask", device);
    const auto first = model->transformer->forward(seg1, {/*use_mems=*/true});
    XLNetInputs seg2;
    seg2.input_ids = In("seg2.input_ids", device);
    seg2.token_type_ids = In("seg2.token_type_ids", device);
    seg2.mems = first.new_mems;
    keep("seg2.last_hidden_state",
         model->transformer->forward(seg2, {/*use_mems=*/true})
             .last_hidden_state);
    auto bi = Model(/*bi_data=*/true, device, attention);
    bi->eval();
    const auto out = bi->forward(Lm(device, true));
    keep("bi_data.logits", out.logits);
    keep("bi_data.loss",
         PartialPredictionLoss(out.logits, In("labels", device)));
    return ours;
  }

  // The relative errors of `ours` against HF's values, one per name; every
  // reference value is covered.
  std::map<std::string, double> Errors(const Named& ours) {
    std::map<std::string, double> errors;
    for (const auto& [name, ref] : ref_) {
      if (name.rfind("in.", 0) == 0) continue;
      const auto it = ours.find(name);
      EXPECT_TRUE(it != ours.end()) << "no value for " << name;
      if (it != ours.end()) errors[name] = RelativeError(it->second, ref);
    }
    EXPECT_EQ(errors.size() + 8, ref_.size());  // 8 inputs
    return errors;
  }

  Named ref_;
  XLNetLMHeadModel weights_{nullptr};
};

TEST_F(HfDh64Test, MatchesHuggingFaceInFp32) {
  if (TestDevice().is_cuda() && !torch::cuda::is_available()) {
    GTEST_SKIP() << "XLNET_TEST_DEVICE=cuda but no CUDA device";
  }
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, error] :
       Errors(Run(TestDevice(), TestAttention(), torch::kFloat))) {
    EXPECT_LT(error, 1e-4) << name;
    if (error >= worst) worst = error, worst_name = name;
  }
  std::printf("[ diff     ] fp32: worst relative error %.3g (%s)\n", worst,
              worst_name.c_str());
}

// bf16 autocast on the CPU (LibTorch's products, attention TestAttention())
// within the bound the tensor-core test below holds the kernels to.
TEST_F(HfDh64Test, Bf16AutocastStaysNearHuggingFace) {
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, error] :
       Errors(Run(torch::kCPU, TestAttention(), torch::kBFloat16))) {
    EXPECT_LT(error, kBf16Bound) << name;
    if (error >= worst) worst = error, worst_name = name;
  }
  std::printf("[ diff     ] bf16 (CPU): worst relative error %.3g (%s)\n",
              worst, worst_name.c_str());
}

// The tensor-core kernels in bf16 and fp16 (model and HF values, every
// gradient) against HF, with LibTorch's products in the same dtype
// (attention `unfused`, same device) as the measure of what the dtype
// costs.
TEST_F(HfDh64Test, TensorCoreKernelsMatchHuggingFace) {
  if (!CudaTensorCoreAttentionCompiled() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "no tensor-core attention kernels in this build or no GPU";
  }
  AttentionOptions tc, unfused;
  tc.impl = AttentionImpl::kCuda;
  unfused.impl = AttentionImpl::kUnfused;
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    const bool bf16 = dtype == torch::kBFloat16;
    SCOPED_TRACE(bf16 ? "bf16" : "fp16");
    const double bound = bf16 ? kBf16Bound : kFp16Bound;
    const auto kernel = Errors(Run(torch::kCUDA, tc, dtype));
    const auto products = Errors(Run(torch::kCUDA, unfused, dtype));
    for (const auto& [name, error] : kernel) {
      const double base = products.at(name);
      std::printf("[ diff     ] %s %s: tensor cores %.3g, unfused %.3g\n",
                  bf16 ? "bf16" : "fp16", name.c_str(), error, base);
      EXPECT_LT(error, bound) << name;
      EXPECT_LT(error, 2 * base + bound / 10) << name;
    }
  }
}

}  // namespace
}  // namespace xlnet
