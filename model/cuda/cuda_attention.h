// FusedRelativeAttention on CUDA tensors: the autograd node around the
// kernels of attention_kernels.cu. Compiled only with -DXLNET_WITH_CUDA=ON
// -DXLNET_CUDA_ATTENTION=ON (model/CMakeLists.txt).
//
// fp16/bf16 inputs with head size 64 run on the tensor-core kernels
// (tc_attention_kernels.h) in builds with -DXLNET_CUDA_TC_ATTENTION=ON, the
// default; everything else on the SIMT kernels (attention_kernels.h), which
// are 7.4x slower than the unfused path in bf16. Both ran on one H100
// against LibTorch 2.11: CudaAttentionTest (tests/model/
// tiled_attention_test.cc, against the CPU path) passes.
#pragma once

#include <torch/torch.h>

#include "model/attention_types.h"

namespace xlnet {

// FusedRelativeAttention's contract (model/attention.h) for CUDA tensors of
// dtype fp32, fp16 or bf16, head size <= 128; FusedRelativeAttention, its
// one caller, has checked the inputs (CheckFusedAttentionInputs). Dropout uses
// the same Philox stream as the CPU path, so with equal seeds both drop the
// same elements. Query positions within one block of 16 rows must span few
// enough positions for the k_r band to fit in shared memory (any sorted
// target_mapping does); otherwise a TORCH_CHECK says so.
torch::Tensor CudaFusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout);

#ifdef XLNET_CUDA_TC_ATTENTION
// Sets bias->blocked_bits (mask, or no mask, with keys past K blocked) and
// other_bits (seg_diff) in the tensor-core kernels' layout, for CUDA masks
// with K known (mask or seg_diff defined); otherwise leaves them.
void PackTensorCoreBits(AttentionBias* bias);
#endif

}  // namespace xlnet
