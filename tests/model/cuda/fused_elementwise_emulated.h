// The fused element-wise kernels (model/cuda/fused_elementwise_kernels.cu)
// compiled for the CPU through model/cuda/emulation.h, run as the autograd
// nodes in fused_elementwise.cc run them, on CPU tensors.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/fused_elementwise.h"

namespace xlnet::testing {

// What the kernels gave: the output, then the gradients; `error` is empty
// unless a launch failed.
struct ElementwiseOutputs {
  std::vector<torch::Tensor> tensors;
  std::string error;
};

// dropout(act(y + bias)) and, for grad_out, its backward: {out, grad_y,
// grad_bias}. y [rows, cols] fp32, fp16 or bf16; bias [cols] fp32.
ElementwiseOutputs EmulatedBiasAct(const torch::Tensor& y,
                                   const torch::Tensor& bias,
                                   FusedActivation act,
                                   const ElementwiseDropout& dropout,
                                   const torch::Tensor& grad_out);

// LayerNorm(dropout(y) + residual) and its backward: {out, grad_y,
// grad_residual, grad_gamma, grad_beta}. residual fp32 or y's dtype; gamma,
// beta [cols] fp32.
ElementwiseOutputs EmulatedResidualLayerNorm(
    const torch::Tensor& y, const torch::Tensor& residual,
    const torch::Tensor& gamma, const torch::Tensor& beta, double eps,
    const ElementwiseDropout& dropout, const torch::Tensor& grad_out);

}  // namespace xlnet::testing
