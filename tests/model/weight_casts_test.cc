// WeightCasts (model/weight_casts.h): the slots hold casts to the autocast
// dtype while it lives, gradients reach the fp32 originals, and the
// originals are back afterwards; nothing happens without autocast.
#include "model/weight_casts.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include "model/precision.h"

namespace xlnet {
namespace {

#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
constexpr bool kCastsTogether = true;
#else
constexpr bool kCastsTogether = false;  // autocast casts as usual
#endif

TEST(WeightCastsTest, SlotsHoldCastsWhoseGradientsReachTheOriginals) {
  torch::manual_seed(1);
  // a: read once; b: read by two streams; unused: read by neither.
  const auto a = torch::randn({3, 4}).requires_grad_(true);
  const auto b = torch::randn({4, 4}).requires_grad_(true);
  const auto unused = torch::randn({2}).requires_grad_(true);
  torch::Tensor slot_a = a, slot_b = b, slot_unused = unused;
  const auto x = torch::randn({5, 3});
  torch::Tensor y0, y1;
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    WeightCasts casts({&slot_a, &slot_unused}, {&slot_b}, /*streams=*/2);
    EXPECT_EQ(casts.active(), kCastsTogether);
    if (kCastsTogether) {
      EXPECT_EQ(slot_a.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(slot_a, a.to(torch::kBFloat16)));
      EXPECT_TRUE(torch::equal(slot_b, b.to(torch::kBFloat16)));
    }
    const auto h = torch::matmul(x, slot_a);  // [5, 4]
    y0 = torch::matmul(h, slot_b);            // stream 0's copy of b
    casts.UseStream(1);
    if (kCastsTogether) {
      EXPECT_TRUE(torch::equal(slot_b, b.to(torch::kBFloat16)));
    }
    y1 = torch::matmul(h.sin(), slot_b);  // stream 1's
  }
  EXPECT_TRUE(slot_a.is_same(a));
  EXPECT_TRUE(slot_b.is_same(b));
  EXPECT_TRUE(slot_unused.is_same(unused));
  torch::manual_seed(2);
  const auto w0 = torch::randn({5, 4}), w1 = torch::randn({5, 4});
  ((y0.to(torch::kFloat) * w0).sum() + (y1.to(torch::kFloat) * w1).sum())
      .backward();
  // What separate casts give: a cast for each use, each gradient cast back
  // to fp32, b's two summed in fp32.
  const auto a16 = a.detach().to(torch::kBFloat16).requires_grad_(true);
  const auto b16 = b.detach().to(torch::kBFloat16).requires_grad_(true);
  const auto b16_1 = b.detach().to(torch::kBFloat16).requires_grad_(true);
  const auto h16 = torch::matmul(x.to(torch::kBFloat16), a16);
  ((torch::matmul(h16, b16).to(torch::kFloat) * w0).sum() +
   (torch::matmul(h16.sin(), b16_1).to(torch::kFloat) * w1).sum())
      .backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(a.grad(), a16.grad().to(torch::kFloat)));
  ASSERT_TRUE(b.grad().defined());
  if (kCastsTogether) {
    // Without WeightCasts autocast's cache may share one cast of b between
    // the two products and sum their gradients in bf16.
    EXPECT_TRUE(torch::equal(b.grad(), b16.grad().to(torch::kFloat) +
                                           b16_1.grad().to(torch::kFloat)));
  }
  EXPECT_FALSE(unused.grad().defined());
}

TEST(WeightCastsTest, NothingWithoutAutocastOrForNonFp32Slots) {
  auto a = torch::randn({2, 2});
  auto h = torch::randn({2, 2}).to(torch::kBFloat16);
  torch::Tensor slot_a = a;
  {
    WeightCasts casts({&slot_a}, {}, 1);  // autocast off
    EXPECT_FALSE(casts.active());
    EXPECT_TRUE(slot_a.is_same(a));
  }
  {
    AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    torch::Tensor slot_h = h;
    WeightCasts casts({&slot_a}, {&slot_h}, 2);  // one slot is not fp32
    EXPECT_FALSE(casts.active());
    EXPECT_TRUE(slot_a.is_same(a));
    WeightCasts none({}, {}, 1);
    EXPECT_FALSE(none.active());
  }
}

}  // namespace
}  // namespace xlnet
