// Generate: the memory cache against recomputing the context window, the
// sampler's determinism and options, the memory bound.
#include "lm/generate.h"

#include <gtest/gtest.h>

#include "tests/lm/lm_test_util.h"

namespace xlnet {
namespace {

using testing::RandomIds;
using testing::TinyLm;

GenerateResult Gen(XLNetLMHeadModel& model, const std::vector<int32_t>& prompt,
                   const GenerateOptions& o) {
  auto r = Generate(model, prompt, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : GenerateResult();
}

class GenerateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerateTest, CacheEqualsNoCacheWhileTheContextFits) {
  XLNetLMHeadModel model = TinyLm(GetParam());
  const std::vector<int32_t> prompt = RandomIds(5, 50, 21);
  GenerateOptions o;
  o.greedy = true;
  o.max_new_tokens = 12;
  o.mem_len = 16;  // 5 + 12 tokens: every context fits in M + 1
  const GenerateResult cached = Gen(model, prompt, o);
  o.use_cache = false;
  const GenerateResult recomputed = Gen(model, prompt, o);
  ASSERT_EQ(cached.ids.size(), 12u);
  EXPECT_EQ(cached.ids, recomputed.ids);
  EXPECT_EQ(cached.max_memory_rows, 16);
  EXPECT_EQ(recomputed.max_memory_rows, 0);
  EXPECT_EQ(cached.token_seconds.size(), 12u);
  // Sampled, the same seed draws the same tokens either way.
  o.greedy = false;
  o.seed = 5;
  const GenerateResult sampled_recomputed = Gen(model, prompt, o);
  o.use_cache = true;
  EXPECT_EQ(Gen(model, prompt, o).ids, sampled_recomputed.ids);
}

TEST_P(GenerateTest, MemoryNeverExceedsM) {
  XLNetLMHeadModel model = TinyLm(GetParam());
  // A prompt longer than M runs in segments of M.
  const std::vector<int32_t> prompt = RandomIds(11, 50, 22);
  GenerateOptions o;
  o.greedy = true;
  o.max_new_tokens = 9;
  o.mem_len = 4;
  const GenerateResult r = Gen(model, prompt, o);
  EXPECT_EQ(r.ids.size(), 9u);
  EXPECT_EQ(r.max_memory_rows, 4);
  // Past M + 1 tokens the cache sees states computed with their own older
  // context, the window does not: both still run.
  o.use_cache = false;
  EXPECT_EQ(Gen(model, prompt, o).ids.size(), 9u);
}

INSTANTIATE_TEST_SUITE_P(Streams, GenerateTest, ::testing::Values("uni", "bi"));

TEST(GenerateSamplingTest, SeedsTopKAndTopP) {
  XLNetLMHeadModel model = TinyLm("uni");
  const std::vector<int32_t> prompt = RandomIds(4, 50, 23);
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.mem_len = 32;
  o.temperature = 2.0;
  o.seed = 1;
  const GenerateResult a = Gen(model, prompt, o);
  EXPECT_EQ(Gen(model, prompt, o).ids, a.ids);
  o.seed = 2;
  EXPECT_NE(Gen(model, prompt, o).ids, a.ids);
  // top_k 1 is greedy whatever the seed and temperature.
  GenerateOptions greedy = o;
  greedy.greedy = true;
  const GenerateResult g = Gen(model, prompt, greedy);
  o.top_k = 1;
  for (uint64_t seed : {3, 4}) {
    o.seed = seed;
    EXPECT_EQ(Gen(model, prompt, o).ids, g.ids);
  }
  // A tiny top_p keeps only the most likely token too.
  o.top_k = 0;
  o.top_p = 1e-9;
  EXPECT_EQ(Gen(model, prompt, o).ids, g.ids);
}

TEST(GenerateSamplingTest, ChooseTokenFollowsTheFilters) {
  const auto logits = torch::tensor({0.0, 3.0, 2.9, -1.0, 3.0}, torch::kFloat);
  GenerateOptions o;
  o.greedy = true;
  std::mt19937_64 rng(0);
  EXPECT_EQ(ChooseToken(logits, o, &rng), 1);  // the first of the tied maxima
  o.greedy = false;
  o.top_k = 3;  // ids 1, 4, 2
  for (int i = 0; i < 200; ++i) {
    const int32_t id = ChooseToken(logits, o, &rng);
    EXPECT_TRUE(id == 1 || id == 4 || id == 2) << id;
  }
  o.top_k = 0;
  o.top_p = 0.5;  // ids 1 and 4 hold ~0.34 each: both needed, nothing else
  for (int i = 0; i < 200; ++i) {
    const int32_t id = ChooseToken(logits, o, &rng);
    EXPECT_TRUE(id == 1 || id == 4) << id;
  }
}

TEST(GenerateSamplingTest, StopAtEod) {
  // A model whose LM bias makes <eod> (id 7) by far the most likely.
  XLNetLMHeadModel model = TinyLm("uni");
  {
    torch::NoGradGuard no_grad;
    model->lm_loss->bias[7] = 1000.0;
  }
  GenerateOptions o;
  o.greedy = true;
  o.max_new_tokens = 10;
  o.mem_len = 8;
  o.stop_at_eod = true;
  const GenerateResult r = Gen(model, {3, 4}, o);
  EXPECT_EQ(r.ids, std::vector<int32_t>({7}));
  EXPECT_TRUE(r.stopped);
  o.stop_at_eod = false;
  EXPECT_EQ(Gen(model, {3, 4}, o).ids.size(), 10u);
}

TEST(GenerateSamplingTest, BadOptionsAreErrors) {
  XLNetLMHeadModel model = TinyLm("uni");
  auto bad = [&](const GenerateOptions& o, const std::string& name) {
    auto r = Generate(model, {1, 2}, o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status();
  };
  GenerateOptions o;
  o.top_p = 0.0;
  bad(o, "top_p");
  o.top_p = 1.5;
  bad(o, "top_p");
  o = GenerateOptions();
  o.temperature = 0.0;
  bad(o, "temperature");
  o.temperature = -1.0;
  bad(o, "temperature");
  o.greedy = true;  // the temperature is not used
  EXPECT_TRUE(Generate(model, {1, 2}, o).ok());
  o = GenerateOptions();
  o.top_k = -1;
  bad(o, "top_k");
  o = GenerateOptions();
  o.mem_len = 0;
  bad(o, "mem_len");
  o = GenerateOptions();
  o.max_new_tokens = -1;
  bad(o, "max_new_tokens");
  EXPECT_FALSE(Generate(model, {}, GenerateOptions()).ok());
  EXPECT_FALSE(Generate(model, {1, 99}, GenerateOptions()).ok());
}

}  // namespace
}  // namespace xlnet
