// Launchers of the fused element-wise kernels behind model/fused_elementwise.h
// (train.fused_elementwise). Plain C++ and the CUDA runtime only, no LibTorch
// (as position_bias_kernels.h): fused_elementwise.cc owns tensors, autograd
// and the CPU implementation of the same maths.
//
// Both ops see their input as rows x cols, row-major and contiguous (cols =
// the last dimension). Dropout keeps element (row, col) iff
//   AttentionKeepBits8(seed, offset, stream, row, col & ~7, threshold)
// has bit (col & 7) set (model/philox.h), so the CPU loops and these kernels
// drop the same elements, and backward regenerates the mask instead of
// storing it.
//
//   BiasAct:  out = drop(act(y + bias))              y, out [rows, cols] T
//   BiasPair: out_a = x + bias_a, out_b = x + bias_b  x, out_*, bias_* T
//             backward: grad_x = grad_a + grad_b (T) and the column sums of
//             grad_a and grad_b (fp32); no dropout
//   ResidualLayerNorm:
//             z = drop(y) + residual                 y [rows, cols] T
//             out = (z - mean) * rstd * gamma + beta residual, out    R
//             (and out's copy in T, where asked for)
// with T, R in {fp32, fp16, bf16} (R fp32 or T), all arithmetic in fp32,
// bias/gamma/beta fp32 (BiasPair's biases T, as LibTorch adds them).
// Gradients of bias, gamma and beta are sums over
// rows: each block writes its partial sums to a workspace, then a second
// kernel adds the partials of each column in a fixed order, so results do
// not vary from run to run (no atomics).
#pragma once

#ifdef XLNET_CUDA_EMULATION  // the kernels on the CPU (emulation.h)
#include "model/cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <cstdint>

namespace xlnet::fused_elementwise {

enum class DType { kFloat, kHalf, kBFloat16 };

// The activation of BiasAct: exact (erf) GELU, its tanh approximation
// (HF's gelu_new) or ReLU.
enum class Activation { kGelu, kGeluTanh, kRelu };

struct Dropout {
  bool on = false;         // false: keep everything, scale 1
  uint32_t threshold = 0;  // AttentionKeepThreshold(p)
  float scale = 1;         // 1 / (1 - p)
  uint64_t seed = 0, offset = 0;
  uint32_t stream = 0;  // the counter's third word (one per op)
};

struct BiasActParams {
  DType dtype = DType::kFloat;
  Activation act = Activation::kGelu;
  int64_t rows = 0, cols = 0;
  const void* y = nullptr;      // [rows, cols] dtype
  const float* bias = nullptr;  // [cols]
  Dropout drop;
};

// Rows of the bias-gradient workspace BiasActBackward needs: it takes
// float[BiasActPartialRows(rows, cols) * cols].
int64_t BiasActPartialRows(int64_t rows, int64_t cols);

// out [rows, cols] in p.dtype.
cudaError_t BiasActForward(const BiasActParams& p, void* out,
                           cudaStream_t stream);

// grad_out [rows, cols] -> grad_y [rows, cols] (p.dtype) and grad_bias
// [cols] fp32.
cudaError_t BiasActBackward(const BiasActParams& p, const void* grad_out,
                            void* grad_y, float* partial, float* grad_bias,
                            cudaStream_t stream);

struct BiasPairParams {
  DType dtype = DType::kFloat;
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;       // [rows, cols] dtype (forward only)
  const void* bias_a = nullptr;  // [cols] dtype (forward only)
  const void* bias_b = nullptr;  // [cols] dtype (forward only)
};

// Rows of the workspace BiasPairBackward needs: it takes
// float[BiasPairPartialRows(rows, cols) * 2 * cols].
int64_t BiasPairPartialRows(int64_t rows, int64_t cols);

// out_a, out_b [rows, cols] in p.dtype.
cudaError_t BiasPairForward(const BiasPairParams& p, void* out_a, void* out_b,
                            cudaStream_t stream);

// grad_a, grad_b [rows, cols] (p.dtype) -> grad_x [rows, cols] (p.dtype),
// grad_bias_a and grad_bias_b [cols] fp32.
cudaError_t BiasPairBackward(const BiasPairParams& p, const void* grad_a,
                             const void* grad_b, void* grad_x, float* partial,
                             float* grad_bias_a, float* grad_bias_b,
                             cudaStream_t stream);

// CastTensors: up to kMaxCastTensors tensors in one launch, each
//   dst[e] = cast(src[e]) (and dst2[e] the same, where dst2 is set), or,
//   where src2 is set, dst[e] = cast(float(src[e]) + float(src2[e]));
// element e < numel of each, contiguous; rounding to nearest even, as
// LibTorch's casts. The weights' casts to the compute dtype under autocast
// (forward, a copy per stream) and their gradients' casts back and
// per-stream sums (backward) of model/weight_casts.h.
constexpr int kMaxCastTensors = 24;

struct CastList {
  DType src_dtype = DType::kFloat;
  DType dst_dtype = DType::kFloat;
  int count = 0;
  const void* src[kMaxCastTensors] = {};
  const void* src2[kMaxCastTensors] = {};  // null: dst = cast(src)
  void* dst[kMaxCastTensors] = {};
  void* dst2[kMaxCastTensors] = {};  // null: none
  int64_t numel[kMaxCastTensors] = {};
};

cudaError_t CastTensors(const CastList& list, cudaStream_t stream);

struct LayerNormParams {
  DType y_dtype = DType::kFloat;    // y, grad_y
  DType res_dtype = DType::kFloat;  // residual, out, grad_out, grad_residual
  int64_t rows = 0, cols = 0;
  const void* y = nullptr;
  const void* residual = nullptr;
  const float* gamma = nullptr;  // [cols]
  const float* beta = nullptr;   // [cols]
  float eps = 1e-12f;
  Dropout drop;
  // With y fp16/bf16 and the residual fp32 only: forward also writes the output
  // in y_dtype to out_copy, and backward adds grad_copy (y_dtype) to grad_out
  // in fp32, where non-null.
  void* out_copy = nullptr;
  const void* grad_copy = nullptr;
};

// The largest cols the LayerNorm kernels take (a warp keeps a row in
// registers).
constexpr int64_t kMaxLayerNormCols = 2048;

// Rows of the workspace ResidualLayerNormBackward needs: it takes
// float[ResidualLayerNormPartialRows(rows) * 2 * cols].
int64_t ResidualLayerNormPartialRows(int64_t rows);

// out [rows, cols] (res_dtype); mean, rstd [rows] fp32 for backward.
cudaError_t ResidualLayerNormForward(const LayerNormParams& p, void* out,
                                     float* mean, float* rstd,
                                     cudaStream_t stream);

// grad_out [rows, cols] (res_dtype) -> grad_y (y_dtype), grad_residual
// (res_dtype), grad_gamma and grad_beta [cols] fp32.
cudaError_t ResidualLayerNormBackward(const LayerNormParams& p,
                                      const void* grad_out, const float* mean,
                                      const float* rstd, void* grad_y,
                                      void* grad_residual, float* partial,
                                      float* grad_gamma, float* grad_beta,
                                      cudaStream_t stream);

}  // namespace xlnet::fused_elementwise
