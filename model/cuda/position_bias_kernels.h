// Launchers of the relative-position bias kernels behind attention 'sdpa'
// (model/sdpa_attention.h). Plain C++ and the CUDA runtime only, no LibTorch
// (as attention_kernels.h): position_bias.cc owns tensors and autograd.
//
// Forward, for every row (b, h, i) of Lq query rows and key j < K:
//   bias[b, h, i, j] = mask[b, i, j] ? masked_value
//                    : scale * (bd[b, h, i, j + qlen - pos_i]
//                               + seg[b, h, i, diff[b, i, j]])
// with pos_i = pos[b, i] (or i when pos is null) and the segment term only
// when seg is given. One read of bd's band and one write of bias, where the
// LibTorch ops (shift view, where, add, mul, masked_fill) make five passes
// over [B, H, Lq, K]. Backward writes the whole of grad_bd (zero outside
// each row's band and at masked keys) and the two per-row sums of grad_seg,
// again in one pass.
//
// Layouts (elements, row-major): bd, grad_bd [B, H, Lq, R] contiguous;
// seg, grad_seg [B, H, Lq, 2] contiguous; bias, grad_bias [B, H, Lq, K]
// contiguous; mask, diff bool (uint8) [B|1, 1, Lq, K] with batch stride
// (0 = broadcast) and contiguous [Lq, K] rows; pos [B, Lq] int64.
#pragma once

#ifdef XLNET_CUDA_EMULATION  // the kernels on the CPU (emulation.h)
#include "model/cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <cstdint>

namespace xlnet::position_bias {

enum class DType { kFloat, kHalf, kBFloat16 };

struct Params {
  DType dtype = DType::kFloat;
  int64_t b = 0, h = 0, lq = 0, klen = 0, rlen = 0, qlen = 0;
  const void* bd = nullptr;
  const void* seg = nullptr;      // null = no segment term
  const uint8_t* diff = nullptr;  // with seg: true = other segment
  int64_t diff_sb = 0;
  const uint8_t* mask = nullptr;  // true = blocked; null = none
  int64_t mask_sb = 0;
  // Query positions in [0, qlen); null: query i is at position i (and qlen
  // is Lq). A band index outside [0, R) reads as masked (never out of
  // bounds).
  const int64_t* pos = nullptr;
  float scale = 1;
  float masked_value = -1e30f;
};

// bias [B, H, Lq, K] in p.dtype.
cudaError_t Forward(const Params& p, void* bias, cudaStream_t stream);

// grad_bias [B, H, Lq, K] -> grad_bd [B, H, Lq, R] and, with p.seg,
// grad_seg [B, H, Lq, 2], both in p.dtype (sums accumulate in fp32).
cudaError_t Backward(const Params& p, const void* grad_bias, void* grad_bd,
                     void* grad_seg, cudaStream_t stream);

}  // namespace xlnet::position_bias
