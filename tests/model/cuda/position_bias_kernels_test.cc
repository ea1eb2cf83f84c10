// The relative-position bias kernels of attention 'sdpa' (their own
// source, run on the CPU through model/cuda/emulation.h:
// position_bias_emulated.h) against RelativePositionBias's LibTorch ops on
// the CPU in fp32, with the bounds of the GPU test
// SdpaAttentionTest.CudaBiasKernelMatchesLibTorchOps (fp32 within 1e-6,
// bf16 within 1% of each tensor's scale): the bias, then the gradients of
// bd and seg, for a content stream and a query stream (positions), with
// and without the segment term, a mask per sample or broadcast, and rows
// whose every key is masked.
#include <gtest/gtest.h>

#include <vector>

#include "model/relative_attention.h"
#include "model/sdpa_attention.h"
#include "tests/model/cuda/position_bias_emulated.h"
#include "tests/model/test_util.h"

namespace xlnet::testing {
namespace {

struct BiasCase {
  bool query_stream = false, seg = false, broadcast_mask = false;
};

TEST(PositionBiasKernelsTest, EmulatedKernelsMatchTheLibTorchOps) {
  for (const BiasCase& bc : std::vector<BiasCase>{{false, false, false},
                                                  {false, true, true},
                                                  {true, true, false},
                                                  {true, false, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "query stream " << bc.query_stream << ", segment term "
                 << bc.seg << ", broadcast mask " << bc.broadcast_mask);
    torch::manual_seed(31);
    const int64_t b = 2, h = 3, l = 37, mlen = 20, klen = mlen + l;
    const int64_t lq = bc.query_stream ? 11 : l, rlen = klen + l;
    const double scale = 0.125;
    AttentionBias bias;
    bias.mask = torch::rand({bc.broadcast_mask ? 1 : b, 1, lq, klen}) < 0.3;
    bias.mask.select(2, 1).fill_(true);  // a row with every key masked
    if (bc.seg) bias.seg_diff = torch::rand({b, 1, lq, klen}) < 0.5;
    if (bc.query_stream) {
      bias.query_pos = torch::randint(0, l, {b, lq}, torch::kLong);
    }
    const auto bd = torch::randn({b, h, lq, rlen});
    const auto seg = bc.seg ? torch::randn({b, h, lq, 2}) : torch::Tensor();
    const auto w = torch::randn({b, h, lq, klen});

    // The LibTorch ops in fp32: the bias and the gradients of sum(bias * w).
    auto bd_r = bd.clone().requires_grad_();
    std::vector<torch::Tensor> xs = {bd_r};
    torch::Tensor seg_r;
    if (bc.seg) {
      seg_r = seg.clone().requires_grad_();
      xs.push_back(seg_r);
    }
    const auto ref_bias =
        RelativePositionBias(bd_r, seg_r, bias, l, klen, scale);
    const auto ref_grads = torch::autograd::grad({(ref_bias * w).sum()}, xs);
    std::vector<torch::Tensor> ref = {ref_bias.detach()};
    for (const auto& g : ref_grads) ref.push_back(g);

    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      const char* name = dtype == torch::kFloat ? "fp32" : "bf16";
      const auto got = EmulatedPositionBias(
          bd.to(dtype), bc.seg ? seg.to(dtype) : torch::Tensor(), bias, l, klen,
          scale, w.to(dtype));
      ASSERT_EQ(got.error, "") << name;
      ASSERT_EQ(got.tensors.size(), ref.size()) << name;
      // Masked entries hold the masked value, exactly, and only they do.
      const auto masked = bias.mask.expand({b, h, lq, klen});
      const auto out = got.tensors[0].to(torch::kFloat);
      const auto masked_value =
          torch::full({}, MaskedScoreValue(dtype), torch::kDouble).to(dtype);
      EXPECT_TRUE((got.tensors[0].masked_select(masked) == masked_value)
                      .all()
                      .item<bool>())
          << name;
      EXPECT_TRUE((out.masked_select(~masked).abs() < 1e20).all().item<bool>())
          << name;
      const double tol = dtype == torch::kFloat ? 1e-6 : 0.01;
      for (size_t i = 0; i < ref.size(); ++i) {
        auto keep = i == 0 ? ~masked : torch::ones_like(ref[i], torch::kBool);
        const auto a = ref[i].masked_select(keep);
        const auto g = got.tensors[i].to(torch::kFloat).masked_select(keep);
        const double s = a.abs().max().item<double>() + 1e-12;
        EXPECT_LT(MaxAbsDiff(g, a), tol * s) << name << " " << i;
      }
      // grad_bd is zero outside each row's band and at masked keys (the
      // LibTorch ops' gradient too, compared above); the masked row's
      // gradients are zero.
      EXPECT_EQ(got.tensors[1].select(2, 1).abs().max().item<float>(), 0.f)
          << name;
    }
  }
}

}  // namespace
}  // namespace xlnet::testing
