// Launchers of the fused relative attention's CUDA kernels
// (attention_kernels.cu). Plain C++ and the CUDA runtime only, no LibTorch:
// the .cu file builds with nvcc against any LibTorch, and the host side
// (cuda_attention.cc) owns tensors, streams and autograd.
//
// Ran on one H100 (sm_90, CUDA 13): correct against the CPU path and HF's
// goldens, but 7.4x slower than the unfused path in bf16 (plain SIMT
// arithmetic, no tensor cores). Reachable only with train.attention: cuda
// in a build configured with -DXLNET_CUDA_ATTENTION=ON.
//
// Layouts (elements, row-major, contiguous unless strides are given):
//   qw, qr [B, H, Lq, Dh]; k, v [B, H, K, Dh]; kr [Bk, H, R, Dh] (Bk = 1 or
//   B); seg [B, H, Lq, 2]; out [B, H, Lq, Dh]; lse [B, H, Lq] fp32; masks
//   bool (uint8) with strides (b stride 0 = broadcast); pos [B, Lq] int64.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace xlnet::cuda_attention {

// Query rows per thread block (4 warps x 4 rows) and keys per tile.
constexpr int kQueryTile = 16;
constexpr int kKeyTile = 32;

enum class DType { kFloat, kHalf, kBFloat16 };

struct Params {
  DType dtype = DType::kFloat;
  int64_t b = 0, h = 0, lq = 0, klen = 0, rlen = 0, dh = 0, qlen = 0;
  int64_t kr_batch = 1;
  const void* qw = nullptr;
  const void* qr = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* kr = nullptr;
  const void* seg = nullptr;      // null = no segment term
  const uint8_t* mask = nullptr;  // true = blocked; null = none
  int64_t mask_sb = 0, mask_si = 0, mask_sj = 0;
  const uint8_t* diff = nullptr;  // true = other segment (with seg)
  int64_t diff_sb = 0, diff_si = 0, diff_sj = 0;
  const int64_t* pos = nullptr;  // null: query i is at position i
  float scale = 1;
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
  // Rows of k_r one key tile needs: kKeyTile + the largest (max - min) of
  // the query positions within one query tile (host computed).
  int64_t band = 0;
  // Forward outputs.
  void* out = nullptr;
  float* lse = nullptr;
  // Backward: the forward's out and lse, the output gradient, and fp32
  // gradients; dk, dv, dkr must be zero (accumulated with atomics).
  const void* dout = nullptr;
  float *dqw = nullptr, *dqr = nullptr, *dseg = nullptr;
  float *dk = nullptr, *dv = nullptr, *dkr = nullptr;
};

// Dynamic shared memory one block needs.
size_t SharedBytes(const Params& p, bool backward);

// Largest head size the kernels take.
constexpr int64_t kMaxHeadSize = 128;

cudaError_t Forward(const Params& p, cudaStream_t stream);
cudaError_t Backward(const Params& p, cudaStream_t stream);

}  // namespace xlnet::cuda_attention
