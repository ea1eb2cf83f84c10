// RelativePositionBias (model/sdpa_attention.h) on CUDA tensors through the
// kernels of position_bias_kernels.cu: one pass forward, one backward.
// Compiled only with -DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON.
#pragma once

#include <torch/torch.h>

#include "model/relative_attention.h"

namespace xlnet {

// Same contract as RelativePositionBias: bd [B, H, Lq, R], seg [B, H, Lq, 2]
// or undefined, all CUDA tensors of one dtype (fp32, fp16 or bf16);
// differentiable in bd and seg.
torch::Tensor CudaRelativePositionBias(const torch::Tensor& bd,
                                       const torch::Tensor& seg,
                                       const AttentionBias& bias, int64_t qlen,
                                       int64_t klen, double scale);

}  // namespace xlnet
