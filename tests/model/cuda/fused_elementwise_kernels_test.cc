// The fused element-wise kernels' own source, run on the CPU through
// model/cuda/emulation.h (fused_elementwise_emulated.h), against the ops'
// CPU implementation (model/fused_elementwise.h) on the shapes and with
// the bounds of the GPU test
// FusedElementwiseCudaTest.MatchesTheCpuImplementation: a vectorised shape (the
// base preset's 768 and 3072 columns), scalar ones (10 columns; 1026, whose
// LayerNorm backward opts into more shared memory) and the widest rows (2048),
// fp32 and bf16, with and without dropout (the same Philox decisions); and
// on shapes, dtypes and input offsets drawn at random, every vector access
// checked for alignment (a launcher that took an off-grid pointer for a
// vector one fails it).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "model/fused_elementwise.h"
#include "tests/model/cuda/fused_elementwise_emulated.h"
#include "tests/model/test_util.h"

namespace xlnet::testing {
namespace {

double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.abs().max().to(torch::kDouble).item<double>();
  return MaxAbsDiff(a.to(torch::kFloat), b.to(torch::kFloat)) /
         std::max(scale, 1e-30);
}

// f(inputs) and the gradients of sum(f * grad_out) w.r.t. the inputs.
template <typename F>
std::vector<torch::Tensor> WithGrads(F f, const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& grad_out) {
  std::vector<torch::Tensor> x;
  for (const auto& t : in) x.push_back(t.clone().requires_grad_());
  auto out = f(x);
  auto grads = torch::autograd::grad({out}, x, {grad_out.to(out.dtype())});
  std::vector<torch::Tensor> r = {out.detach()};
  for (auto& g : grads) r.push_back(g);
  return r;
}

// t's values at `offset` elements past the start of an allocation, so
// that the launchers' choice between vector and element accesses meets
// pointers off the 16-byte grid (the emulation checks every vector access
// for alignment, XLNET_VECTOR_AT).
torch::Tensor AtOffset(const torch::Tensor& t, int64_t offset) {
  auto v = torch::empty({t.numel() + offset}, t.options())
               .narrow(0, offset, t.numel())
               .view(t.sizes());
  v.copy_(t);
  return v;
}

// Bias + GELU + dropout on [rows, inner] and dropout + residual + LayerNorm
// on [rows, cols] through the emulated kernels, the row-shaped inputs
// `offset` elements off their allocation's start, against the CPU
// implementation. As on the GPU: fp32 the same maths (erff, rsqrtf and the
// summation order differ); bf16 one rounding of the output apart.
void ExpectBiasActAndLayerNormMatch(int64_t rows, int64_t cols, int64_t inner,
                                    torch::ScalarType dtype,
                                    const ElementwiseDropout& d,
                                    int64_t offset) {
  const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
  const auto y1 = torch::randn({rows, inner}).to(dtype);
  const auto b1 = torch::randn({inner});
  const auto g1 = torch::randn({rows, inner}).to(dtype);
  const auto act = FusedActivation::kGelu;
  const auto cpu1 = WithGrads(
      [&](const std::vector<torch::Tensor>& x) {
        return BiasActivationDropout(x[0], x[1], act, d);
      },
      {y1, b1}, g1);
  const EmulatedOutputs emu1 =
      EmulatedBiasAct(AtOffset(y1, offset), b1, act, d, AtOffset(g1, offset));
  ASSERT_EQ(emu1.error, "");
  EXPECT_LE(RelDiff(emu1.tensors[0], cpu1[0]), tol) << "bias act out";
  EXPECT_LE(RelDiff(emu1.tensors[1], cpu1[1]), tol) << "grad y";
  EXPECT_LE(RelDiff(emu1.tensors[2], cpu1[2]), 1e-4) << "grad bias";

  const std::vector<torch::Tensor> ln = {
      torch::randn({rows, cols}).to(dtype), torch::randn({rows, cols}),
      torch::randn({cols}), torch::randn({cols})};
  const auto g2 = torch::randn({rows, cols});
  const auto cpu2 = WithGrads(
      [&](const std::vector<torch::Tensor>& x) {
        return DropoutResidualLayerNorm(x[0], x[1], x[2], x[3], 1e-12, d);
      },
      ln, g2);
  const EmulatedOutputs emu2 = EmulatedResidualLayerNorm(
      AtOffset(ln[0], offset), AtOffset(ln[1], offset), ln[2], ln[3], 1e-12, d,
      AtOffset(g2, offset));
  ASSERT_EQ(emu2.error, "");
  EXPECT_LE(RelDiff(emu2.tensors[0], cpu2[0]), 1e-5) << "ln out";
  EXPECT_LE(RelDiff(emu2.tensors[1], cpu2[1]), tol) << "grad y";
  const char* names[] = {"grad residual", "grad gamma", "grad beta"};
  for (int i = 2; i < 5; ++i) {
    EXPECT_LE(RelDiff(emu2.tensors[i], cpu2[i]), 1e-4) << names[i - 2];
  }
}

// AddBiasPair's kernels on [rows, cols] in `dtype`, x and the gradients
// `offset` elements off their allocation's start: the sums and x's
// gradient bit for bit (each one rounding of the same fp32 sum), the bias
// gradients within fp32 summation order of the CPU loops'.
void ExpectBiasPairMatches(int64_t rows, int64_t cols, torch::ScalarType dtype,
                           int64_t offset) {
  const auto x = torch::randn({rows, cols}).to(dtype);
  const auto a = torch::randn({cols}).to(dtype);
  const auto b = torch::randn({cols}).to(dtype);
  const auto ga = torch::randn({rows, cols}).to(dtype);
  const auto gb = torch::randn({rows, cols}).to(dtype);
  std::vector<torch::Tensor> in = {x.clone().requires_grad_(),
                                   a.clone().requires_grad_(),
                                   b.clone().requires_grad_()};
  const auto [oa, ob] = AddBiasPair(in[0], in[1], in[2]);
  const auto grads = torch::autograd::grad({oa, ob}, in, {ga, gb});
  const EmulatedOutputs emu = EmulatedBiasPair(
      AtOffset(x, offset), a, b, AtOffset(ga, offset), AtOffset(gb, offset));
  ASSERT_EQ(emu.error, "");
  EXPECT_TRUE(emu.tensors[0].equal(oa.detach())) << "out a";
  EXPECT_TRUE(emu.tensors[1].equal(ob.detach())) << "out b";
  EXPECT_TRUE(emu.tensors[2].equal(grads[0])) << "grad x";
  // The CPU op returns the bias gradients in the biases' dtype.
  const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
  EXPECT_LE(RelDiff(emu.tensors[3], grads[1]), tol) << "grad bias a";
  EXPECT_LE(RelDiff(emu.tensors[4], grads[2]), tol) << "grad bias b";
  const auto exact = ga.to(torch::kDouble).sum(0);
  EXPECT_LE(RelDiff(emu.tensors[3], exact), 1e-5) << "grad bias a, exact";
}

TEST(FusedElementwiseKernelsTest, EmulatedKernelsMatchTheCpuImplementation) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const double p : {0.0, 0.2}) {
      for (const auto& [rows, cols, inner] : ElementwiseKernelShapes()) {
        SCOPED_TRACE(::testing::Message() << dtype << " p " << p << " rows "
                                          << rows << " cols " << cols);
        torch::manual_seed(rows + cols);
        ElementwiseDropout d;
        d.p = p;
        d.seed = 0x1234567890ull;
        d.offset = 11;
        ExpectBiasActAndLayerNormMatch(rows, cols, inner, dtype, d, 0);
      }
    }
  }
}

// Shapes, dtypes, dropout and the inputs' offsets drawn at random (24 fixed
// seeds), the three kernels' checks above.
TEST(FusedElementwiseKernelsTest, EmulatedKernelsOnDrawnShapes) {
  for (int i = 0; i < 24; ++i) {
    std::mt19937_64 rng(3000 + i);
    const auto pick = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
      return lo +
             static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    };
    const int64_t rows = pick(1, 300), cols = pick(1, 2048),
                  inner = pick(1, 1100), offset = pick(0, 3);
    const auto dtype = pick(0, 1) == 0 ? torch::kFloat : torch::kBFloat16;
    ElementwiseDropout d;
    d.p = pick(0, 1) == 0 ? 0.0 : 0.2;
    d.seed = 0x1234567890ull + static_cast<uint64_t>(i);
    d.offset = 11;
    const auto pair_dtype = pick(0, 2) == 0   ? torch::kFloat
                            : pick(0, 1) == 0 ? torch::kHalf
                                              : torch::kBFloat16;
    SCOPED_TRACE(::testing::Message()
                 << "draw " << i << ": " << dtype << " p " << d.p << " rows "
                 << rows << " cols " << cols << " inner " << inner << " offset "
                 << offset << ", pair " << pair_dtype);
    torch::manual_seed(3000 + i);
    ExpectBiasActAndLayerNormMatch(rows, cols, inner, dtype, d, offset);
    ExpectBiasPairMatches(rows, cols, pair_dtype, offset);
  }
}

// AddBiasPair's kernels (ExpectBiasPairMatches): fp32, fp16 and bf16 on
// the vectorised shape (768 columns: blocks of 192 threads), scalar ones (10
// and 1026 columns, the latter two column tiles), 2048 columns, and chunks
// of 6 and 5 rows (a whole group of 4 rows loaded before the stores, then a
// part).
TEST(FusedElementwiseKernelsTest, EmulatedBiasPairMatchesTheCpuImplementation) {
  auto shapes = ElementwiseKernelShapes();
  shapes.push_back({3000, 40, 0});
  shapes.push_back({2100, 10, 0});
  for (const auto dtype : {torch::kFloat, torch::kHalf, torch::kBFloat16}) {
    for (const auto& [rows, cols, inner] : shapes) {
      (void)inner;
      SCOPED_TRACE(::testing::Message()
                   << dtype << " rows " << rows << " cols " << cols);
      torch::manual_seed(rows * 7 + cols);
      ExpectBiasPairMatches(rows, cols, dtype, 0);
    }
  }
}

// CastTensors (the weights' casts of model/weight_casts.h) gives LibTorch's
// casts bit for bit: fp32 to bf16 and fp16 with one and two outputs, and
// back with and without a second gradient added in fp32; on tensors whose
// length is a multiple of 4 (16-byte accesses), ragged ones and one that
// starts off the 16-byte grid (element by element), in one launch.
TEST(FusedElementwiseKernelsTest, EmulatedCastTensorsAreLibTorchsCasts) {
  torch::manual_seed(17);
  const auto backing = torch::randn({4099});
  const std::vector<torch::Tensor> weights = {
      torch::randn({768, 12}), torch::randn({10}), torch::randn({1}),
      backing.narrow(0, 1, 4097), torch::randn({3, 1027})};
  for (const auto low : {torch::kBFloat16, torch::kHalf}) {
    SCOPED_TRACE(::testing::Message() << low);
    std::vector<EmulatedCast> down;
    for (size_t i = 0; i < weights.size(); ++i) {
      down.push_back({weights[i], torch::Tensor(), low, i % 2 == 0});
    }
    const EmulatedOutputs cast = EmulatedCastTensors(down);
    ASSERT_EQ(cast.error, "");
    size_t at = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const auto want = weights[i].to(low);
      EXPECT_TRUE(cast.tensors[at++].equal(want)) << "cast " << i;
      if (i % 2 == 0) {
        EXPECT_TRUE(cast.tensors[at++].equal(want)) << "second cast " << i;
      }
    }
    // Back: each weight's stream gradients cast and summed in fp32.
    std::vector<EmulatedCast> up;
    std::vector<torch::Tensor> want;
    for (size_t i = 0; i < weights.size(); ++i) {
      const auto a = torch::randn(weights[i].sizes()).to(low);
      const auto b = torch::randn(weights[i].sizes()).to(low);
      if (i % 2 == 0) {
        up.push_back({a, b, torch::kFloat, false});
        want.push_back(a.to(torch::kFloat) + b.to(torch::kFloat));
      } else {
        up.push_back({a, torch::Tensor(), torch::kFloat, false});
        want.push_back(a.to(torch::kFloat));
      }
    }
    const EmulatedOutputs back = EmulatedCastTensors(up);
    ASSERT_EQ(back.error, "");
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(back.tensors[i].equal(want[i])) << "gradient " << i;
    }
  }
  // More tensors than a launch takes: refused.
  std::vector<EmulatedCast> many(
      25, {weights[1], torch::Tensor(), torch::kBFloat16, false});
  EXPECT_NE(EmulatedCastTensors(many).error, "");
}

}  // namespace
}  // namespace xlnet::testing
