// The fused element-wise kernels compiled for the CPU
// (fused_elementwise_emulated.h), in their own namespace
// (fused_elementwise_emulated): a CUDA build links the real kernels into the
// same test. LibTorch comes first: the emulation's keyword macros are for
// the kernel source only.
#include "tests/model/cuda/fused_elementwise_emulated.h"

#include <torch/torch.h>

#include "model/philox.h"

#define XLNET_CUDA_EMULATION 1
#define fused_elementwise fused_elementwise_emulated
#include "model/cuda/fused_elementwise_kernels.cu"

namespace xlnet::testing {
namespace {

namespace fe = ::xlnet::fused_elementwise;

// The counter's third word of each op, as model/fused_elementwise.cc
// draws them (kBiasActivationStream, kResidualLayerNormStream).
constexpr uint32_t kBiasActStream = 0xFFFFFFFEu;
constexpr uint32_t kLayerNormStream = 0xFFFFFFFDu;

fe::DType KernelDType(torch::ScalarType t) {
  return t == torch::kFloat  ? fe::DType::kFloat
         : t == torch::kHalf ? fe::DType::kHalf
                             : fe::DType::kBFloat16;
}

fe::Dropout KernelDropout(const ElementwiseDropout& d, uint32_t stream) {
  fe::Dropout k;
  k.on = d.p > 0;
  k.threshold = AttentionKeepThreshold(d.p);
  k.scale = static_cast<float>(1.0 / (1.0 - d.p));
  k.seed = d.seed;
  k.offset = d.offset;
  k.stream = stream;
  return k;
}

fe::Activation KernelActivation(FusedActivation a) {
  return a == FusedActivation::kGelu       ? fe::Activation::kGelu
         : a == FusedActivation::kGeluTanh ? fe::Activation::kGeluTanh
                                           : fe::Activation::kRelu;
}

std::string Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return "";
  return std::string(what) + ": error " + std::to_string(static_cast<int>(e)) +
         " " + cuda_emulation::LastLaunchMessage();
}

}  // namespace

EmulatedOutputs EmulatedBiasAct(const torch::Tensor& y,
                                const torch::Tensor& bias, FusedActivation act,
                                const ElementwiseDropout& dropout,
                                const torch::Tensor& grad_out) {
  fe::BiasActParams p;
  p.dtype = KernelDType(y.scalar_type());
  p.act = KernelActivation(act);
  p.rows = y.size(0);
  p.cols = y.size(1);
  p.y = y.data_ptr();
  p.bias = bias.data_ptr<float>();
  p.drop = KernelDropout(dropout, kBiasActStream);
  EmulatedOutputs r;
  auto out = torch::full_like(y, std::nanf(""));
  r.error += Check(fe::BiasActForward(p, out.data_ptr(), nullptr), "forward");
  auto grad_y = torch::full_like(y, std::nanf(""));
  auto grad_bias = torch::full({p.cols}, std::nanf(""));
  auto partial = torch::full({fe::BiasActPartialRows(p.rows, p.cols), p.cols},
                             std::nanf(""));
  r.error +=
      Check(fe::BiasActBackward(p, grad_out.data_ptr(), grad_y.data_ptr(),
                                partial.data_ptr<float>(),
                                grad_bias.data_ptr<float>(), nullptr),
            "backward");
  r.tensors = {out, grad_y, grad_bias};
  return r;
}

EmulatedOutputs EmulatedBiasPair(const torch::Tensor& x,
                                 const torch::Tensor& bias_a,
                                 const torch::Tensor& bias_b,
                                 const torch::Tensor& grad_a,
                                 const torch::Tensor& grad_b) {
  fe::BiasPairParams p;
  p.dtype = KernelDType(x.scalar_type());
  p.rows = x.size(0);
  p.cols = x.size(1);
  p.x = x.data_ptr();
  p.bias_a = bias_a.data_ptr();
  p.bias_b = bias_b.data_ptr();
  EmulatedOutputs r;
  auto out_a = torch::full_like(x, std::nanf(""));
  auto out_b = torch::full_like(x, std::nanf(""));
  r.error +=
      Check(fe::BiasPairForward(p, out_a.data_ptr(), out_b.data_ptr(), nullptr),
            "forward");
  auto grad_x = torch::full_like(x, std::nanf(""));
  auto grad_bias_a = torch::full({p.cols}, std::nanf(""));
  auto grad_bias_b = torch::full({p.cols}, std::nanf(""));
  auto partial = torch::full(
      {fe::BiasPairPartialRows(p.rows, p.cols), 2 * p.cols}, std::nanf(""));
  r.error +=
      Check(fe::BiasPairBackward(p, grad_a.data_ptr(), grad_b.data_ptr(),
                                 grad_x.data_ptr(), partial.data_ptr<float>(),
                                 grad_bias_a.data_ptr<float>(),
                                 grad_bias_b.data_ptr<float>(), nullptr),
            "backward");
  r.tensors = {out_a, out_b, grad_x, grad_bias_a, grad_bias_b};
  return r;
}

EmulatedOutputs EmulatedCastTensors(const std::vector<EmulatedCast>& casts) {
  fe::CastList list;
  EmulatedOutputs r;
  if (casts.empty()) return r;
  list.src_dtype = KernelDType(casts[0].src.scalar_type());
  list.dst_dtype = KernelDType(casts[0].dtype);
  list.count = static_cast<int>(casts.size());
  if (list.count > fe::kMaxCastTensors) {
    r.error = Check(fe::CastTensors(list, nullptr), "cast");
    return r;
  }
  for (int k = 0; k < list.count; ++k) {
    const EmulatedCast& c = casts[k];
    auto dst = torch::full(c.src.sizes(), std::nanf(""),
                           torch::TensorOptions().dtype(c.dtype));
    list.src[k] = c.src.data_ptr();
    list.src2[k] = c.src2.defined() ? c.src2.data_ptr() : nullptr;
    list.dst[k] = dst.data_ptr();
    list.numel[k] = c.src.numel();
    r.tensors.push_back(dst);
    if (c.second) {
      auto dst2 = torch::full_like(dst, std::nanf(""));
      list.dst2[k] = dst2.data_ptr();
      r.tensors.push_back(dst2);
    }
  }
  r.error += Check(fe::CastTensors(list, nullptr), "cast");
  return r;
}

EmulatedOutputs EmulatedResidualLayerNorm(const torch::Tensor& y,
                                          const torch::Tensor& residual,
                                          const torch::Tensor& gamma,
                                          const torch::Tensor& beta, double eps,
                                          const ElementwiseDropout& dropout,
                                          const torch::Tensor& grad_out) {
  fe::LayerNormParams p;
  p.y_dtype = KernelDType(y.scalar_type());
  p.res_dtype = KernelDType(residual.scalar_type());
  p.rows = y.size(0);
  p.cols = y.size(1);
  p.y = y.data_ptr();
  p.residual = residual.data_ptr();
  p.gamma = gamma.data_ptr<float>();
  p.beta = beta.data_ptr<float>();
  p.eps = static_cast<float>(eps);
  p.drop = KernelDropout(dropout, kLayerNormStream);
  EmulatedOutputs r;
  auto out = torch::full_like(residual, std::nanf(""));
  auto mean = torch::full({p.rows}, std::nanf(""));
  auto rstd = torch::full({p.rows}, std::nanf(""));
  r.error += Check(
      fe::ResidualLayerNormForward(p, out.data_ptr(), mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(), nullptr),
      "forward");
  auto grad_y = torch::full_like(y, std::nanf(""));
  auto grad_res = torch::full_like(residual, std::nanf(""));
  auto grad_gamma = torch::full({p.cols}, std::nanf(""));
  auto grad_beta = torch::full({p.cols}, std::nanf(""));
  auto partial = torch::full(
      {fe::ResidualLayerNormPartialRows(p.rows), 2 * p.cols}, std::nanf(""));
  r.error +=
      Check(fe::ResidualLayerNormBackward(
                p, grad_out.data_ptr(), mean.data_ptr<float>(),
                rstd.data_ptr<float>(), grad_y.data_ptr(), grad_res.data_ptr(),
                partial.data_ptr<float>(), grad_gamma.data_ptr<float>(),
                grad_beta.data_ptr<float>(), nullptr),
            "backward");
  r.tensors = {out, grad_y, grad_res, grad_gamma, grad_beta};
  return r;
}

}  // namespace xlnet::testing
