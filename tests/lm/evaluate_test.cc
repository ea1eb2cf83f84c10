// EvaluateLm's three modes against one long forward over the whole text,
// for both streams. fp32 sums of ~40 log-probabilities: agreement to 1e-4
// nats in total.
#include "lm/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tests/lm/lm_test_util.h"

namespace xlnet {
namespace {

using testing::IdsRow;
using testing::RandomIds;
using testing::TinyLm;

// Summed NLL of tokens 1..N-1 from one forward over the whole text.
double LongForwardNll(XLNetLMHeadModel& model,
                      const std::vector<int32_t>& ids) {
  const LmStream stream = ResolveStream(LmStream::kAuto, model->config());
  const auto row = IdsRow(ids);
  const int64_t n = row.size(1);
  LmForwardOptions o;
  o.stream = stream;
  torch::Tensor logits, targets;
  if (stream == LmStream::kContent) {
    logits = LmForward(*model, row.narrow(1, 0, n - 1), LmMemory(), {}, o)
                 .logits;               // [1, N-1, V]
    targets = row.narrow(1, 1, n - 1);  // [1, N-1]
  } else {
    logits = LmForward(*model, row, LmMemory(), {}, o)
                 .logits.narrow(1, 1, n - 1);  // position 0 has no context
    targets = row.narrow(1, 1, n - 1);
  }
  auto logp = torch::log_softmax(logits.to(torch::kDouble), -1);
  return -logp.gather(-1, targets.unsqueeze(-1)).sum().item<double>();
}

LmEvalResult Eval(XLNetLMHeadModel& model, const std::vector<int32_t>& ids,
                  LmEvalMode mode, int64_t l, int64_t m, int64_t batch = 4,
                  const std::vector<int32_t>& bytes = {}) {
  LmEvalOptions o;
  o.mode = mode;
  o.seq_len = l;
  o.mem_len = m;
  o.batch_size = batch;
  auto r = EvaluateLm(model, ids, bytes, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : LmEvalResult();
}

class EvaluateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EvaluateTest, ModesAgreeWithOneLongForwardWhenTheyCoverTheText) {
  XLNetLMHeadModel model = TinyLm(GetParam());
  const std::vector<int32_t> ids = RandomIds(41, 50, 11);
  const double reference = LongForwardNll(model, ids);
  // memory: segments of 8 over a memory that holds the whole text.
  for (const int64_t l : {1, 8, 16}) {
    const LmEvalResult r = Eval(model, ids, LmEvalMode::kMemory, l, 48);
    EXPECT_EQ(r.tokens, 40);
    EXPECT_NEAR(r.nll, reference, 1e-4) << "memory L=" << l;
    const int64_t n_in =
        static_cast<int64_t>(ids.size()) - (GetParam() == "uni" ? 1 : 0);
    EXPECT_EQ(r.forwards, (n_in + l - 1) / l);
  }
  // sliding with windows at least as long as the text; batch sizes that
  // do and do not divide the number of windows.
  for (const int64_t batch : {1, 3, 64}) {
    const LmEvalResult r = Eval(model, ids, LmEvalMode::kSliding, 45, 0, batch);
    EXPECT_EQ(r.tokens, 40);
    EXPECT_NEAR(r.nll, reference, 1e-4) << "sliding batch " << batch;
  }
  // none with one segment covering the text is the long forward too.
  EXPECT_NEAR(Eval(model, ids, LmEvalMode::kNone, 41, 0).nll, reference, 1e-4);
  // Shorter segments fragment the context: a different NLL.
  const LmEvalResult none = Eval(model, ids, LmEvalMode::kNone, 8, 0);
  EXPECT_EQ(none.tokens, 40);
  EXPECT_GT(std::abs(none.nll - reference), 1e-2);
  // sliding with short windows and memory with a short memory lose
  // context too, and differ from none (they keep more of it).
  const LmEvalResult sliding = Eval(model, ids, LmEvalMode::kSliding, 8, 0);
  const LmEvalResult memory = Eval(model, ids, LmEvalMode::kMemory, 8, 8);
  EXPECT_GT(std::abs(sliding.nll - reference), 1e-2);
  EXPECT_GT(std::abs(memory.nll - reference), 1e-2);
  EXPECT_GT(std::abs(memory.nll - none.nll), 1e-2);
  EXPECT_TRUE(std::isfinite(sliding.Perplexity()));
}

INSTANTIATE_TEST_SUITE_P(Streams, EvaluateTest, ::testing::Values("uni", "bi"));

TEST(EvaluateLmTest, SlidingWindowsMatchSeparateForwards) {
  // Each sliding prediction equals a forward over exactly its window (no
  // padding), checked token by token against a hand loop.
  XLNetLMHeadModel model = TinyLm("uni");
  const std::vector<int32_t> ids = RandomIds(20, 50, 12);
  const int64_t l = 6;
  double expected = 0;
  LmForwardOptions o;
  o.stream = LmStream::kContent;
  o.last_only = true;
  for (int64_t p = 0; p + 1 < 20; ++p) {
    const int64_t begin = std::max<int64_t>(0, p - l + 1);
    std::vector<int32_t> window(ids.begin() + begin, ids.begin() + p + 1);
    auto logits = LmForward(*model, IdsRow(window), LmMemory(), {}, o).logits;
    expected -=
        torch::log_softmax(logits.to(torch::kDouble), -1)[0][0][ids[p + 1]]
            .item<double>();
  }
  EXPECT_NEAR(Eval(model, ids, LmEvalMode::kSliding, l, 0, 5).nll, expected,
              1e-4);
}

TEST(EvaluateLmTest, BytesAndDerivedMetrics) {
  XLNetLMHeadModel model = TinyLm("uni");
  const std::vector<int32_t> ids = RandomIds(30, 50, 13);
  std::vector<int32_t> bytes(50);
  for (int i = 0; i < 50; ++i) bytes[i] = i % 5;
  int64_t expected = 0;
  for (size_t t = 1; t < ids.size(); ++t) expected += bytes[ids[t]];
  for (const LmEvalMode mode :
       {LmEvalMode::kMemory, LmEvalMode::kNone, LmEvalMode::kSliding}) {
    const LmEvalResult r = Eval(model, ids, mode, 7, 7, 4, bytes);
    EXPECT_EQ(r.bytes, expected) << EnumName(mode);
    EXPECT_NEAR(r.Perplexity(), std::exp(r.nll / 29), 1e-9);
    EXPECT_NEAR(r.BitsPerByte(), r.nll / std::log(2.0) / expected, 1e-12);
    EXPECT_GT(r.seconds, 0);
  }
}

TEST(EvaluateLmTest, SameLengthAndClampLenRun) {
  // same_length (memory mode only) and clamp_len change the numbers but
  // keep them finite; without memory, modes none and sliding ignore
  // same_length (it would leave each token only itself).
  XLNetLMHeadModel model = TinyLm("uni");
  XLNetConfig config = model->config();
  config.same_length = true;
  config.clamp_len = 4;
  XLNetLMHeadModel other = CopyWithConfig(model, config);
  const std::vector<int32_t> ids = RandomIds(30, 50, 14);
  const LmEvalResult memory = Eval(other, ids, LmEvalMode::kMemory, 8, 8);
  const LmEvalResult none = Eval(other, ids, LmEvalMode::kNone, 8, 0);
  EXPECT_TRUE(std::isfinite(memory.nll));
  config.same_length = false;
  XLNetLMHeadModel clamp_only = CopyWithConfig(model, config);
  EXPECT_NEAR(Eval(clamp_only, ids, LmEvalMode::kNone, 8, 0).nll, none.nll,
              1e-4);
  EXPECT_GT(std::abs(Eval(clamp_only, ids, LmEvalMode::kMemory, 8, 8).nll -
                     memory.nll),
            1e-3);
}

TEST(EvaluateLmTest, BadOptionsAreErrors) {
  XLNetLMHeadModel model = TinyLm("uni");
  const std::vector<int32_t> ids = RandomIds(10, 50, 15);
  LmEvalOptions o;
  o.seq_len = 0;
  EXPECT_FALSE(EvaluateLm(model, ids, {}, o).ok());
  o = LmEvalOptions();
  o.mem_len = 0;
  auto r = EvaluateLm(model, ids, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mem_len"), std::string::npos);
  o = LmEvalOptions();
  o.batch_size = 0;
  o.mode = LmEvalMode::kSliding;
  EXPECT_FALSE(EvaluateLm(model, ids, {}, o).ok());
  EXPECT_FALSE(EvaluateLm(model, {3}, {}, LmEvalOptions()).ok());
  r = EvaluateLm(model, {3, 50}, {}, LmEvalOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace xlnet
