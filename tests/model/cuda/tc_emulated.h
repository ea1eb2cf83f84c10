// The tensor-core attention kernels (model/cuda/tc_attention_kernels.cu)
// compiled for the CPU through model/cuda/emulation.h, in two variants: the
// default source and the one built with XLNET_CUDA_PENDING. Each runs what
// the autograd node in cuda_attention.cc runs (position products, packed
// masks, Forward, RowDots, Backward, the position products' gradients) on
// CPU tensors.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace xlnet::testing {

// One call of the fused op (model/attention.h's FusedRelativeAttention),
// all floating tensors in the kernels' dtype (bf16 or fp16); the
// [B, H, T, 64] ones at any batch, head and row strides (multiples of 8)
// with rows of 64 contiguous elements, as the kernels' Layout takes them.
struct TcInputs {
  torch::Tensor qw, qr;     // [B, H, Lq, 64]
  torch::Tensor k, v;       // [B, H, K, 64]
  torch::Tensor k_r;        // [G, H, R, 64], G divides B
  torch::Tensor seg;        // [B, H, Lq, 2] or undefined
  torch::Tensor mask;       // bool [B | 1, 1, Lq, K] or undefined
  torch::Tensor seg_diff;   // bool [B, 1, Lq, K]; defined iff seg is
  torch::Tensor query_pos;  // int64 [B, Lq] or undefined
  torch::Tensor dout;       // the output's gradient [B, H, Lq, 64]
  int64_t qlen = 0;
  float scale = 0.125f;
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
  // cp.async applied where it is issued instead of where it is waited for,
  // and the order of the warps: 0 lockstep, 1 one warp at a time first to
  // last, 2 last to first (model/cuda/emulation.h, CopyTiming, Schedule).
  bool copies_at_issue = false;
  int schedule = 0;
  // The kernels compute the position products from qr and k_r instead of
  // reading bd (Params::qr; only where KernelsComputePositionProducts()).
  bool kernel_products = false;
};

// The output and the gradients of qw, qr, k, v, k_r and seg (undefined
// without seg), in the inputs' dtype; `error` is empty unless a launch
// failed (then it says which and why).
struct TcOutputs {
  torch::Tensor out, dqw, dqr, dk, dv, dkr, dseg;
  std::string error;
};

TcOutputs RunEmulatedTcKernels(const TcInputs& in);
TcOutputs RunEmulatedTcKernelsPending(const TcInputs& in);

}  // namespace xlnet::testing
