// Activation checkpointing (XLNetModelImpl::SetActivationCheckpointing):
// with dropout on and the same seed, the loss, every gradient, the new mems
// and the RNG stream afterwards equal those of the ordinary forward/backward.
#include <gtest/gtest.h>

#include "model/precision.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::MakePlmInputs;
using testing::MaxAbsDiff;
using testing::ReadTensors;

constexpr double kTol = 1e-6;

struct StepResult {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
  std::vector<torch::Tensor> new_mems;
  // The next number the global generator gives after the step.
  double next_random = 0;
};

// One training step (forward, loss, backward) from a fixed RNG state.
StepResult Step(XLNetLMHeadModel& model, const XLNetInputs& x,
                const torch::Tensor& labels, bool checkpointing, uint64_t seed,
                torch::ScalarType dtype = torch::kFloat) {
  model->train();
  model->zero_grad();
  model->transformer->SetActivationCheckpointing(checkpointing);
  model->transformer->SetAttention(testing::TestAttention());
  torch::manual_seed(seed);
  StepResult r;
  torch::Tensor loss;
  {
    AutocastGuard autocast(torch::kCPU, dtype);
    XLNetLMOutputs out = model->forward(x, {/*use_mems=*/true});
    loss = PartialPredictionLoss(out.logits, labels);
    r.new_mems = out.new_mems;
  }
  loss.backward();
  r.loss = loss.item<double>();
  for (const auto& p : model->named_parameters()) {
    // Unused parameters (mask_emb without a query stream) have none.
    if (p.value().grad().defined()) r.grads[p.key()] = p.value().grad().clone();
  }
  r.next_random = torch::rand({1}).item<double>();
  return r;
}

void ExpectSame(const StepResult& plain, const StepResult& ckpt,
                double tol = kTol) {
  EXPECT_NEAR(plain.loss, ckpt.loss, tol);
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  EXPECT_GE(plain.grads.size(), 36u);
  double worst = 0;
  for (const auto& [name, g] : plain.grads) {
    ASSERT_TRUE(ckpt.grads.count(name)) << name;
    const double d = MaxAbsDiff(g, ckpt.grads.at(name));
    EXPECT_LE(d, tol) << name;
    worst = std::max(worst, d);
  }
  ASSERT_EQ(plain.new_mems.size(), ckpt.new_mems.size());
  for (size_t i = 0; i < plain.new_mems.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(plain.new_mems[i], ckpt.new_mems[i]), tol);
  }
  // Recomputation restored the generator: the run continues identically.
  EXPECT_EQ(plain.next_random, ckpt.next_random);
  std::printf("[ diff     ] loss %.3g, %zu grads worst max_abs_diff=%.3g\n",
              std::abs(plain.loss - ckpt.loss), plain.grads.size(), worst);
}

// The golden tiny model's weights with dropout 0.1.
XLNetLMHeadModel GoldenWithDropout() {
  auto golden = LoadPretrained(GoldenDir());
  EXPECT_TRUE(golden.ok()) << golden.status();
  XLNetConfig config = (*golden)->config();
  config.dropout = 0.1;
  XLNetLMHeadModel model(config);
  auto status = LoadStateDict(*model, HfStateDict(**golden), "golden");
  EXPECT_TRUE(status.ok()) << status;
  return model;
}

TEST(ActivationCheckpointTest, GoldenModelWithDropoutAndMems) {
  auto in = ReadTensors(GoldenDir() + "/inputs.safetensors");
  auto out = ReadTensors(GoldenDir() + "/outputs.safetensors");
  auto model = GoldenWithDropout();
  XLNetInputs x = testing::GoldenLmInputs(in);
  x.mems = {out.at("base.mems.0"), out.at("base.mems.1")};
  const torch::Tensor labels = in.at("labels");

  const StepResult plain = Step(model, x, labels, false, 7);
  const StepResult ckpt = Step(model, x, labels, true, 7);
  ExpectSame(plain, ckpt);
  // Dropout really is on: another seed gives another loss.
  const StepResult other = Step(model, x, labels, true, 8);
  EXPECT_GT(std::abs(other.loss - plain.loss), 1e-4);
}

TEST(ActivationCheckpointTest, RandomTwoLayerModelBiDataSegmentsPadding) {
  XLNetConfig config = testing::TinyConfig();
  config.dropout = 0.2;
  config.bi_data = true;
  config.ff_activation = "gelu_new";
  torch::manual_seed(3);
  XLNetLMHeadModel model(config);
  XLNetInputs x = MakePlmInputs(/*b=*/4, /*l=*/12, /*p=*/4, config.vocab_size,
                                {0, 2, 0, 3}, /*seed=*/11);
  x.mems = {torch::randn({5, 4, config.d_model}),
            torch::randn({5, 4, config.d_model})};
  const torch::Tensor labels = torch::randint(0, config.vocab_size, {4, 4});
  ExpectSame(Step(model, x, labels, false, 21),
             Step(model, x, labels, true, 21));
}

TEST(ActivationCheckpointTest, ContentStreamOnly) {
  XLNetConfig config = testing::TinyConfig();
  config.dropout = 0.1;
  torch::manual_seed(4);
  XLNetLMHeadModel model(config);
  XLNetInputs x = MakePlmInputs(2, 10, 3, config.vocab_size, {}, 12);
  x.perm_mask = torch::Tensor();
  x.target_mapping = torch::Tensor();  // logits on the content stream [B, L, V]
  const torch::Tensor labels = torch::randint(0, config.vocab_size, {2, 10});
  ExpectSame(Step(model, x, labels, false, 5), Step(model, x, labels, true, 5));
}

TEST(ActivationCheckpointTest, Bf16AutocastIsRestoredForTheRecomputation) {
  XLNetConfig config = testing::TinyConfig();
  config.dropout = 0.1;
  torch::manual_seed(6);
  XLNetLMHeadModel model(config);
  XLNetInputs x = MakePlmInputs(2, 10, 3, config.vocab_size, {1, 0}, 13);
  const torch::Tensor labels = torch::randint(0, config.vocab_size, {2, 3});
  const StepResult plain = Step(model, x, labels, false, 9, torch::kBFloat16);
  const StepResult ckpt = Step(model, x, labels, true, 9, torch::kBFloat16);
  // bf16 gradients are summed in a different order through the recomputed
  // graph, so equal only up to bf16 rounding of partial sums.
  constexpr double kBf16Tol = 2e-5;
  ExpectSame(plain, ckpt, kBf16Tol);
  // Which is far below what computing in fp32 instead of bf16 changes, so a
  // recomputation outside the forward's autocast would be caught.
  const StepResult fp32 = Step(model, x, labels, false, 9, torch::kFloat);
  double dtype_effect = 0;
  for (const auto& [name, g] : plain.grads) {
    dtype_effect = std::max(dtype_effect, MaxAbsDiff(g, fp32.grads.at(name)));
  }
  EXPECT_GT(dtype_effect, 50 * kBf16Tol);
}

TEST(ActivationCheckpointTest, NoGradForwardIsUnchanged) {
  XLNetConfig config = testing::TinyConfig();
  torch::manual_seed(5);
  XLNetLMHeadModel model(config);
  model->eval();
  XLNetInputs x = MakePlmInputs(2, 10, 3, config.vocab_size, {}, 14);
  torch::NoGradGuard no_grad;
  const torch::Tensor a = model->forward(x).logits;
  model->transformer->SetActivationCheckpointing(true);
  const torch::Tensor b = model->forward(x).logits;
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(b.requires_grad());
}

}  // namespace
}  // namespace xlnet
