// The fused element-wise kernels (model/cuda/fused_elementwise_kernels.cu)
// compiled for the CPU through model/cuda/emulation.h, run as the autograd
// nodes in fused_elementwise.cc run them, on CPU tensors.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/fused_elementwise.h"
#include "tests/model/cuda/emulated_outputs.h"

namespace xlnet::testing {

// dropout(act(y + bias)) and, for grad_out, its backward: {out, grad_y,
// grad_bias}. y [rows, cols] fp32, fp16 or bf16; bias [cols] fp32.
EmulatedOutputs EmulatedBiasAct(const torch::Tensor& y,
                                const torch::Tensor& bias, FusedActivation act,
                                const ElementwiseDropout& dropout,
                                const torch::Tensor& grad_out);

// {x + bias_a, x + bias_b} and, for grad_a and grad_b, the backward:
// {out_a, out_b, grad_x, grad_bias_a, grad_bias_b}. x, grads [rows, cols]
// and the biases [cols], all in one dtype (fp32, fp16 or bf16).
EmulatedOutputs EmulatedBiasPair(const torch::Tensor& x,
                                 const torch::Tensor& bias_a,
                                 const torch::Tensor& bias_b,
                                 const torch::Tensor& grad_a,
                                 const torch::Tensor& grad_b);

// One cast of CastTensors: src (plus src2, where defined, in fp32) cast to
// `dtype`, into one output or, with `second`, two.
struct EmulatedCast {
  torch::Tensor src, src2;
  torch::ScalarType dtype = torch::kFloat;
  bool second = false;
};

// CastTensors on the casts in one launch (their src one dtype, their
// outputs one dtype): each cast's output, then its second where asked.
EmulatedOutputs EmulatedCastTensors(const std::vector<EmulatedCast>& casts);

// LayerNorm(dropout(y) + residual) and its backward: {out, grad_y,
// grad_residual, grad_gamma, grad_beta}. residual fp32 or y's dtype; gamma,
// beta [cols] fp32.
EmulatedOutputs EmulatedResidualLayerNorm(const torch::Tensor& y,
                                          const torch::Tensor& residual,
                                          const torch::Tensor& gamma,
                                          const torch::Tensor& beta, double eps,
                                          const ElementwiseDropout& dropout,
                                          const torch::Tensor& grad_out);

}  // namespace xlnet::testing
