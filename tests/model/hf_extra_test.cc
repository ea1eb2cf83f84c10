// XLNet against HuggingFace on the cases the shared golden set lacks
// (tests/fixtures/hf_extra, see its README): attn_type "uni" (with and
// without same_length), clamp_len (also with bi_data), relu and reuse_len,
// each through two segments with memory where HF recorded them.
//
// XLNET_TEST_DEVICE=cuda runs the same comparisons on a GPU (fp32; the
// tolerance is unchanged), which is how scripts/gpu_check.sh checks the CUDA
// path. Tolerance 1e-4 throughout, as the golden tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "absl/strings/str_cat.h"

#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::ReadTensors;
using testing::ReportDiff;
using testing::TestDevice;

constexpr double kTol = 1e-4;

class HfExtraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestDevice().is_cuda() && !torch::cuda::is_available()) {
      GTEST_SKIP() << "XLNET_TEST_DEVICE=cuda but no CUDA device";
    }
    in_ = ReadTensors(GoldenDir() + "/inputs.safetensors");
    ref_ = ReadTensors(std::string(XLNET_SOURCE_DIR) +
                       "/tests/fixtures/hf_extra/hf_extra.safetensors");
    golden_ = LoadPretrained(GoldenDir()).value();
  }

  // The golden weights in a model with `edit` applied to its config.
  XLNetLMHeadModel Model(const std::function<void(XLNetConfig&)>& edit) {
    XLNetConfig config = golden_->config();
    edit(config);
    XLNetLMHeadModel model(config);
    EXPECT_TRUE(LoadStateDict(*model, HfStateDict(*golden_), "golden").ok());
    model->eval();
    model->to(TestDevice());
    model->transformer->SetAttention(testing::TestAttention());
    return model;
  }

  torch::Tensor In(const std::string& name) {
    return in_.at(name).to(TestDevice());
  }

  // HF's "uni" cases ran without attention_mask/perm_mask (see README).
  XLNetInputs Seg1(bool masks) {
    XLNetInputs x;
    x.input_ids = In("input_ids");
    x.token_type_ids = In("token_type_ids");
    if (masks) x.attention_mask = In("attention_mask");
    return x;
  }
  XLNetInputs Seg2(bool masks, std::vector<torch::Tensor> mems) {
    XLNetInputs x;
    x.input_ids = In("seg2.input_ids");
    x.token_type_ids = In("seg2.token_type_ids");
    if (masks) x.attention_mask = In("seg2.attention_mask");
    x.mems = std::move(mems);
    return x;
  }

  double Diff(const std::string& name, const torch::Tensor& ours) {
    return ReportDiff(name, ours.to(torch::kCPU), ref_.at(name));
  }

  // Backbone outputs, mems, the second segment and (lm) the query-stream
  // and content-stream logits of case `name`.
  void CheckCase(const std::string& name,
                 const std::function<void(XLNetConfig&)>& edit,
                 bool two_segments, bool lm) {
    SCOPED_TRACE(name);
    auto model = Model(edit);
    const bool masks = model->config().attn_type == "bi";
    torch::NoGradGuard no_grad;
    auto out = model->transformer->forward(Seg1(masks), {/*use_mems=*/true});
    EXPECT_LT(Diff(name + ".out.last_hidden_state", out.last_hidden_state),
              kTol);
    ASSERT_EQ(out.new_mems.size(), 2u);
    for (int n = 0; n < 2; ++n) {
      EXPECT_LT(Diff(absl::StrCat(name, ".out.mems.", n), out.new_mems[n]),
                kTol);
    }
    if (two_segments) {
      auto out2 = model->transformer->forward(Seg2(masks, out.new_mems),
                                              {/*use_mems=*/true});
      EXPECT_LT(Diff(name + ".out.seg2.last_hidden_state",
                     out2.last_hidden_state),
                kTol);
      for (int n = 0; n < 2; ++n) {
        EXPECT_LT(Diff(absl::StrCat(name, ".out.seg2.mems.", n),
                       out2.new_mems[n]),
                  kTol);
      }
    }
    if (lm) {
      XLNetInputs x = Seg1(masks);
      if (masks) x.perm_mask = In("perm_mask");
      x.target_mapping = In("target_mapping");
      for (bool all_positions : {false, true}) {
        SCOPED_TRACE(all_positions ? "L x K query stream" : "P x K");
        auto q = model->forward(x, {/*use_mems=*/false, all_positions});
        EXPECT_LT(Diff(name + ".out.lm.logits", q.logits), kTol);
        auto loss = PartialPredictionLoss(q.logits, In("labels"));
        EXPECT_NEAR(loss.item<double>(),
                    ref_.at(name + ".out.lm.loss").item<double>(), kTol);
      }
      XLNetInputs c = Seg1(masks);
      if (masks) c.perm_mask = In("perm_mask");
      EXPECT_LT(Diff(name + ".out.lm_content.logits", model->forward(c).logits),
                kTol);
    }
  }

  std::map<std::string, torch::Tensor> in_, ref_;
  XLNetLMHeadModel golden_{nullptr};
};

TEST_F(HfExtraTest, UnidirectionalAttention) {
  CheckCase("uni", [](XLNetConfig& c) { c.attn_type = "uni"; }, true, true);
}

TEST_F(HfExtraTest, UnidirectionalSameLength) {
  CheckCase(
      "uni_same",
      [](XLNetConfig& c) {
        c.attn_type = "uni";
        c.same_length = true;
      },
      true, true);
}

TEST_F(HfExtraTest, ClampLen) {
  CheckCase("clamp", [](XLNetConfig& c) { c.clamp_len = 3; }, true, true);
}

TEST_F(HfExtraTest, ClampLenWithBiData) {
  CheckCase(
      "clamp_bi_data",
      [](XLNetConfig& c) {
        c.clamp_len = 3;
        c.bi_data = true;
      },
      false, true);
}

TEST_F(HfExtraTest, ReluFeedForward) {
  CheckCase("relu", [](XLNetConfig& c) { c.ff_activation = "relu"; }, false,
            false);
}

TEST_F(HfExtraTest, ReuseLenMemory) {
  CheckCase("reuse", [](XLNetConfig& c) { c.reuse_len = 6; }, true, false);
}

}  // namespace
}  // namespace xlnet
