#include "model/fused_elementwise.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/counter_dropout.h"
#include "model/philox.h"

#ifdef XLNET_CUDA_ATTENTION
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/cuda/fused_elementwise_dtype.h"
#include "model/cuda/fused_elementwise_kernels.h"
#endif

namespace xlnet {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The counter's third word of each op, so the two ops (and the attention's
// b*H + h, CounterDropout's 0xFFFFFFFF) never share a stream for one seed.
constexpr uint32_t kBiasActivationStream = 0xFFFFFFFEu;
constexpr uint32_t kResidualLayerNormStream = 0xFFFFFFFDu;

// One op call's dropout as both implementations use it.
struct DropSpec {
  bool on = false;
  uint32_t threshold = 0;
  float scale = 1;
  uint64_t seed = 0, offset = 0;
  uint32_t stream = 0;
};

DropSpec MakeDropSpec(const ElementwiseDropout& d, uint32_t stream) {
  TORCH_CHECK(d.p >= 0 && d.p < 1, "dropout must be in [0, 1), got ", d.p);
  DropSpec s;
  s.on = d.p > 0;
  s.threshold = AttentionKeepThreshold(d.p);
  s.scale = static_cast<float>(1.0 / (1.0 - d.p));
  s.seed = d.seed;
  s.offset = d.offset;
  s.stream = stream;
  return s;
}

// factor[c] = scale if element (row, c) is kept, 0 if dropped (1 without
// dropout), c < cols.
void RowFactors(const DropSpec& d, int64_t row, int64_t cols, float* factor) {
  if (!d.on) {
    std::fill(factor, factor + cols, 1.f);
    return;
  }
  for (int64_t c0 = 0; c0 < cols; c0 += kKeysPerDraw) {
    const uint32_t bits =
        AttentionKeepBits8(d.seed, d.offset, d.stream, row, c0, d.threshold);
    for (int64_t t = 0; t < kKeysPerDraw && c0 + t < cols; ++t)
      factor[c0 + t] = (bits >> t) & 1u ? d.scale : 0.f;
  }
}

torch::Tensor KeepMask(int64_t rows, int64_t cols, const ElementwiseDropout& d,
                       uint32_t stream) {
  const DropSpec s = MakeDropSpec(d, stream);
  auto keep = torch::empty({rows, cols}, torch::kBool);
  bool* data = keep.data_ptr<bool>();
  std::vector<float> f(cols);
  for (int64_t r = 0; r < rows; ++r) {
    RowFactors(s, r, cols, f.data());
    for (int64_t c = 0; c < cols; ++c) data[r * cols + c] = f[c] != 0.f;
  }
  return keep;
}

// Rows of t seen as [rows, last dimension].
int64_t RowsOf(const torch::Tensor& t) {
  return t.numel() / std::max<int64_t>(t.size(-1), 1);
}

// Calls f with a value of the C++ type of t (fp32, fp16 or bf16).
template <typename F>
void DispatchFloat(torch::ScalarType t, const char* what, F f) {
  switch (t) {
    case torch::kFloat:
      return f(float{});
    case torch::kHalf:
      return f(c10::Half{});
    case torch::kBFloat16:
      return f(c10::BFloat16{});
    default:
      TORCH_CHECK(false, what, ": fp32, fp16 or bf16 expected, got ", t);
  }
}

// ------------------------------------------------- the maths, CPU (fp32)

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kTanhCubic = 0.044715f;

float Act(FusedActivation a, float u) {
  switch (a) {
    case FusedActivation::kGelu:
      return 0.5f * u * (1.f + std::erf(u * kSqrtHalf));
    case FusedActivation::kGeluTanh:
      return 0.5f * u *
             (1.f + std::tanh(kSqrt2OverPi * (u + kTanhCubic * u * u * u)));
    case FusedActivation::kRelu:
      break;
  }
  return u > 0.f ? u : 0.f;
}

float ActGrad(FusedActivation a, float u) {
  switch (a) {
    case FusedActivation::kGelu:
      return 0.5f * (1.f + std::erf(u * kSqrtHalf)) +
             u * kInvSqrt2Pi * std::exp(-0.5f * u * u);
    case FusedActivation::kGeluTanh: {
      const float th = std::tanh(kSqrt2OverPi * (u + kTanhCubic * u * u * u));
      return 0.5f * (1.f + th) + 0.5f * u * (1.f - th * th) * kSqrt2OverPi *
                                     (1.f + 3.f * kTanhCubic * u * u);
    }
    case FusedActivation::kRelu:
      break;
  }
  return u > 0.f ? 1.f : 0.f;
}

// y [rows, cols] contiguous, bias fp32 [cols] -> out (y's dtype).
torch::Tensor CpuBiasActForward(const torch::Tensor& y,
                                const torch::Tensor& bias, FusedActivation act,
                                const DropSpec& d) {
  const int64_t cols = y.size(-1), rows = RowsOf(y);
  auto out = torch::empty_like(y);
  DispatchFloat(y.scalar_type(), "BiasActivationDropout", [&](auto tag) {
    using T = decltype(tag);
    const T* in = y.data_ptr<T>();
    T* o = out.data_ptr<T>();
    const float* b = bias.data_ptr<float>();
    std::vector<float> f(cols);
    for (int64_t r = 0; r < rows; ++r) {
      RowFactors(d, r, cols, f.data());
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = r * cols + c;
        o[k] =
            static_cast<T>(Act(act, static_cast<float>(in[k]) + b[c]) * f[c]);
      }
    }
  });
  return out;
}

// -> {grad_y (y's dtype), grad_bias fp32 [cols]}.
std::pair<torch::Tensor, torch::Tensor> CpuBiasActBackward(
    const torch::Tensor& y, const torch::Tensor& bias,
    const torch::Tensor& grad_out, FusedActivation act, const DropSpec& d) {
  const int64_t cols = y.size(-1), rows = RowsOf(y);
  auto grad_y = torch::empty_like(y);
  auto grad_bias = torch::zeros({cols}, y.options().dtype(torch::kFloat));
  DispatchFloat(y.scalar_type(), "BiasActivationDropout", [&](auto tag) {
    using T = decltype(tag);
    const T* in = y.data_ptr<T>();
    const T* go = grad_out.data_ptr<T>();
    T* gy = grad_y.data_ptr<T>();
    const float* b = bias.data_ptr<float>();
    float* gb = grad_bias.data_ptr<float>();
    std::vector<float> f(cols);
    for (int64_t r = 0; r < rows; ++r) {
      RowFactors(d, r, cols, f.data());
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = r * cols + c;
        const float g = static_cast<float>(go[k]) * f[c] *
                        ActGrad(act, static_cast<float>(in[k]) + b[c]);
        gy[k] = static_cast<T>(g);
        gb[c] += g;
      }
    }
  });
  return {grad_y, grad_bias};
}

// For each row r of y and residual (contiguous, [rows, cols]): the dropout
// factors of the row and z = drop(y) + residual, then
// f(r, factor, z, TY{}, TR{}) with TY, TR the C++ types of y and residual.
template <typename F>
void ForEachLayerNormRow(const torch::Tensor& y, const torch::Tensor& residual,
                         const DropSpec& d, F f) {
  const int64_t cols = y.size(-1), rows = RowsOf(y);
  DispatchFloat(y.scalar_type(), "DropoutResidualLayerNorm", [&](auto ytag) {
    DispatchFloat(
        residual.scalar_type(), "DropoutResidualLayerNorm", [&](auto rtag) {
          using TY = decltype(ytag);
          using TR = decltype(rtag);
          const TY* yp = y.data_ptr<TY>();
          const TR* rp = residual.data_ptr<TR>();
          std::vector<float> factor(cols), z(cols);
          for (int64_t r = 0; r < rows; ++r) {
            RowFactors(d, r, cols, factor.data());
            for (int64_t c = 0; c < cols; ++c) {
              z[c] = static_cast<float>(yp[r * cols + c]) * factor[c] +
                     static_cast<float>(rp[r * cols + c]);
            }
            f(r, factor.data(), z.data(), ytag, rtag);
          }
        });
  });
}

// DropoutResidualLayerNorm's tensors as both implementations take them:
// y and residual contiguous [rows, cols]; gamma, beta fp32 [cols]; mean and
// rstd fp32 [rows] (written forward, read backward).
struct LayerNormTensors {
  torch::Tensor y, residual, gamma, beta, mean, rstd;
};

// The gradients; gamma and beta fp32, zero-filled before backward.
struct LayerNormGrads {
  torch::Tensor y, residual, gamma, beta;
};

// Writes out (the residual's dtype), t.mean, t.rstd and, when defined,
// `copy` (y's dtype: out rounded once, as out.to(y's dtype) would).
void CpuLayerNormForward(const LayerNormTensors& t, float eps,
                         const DropSpec& d, const torch::Tensor& out,
                         const torch::Tensor& copy) {
  const int64_t cols = t.y.size(-1);
  const float* g = t.gamma.data_ptr<float>();
  const float* b = t.beta.data_ptr<float>();
  float* mean_out = t.mean.data_ptr<float>();
  float* rstd_out = t.rstd.data_ptr<float>();
  const auto row = [&](int64_t r, const float*, const float* z, auto ytag,
                       auto rtag) {
    using TY = decltype(ytag);
    using TR = decltype(rtag);
    TR* o = out.data_ptr<TR>() + r * cols;
    TY* oc = copy.defined() ? copy.data_ptr<TY>() + r * cols : nullptr;
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum += z[c];
    const float mean = sum / static_cast<float>(cols);
    float sq = 0.f;
    for (int64_t c = 0; c < cols; ++c) sq += (z[c] - mean) * (z[c] - mean);
    const float rstd = 1.f / std::sqrt(sq / static_cast<float>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      o[c] = static_cast<TR>((z[c] - mean) * rstd * g[c] + b[c]);
      if (oc != nullptr) oc[c] = static_cast<TY>(static_cast<float>(o[c]));
    }
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  };
  ForEachLayerNormRow(t.y, t.residual, d, row);
}

// grad_out: the gradient of out (the residual's dtype); grad_copy, when
// defined, that of the copy (y's dtype), added to it in fp32.
void CpuLayerNormBackward(const LayerNormTensors& t,
                          const torch::Tensor& grad_out,
                          const torch::Tensor& grad_copy, const DropSpec& d,
                          const LayerNormGrads& grads) {
  const int64_t cols = t.y.size(-1);
  const float* g = t.gamma.data_ptr<float>();
  const float* mean_in = t.mean.data_ptr<float>();
  const float* rstd_in = t.rstd.data_ptr<float>();
  float* gg = grads.gamma.data_ptr<float>();
  float* gb = grads.beta.data_ptr<float>();
  std::vector<float> xhat(cols), dx(cols);
  const float inv_cols = 1.f / static_cast<float>(cols);
  const auto row = [&](int64_t r, const float* factor, const float* z,
                       auto ytag, auto rtag) {
    using TY = decltype(ytag);
    using TR = decltype(rtag);
    const TR* go = grad_out.data_ptr<TR>() + r * cols;
    const TY* gc =
        grad_copy.defined() ? grad_copy.data_ptr<TY>() + r * cols : nullptr;
    TY* gy = grads.y.data_ptr<TY>() + r * cols;
    TR* gr = grads.residual.data_ptr<TR>() + r * cols;
    const float mu = mean_in[r], rs = rstd_in[r];
    float sum_dx = 0.f, sum_dx_xhat = 0.f;
    for (int64_t c = 0; c < cols; ++c) {
      const float o =
          gc != nullptr ? static_cast<float>(go[c]) + static_cast<float>(gc[c])
                        : static_cast<float>(go[c]);
      xhat[c] = (z[c] - mu) * rs;
      dx[c] = o * g[c];
      gg[c] += o * xhat[c];
      gb[c] += o;
      sum_dx += dx[c];
      sum_dx_xhat += dx[c] * xhat[c];
    }
    const float mean_dx = sum_dx * inv_cols;
    const float mean_dx_xhat = sum_dx_xhat * inv_cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float dz = rs * (dx[c] - mean_dx - xhat[c] * mean_dx_xhat);
      gr[c] = static_cast<TR>(dz);
      gy[c] = static_cast<TY>(dz * factor[c]);
    }
  };
  ForEachLayerNormRow(t.y, t.residual, d, row);
}

// x [rows, cols] contiguous, biases in x's dtype [cols] -> {x + a, x + b}.
std::pair<torch::Tensor, torch::Tensor> CpuBiasPairForward(
    const torch::Tensor& x, const torch::Tensor& bias_a,
    const torch::Tensor& bias_b) {
  const int64_t cols = x.size(-1), rows = RowsOf(x);
  auto out_a = torch::empty_like(x);
  auto out_b = torch::empty_like(x);
  DispatchFloat(x.scalar_type(), "AddBiasPair", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data_ptr<T>();
    const T* a = bias_a.data_ptr<T>();
    const T* b = bias_b.data_ptr<T>();
    T* oa = out_a.data_ptr<T>();
    T* ob = out_b.data_ptr<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = r * cols + c;
        const float v = static_cast<float>(in[k]);
        oa[k] = static_cast<T>(v + static_cast<float>(a[c]));
        ob[k] = static_cast<T>(v + static_cast<float>(b[c]));
      }
    }
  });
  return {out_a, out_b};
}

// The gradients of AddBiasPair.
struct BiasPairGrads {
  torch::Tensor x;     // x's dtype
  torch::Tensor a, b;  // fp32 [cols]
};

// grad_a, grad_b [rows, cols] contiguous, one dtype.
BiasPairGrads CpuBiasPairBackward(const torch::Tensor& grad_a,
                                  const torch::Tensor& grad_b) {
  const int64_t cols = grad_a.size(-1), rows = RowsOf(grad_a);
  BiasPairGrads g;
  g.x = torch::empty_like(grad_a);
  g.a = torch::zeros({cols}, grad_a.options().dtype(torch::kFloat));
  g.b = torch::zeros({cols}, grad_a.options().dtype(torch::kFloat));
  DispatchFloat(grad_a.scalar_type(), "AddBiasPair", [&](auto tag) {
    using T = decltype(tag);
    const T* ga = grad_a.data_ptr<T>();
    const T* gb = grad_b.data_ptr<T>();
    T* gx = g.x.data_ptr<T>();
    float* sa = g.a.data_ptr<float>();
    float* sb = g.b.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = r * cols + c;
        const float va = static_cast<float>(ga[k]);
        const float vb = static_cast<float>(gb[k]);
        gx[k] = static_cast<T>(va + vb);
        sa[c] += va;
        sb[c] += vb;
      }
    }
  });
  return g;
}

// ------------------------------------------------------------------- CUDA

#ifdef XLNET_CUDA_ATTENTION
namespace fe = fused_elementwise;

using fe::KernelDType;

fe::Dropout KernelDropout(const DropSpec& d) {
  return {d.on, d.threshold, d.scale, d.seed, d.offset, d.stream};
}

fe::Activation KernelActivation(FusedActivation a) {
  switch (a) {
    case FusedActivation::kGelu:
      return fe::Activation::kGelu;
    case FusedActivation::kGeluTanh:
      return fe::Activation::kGeluTanh;
    case FusedActivation::kRelu:
      break;
  }
  return fe::Activation::kRelu;
}

cudaStream_t StreamOf(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

fe::BiasActParams BiasActParamsOf(const torch::Tensor& y,
                                  const torch::Tensor& bias,
                                  FusedActivation act, const DropSpec& d) {
  fe::BiasActParams p;
  p.dtype = KernelDType(y.scalar_type());
  p.act = KernelActivation(act);
  p.cols = y.size(-1);
  p.rows = RowsOf(y);
  p.y = y.data_ptr();
  p.bias = bias.data_ptr<float>();
  p.drop = KernelDropout(d);
  return p;
}

torch::Tensor CudaBiasActForward(const torch::Tensor& y,
                                 const torch::Tensor& bias, FusedActivation act,
                                 const DropSpec& d) {
  const c10::cuda::CUDAGuard guard(y.device());
  auto out = torch::empty_like(y);
  C10_CUDA_CHECK(fe::BiasActForward(BiasActParamsOf(y, bias, act, d),
                                    out.data_ptr(), StreamOf(y)));
  return out;
}

std::pair<torch::Tensor, torch::Tensor> CudaBiasActBackward(
    const torch::Tensor& y, const torch::Tensor& bias,
    const torch::Tensor& grad_out, FusedActivation act, const DropSpec& d) {
  const c10::cuda::CUDAGuard guard(y.device());
  const fe::BiasActParams p = BiasActParamsOf(y, bias, act, d);
  auto grad_y = torch::empty_like(y);
  auto grad_bias = torch::empty({p.cols}, y.options().dtype(torch::kFloat));
  auto partial = torch::empty({fe::BiasActPartialRows(p.rows, p.cols), p.cols},
                              y.options().dtype(torch::kFloat));
  C10_CUDA_CHECK(fe::BiasActBackward(p, grad_out.data_ptr(), grad_y.data_ptr(),
                                     partial.data_ptr<float>(),
                                     grad_bias.data_ptr<float>(), StreamOf(y)));
  return {grad_y, grad_bias};
}

fe::LayerNormParams LayerNormParamsOf(const LayerNormTensors& t, float eps,
                                      const DropSpec& d) {
  fe::LayerNormParams p;
  p.y_dtype = KernelDType(t.y.scalar_type());
  p.res_dtype = KernelDType(t.residual.scalar_type());
  p.cols = t.y.size(-1);
  p.rows = RowsOf(t.y);
  p.y = t.y.data_ptr();
  p.residual = t.residual.data_ptr();
  p.gamma = t.gamma.data_ptr<float>();
  if (t.beta.defined()) p.beta = t.beta.data_ptr<float>();
  p.eps = eps;
  p.drop = KernelDropout(d);
  return p;
}

void CudaLayerNormForward(const LayerNormTensors& t, float eps,
                          const DropSpec& d, const torch::Tensor& out,
                          const torch::Tensor& copy) {
  const c10::cuda::CUDAGuard guard(t.y.device());
  fe::LayerNormParams p = LayerNormParamsOf(t, eps, d);
  if (copy.defined()) p.out_copy = copy.data_ptr();
  C10_CUDA_CHECK(
      fe::ResidualLayerNormForward(p, out.data_ptr(), t.mean.data_ptr<float>(),
                                   t.rstd.data_ptr<float>(), StreamOf(t.y)));
}

void CudaLayerNormBackward(const LayerNormTensors& t,
                           const torch::Tensor& grad_out,
                           const torch::Tensor& grad_copy, const DropSpec& d,
                           const LayerNormGrads& grads) {
  const c10::cuda::CUDAGuard guard(t.y.device());
  fe::LayerNormParams p = LayerNormParamsOf(t, 0.f, d);
  if (grad_copy.defined()) p.grad_copy = grad_copy.data_ptr();
  auto partial =
      torch::empty({fe::ResidualLayerNormPartialRows(p.rows), 2 * p.cols},
                   t.y.options().dtype(torch::kFloat));
  C10_CUDA_CHECK(fe::ResidualLayerNormBackward(
      p, grad_out.data_ptr(), t.mean.data_ptr<float>(),
      t.rstd.data_ptr<float>(), grads.y.data_ptr(), grads.residual.data_ptr(),
      partial.data_ptr<float>(), grads.gamma.data_ptr<float>(),
      grads.beta.data_ptr<float>(), StreamOf(t.y)));
}

#ifdef XLNET_CUDA_PENDING
std::pair<torch::Tensor, torch::Tensor> CudaBiasPairForward(
    const torch::Tensor& x, const torch::Tensor& bias_a,
    const torch::Tensor& bias_b) {
  const c10::cuda::CUDAGuard guard(x.device());
  fe::BiasPairParams p;
  p.dtype = KernelDType(x.scalar_type());
  p.cols = x.size(-1);
  p.rows = RowsOf(x);
  p.x = x.data_ptr();
  p.bias_a = bias_a.data_ptr();
  p.bias_b = bias_b.data_ptr();
  auto out_a = torch::empty_like(x);
  auto out_b = torch::empty_like(x);
  C10_CUDA_CHECK(
      fe::BiasPairForward(p, out_a.data_ptr(), out_b.data_ptr(), StreamOf(x)));
  return {out_a, out_b};
}

BiasPairGrads CudaBiasPairBackward(const torch::Tensor& grad_a,
                                   const torch::Tensor& grad_b) {
  const c10::cuda::CUDAGuard guard(grad_a.device());
  fe::BiasPairParams p;
  p.dtype = KernelDType(grad_a.scalar_type());
  p.cols = grad_a.size(-1);
  p.rows = RowsOf(grad_a);
  BiasPairGrads g;
  g.x = torch::empty_like(grad_a);
  const auto f32 = grad_a.options().dtype(torch::kFloat);
  g.a = torch::empty({p.cols}, f32);
  g.b = torch::empty({p.cols}, f32);
  auto partial =
      torch::empty({fe::BiasPairPartialRows(p.rows, p.cols), 2 * p.cols}, f32);
  C10_CUDA_CHECK(fe::BiasPairBackward(p, grad_a.data_ptr(), grad_b.data_ptr(),
                                      g.x.data_ptr(), partial.data_ptr<float>(),
                                      g.a.data_ptr<float>(),
                                      g.b.data_ptr<float>(), StreamOf(grad_a)));
  return g;
}
#endif  // XLNET_CUDA_PENDING
#endif  // XLNET_CUDA_ATTENTION

// A CUDA tensor in a build without the kernels.
void CheckCudaBuild(const torch::Tensor& t, const char* op) {
#ifndef XLNET_CUDA_ATTENTION
  TORCH_CHECK(!t.is_cuda(), op,
              " on CUDA tensors needs the kernels: build with "
              "-DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON");
#else
  (void)t;
  (void)op;
#endif
}

DropSpec SavedDropSpec(AutogradContext* ctx, uint32_t stream) {
  ElementwiseDropout d;
  d.p = ctx->saved_data["p"].toDouble();
  d.seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
  d.offset = static_cast<uint64_t>(ctx->saved_data["offset"].toInt());
  return MakeDropSpec(d, stream);
}

void SaveDropout(AutogradContext* ctx, const ElementwiseDropout& d) {
  ctx->saved_data["p"] = d.p;
  ctx->saved_data["seed"] = static_cast<int64_t>(d.seed);
  ctx->saved_data["offset"] = static_cast<int64_t>(d.offset);
}

ElementwiseDropout DropoutOf(double p, int64_t seed, int64_t offset) {
  ElementwiseDropout d;
  d.p = p;
  d.seed = static_cast<uint64_t>(seed);
  d.offset = static_cast<uint64_t>(offset);
  return d;
}

// ---------------------------------------------------------------- autograd

class BiasActivationDropoutFunction
    : public torch::autograd::Function<BiasActivationDropoutFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& bias, int64_t act, double p,
                               int64_t seed, int64_t offset) {
    const auto yc = y.contiguous();
    const auto bias32 = bias.to(torch::kFloat).contiguous();
    const ElementwiseDropout d = DropoutOf(p, seed, offset);
    const DropSpec spec = MakeDropSpec(d, kBiasActivationStream);
    const auto a = static_cast<FusedActivation>(act);
    torch::Tensor out;
#ifdef XLNET_CUDA_ATTENTION
    if (yc.is_cuda()) out = CudaBiasActForward(yc, bias32, a, spec);
#endif
    if (!out.defined()) out = CpuBiasActForward(yc, bias32, a, spec);
    ctx->save_for_backward({yc, bias32});
    ctx->saved_data["act"] = act;
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    SaveDropout(ctx, d);
    return out;
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    variable_list result(6);
    if (!grad_outputs[0].defined()) return result;
    const auto saved = ctx->get_saved_variables();
    const auto& y = saved[0];
    const auto& bias32 = saved[1];
    const auto grad_out = grad_outputs[0].to(y.scalar_type()).contiguous();
    const auto a = static_cast<FusedActivation>(ctx->saved_data["act"].toInt());
    const DropSpec spec = SavedDropSpec(ctx, kBiasActivationStream);
    std::pair<torch::Tensor, torch::Tensor> grads;
#ifdef XLNET_CUDA_ATTENTION
    if (y.is_cuda()) grads = CudaBiasActBackward(y, bias32, grad_out, a, spec);
#endif
    if (!grads.first.defined())
      grads = CpuBiasActBackward(y, bias32, grad_out, a, spec);
    result[0] = grads.first;
    result[1] = grads.second.to(
        static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt()));
    return result;
  }
};

// Outputs {out} or, with `copy`, {out, out in y's dtype}.
class DropoutResidualLayerNormFunction
    : public torch::autograd::Function<DropoutResidualLayerNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& residual,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta, double eps, double p,
                               int64_t seed, int64_t offset, bool copy) {
    LayerNormTensors t;
    t.y = y.contiguous();
    t.residual = residual.contiguous();
    t.gamma = gamma.to(torch::kFloat).contiguous();
    t.beta = beta.to(torch::kFloat).contiguous();
    const auto stats = y.options().dtype(torch::kFloat);
    t.mean = torch::empty({RowsOf(t.y)}, stats);
    t.rstd = torch::empty({RowsOf(t.y)}, stats);
    auto out = torch::empty_like(t.residual);
    torch::Tensor out_copy;
    if (copy) out_copy = torch::empty_like(t.residual, t.y.scalar_type());
    const ElementwiseDropout d = DropoutOf(p, seed, offset);
    const DropSpec spec = MakeDropSpec(d, kResidualLayerNormStream);
    if (t.y.is_cuda()) {
#ifdef XLNET_CUDA_ATTENTION
      CudaLayerNormForward(t, static_cast<float>(eps), spec, out, out_copy);
#endif
    } else {
      CpuLayerNormForward(t, static_cast<float>(eps), spec, out, out_copy);
    }
    ctx->save_for_backward({t.y, t.residual, t.gamma, t.mean, t.rstd});
    ctx->saved_data["gamma_dtype"] = static_cast<int64_t>(gamma.scalar_type());
    ctx->saved_data["beta_dtype"] = static_cast<int64_t>(beta.scalar_type());
    SaveDropout(ctx, d);
    if (copy) return {out, out_copy};
    return {out};
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    variable_list result(9);
    const auto saved = ctx->get_saved_variables();
    LayerNormTensors t;
    t.y = saved[0];
    t.residual = saved[1];
    t.gamma = saved[2];
    t.mean = saved[3];
    t.rstd = saved[4];
    torch::Tensor grad_out = grad_outputs[0], grad_copy;
    if (grad_outputs.size() > 1 && grad_outputs[1].defined()) {
      grad_copy = grad_outputs[1].to(t.y.scalar_type()).contiguous();
      // Only the copy is used: its gradient alone, as autograd would pass
      // it through a cast.
      if (!grad_out.defined()) {
        grad_out = grad_copy;
        grad_copy = torch::Tensor();
      }
    }
    if (!grad_out.defined()) return result;
    grad_out = grad_out.to(t.residual.scalar_type()).contiguous();
    const DropSpec spec = SavedDropSpec(ctx, kResidualLayerNormStream);
    LayerNormGrads g;
    g.y = torch::empty_like(t.y);
    g.residual = torch::empty_like(t.residual);
    g.gamma = torch::zeros_like(t.gamma);
    g.beta = torch::zeros_like(t.gamma);
    if (t.y.is_cuda()) {
#ifdef XLNET_CUDA_ATTENTION
      CudaLayerNormBackward(t, grad_out, grad_copy, spec, g);
#endif
    } else {
      CpuLayerNormBackward(t, grad_out, grad_copy, spec, g);
    }
    result[0] = g.y;
    result[1] = g.residual;
    result[2] = g.gamma.to(
        static_cast<torch::ScalarType>(ctx->saved_data["gamma_dtype"].toInt()));
    result[3] = g.beta.to(
        static_cast<torch::ScalarType>(ctx->saved_data["beta_dtype"].toInt()));
    return result;
  }
};

// Outputs {x + bias_a, x + bias_b}.
class BiasPairFunction : public torch::autograd::Function<BiasPairFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& bias_a,
                               const torch::Tensor& bias_b) {
    const auto xc = x.contiguous();
    const auto a = bias_a.to(x.scalar_type()).contiguous();
    const auto b = bias_b.to(x.scalar_type()).contiguous();
    std::pair<torch::Tensor, torch::Tensor> out;
#ifdef XLNET_CUDA_PENDING
    if (xc.is_cuda()) out = CudaBiasPairForward(xc, a, b);
#endif
    if (!out.first.defined()) out = CpuBiasPairForward(xc, a, b);
    ctx->saved_data["a_dtype"] = static_cast<int64_t>(bias_a.scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(bias_b.scalar_type());
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    return {out.first, out.second};
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    variable_list result(3);
    torch::Tensor ga = grad_outputs[0], gb = grad_outputs[1];
    if (!ga.defined() && !gb.defined()) return result;
    const auto dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    // An output without a gradient contributes zeros.
    if (!ga.defined()) ga = torch::zeros_like(gb);
    if (!gb.defined()) gb = torch::zeros_like(ga);
    ga = ga.to(dtype).contiguous();
    gb = gb.to(dtype).contiguous();
    BiasPairGrads g;
#ifdef XLNET_CUDA_PENDING
    if (ga.is_cuda()) g = CudaBiasPairBackward(ga, gb);
#endif
    if (!g.x.defined()) g = CpuBiasPairBackward(ga, gb);
    // The biases are used cast to x's dtype: their gradients pass through
    // that dtype, as through the cast's backward (so a bias given in x's
    // dtype and one given in fp32 get the same bits).
    result[0] = g.x;
    result[1] = g.a.to(dtype).to(
        static_cast<torch::ScalarType>(ctx->saved_data["a_dtype"].toInt()));
    result[2] = g.b.to(dtype).to(
        static_cast<torch::ScalarType>(ctx->saved_data["b_dtype"].toInt()));
    return result;
  }
};

bool IsFloat16Or32(torch::ScalarType t) {
  return t == torch::kFloat || t == torch::kHalf || t == torch::kBFloat16;
}

}  // namespace

bool FusedElementwiseCompiled() {
#ifdef XLNET_CUDA_ATTENTION
  return true;
#else
  return false;
#endif
}

absl::StatusOr<bool> UseFusedElementwise(FusedElementwise setting,
                                         const torch::Device& device) {
  switch (setting) {
    case FusedElementwise::kOff:
      return false;
    case FusedElementwise::kAuto:
      return device.is_cuda() && FusedElementwiseCompiled();
    case FusedElementwise::kOn:
      break;
  }
  if (!FusedElementwiseCompiled()) {
    return absl::InvalidArgumentError(
        "train.fused_elementwise: true needs a build with "
        "-DXLNET_WITH_CUDA=ON and -DXLNET_CUDA_ATTENTION=ON (the default "
        "with CUDA); this build has no fused element-wise kernels (set it "
        "to auto or false)");
  }
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("train.fused_elementwise: true needs device cuda, got ",
                     device.str(), " (set it to auto or false)"));
  }
  return true;
}

FusedActivation FusedActivationFromName(const std::string& name) {
  if (name == "gelu") return FusedActivation::kGelu;
  if (name == "gelu_new") return FusedActivation::kGeluTanh;
  TORCH_CHECK(name == "relu", "fused element-wise ops: activation '", name,
              "' is not gelu, gelu_new or relu");
  return FusedActivation::kRelu;
}

ElementwiseDropout DrawElementwiseDropout(double p, bool training) {
  ElementwiseDropout d;
  if (training && p > 0) {
    d.p = p;
    d.seed = DrawCpuSeed();
  }
  return d;
}

torch::Tensor BiasActivationDropout(const torch::Tensor& y,
                                    const torch::Tensor& bias,
                                    FusedActivation act,
                                    const ElementwiseDropout& dropout) {
  TORCH_CHECK(y.dim() >= 1 && IsFloat16Or32(y.scalar_type()),
              "BiasActivationDropout: y must be fp32, fp16 or bf16 [..., C], "
              "got ",
              y.scalar_type(), " ", y.sizes());
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == y.size(-1) &&
                  at::isFloatingType(bias.scalar_type()) &&
                  bias.device() == y.device(),
              "BiasActivationDropout: bias must be a floating [", y.size(-1),
              "] on ", y.device(), ", got ", bias.scalar_type(), " ",
              bias.sizes(), " on ", bias.device());
  TORCH_CHECK(dropout.p >= 0 && dropout.p < 1,
              "BiasActivationDropout: dropout must be in [0, 1), got ",
              dropout.p);
  CheckCudaBuild(y, "BiasActivationDropout");
  return BiasActivationDropoutFunction::apply(
      y, bias, static_cast<int64_t>(act), dropout.p,
      static_cast<int64_t>(dropout.seed), static_cast<int64_t>(dropout.offset));
}

namespace {

// DropoutResidualLayerNorm's argument checks.
void CheckLayerNormArguments(const torch::Tensor& y,
                             const torch::Tensor& residual,
                             const torch::Tensor& gamma,
                             const torch::Tensor& beta,
                             const ElementwiseDropout& dropout) {
  TORCH_CHECK(y.dim() >= 1 && IsFloat16Or32(y.scalar_type()),
              "DropoutResidualLayerNorm: y must be fp32, fp16 or bf16 "
              "[..., C], got ",
              y.scalar_type(), " ", y.sizes());
  TORCH_CHECK(
      residual.sizes() == y.sizes() && residual.device() == y.device() &&
          (residual.scalar_type() == torch::kFloat ||
           residual.scalar_type() == y.scalar_type()),
      "DropoutResidualLayerNorm: residual must have y's shape ", y.sizes(),
      " and device, dtype fp32 or y's ", y.scalar_type(), "; got ",
      residual.scalar_type(), " ", residual.sizes(), " on ", residual.device());
  const int64_t c = y.size(-1);
  for (const auto* t : {&gamma, &beta}) {
    TORCH_CHECK(
        t->dim() == 1 && t->size(0) == c &&
            at::isFloatingType(t->scalar_type()) && t->device() == y.device(),
        "DropoutResidualLayerNorm: gamma and beta must be floating [", c,
        "] on ", y.device(), ", got ", t->sizes(), " on ", t->device());
  }
  TORCH_CHECK(dropout.p >= 0 && dropout.p < 1,
              "DropoutResidualLayerNorm: dropout must be in [0, 1), got ",
              dropout.p);
  CheckCudaBuild(y, "DropoutResidualLayerNorm");
#ifdef XLNET_CUDA_ATTENTION
  TORCH_CHECK(
      !y.is_cuda() || (c >= 1 && c <= fused_elementwise::kMaxLayerNormCols),
      "DropoutResidualLayerNorm: on CUDA the last dimension must be "
      "in [1, ",
      fused_elementwise::kMaxLayerNormCols, "], got ", c);
#endif
}

}  // namespace

torch::Tensor DropoutResidualLayerNorm(const torch::Tensor& y,
                                       const torch::Tensor& residual,
                                       const torch::Tensor& gamma,
                                       const torch::Tensor& beta, double eps,
                                       const ElementwiseDropout& dropout) {
  CheckLayerNormArguments(y, residual, gamma, beta, dropout);
  return DropoutResidualLayerNormFunction::apply(
      y, residual, gamma, beta, eps, dropout.p,
      static_cast<int64_t>(dropout.seed), static_cast<int64_t>(dropout.offset),
      /*copy=*/false)[0];
}

bool LayerNormCopyAvailable(const torch::Device& device) {
  if (!device.is_cuda()) return true;
#ifdef XLNET_CUDA_ATTENTION
  return true;
#else
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> DropoutResidualLayerNormWithCopy(
    const torch::Tensor& y, const torch::Tensor& residual,
    const torch::Tensor& gamma, const torch::Tensor& beta, double eps,
    const ElementwiseDropout& dropout) {
  CheckLayerNormArguments(y, residual, gamma, beta, dropout);
  TORCH_CHECK((y.scalar_type() == torch::kHalf ||
               y.scalar_type() == torch::kBFloat16) &&
                  residual.scalar_type() == torch::kFloat,
              "DropoutResidualLayerNormWithCopy: y must be fp16 or bf16 and "
              "the residual fp32, got ",
              y.scalar_type(), " and ", residual.scalar_type());
  TORCH_CHECK(
      LayerNormCopyAvailable(y.device()),
      "DropoutResidualLayerNormWithCopy on ", y.device(),
      " needs a build with our CUDA kernels (-DXLNET_CUDA_ATTENTION=ON)");
  auto out = DropoutResidualLayerNormFunction::apply(
      y, residual, gamma, beta, eps, dropout.p,
      static_cast<int64_t>(dropout.seed), static_cast<int64_t>(dropout.offset),
      /*copy=*/true);
  return {out[0], out[1]};
}

bool BiasPairAvailable(const torch::Device& device) {
  if (!device.is_cuda()) return true;
#if defined(XLNET_CUDA_ATTENTION) && defined(XLNET_CUDA_PENDING)
  return true;
#else
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> AddBiasPair(
    const torch::Tensor& x, const torch::Tensor& bias_a,
    const torch::Tensor& bias_b) {
  TORCH_CHECK(x.dim() >= 1 && IsFloat16Or32(x.scalar_type()),
              "AddBiasPair: x must be fp32, fp16 or bf16 [..., C], got ",
              x.scalar_type(), " ", x.sizes());
  for (const auto* t : {&bias_a, &bias_b}) {
    TORCH_CHECK(t->dim() == 1 && t->size(0) == x.size(-1) &&
                    at::isFloatingType(t->scalar_type()) &&
                    t->device() == x.device(),
                "AddBiasPair: the biases must be floating [", x.size(-1),
                "] on ", x.device(), ", got ", t->scalar_type(), " ",
                t->sizes(), " on ", t->device());
  }
  TORCH_CHECK(BiasPairAvailable(x.device()), "AddBiasPair on ", x.device(),
              " needs a build with our CUDA kernels and "
              "-DXLNET_CUDA_PENDING=ON");
  auto out = BiasPairFunction::apply(x, bias_a, bias_b);
  return {out[0], out[1]};
}

torch::Tensor BiasActivationDropoutKeepMask(int64_t rows, int64_t cols,
                                            const ElementwiseDropout& dropout) {
  return KeepMask(rows, cols, dropout, kBiasActivationStream);
}

torch::Tensor DropoutResidualLayerNormKeepMask(
    int64_t rows, int64_t cols, const ElementwiseDropout& dropout) {
  return KeepMask(rows, cols, dropout, kResidualLayerNormStream);
}

}  // namespace xlnet
