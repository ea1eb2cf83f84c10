// The fused element-wise ops (model/fused_elementwise.h): the CPU
// implementation against the LibTorch ops it replaces (dropout 0, and
// dropout > 0 with the op's own keep mask), forward and gradients in fp32
// and with bf16 inputs; the keep rate; the whole model with
// train.fused_elementwise against the unfused model; activation
// checkpointing with the fused ops' dropout; and on a GPU the CUDA kernels
// against the CPU implementation.
#include "model/fused_elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "model/precision.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::ElementwiseKernelShapes;
using testing::MaskCorrelation;
using testing::MaxAbsDiff;

// max |a - b| / max |b|: the error relative to the reference's magnitude.
double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.abs().max().to(torch::kDouble).item<double>();
  return MaxAbsDiff(a, b) / std::max(scale, 1e-30);
}

// Dropout p from (seed, offset).
ElementwiseDropout Dropout(double p, uint64_t seed, uint64_t offset = 0) {
  ElementwiseDropout d;
  d.p = p;
  d.seed = seed;
  d.offset = offset;
  return d;
}

torch::Tensor Activation(const torch::Tensor& u, FusedActivation act) {
  switch (act) {
    case FusedActivation::kGelu:
      return torch::gelu(u);
    case FusedActivation::kGeluTanh:
      return torch::gelu(u, "tanh");
    case FusedActivation::kRelu:
      break;
  }
  return torch::relu(u);
}

const char* Name(FusedActivation act) {
  switch (act) {
    case FusedActivation::kGelu:
      return "gelu";
    case FusedActivation::kGeluTanh:
      return "gelu_new";
    case FusedActivation::kRelu:
      break;
  }
  return "relu";
}

// The LibTorch ops BiasActivationDropout replaces, with the op's keep mask
// (p > 0) or none.
torch::Tensor ReferenceBiasAct(const torch::Tensor& y, const torch::Tensor& b,
                               FusedActivation act,
                               const ElementwiseDropout& d) {
  auto out = Activation(y + b, act);
  if (d.p == 0) return out;
  const int64_t cols = y.size(-1);
  auto keep = BiasActivationDropoutKeepMask(y.numel() / cols, cols, d)
                  .view(y.sizes())
                  .to(out.scalar_type());
  return out * keep / (1 - d.p);
}

torch::Tensor ReferenceResidualLn(const torch::Tensor& y,
                                  const torch::Tensor& residual,
                                  const torch::Tensor& gamma,
                                  const torch::Tensor& beta, double eps,
                                  const ElementwiseDropout& d) {
  auto z = y;
  if (d.p > 0) {
    const int64_t cols = y.size(-1);
    auto keep = DropoutResidualLayerNormKeepMask(y.numel() / cols, cols, d)
                    .view(y.sizes())
                    .to(y.scalar_type());
    z = y * keep / (1 - d.p);
  }
  return torch::layer_norm(z + residual, {y.size(-1)}, gamma, beta, eps);
}

// Values and gradients of f(inputs) for a fixed upstream gradient.
struct OpResult {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

template <typename F>
OpResult RunWithGrads(F f, std::vector<torch::Tensor> inputs,
                      const torch::Tensor& grad_out) {
  for (auto& t : inputs) t = t.detach().clone().requires_grad_(true);
  OpResult r;
  r.out = f(inputs);
  auto grads = torch::autograd::grad({r.out}, inputs,
                                     {grad_out.to(r.out.scalar_type())});
  r.out = r.out.detach();
  for (auto& g : grads) r.grads.push_back(g.detach());
  return r;
}

// BiasActivationDropout (fused) or the LibTorch ops it replaces (in fp32)
// on y and b, with gradients for grad_out.
OpResult BiasActRun(bool fused, const torch::Tensor& y, const torch::Tensor& b,
                    FusedActivation act, const ElementwiseDropout& d,
                    const torch::Tensor& grad_out) {
  return RunWithGrads(
      [&](const std::vector<torch::Tensor>& in) {
        return fused ? BiasActivationDropout(in[0], in[1], act, d)
                     : ReferenceBiasAct(in[0].to(torch::kFloat), in[1], act, d);
      },
      {y, b}, grad_out);
}

// DropoutResidualLayerNorm (fused) or the LibTorch ops (y in fp32).
OpResult ResidualLnRun(bool fused, const std::vector<torch::Tensor>& inputs,
                       double eps, const ElementwiseDropout& d,
                       const torch::Tensor& grad_out) {
  return RunWithGrads(
      [&](const std::vector<torch::Tensor>& in) {
        return fused ? DropoutResidualLayerNorm(in[0], in[1], in[2], in[3], eps,
                                                d)
                     : ReferenceResidualLn(in[0].to(torch::kFloat), in[1],
                                           in[2], in[3], eps, d);
      },
      inputs, grad_out);
}

// ------------------------------------------------------ BiasActivationDropout

class BiasActTest
    : public ::testing::TestWithParam<std::tuple<FusedActivation, double>> {};

TEST_P(BiasActTest, Fp32MatchesLibTorchOps) {
  const auto [act, p] = GetParam();
  torch::manual_seed(1);
  // 7 columns: neither a multiple of 4 nor of anything the op tiles by.
  const auto y = torch::randn({3, 5, 7}) * 2;
  const auto b = torch::randn({7});
  const auto grad_out = torch::randn({3, 5, 7});
  const ElementwiseDropout d = Dropout(p, 1234, 5);
  const OpResult fused = BiasActRun(true, y, b, act, d, grad_out);
  const OpResult ref = BiasActRun(false, y, b, act, d, grad_out);
  SCOPED_TRACE(Name(act));
  EXPECT_EQ(fused.out.scalar_type(), torch::kFloat);
  EXPECT_LE(RelDiff(fused.out, ref.out), 1e-5);
  EXPECT_LE(RelDiff(fused.grads[0], ref.grads[0]), 1e-5);
  EXPECT_LE(RelDiff(fused.grads[1], ref.grads[1]), 1e-5);
  if (p > 0) {
    // Some elements really are dropped, and exactly those of the mask.
    EXPECT_GT((fused.out == 0).sum().item<int64_t>(), 0);
  }
}

// bf16 y (as under autocast) with an fp32 bias: the reference runs the
// LibTorch ops in fp32 on the same bf16 values, so the op differs only by
// rounding its bf16 output and y gradient: within 1% of the largest value.
TEST_P(BiasActTest, Bf16InputsWithinRounding) {
  const auto [act, p] = GetParam();
  torch::manual_seed(2);
  const auto y = (torch::randn({4, 33}) * 2).to(torch::kBFloat16);
  const auto b = torch::randn({33});
  const auto grad_out = torch::randn({4, 33}).to(torch::kBFloat16);
  const ElementwiseDropout d = Dropout(p, 99);
  const OpResult fused = BiasActRun(true, y, b, act, d, grad_out);
  const OpResult ref = BiasActRun(false, y, b, act, d, grad_out);
  SCOPED_TRACE(Name(act));
  EXPECT_EQ(fused.out.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(fused.grads[0].scalar_type(), torch::kBFloat16);
  EXPECT_EQ(fused.grads[1].scalar_type(), torch::kFloat);
  EXPECT_LE(RelDiff(fused.out, ref.out), 1e-2);
  EXPECT_LE(RelDiff(fused.grads[0], ref.grads[0]), 1e-2);
  // The bias gradient sums fp32 values before any rounding.
  EXPECT_LE(RelDiff(fused.grads[1], ref.grads[1]), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Activations, BiasActTest,
    ::testing::Combine(::testing::Values(FusedActivation::kGelu,
                                         FusedActivation::kGeluTanh,
                                         FusedActivation::kRelu),
                       ::testing::Values(0.0, 0.3)));

// -----------------------------------------------------
// DropoutResidualLayerNorm

class ResidualLnTest : public ::testing::TestWithParam<double> {};

TEST_P(ResidualLnTest, Fp32MatchesLibTorchOps) {
  const double p = GetParam();
  torch::manual_seed(3);
  const auto y = torch::randn({2, 6, 10});
  const auto residual = torch::randn({2, 6, 10}) * 3 + 1;
  const auto gamma = torch::randn({10});
  const auto beta = torch::randn({10});
  const auto grad_out = torch::randn({2, 6, 10});
  const ElementwiseDropout d = Dropout(p, 77, 3);
  const double eps = 1e-12;
  const OpResult fused =
      ResidualLnRun(true, {y, residual, gamma, beta}, eps, d, grad_out);
  const OpResult ref =
      ResidualLnRun(false, {y, residual, gamma, beta}, eps, d, grad_out);
  EXPECT_LE(RelDiff(fused.out, ref.out), 1e-5);
  const char* names[] = {"y", "residual", "gamma", "beta"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_LE(RelDiff(fused.grads[i], ref.grads[i]), 1e-5) << names[i];
  }
}

// bf16 y (the projection under autocast) with the fp32 residual stream: the
// output is fp32 and computed in fp32 from the same values (1e-5); only the
// y gradient is rounded to bf16 (1%).
TEST_P(ResidualLnTest, Bf16InputWithFp32Residual) {
  const double p = GetParam();
  torch::manual_seed(4);
  const auto y = torch::randn({3, 40}).to(torch::kBFloat16);
  const auto residual = torch::randn({3, 40});
  const auto gamma = torch::randn({40});
  const auto beta = torch::randn({40});
  const auto grad_out = torch::randn({3, 40});
  const ElementwiseDropout d = Dropout(p, 5);
  const OpResult fused =
      ResidualLnRun(true, {y, residual, gamma, beta}, 1e-5, d, grad_out);
  const OpResult ref =
      ResidualLnRun(false, {y, residual, gamma, beta}, 1e-5, d, grad_out);
  EXPECT_EQ(fused.out.scalar_type(), torch::kFloat);
  EXPECT_EQ(fused.grads[0].scalar_type(), torch::kBFloat16);
  EXPECT_LE(RelDiff(fused.out, ref.out), 1e-5);
  EXPECT_LE(RelDiff(fused.grads[0], ref.grads[0]), 1e-2);
  EXPECT_LE(RelDiff(fused.grads[1], ref.grads[1]), 1e-5);
  EXPECT_LE(RelDiff(fused.grads[2], ref.grads[2]), 1e-5);
  EXPECT_LE(RelDiff(fused.grads[3], ref.grads[3]), 1e-5);
}

// The gradients of `in` for upstream gradients on two outputs, each
// left out where undefined (an input no output reads: undefined).
std::vector<torch::Tensor> GradsOfTwo(const std::vector<torch::Tensor>& in,
                                      const torch::Tensor& first,
                                      const torch::Tensor& on_first,
                                      const torch::Tensor& second,
                                      const torch::Tensor& on_second) {
  std::vector<torch::Tensor> outs, upstream;
  if (on_first.defined()) {
    outs.push_back(first);
    upstream.push_back(on_first);
  }
  if (on_second.defined()) {
    outs.push_back(second);
    upstream.push_back(on_second);
  }
  auto grads = torch::autograd::grad(outs, in, upstream, /*retain_graph=*/false,
                                     /*create_graph=*/false,
                                     /*allow_unused=*/true);
  for (auto& g : grads) {
    if (g.defined()) g = g.detach();
  }
  return grads;
}

// The outputs of DropoutResidualLayerNormWithCopy (fused) or of
// DropoutResidualLayerNorm followed by the cast it replaces, and the
// gradients of the inputs for upstream gradients on the output (`on_out`)
// and on the copy (`on_copy`).
struct CopyRun {
  torch::Tensor out, copy;
  std::vector<torch::Tensor> grads;
};

CopyRun ResidualLnCopyRun(bool fused, const std::vector<torch::Tensor>& inputs,
                          const ElementwiseDropout& d,
                          const torch::Tensor& on_out,
                          const torch::Tensor& on_copy) {
  std::vector<torch::Tensor> in;
  for (const auto& t : inputs)
    in.push_back(t.detach().clone().requires_grad_());
  CopyRun r;
  if (fused) {
    std::tie(r.out, r.copy) =
        DropoutResidualLayerNormWithCopy(in[0], in[1], in[2], in[3], 1e-5, d);
  } else {
    r.out = DropoutResidualLayerNorm(in[0], in[1], in[2], in[3], 1e-5, d);
    r.copy = r.out.to(in[0].scalar_type());
  }
  r.grads = GradsOfTwo(in, r.out, on_out, r.copy, on_copy);
  r.out = r.out.detach();
  r.copy = r.copy.detach();
  return r;
}

// The copy is the cast bit for bit, and so are the gradients whichever
// outputs carry one (both, the output alone, the copy alone): backward adds
// the copy's gradient to the output's in fp32, as autograd adds the cast's.
TEST_P(ResidualLnTest, CopyIsTheCastBitForBit) {
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    torch::manual_seed(9);
    const std::vector<torch::Tensor> inputs = {
        torch::randn({5, 48}).to(dtype), torch::randn({5, 48}) * 2,
        torch::randn({48}), torch::randn({48})};
    const auto on_out = torch::randn({5, 48});
    const auto on_copy = torch::randn({5, 48}).to(dtype);
    const ElementwiseDropout d = Dropout(GetParam(), 21, 4);
    const std::vector<std::pair<torch::Tensor, torch::Tensor>> upstream = {
        {on_out, on_copy}, {on_out, {}}, {{}, on_copy}};
    for (size_t u = 0; u < upstream.size(); ++u) {
      SCOPED_TRACE(u);
      const CopyRun fused = ResidualLnCopyRun(
          true, inputs, d, upstream[u].first, upstream[u].second);
      const CopyRun ref = ResidualLnCopyRun(false, inputs, d, upstream[u].first,
                                            upstream[u].second);
      EXPECT_EQ(fused.copy.scalar_type(), dtype);
      EXPECT_TRUE(torch::equal(fused.out, ref.out));
      EXPECT_TRUE(torch::equal(fused.copy, ref.copy));
      ASSERT_EQ(fused.grads.size(), 4u);
      for (int i = 0; i < 4; ++i) {
        EXPECT_TRUE(torch::equal(fused.grads[i], ref.grads[i])) << i;
      }
    }
    // Not the same function: the gradients did depend on the copy's.
    const CopyRun without = ResidualLnCopyRun(true, inputs, d, on_out, {});
    const CopyRun with = ResidualLnCopyRun(true, inputs, d, on_out, on_copy);
    EXPECT_FALSE(torch::equal(without.grads[1], with.grads[1]));
  }
}

INSTANTIATE_TEST_SUITE_P(Dropout, ResidualLnTest, ::testing::Values(0.0, 0.25));

// ------------------------------------------------------------ the dropout

TEST(FusedElementwiseDropoutTest, KeepRateAndSeeds) {
  const double p = 0.1;
  const int64_t rows = 96, cols = 768;  // 73,728 decisions
  const ElementwiseDropout d = Dropout(p, 2024);
  const double n = rows * cols;
  const double sigma = std::sqrt(p * (1 - p) / n);  // ~1.1e-3
  for (const auto& keep : {BiasActivationDropoutKeepMask(rows, cols, d),
                           DropoutResidualLayerNormKeepMask(rows, cols, d)}) {
    const double kept = keep.to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(kept, 1 - p, 4 * sigma);
  }
  // The two ops draw different masks from one seed; another seed or offset
  // gives another mask; the same seed the same one.
  const auto a = BiasActivationDropoutKeepMask(rows, cols, d);
  EXPECT_FALSE(a.equal(DropoutResidualLayerNormKeepMask(rows, cols, d)));
  EXPECT_TRUE(a.equal(BiasActivationDropoutKeepMask(rows, cols, d)));
  ElementwiseDropout other = d;
  other.seed = 2025;
  EXPECT_FALSE(a.equal(BiasActivationDropoutKeepMask(rows, cols, other)));
  other = d;
  other.offset = 1;
  EXPECT_FALSE(a.equal(BiasActivationDropoutKeepMask(rows, cols, other)));
  // p = 0 keeps everything.
  EXPECT_TRUE(BiasActivationDropoutKeepMask(4, 9, ElementwiseDropout{})
                  .all()
                  .item<bool>());
  // The op drops exactly the mask's zeros.
  const auto y = torch::rand({rows, cols}) + 1;  // relu(y) = y > 0
  const auto out =
      BiasActivationDropout(y, torch::zeros({cols}), FusedActivation::kRelu, d);
  EXPECT_TRUE((out != 0).equal(a));
}

// What training relies on beyond the keep rate: the decisions of one call
// are independent of each other (neighbouring columns share a Philox
// output, neighbouring rows a key), and the masks of successive calls
// (layers, steps: each draws its seed from the CPU generator) are
// independent of one another. Correlations over 196,608 decisions have a
// standard error of ~2.3e-3; each bound is 5 of them.
TEST(FusedElementwiseDropoutTest, DecisionsAndCallsAreIndependent) {
  const double p = 0.1;
  const int64_t rows = 256, cols = 768;
  const double bound = 5 / std::sqrt(static_cast<double>(rows * cols));
  torch::manual_seed(7);
  std::vector<torch::Tensor> masks;
  for (int call = 0; call < 4; ++call) {
    const ElementwiseDropout d = DrawElementwiseDropout(p, /*training=*/true);
    masks.push_back(BiasActivationDropoutKeepMask(rows, cols, d));
    masks.push_back(DropoutResidualLayerNormKeepMask(rows, cols, d));
  }
  for (size_t i = 0; i < masks.size(); ++i) {
    const torch::Tensor& m = masks[i];
    // Each of the eight decisions of one Philox output (the low and high
    // halves of its four words) keeps at 1 - p.
    const double sigma = std::sqrt(p * (1 - p) / (rows * cols / 8));
    for (int64_t lane = 0; lane < 8; ++lane) {
      const double kept =
          m.slice(1, lane, cols, 8).to(torch::kDouble).mean().item<double>();
      EXPECT_NEAR(kept, 1 - p, 5 * sigma) << "mask " << i << " lane " << lane;
    }
    // Neighbouring columns (within and across Philox outputs) and rows.
    EXPECT_LT(
        std::abs(MaskCorrelation(m.slice(1, 0, cols - 1), m.slice(1, 1, cols))),
        bound)
        << "mask " << i;
    EXPECT_LT(
        std::abs(MaskCorrelation(m.slice(0, 0, rows - 1), m.slice(0, 1, rows))),
        bound)
        << "mask " << i;
    // Every other call's masks, and the other op's.
    for (size_t j = i + 1; j < masks.size(); ++j) {
      EXPECT_LT(std::abs(MaskCorrelation(m, masks[j])), bound)
          << "masks " << i << " and " << j;
    }
  }
}

TEST(FusedElementwiseDropoutTest, DrawnOnlyWhenTraining) {
  EXPECT_EQ(DrawElementwiseDropout(0.1, false).p, 0);
  EXPECT_EQ(DrawElementwiseDropout(0.0, true).p, 0);
  torch::manual_seed(8);
  const auto a = DrawElementwiseDropout(0.1, true);
  const auto b = DrawElementwiseDropout(0.1, true);
  torch::manual_seed(8);
  EXPECT_EQ(DrawElementwiseDropout(0.1, true).seed, a.seed);
  EXPECT_NE(a.seed, b.seed);
  EXPECT_EQ(a.p, 0.1);
}

TEST(FusedElementwiseTest, SettingResolvesByDeviceAndBuild) {
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  const bool built = FusedElementwiseCompiled();
  EXPECT_EQ(*UseFusedElementwise(FusedElementwise::kAuto, cpu), false);
  EXPECT_EQ(*UseFusedElementwise(FusedElementwise::kAuto, cuda), built);
  EXPECT_EQ(*UseFusedElementwise(FusedElementwise::kOff, cuda), false);
  const absl::StatusOr<bool> on_cuda =
      UseFusedElementwise(FusedElementwise::kOn, cuda);
  EXPECT_EQ(on_cuda.ok(), built);
  if (!built) {
    EXPECT_NE(on_cuda.status().message().find("-DXLNET_CUDA_ATTENTION=ON"),
              std::string::npos)
        << on_cuda.status();
  }
  const absl::StatusOr<bool> on_cpu =
      UseFusedElementwise(FusedElementwise::kOn, cpu);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_NE(on_cpu.status().message().find("train.fused_elementwise"),
            std::string::npos)
      << on_cpu.status();
}

TEST(FusedElementwiseTest, RejectsBadArguments) {
  const auto y = torch::randn({2, 4});
  EXPECT_THROW(
      BiasActivationDropout(y, torch::zeros({3}), FusedActivation::kGelu, {}),
      c10::Error);
  EXPECT_THROW(BiasActivationDropout(y.to(torch::kDouble), torch::zeros({4}),
                                     FusedActivation::kGelu, {}),
               c10::Error);
  EXPECT_THROW(
      DropoutResidualLayerNorm(y, torch::randn({2, 5}), torch::ones({4}),
                               torch::zeros({4}), 1e-5, {}),
      c10::Error);
  ElementwiseDropout bad;
  bad.p = 1;
  EXPECT_THROW(DropoutResidualLayerNorm(y, y, torch::ones({4}),
                                        torch::zeros({4}), 1e-5, bad),
               c10::Error);
  EXPECT_THROW(FusedActivationFromName("swish"), c10::Error);
  // The copy is for a low-precision y beside an fp32 residual.
  EXPECT_THROW(DropoutResidualLayerNormWithCopy(y, y, torch::ones({4}),
                                                torch::zeros({4}), 1e-5, {}),
               c10::Error);
  EXPECT_THROW(DropoutResidualLayerNormWithCopy(
                   y.to(torch::kBFloat16), y.to(torch::kBFloat16),
                   torch::ones({4}), torch::zeros({4}), 1e-5, {}),
               c10::Error);
  EXPECT_TRUE(LayerNormCopyAvailable(torch::kCPU));
  EXPECT_THROW(AddBiasPair(y, torch::zeros({3}), torch::zeros({4})),
               c10::Error);
  EXPECT_THROW(AddBiasPair(y, torch::zeros({4}), torch::zeros({2, 4})),
               c10::Error);
  EXPECT_THROW(
      AddBiasPair(y.to(torch::kDouble), torch::zeros({4}), torch::zeros({4})),
      c10::Error);
  EXPECT_THROW(
      AddBiasPair(y, torch::zeros({4}, torch::kLong), torch::zeros({4})),
      c10::Error);
  EXPECT_TRUE(BiasPairAvailable(torch::kCPU));
}

// --------------------------------------------------------------- AddBiasPair

// AddBiasPair's outputs and the gradients of sum(out_a * grad_a + out_b *
// grad_b) w.r.t. x, bias_a and bias_b; `fused` false: the LibTorch adds it
// replaces (each bias cast to x's dtype, as the attention core adds them).
struct PairResult {
  torch::Tensor a, b;
  std::vector<torch::Tensor> grads;  // x, bias_a, bias_b
};

PairResult BiasPairRun(bool fused, const torch::Tensor& x,
                       const torch::Tensor& bias_a, const torch::Tensor& bias_b,
                       const torch::Tensor& grad_a,
                       const torch::Tensor& grad_b) {
  std::vector<torch::Tensor> in;
  for (const auto* t : {&x, &bias_a, &bias_b})
    in.push_back(t->detach().clone().requires_grad_(true));
  PairResult r;
  if (fused) {
    std::tie(r.a, r.b) = AddBiasPair(in[0], in[1], in[2]);
  } else {
    r.a = in[0] + in[1].to(x.scalar_type());
    r.b = in[0] + in[2].to(x.scalar_type());
  }
  r.grads = GradsOfTwo(in, r.a, grad_a, r.b, grad_b);
  r.a = r.a.detach();
  r.b = r.b.detach();
  return r;
}

// x [rows, cols] and the outputs' gradients in dtype, fp32 biases [cols].
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           torch::Tensor>
RandomPairInputs(int64_t rows, int64_t cols, torch::ScalarType dtype) {
  torch::manual_seed(rows * 7 + cols);
  auto x = torch::randn({rows, cols}).to(dtype);
  auto a = torch::randn({cols});
  auto b = torch::randn({cols});
  auto ga = torch::randn({rows, cols}).to(dtype);
  auto gb = torch::randn({rows, cols}).to(dtype);
  return {x, a, b, ga, gb};
}

// f(dtype, rows, cols) for fp32, fp16 and bf16 on each shape of
// ElementwiseKernelShapes, traced.
template <typename F>
void ForEachBiasPairCase(F f) {
  for (const auto dtype : {torch::kFloat, torch::kHalf, torch::kBFloat16}) {
    for (const auto& [rows, cols, inner] : ElementwiseKernelShapes()) {
      (void)inner;
      SCOPED_TRACE(::testing::Message()
                   << dtype << " rows " << rows << " cols " << cols);
      f(dtype, rows, cols);
    }
  }
}

// Forward and x's gradient are the LibTorch adds' bits (fp32, fp16, bf16;
// each a single rounding of an fp32 sum); the bias gradients are fp32
// column sums rounded to x's dtype, as LibTorch's (which sum in x's dtype
// with fp32 accumulation): in fp32 within summation-order error of the
// double-precision sums, in fp16/bf16 within one rounding of them and of
// LibTorch's.
TEST(BiasPairTest, MatchesLibTorchAdds) {
  ForEachBiasPairCase([&](torch::ScalarType dtype, int64_t rows, int64_t cols) {
    const auto [x, a, b, ga, gb] = RandomPairInputs(rows, cols, dtype);
    const PairResult fused = BiasPairRun(true, x, a, b, ga, gb);
    const PairResult ref = BiasPairRun(false, x, a, b, ga, gb);
    EXPECT_TRUE(fused.a.equal(ref.a));
    EXPECT_TRUE(fused.b.equal(ref.b));
    EXPECT_EQ(fused.a.scalar_type(), dtype);
    EXPECT_TRUE(fused.grads[0].equal(ref.grads[0])) << "grad x";
    for (int i = 1; i < 3; ++i) {
      const auto& g = i == 1 ? ga : gb;
      EXPECT_EQ(fused.grads[i].scalar_type(), torch::kFloat);
      const auto exact = g.to(torch::kDouble).sum(0);
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
      EXPECT_LE(RelDiff(fused.grads[i].to(torch::kDouble), exact), tol)
          << "grad bias " << i;
      EXPECT_LE(RelDiff(fused.grads[i], ref.grads[i]), tol)
          << "grad bias " << i << " against LibTorch";
    }
  });
}

// An output nobody reads contributes no gradient: x's gradient is the
// other's, that bias's gradient zero; biases in bf16 keep their dtype.
TEST(BiasPairTest, OneOutputWithoutGradient) {
  torch::manual_seed(3);
  const auto x = torch::randn({6, 10});
  const auto a = torch::randn({10}).to(torch::kBFloat16);
  const auto b = torch::randn({10});
  const auto ga = torch::randn({6, 10});
  const PairResult r = BiasPairRun(true, x, a, b, ga, torch::Tensor());
  EXPECT_TRUE(r.grads[0].equal(ga));
  EXPECT_EQ(r.grads[1].scalar_type(), torch::kBFloat16);
  EXPECT_LE(RelDiff(r.grads[1].to(torch::kFloat),
                    ga.sum(0).to(torch::kBFloat16).to(torch::kFloat)),
            1e-2);
  EXPECT_TRUE(r.grads[2].equal(torch::zeros({10})));
}

// ------------------------------------------------------------ the model

struct ModelStep {
  torch::Tensor logits;
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
};

ModelStep TrainStep(XLNetLMHeadModel& model, const XLNetInputs& x,
                    const torch::Tensor& labels, bool fused, bool checkpointing,
                    uint64_t seed) {
  model->train();
  model->zero_grad();
  model->transformer->SetFusedElementwise(fused);
  model->transformer->SetActivationCheckpointing(checkpointing);
  torch::manual_seed(seed);
  XLNetLMOutputs out = model->forward(x);
  auto loss = PartialPredictionLoss(out.logits, labels);
  loss.backward();
  ModelStep s;
  s.logits = out.logits.detach();
  s.loss = loss.item<double>();
  for (const auto& p : model->named_parameters()) {
    if (p.value().grad().defined()) s.grads[p.key()] = p.value().grad().clone();
  }
  return s;
}

// Dropout 0: the fused model computes the unfused model's function (all
// three activations, both streams, memory, segments, padding), under the
// unfused attention core and under the tiled one (whose queries' biases
// the fused model adds with AddBiasPair).
TEST(FusedElementwiseModelTest, MatchesUnfusedModelWithoutDropout) {
  for (const auto impl : {AttentionImpl::kUnfused, AttentionImpl::kTiled}) {
    for (const char* act : {"gelu", "gelu_new", "relu"}) {
      SCOPED_TRACE(::testing::Message() << act << " " << EnumName(impl));
      XLNetConfig config = testing::TinyConfig();
      config.ff_activation = act;
      auto model = testing::MakeRandomModel(config, 5);
      AttentionOptions attention;
      attention.impl = impl;
      model->transformer->SetAttention(attention);
      XLNetInputs x = testing::MakePlmInputs(3, 10, 3, config.vocab_size,
                                             {0, 2, 0}, /*seed=*/6);
      x.mems = {torch::randn({4, 3, config.d_model}),
                torch::randn({4, 3, config.d_model})};
      const auto labels = torch::randint(0, config.vocab_size, {3, 3});
      const ModelStep plain = TrainStep(model, x, labels, false, false, 1);
      const ModelStep fused = TrainStep(model, x, labels, true, false, 1);
      EXPECT_LE(MaxAbsDiff(plain.logits, fused.logits), 1e-4);
      EXPECT_NEAR(plain.loss, fused.loss, 1e-5);
      ASSERT_EQ(plain.grads.size(), fused.grads.size());
      double worst = 0;
      for (const auto& [name, g] : plain.grads) {
        const double d = RelDiff(fused.grads.at(name), g);
        EXPECT_LE(d, 1e-4) << name;
        worst = std::max(worst, d);
      }
      std::printf("[ diff     ] %s %s: %zu grads, worst relative %.3g\n", act,
                  EnumName(impl), plain.grads.size(), worst);
    }
  }
}

// With dropout, activation checkpointing's replay draws the same seeds (it
// restores the CPU generator), so the fused ops drop the same elements:
// loss and gradients equal the run without checkpointing.
TEST(FusedElementwiseModelTest, ActivationCheckpointingReplaysTheDropout) {
  XLNetConfig config = testing::TinyConfig();
  config.dropout = 0.2;
  auto model = testing::MakeRandomModel(config, 7);
  XLNetInputs x =
      testing::MakePlmInputs(2, 9, 2, config.vocab_size, {0, 1}, /*seed=*/8);
  const auto labels = torch::randint(0, config.vocab_size, {2, 2});
  const ModelStep plain = TrainStep(model, x, labels, true, false, 3);
  const ModelStep ckpt = TrainStep(model, x, labels, true, true, 3);
  EXPECT_NEAR(plain.loss, ckpt.loss, 1e-6);
  for (const auto& [name, g] : plain.grads) {
    EXPECT_LE(MaxAbsDiff(g, ckpt.grads.at(name)), 1e-6) << name;
  }
  // Dropout is on: another seed gives another loss.
  const ModelStep other = TrainStep(model, x, labels, true, false, 4);
  EXPECT_GT(std::abs(other.loss - plain.loss), 1e-4);
}

// Nodes called `name` in the autograd graph of `root`.
int CountNodes(const torch::Tensor& root, const std::string& name) {
  std::vector<torch::autograd::Node*> todo = {root.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int count = 0;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (node->name() == name) ++count;
    for (const auto& edge : node->next_edges())
      todo.push_back(edge.function.get());
  }
  return count;
}

// Under bf16 autocast with the fused ops, the LayerNorms' copies
// (SetLayerNormCopies) change no bit of the logits, the loss, the
// gradients or the new memory, dropout on (the seeds are drawn in the same
// order), both streams, memory in and out; and they remove the streams'
// casts from the loss's graph: the layer inputs' after the first and the
// feed-forward inputs', two streams each, but for the last layer's content
// stream, which the loss (from the query stream) does not reach.
TEST(FusedElementwiseModelTest, LayerNormCopiesChangeNoBitUnderAutocast) {
  XLNetConfig config = testing::TinyConfig();
  config.dropout = 0.1;
  auto model = testing::MakeRandomModel(config, 12);
  XLNetInputs x =
      testing::MakePlmInputs(2, 9, 3, config.vocab_size, {0, 2}, /*seed=*/13);
  x.mems = {torch::randn({4, 2, config.d_model}),
            torch::randn({4, 2, config.d_model})};
  const auto labels = torch::randint(0, config.vocab_size, {2, 3});
  struct Run {
    ModelStep step;
    std::vector<torch::Tensor> mems;
    int casts = 0;
  };
  const auto run = [&](bool copies) {
    model->train();
    model->zero_grad();
    model->transformer->SetFusedElementwise(true);
    model->transformer->SetLayerNormCopies(copies);
    torch::manual_seed(14);
    Run r;
    torch::Tensor loss;
    {
      AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
      XLNetLMOutputs out = model->forward(x, {/*use_mems=*/true});
      loss = PartialPredictionLoss(out.logits, labels);
      r.step.logits = out.logits.detach();
      r.mems = out.new_mems;
    }
    r.casts = CountNodes(loss, "ToCopyBackward0");
    loss.backward();
    r.step.loss = loss.item<double>();
    for (const auto& p : model->named_parameters()) {
      if (p.value().grad().defined()) {
        r.step.grads[p.key()] = p.value().grad().clone();
      }
    }
    return r;
  };
  const Run cast = run(false);
  const Run copy = run(true);
  model->transformer->SetLayerNormCopies(true);
  EXPECT_TRUE(torch::equal(cast.step.logits, copy.step.logits));
  EXPECT_EQ(cast.step.loss, copy.step.loss);
  ASSERT_EQ(cast.step.grads.size(), copy.step.grads.size());
  for (const auto& [name, g] : cast.step.grads) {
    EXPECT_TRUE(torch::equal(g, copy.step.grads.at(name))) << name;
  }
  ASSERT_EQ(cast.mems.size(), copy.mems.size());
  for (size_t n = 0; n < cast.mems.size(); ++n) {
    EXPECT_EQ(copy.mems[n].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(cast.mems[n], copy.mems[n])) << n;
  }
  const int n_layer = static_cast<int>(config.n_layer);
  EXPECT_EQ(cast.casts - copy.casts, 2 * (n_layer - 1) + 2 * n_layer - 1);
}

// ------------------------------------------------------------ CUDA

// Fills blocks of the given sizes (bytes) with NaN and frees them to the
// caching allocator (on the current stream, so in order with what
// follows): the op's outputs and workspaces of those sizes reuse them, and
// an element a kernel fails to write reads as NaN.
void PoisonCudaAllocator(const std::vector<int64_t>& bytes) {
  std::vector<torch::Tensor> blocks;
  for (const int64_t n : bytes) {
    blocks.push_back(torch::full({(n + 3) / 4},
                                 std::numeric_limits<float>::quiet_NaN(),
                                 torch::TensorOptions().device(torch::kCUDA)));
  }
}

// The CUDA kernels against the CPU implementation on fresh random inputs,
// forward and backward, fp32 and bf16, with and without dropout, on a
// vectorised shape (cols % 4 == 0, the base preset's 768 and 3072 columns),
// scalar ones (cols 10; cols 1026, whose LayerNorm backward asks for more
// than the default 48 KiB of shared memory) and the widest rows (2048).
TEST(FusedElementwiseCudaTest, MatchesTheCpuImplementation) {
  if (!torch::cuda::is_available() || !FusedElementwiseCompiled()) {
    GTEST_SKIP() << "needs a GPU and a build with -DXLNET_CUDA_ATTENTION=ON";
  }
  const auto gpu = [](const std::vector<torch::Tensor>& ts) {
    std::vector<torch::Tensor> out;
    for (const auto& t : ts) out.push_back(t.to(torch::kCUDA));
    return out;
  };
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    // fp32: the same fp32 maths (erff, rsqrtf and summation order differ);
    // bf16: one rounding of the output apart.
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
    const int64_t e = dtype == torch::kFloat ? 4 : 2;
    for (const double p : {0.0, 0.2}) {
      for (const auto& [rows, cols, inner] : ElementwiseKernelShapes()) {
        SCOPED_TRACE(::testing::Message() << dtype << " p " << p << " rows "
                                          << rows << " cols " << cols);
        torch::manual_seed(rows + cols);
        const ElementwiseDropout d = Dropout(p, 0x1234567890ull, 11);
        const auto y1 = torch::randn({rows, inner}).to(dtype);
        const auto b1 = torch::randn({inner});
        const auto g1 = torch::randn({rows, inner}).to(dtype);
        const std::vector<torch::Tensor> ln_in = {
            torch::randn({rows, cols}).to(dtype), torch::randn({rows, cols}),
            torch::randn({cols}), torch::randn({cols})};
        const auto g2 = torch::randn({rows, cols});
        const auto gelu = FusedActivation::kGelu;
        const OpResult cpu1 = BiasActRun(true, y1, b1, gelu, d, g1);
        const OpResult cpu2 = ResidualLnRun(true, ln_in, 1e-12, d, g2);
        PoisonCudaAllocator(
            {rows * inner * e, rows * inner * e, inner * 4, 1024 * inner * 4});
        const auto in1 = gpu({y1, b1, g1});
        const OpResult gpu1 = BiasActRun(true, in1[0], in1[1], gelu, d, in1[2]);
        PoisonCudaAllocator({rows * cols * 4, rows * cols * e, rows * cols * 4,
                             rows * 4, rows * 4, cols * 4, cols * 4,
                             512 * 2 * cols * 4});
        const OpResult gpu2 =
            ResidualLnRun(true, gpu(ln_in), 1e-12, d, g2.to(torch::kCUDA));
        EXPECT_LE(RelDiff(gpu1.out, cpu1.out), tol) << "bias act out";
        EXPECT_LE(RelDiff(gpu1.grads[0], cpu1.grads[0]), tol) << "grad y";
        EXPECT_LE(RelDiff(gpu1.grads[1], cpu1.grads[1]), 1e-4) << "grad bias";
        EXPECT_LE(RelDiff(gpu2.out, cpu2.out), 1e-5) << "ln out";
        EXPECT_LE(RelDiff(gpu2.grads[0], cpu2.grads[0]), tol) << "grad y";
        const char* names[] = {"grad residual", "grad gamma", "grad beta"};
        for (int i = 1; i < 4; ++i) {
          EXPECT_LE(RelDiff(gpu2.grads[i], cpu2.grads[i]), 1e-4)
              << names[i - 1];
        }
        // No atomics: a second backward gives the same bits.
        const OpResult again =
            ResidualLnRun(true, gpu(ln_in), 1e-12, d, g2.to(torch::kCUDA));
        EXPECT_TRUE(again.grads[2].equal(gpu2.grads[2]));
        EXPECT_TRUE(again.grads[3].equal(gpu2.grads[3]));
        const OpResult again1 =
            BiasActRun(true, in1[0], in1[1], gelu, d, in1[2]);
        EXPECT_TRUE(again1.grads[1].equal(gpu1.grads[1]));
      }
    }
  }
}

// AddBiasPair's kernels (-DXLNET_CUDA_PENDING=ON) against its CPU
// implementation: the sums and x's gradient bit for bit (one rounding of
// the same fp32 sums), the bias gradients within fp32 summation order,
// and bit-identical on a second run (no atomics); fp32, fp16 and bf16 on
// the vectorised and scalar shapes.
TEST(FusedElementwiseCudaTest, BiasPairMatchesTheCpuImplementation) {
  if (!torch::cuda::is_available() || !BiasPairAvailable(torch::kCUDA)) {
    GTEST_SKIP() << "needs a GPU and a build with -DXLNET_CUDA_ATTENTION=ON "
                    "-DXLNET_CUDA_PENDING=ON";
  }
  ForEachBiasPairCase([&](torch::ScalarType dtype, int64_t rows, int64_t cols) {
    const auto [x, a, b, ga, gb] = RandomPairInputs(rows, cols, dtype);
    const PairResult cpu = BiasPairRun(true, x, a, b, ga, gb);
    const auto c = [](const torch::Tensor& t) { return t.to(torch::kCUDA); };
    const int64_t e = dtype == torch::kFloat ? 4 : 2;
    PoisonCudaAllocator({rows * cols * e, rows * cols * e, rows * cols * e,
                         cols * 4, cols * 4, 512 * 2 * cols * 4});
    const PairResult gpu = BiasPairRun(true, c(x), c(a), c(b), c(ga), c(gb));
    EXPECT_TRUE(gpu.a.cpu().equal(cpu.a));
    EXPECT_TRUE(gpu.b.cpu().equal(cpu.b));
    EXPECT_TRUE(gpu.grads[0].cpu().equal(cpu.grads[0])) << "grad x";
    // fp32 sums in another order, then (fp16, bf16) rounded to x's dtype.
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_LE(RelDiff(gpu.grads[1].cpu(), cpu.grads[1]), tol);
    EXPECT_LE(RelDiff(gpu.grads[2].cpu(), cpu.grads[2]), tol);
    const PairResult again = BiasPairRun(true, c(x), c(a), c(b), c(ga), c(gb));
    EXPECT_TRUE(again.grads[1].equal(gpu.grads[1]));
    EXPECT_TRUE(again.grads[2].equal(gpu.grads[2]));
  });
}

// The copy on CUDA: the kernels'
// copy is the cast bit for bit and so are the gradients, on the widths of
// every column-group variant, vectorised or not, with and without dropout;
// then a bf16 training step of a tiny model with and without the copies.
TEST(FusedElementwiseCudaTest, LayerNormCopyIsTheCastBitForBit) {
  if (!torch::cuda::is_available() || !FusedElementwiseCompiled()) {
    GTEST_SKIP() << "needs a GPU and a build with -DXLNET_CUDA_ATTENTION=ON";
  }
  ASSERT_TRUE(LayerNormCopyAvailable(torch::kCUDA));
  const auto gpu = [](const torch::Tensor& t) { return t.to(torch::kCUDA); };
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (const double p : {0.0, 0.2}) {
      for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
               {517, 768}, {37, 10}, {45, 1026}, {20, 2048}, {33, 1024}}) {
        SCOPED_TRACE(::testing::Message() << dtype << " p " << p << " rows "
                                          << rows << " cols " << cols);
        torch::manual_seed(rows * cols);
        const std::vector<torch::Tensor> inputs = {
            gpu(torch::randn({rows, cols}).to(dtype)),
            gpu(torch::randn({rows, cols})), gpu(torch::randn({cols})),
            gpu(torch::randn({cols}))};
        const auto on_out = gpu(torch::randn({rows, cols}));
        const auto on_copy = gpu(torch::randn({rows, cols}).to(dtype));
        const ElementwiseDropout d = Dropout(p, 0x5eedull, 2);
        for (const auto& [a, b] :
             std::vector<std::pair<torch::Tensor, torch::Tensor>>{
                 {on_out, on_copy}, {on_out, {}}, {{}, on_copy}}) {
          const CopyRun fused = ResidualLnCopyRun(true, inputs, d, a, b);
          const CopyRun ref = ResidualLnCopyRun(false, inputs, d, a, b);
          EXPECT_TRUE(torch::equal(fused.out, ref.out));
          EXPECT_TRUE(torch::equal(fused.copy, ref.copy));
          for (int i = 0; i < 4; ++i) {
            EXPECT_TRUE(torch::equal(fused.grads[i], ref.grads[i])) << i;
          }
        }
      }
    }
  }
  // A tiny model's bf16 step: the copies against the casts. Bit for bit
  // where two runs of the casts agree (else within rounding).
  XLNetConfig config = testing::TinyConfig();
  auto model = testing::MakeRandomModel(config, 15);
  model->to(torch::kCUDA);
  XLNetInputs x =
      testing::MakePlmInputs(2, 9, 3, config.vocab_size, {0, 2}, /*seed=*/16);
  x.input_ids = gpu(x.input_ids);
  x.perm_mask = gpu(x.perm_mask);
  x.target_mapping = gpu(x.target_mapping);
  if (x.token_type_ids.defined()) x.token_type_ids = gpu(x.token_type_ids);
  if (x.attention_mask.defined()) x.attention_mask = gpu(x.attention_mask);
  const auto labels = gpu(torch::randint(0, config.vocab_size, {2, 3}));
  const auto step = [&](bool copies) {
    model->train();
    model->zero_grad();
    model->transformer->SetFusedElementwise(true);
    model->transformer->SetLayerNormCopies(copies);
    torch::manual_seed(17);
    torch::Tensor loss;
    {
      AutocastGuard autocast(torch::kCUDA, torch::kBFloat16);
      loss = PartialPredictionLoss(model->forward(x).logits, labels);
    }
    loss.backward();
    std::vector<torch::Tensor> out = {loss.detach()};
    for (const auto& q : model->parameters()) out.push_back(q.grad().clone());
    return out;
  };
  const auto cast = step(false), cast_again = step(false), copy = step(true);
  model->transformer->SetLayerNormCopies(true);
  bool deterministic = true;
  for (size_t i = 0; i < cast.size(); ++i) {
    deterministic = deterministic && torch::equal(cast[i], cast_again[i]);
  }
  for (size_t i = 0; i < cast.size(); ++i) {
    if (deterministic) {
      EXPECT_TRUE(torch::equal(cast[i], copy[i])) << i;
    } else {
      EXPECT_LE(RelDiff(copy[i], cast[i]), 1e-5) << i;
    }
  }
}

}  // namespace
}  // namespace xlnet
