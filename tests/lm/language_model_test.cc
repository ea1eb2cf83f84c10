// LmForward: causality of the content stream, the query stream's left-to-
// right predictions, and segment recurrence over a memory that covers the
// whole prefix equal to one long forward. fp32; logits are O(1) (wide
// initialiser), tolerances stated per test.
#include "lm/language_model.h"

#include <gtest/gtest.h>

#include "tests/lm/lm_test_util.h"

namespace xlnet {
namespace {

using testing::IdsRow;
using testing::MaxDiff;
using testing::RandomIds;
using testing::TinyLm;

// One forward of `ids` without memory: logits [1, L, V].
torch::Tensor LongForward(XLNetLMHeadModel& model, const torch::Tensor& ids,
                          LmStream stream) {
  LmForwardOptions o;
  o.stream = stream;
  return LmForward(*model, ids, LmMemory(), {}, o).logits;
}

// The same over segments of `seg` tokens, each after the memory of all the
// positions before it (`m` rows, starting as padding): logits [1, L, V].
torch::Tensor SegmentedForward(XLNetLMHeadModel& model,
                               const torch::Tensor& ids, LmStream stream,
                               int64_t seg, int64_t m, int64_t* max_rows) {
  LmForwardOptions o;
  o.stream = stream;
  o.keep_memory = m;
  LmMemory memory = EmptyMemory(model->config(), 1, m, torch::kCPU);
  std::vector<torch::Tensor> parts;
  for (int64_t s = 0; s < ids.size(1); s += seg) {
    const int64_t len = std::min(seg, ids.size(1) - s);
    LmForwardResult r = LmForward(*model, ids.narrow(1, s, len), memory, {}, o);
    parts.push_back(r.logits);
    memory = std::move(r.memory);
    *max_rows = std::max(*max_rows, memory.rows());
  }
  return torch::cat(parts, 1);
}

TEST(LanguageModelTest, ContentStreamIsCausalWithAndWithoutMemory) {
  XLNetLMHeadModel model = TinyLm("uni");
  const auto ids = IdsRow(RandomIds(24, 50, 1));
  LmForwardOptions o;
  o.stream = LmStream::kContent;
  o.keep_memory = 16;
  // Memory from a first segment, then the segment under test.
  const auto first = IdsRow(RandomIds(10, 50, 2));
  LmMemory memory =
      LmForward(*model, first, EmptyMemory(model->config(), 1, 16, torch::kCPU),
                {}, o)
          .memory;
  ASSERT_EQ(memory.rows(), 16);
  ASSERT_EQ(memory.filled(), 10);
  for (const bool with_memory : {false, true}) {
    const LmMemory& mem = with_memory ? memory : LmMemory();
    const auto base = LmForward(*model, ids, mem, {}, o).logits;
    for (int64_t t : {0, 5, 17, 22}) {
      auto changed = ids.clone();
      changed.narrow(1, t + 1, 24 - t - 1)
          .copy_((changed.narrow(1, t + 1, 24 - t - 1) + 7) % 50);
      const auto out = LmForward(*model, changed, mem, {}, o).logits;
      // At and before t: unchanged (masked keys get exactly zero weight).
      EXPECT_LT(MaxDiff(out.narrow(1, 0, t + 1), base.narrow(1, 0, t + 1)),
                1e-6)
          << "t=" << t << " memory=" << with_memory;
      // After t: the change is seen.
      EXPECT_GT(MaxDiff(out.narrow(1, t + 1, 24 - t - 1),
                        base.narrow(1, t + 1, 24 - t - 1)),
                1e-3)
          << "t=" << t;
    }
  }
}

TEST(LanguageModelTest, QueryStreamPredictsFromTheLeftOnly) {
  XLNetLMHeadModel model = TinyLm("bi");
  const auto ids = IdsRow(RandomIds(20, 50, 3));
  const auto base = LongForward(model, ids, LmStream::kQuery);
  ASSERT_EQ(base.size(1), 20);
  for (int64_t i : {1, 6, 13, 19}) {
    // Tokens i.. changed: predictions at positions <= i unchanged
    // (position i predicts token i from tokens < i).
    auto changed = ids.clone();
    changed.narrow(1, i, 20 - i)
        .copy_((changed.narrow(1, i, 20 - i) + 11) % 50);
    const auto out = LongForward(model, changed, LmStream::kQuery);
    EXPECT_LT(MaxDiff(out.narrow(1, 0, i + 1), base.narrow(1, 0, i + 1)), 1e-6)
        << "i=" << i;
    if (i + 1 < 20) {
      EXPECT_GT(MaxDiff(out.narrow(1, i + 1, 20 - i - 1),
                        base.narrow(1, i + 1, 20 - i - 1)),
                1e-3);
    }
  }
  // The same model read through the content stream of a "bi" checkpoint
  // does see later tokens: the perm_mask is what makes it left to right.
  const auto content = LongForward(model, ids, LmStream::kContent);
  auto changed = ids.clone();
  changed[0][19] = (changed[0][19].item<int64_t>() + 1) % 50;
  EXPECT_GT(
      MaxDiff(LongForward(model, changed, LmStream::kContent).narrow(1, 0, 1),
              content.narrow(1, 0, 1)),
      1e-4);
}

TEST(LanguageModelTest, MemoryCoveringThePrefixEqualsOneLongForward) {
  for (const std::string attn_type : {"uni", "bi"}) {
    XLNetLMHeadModel model = TinyLm(attn_type);
    const LmStream stream = ResolveStream(LmStream::kAuto, model->config());
    const auto ids = IdsRow(RandomIds(37, 50, 4));
    const auto full = LongForward(model, ids, stream);
    for (const int64_t seg : {1, 5, 8, 37}) {
      int64_t max_rows = 0;
      const auto parts =
          SegmentedForward(model, ids, stream, seg, 40, &max_rows);
      EXPECT_LT(MaxDiff(parts, full), 1e-5)
          << attn_type << " segments of " << seg;
      EXPECT_EQ(max_rows, 40);
    }
    // A memory shorter than the prefix loses context: logits differ.
    int64_t max_rows = 0;
    const auto short_mem =
        SegmentedForward(model, ids, stream, 8, 8, &max_rows);
    EXPECT_GT(MaxDiff(short_mem, full), 1e-3) << attn_type;
    EXPECT_EQ(max_rows, 8);
  }
}

TEST(LanguageModelTest, QueryStreamSlotIsNotCached) {
  // Generation's segment [token, slot] caches only the token: the memory
  // equals the one from the token alone.
  XLNetLMHeadModel model = TinyLm("bi");
  const auto ids = IdsRow(RandomIds(6, 50, 5));
  LmForwardOptions o;
  o.stream = LmStream::kQuery;
  o.keep_memory = 8;
  LmMemory start = EmptyMemory(model->config(), 1, 8, torch::kCPU);
  const LmMemory plain = LmForward(*model, ids, start, {}, o).memory;
  o.cache_positions = 6;
  const auto with_slot =
      torch::cat({ids, torch::full({1, 1}, 6, torch::kLong)}, 1);
  const LmMemory slotted = LmForward(*model, with_slot, start, {}, o).memory;
  ASSERT_EQ(slotted.rows(), 8);
  EXPECT_EQ(slotted.filled(), 6);
  for (size_t n = 0; n < plain.states.size(); ++n) {
    EXPECT_LT(MaxDiff(slotted.states[n], plain.states[n]), 1e-6);
  }
  EXPECT_TRUE(torch::equal(slotted.valid, plain.valid));
}

TEST(LanguageModelTest, WithoutSameLengthSharesTheWeights) {
  XLNetLMHeadModel model = TinyLm("uni");
  EXPECT_EQ(WithoutSameLength(model).get(), model.get());
  XLNetConfig config = model->config();
  config.same_length = true;
  XLNetLMHeadModel same = CopyWithConfig(model, config);
  XLNetLMHeadModel copy = WithoutSameLength(same);
  EXPECT_FALSE(copy->config().same_length);
  const auto ids = IdsRow(RandomIds(12, 50, 6));
  EXPECT_LT(MaxDiff(LongForward(copy, ids, LmStream::kContent),
                    LongForward(model, ids, LmStream::kContent)),
            1e-6);
}

}  // namespace
}  // namespace xlnet
