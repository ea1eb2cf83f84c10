// XLNet against HuggingFace's outputs and gradients on the tiny golden model
// (tests/fixtures/golden_tiny, see its README). Tolerance 1e-4 throughout.
// XLNET_TEST_DEVICE=cuda runs them on a GPU (with XLNET_TEST_ATTENTION=cuda
// through the fused attention kernel).
#include <gtest/gtest.h>

#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::LoadGoldenModel;
using testing::MaxAbsDiff;
using testing::ReportDiff;
using testing::ReadTensors;
using testing::TestDevice;

constexpr double kTol = 1e-4;

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestDevice().is_cuda() && !torch::cuda::is_available()) {
      GTEST_SKIP() << "XLNET_TEST_DEVICE=cuda but no CUDA device";
    }
    in_ = ReadTensors(GoldenDir() + "/inputs.safetensors");
    for (auto& [name, t] : in_) t = t.to(TestDevice());
    out_ = ReadTensors(GoldenDir() + "/outputs.safetensors");
  }
  XLNetInputs Base() {
    XLNetInputs x;
    x.input_ids = in_.at("input_ids");
    x.token_type_ids = in_.at("token_type_ids");
    x.attention_mask = in_.at("attention_mask");
    return x;
  }
  XLNetInputs Lm() {
    XLNetInputs x = Base();
    x.perm_mask = in_.at("perm_mask");
    x.target_mapping = in_.at("target_mapping");
    return x;
  }
  XLNetInputs Seg2(std::vector<torch::Tensor> mems) {
    XLNetInputs x;
    x.input_ids = in_.at("seg2.input_ids");
    x.token_type_ids = in_.at("seg2.token_type_ids");
    x.attention_mask = in_.at("seg2.attention_mask");
    x.mems = std::move(mems);
    return x;
  }
  std::vector<torch::Tensor> GoldenMems(const std::string& prefix) {
    return {out_.at(prefix + ".0").to(TestDevice()),
            out_.at(prefix + ".1").to(TestDevice())};
  }
  std::map<std::string, torch::Tensor> in_, out_;
};

TEST_F(GoldenTest, ContentStreamAndMems) {
  auto model = LoadGoldenModel();
  torch::NoGradGuard no_grad;
  auto out = model->transformer->forward(Base(), {/*use_mems=*/true});
  double diff = ReportDiff("base.last_hidden_state", out.last_hidden_state, out_.at("base.last_hidden_state"));
  RecordProperty("max_abs_diff", std::to_string(diff));
  EXPECT_LT(diff, kTol) << "base.last_hidden_state (padded rows included)";
  ASSERT_EQ(out.new_mems.size(), 2u);
  for (int n = 0; n < 2; ++n) {
    EXPECT_LT(ReportDiff("base.mems." + std::to_string(n), out.new_mems[n], out_.at("base.mems." + std::to_string(n))), kTol);
  }
  EXPECT_FALSE(out.query_hidden_state.defined());
}

TEST_F(GoldenTest, QueryStreamLogitsLossMems) {
  auto model = LoadGoldenModel();
  torch::NoGradGuard no_grad;
  for (bool all_positions : {false, true}) {
    SCOPED_TRACE(all_positions ? "HF-style L x K query stream" : "P x K query stream");
    const std::string tag = all_positions ? "[all-L] " : "[P] ";
    auto out = model->forward(Lm(), {/*use_mems=*/true, all_positions});
    double diff = ReportDiff(tag + "lm.logits", out.logits, out_.at("lm.logits"));
    EXPECT_LT(diff, kTol) << "lm.logits";
    auto loss = PartialPredictionLoss(out.logits, in_.at("labels"));
    ReportDiff(tag + "lm.loss", loss, out_.at("lm.loss"));
    EXPECT_NEAR(loss.item<double>(), out_.at("lm.loss").item<double>(), kTol);
    for (int n = 0; n < 2; ++n) {
      EXPECT_LT(ReportDiff(tag + "lm.mems." + std::to_string(n), out.new_mems[n], out_.at("lm.mems." + std::to_string(n))), kTol);
    }
  }
}

TEST_F(GoldenTest, SecondSegmentOverMems) {
  auto model = LoadGoldenModel();
  torch::NoGradGuard no_grad;
  // From HF's mems, and from our own first-segment mems.
  auto ours = model->transformer->forward(Base(), {true}).new_mems;
  for (const auto& mems : {GoldenMems("base.mems"), ours}) {
    auto out = model->transformer->forward(Seg2(mems), {true});
    EXPECT_LT(ReportDiff("seg2.last_hidden_state", out.last_hidden_state, out_.at("seg2.last_hidden_state")), kTol);
    for (int n = 0; n < 2; ++n) {
      EXPECT_LT(ReportDiff("seg2.mems." + std::to_string(n), out.new_mems[n], out_.at("seg2.mems." + std::to_string(n))), kTol);
    }
  }
}

TEST_F(GoldenTest, LmHeadOnContentStream) {
  auto model = LoadGoldenModel();
  torch::NoGradGuard no_grad;
  auto out = model->forward(Base());
  EXPECT_LT(ReportDiff("lm_content.logits", out.logits, out_.at("lm_content.logits")), kTol);
}

TEST_F(GoldenTest, BiData) {
  auto model = LoadGoldenModel("config_bi_data.json");
  ASSERT_TRUE(model->config().bi_data);
  torch::NoGradGuard no_grad;
  for (bool all_positions : {false, true}) {
    auto lm = model->forward(Lm(), {false, all_positions});
    EXPECT_LT(ReportDiff(all_positions ? "[all-L] bi_data.lm.logits" : "[P] bi_data.lm.logits", lm.logits, out_.at("bi_data.lm.logits")), kTol);
  }
  auto base = model->transformer->forward(Base(), {true});
  EXPECT_LT(ReportDiff("bi_data.base.last_hidden_state", base.last_hidden_state, out_.at("bi_data.base.last_hidden_state")), kTol);
  auto seg2 = model->transformer->forward(Seg2(base.new_mems), {true});
  EXPECT_LT(ReportDiff("bi_data.seg2.last_hidden_state", seg2.last_hidden_state, out_.at("bi_data.seg2.last_hidden_state")), kTol);
}

TEST_F(GoldenTest, GradientsOfLossWrtEveryParameter) {
  auto grads = ReadTensors(GoldenDir() + "/grads.safetensors");
  ASSERT_EQ(grads.size(), 37u);
  for (bool all_positions : {false, true}) {
    SCOPED_TRACE(all_positions ? "HF-style L x K query stream" : "P x K query stream");
    auto model = LoadGoldenModel();
    model->train();  // dropout is 0 in the golden config
    auto out = model->forward(Lm(), {/*use_mems=*/false, all_positions});
    auto loss = PartialPredictionLoss(out.logits, in_.at("labels"));
    loss.backward();
    auto params = model->named_parameters();
    EXPECT_EQ(params.size(), grads.size());
    double worst = 0;
    for (const auto& item : params) {
      ASSERT_TRUE(grads.count(item.key())) << item.key();
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      double diff = MaxAbsDiff(item.value().grad(), grads.at(item.key()));
      EXPECT_LT(diff, kTol) << item.key();
      worst = std::max(worst, diff);
    }
    std::printf("[ diff     ] %sgrads (37 params) worst max_abs_diff=%.3g\n",
                all_positions ? "[all-L] " : "[P] ", worst);
  }
}

}  // namespace
}  // namespace xlnet
