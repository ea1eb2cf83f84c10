// The relative-position bias kernels of attention 'sdpa'
// (model/cuda/position_bias_kernels.cu) compiled for the CPU through
// model/cuda/emulation.h, run as the autograd node in
// model/cuda/position_bias.cc runs them, on CPU tensors.
#pragma once

#include <torch/torch.h>

#include "model/attention_types.h"
#include "tests/model/cuda/emulated_outputs.h"

namespace xlnet::testing {

// RelativePositionBias's contract (model/sdpa_attention.h) for bd [B, H,
// Lq, R] and seg [B, H, Lq, 2] (or undefined) in fp32, fp16 or bf16, then
// its backward for grad_bias [B, H, Lq, K] in bd's dtype: {bias, grad_bd[,
// grad_seg]}.
EmulatedOutputs EmulatedPositionBias(const torch::Tensor& bd,
                                     const torch::Tensor& seg,
                                     const AttentionBias& bias, int64_t qlen,
                                     int64_t klen, double scale,
                                     const torch::Tensor& grad_bias);

}  // namespace xlnet::testing
