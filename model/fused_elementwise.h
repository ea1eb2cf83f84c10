// Fused element-wise ops of the feed-forward and attention-output blocks
// (train.fused_elementwise): each replaces a chain of LibTorch element-wise
// passes (and, under bf16 autocast, fp32 round trips) by one pass forward
// and one backward.
//
//   BiasActivationDropout:    dropout(act(y + bias)), act = gelu (erf),
//                             gelu_new (tanh) or relu; the feed-forward's
//                             layer_1 then runs without its bias.
//   DropoutResidualLayerNorm: LayerNorm(dropout(y) + residual), fp32
//                             statistics, output in the residual's dtype
//                             (and, WithCopy, also in y's dtype).
//   AddBiasPair:              x + bias_a and x + bias_b (the attention's
//                             q + r_w_bias and q + r_r_bias): x read once
//                             forward; backward one pass for the sum of the
//                             two gradients and both bias gradients.
//
// Dropout is counter-based (model/philox.h): element (row, col) of the
// input seen as [rows, cols] (cols = last dimension) is kept iff
// AttentionKeepBits8(seed, offset, stream, row, col & ~7, threshold) has bit
// col & 7 set, stream a constant per op; kept values are scaled by
// 1 / (1 - p). Backward regenerates the mask instead of storing it. CPU
// tensors run plain C++ loops (the reference, fp32 arithmetic), CUDA tensors
// the kernels of cuda/fused_elementwise_kernels.cu (builds with
// -DXLNET_CUDA_ATTENTION=ON), with the same maths and the same dropout
// decisions. Gradients of bias, gamma and beta are deterministic (per-block
// partial sums, then a fixed-order sum; no atomics).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "config/settings.h"
#include "model/attention_types.h"

namespace xlnet {

// Whether this build contains the CUDA kernels (-DXLNET_CUDA_ATTENTION=ON).
bool FusedElementwiseCompiled();

// train.fused_elementwise for a model on `device`: auto is on exactly for
// CUDA devices in builds with the kernels; true in a build without them is
// an error naming the key and the build options (validation has already
// refused true on the CPU).
absl::StatusOr<bool> UseFusedElementwise(FusedElementwise setting,
                                         const torch::Device& device);

// The activation of BiasActivationDropout.
enum class FusedActivation { kGelu, kGeluTanh, kRelu };

// The config's ff_activation ("gelu", "gelu_new", "relu") as a
// FusedActivation; TORCH_CHECK failure for anything else.
FusedActivation FusedActivationFromName(const std::string& name);

// Counter-based dropout of one op call (p, seed, offset; p = 0 keeps
// everything): the attention's parameters, drawn per element here.
using ElementwiseDropout = AttentionDropout;

// The dropout of a module's forward: p with a seed drawn from the default
// CPU generator when training and p > 0 (so activation checkpointing's
// replay, which restores that generator, and a resumed run draw the same
// masks), else no dropout.
ElementwiseDropout DrawElementwiseDropout(double p, bool training);

// dropout(act(y + bias)): y [..., C] fp32, fp16 or bf16; bias [C] (any
// floating dtype, used in fp32). Returns y's shape and dtype;
// differentiable in y and bias (bias's gradient in bias's dtype). Stores y
// and bias for backward.
torch::Tensor BiasActivationDropout(const torch::Tensor& y,
                                    const torch::Tensor& bias,
                                    FusedActivation act,
                                    const ElementwiseDropout& dropout);

// LayerNorm(dropout(y) + residual) over the last dimension C: y [..., C]
// fp32, fp16 or bf16; residual of y's shape, fp32 or y's dtype; gamma,
// beta [C] (used in fp32). Statistics in fp32; returns the residual's
// dtype; differentiable in y, residual, gamma and beta. On CUDA C is at most
// 2048. Stores y, residual, gamma and the per-row mean and 1/std.
torch::Tensor DropoutResidualLayerNorm(const torch::Tensor& y,
                                       const torch::Tensor& residual,
                                       const torch::Tensor& gamma,
                                       const torch::Tensor& beta, double eps,
                                       const ElementwiseDropout& dropout);

// Whether DropoutResidualLayerNormWithCopy runs on `device`: always on the
// CPU; on CUDA in builds with our kernels (-DXLNET_CUDA_ATTENTION=ON).
bool LayerNormCopyAvailable(const torch::Device& device);

// DropoutResidualLayerNorm that also returns its output in y's dtype, {out,
// out.to(y's dtype)}, written in the same pass. Under autocast the stream
// between layers stays fp32 for the residual sums while its copy feeds the
// next products: no cast forward, and backward neither a cast of the copy's
// gradient nor a sum of the two gradients (the copy's gradient is added to
// out's in fp32 inside backward). Values and gradients are bit for bit
// those of DropoutResidualLayerNorm followed by the cast. y fp16 or bf16,
// residual fp32; TORCH_CHECK failure where !LayerNormCopyAvailable.
std::pair<torch::Tensor, torch::Tensor> DropoutResidualLayerNormWithCopy(
    const torch::Tensor& y, const torch::Tensor& residual,
    const torch::Tensor& gamma, const torch::Tensor& beta, double eps,
    const ElementwiseDropout& dropout);

// Whether AddBiasPair runs on `device`: always on the CPU; on CUDA in
// builds with our kernels and -DXLNET_CUDA_PENDING=ON (its kernels have not
// yet run on a GPU).
bool BiasPairAvailable(const torch::Device& device);

// {x + bias_a, x + bias_b}: x [..., C] fp32, fp16 or bf16; bias_a, bias_b
// [C] floating, rounded to x's dtype before the sums (as LibTorch adds a
// bias cast to x's dtype); returns x's shape and dtype, each sum rounded
// once. Differentiable in x and both biases: x's gradient is the sum of the
// two outputs' (rounded once, in x's dtype), each bias's the column sums of
// its output's gradient in fp32, rounded to x's dtype (as the gradient of
// the bias's cast to x's dtype) and then given in the bias's dtype;
// deterministic.
// Stores nothing for backward. TORCH_CHECK failure where !BiasPairAvailable.
std::pair<torch::Tensor, torch::Tensor> AddBiasPair(
    const torch::Tensor& x, const torch::Tensor& bias_a,
    const torch::Tensor& bias_b);

// The keep decisions of each op for an input seen as [rows, cols], as a
// bool tensor (true = kept), from the scalar Philox reference: for tests
// (the ops never materialise it).
torch::Tensor BiasActivationDropoutKeepMask(int64_t rows, int64_t cols,
                                            const ElementwiseDropout& dropout);
torch::Tensor DropoutResidualLayerNormKeepMask(
    int64_t rows, int64_t cols, const ElementwiseDropout& dropout);

}  // namespace xlnet
