// Launchers of the tensor-core kernels of the fused relative attention
// (tc_attention_kernels.cu). Plain C++ and the CUDA runtime only, no
// LibTorch, like attention_kernels.h.
//
// Forward and backward of attention 'cuda' with fp16/bf16 inputs and head
// size 64 (XLNet base and large). Compiled only with
// -DXLNET_CUDA_TC_ATTENTION=ON (off by default).
//
// Unlike the SIMT kernels, the position term arrives as a product: bd =
// q_r . k_r^T over all R = K + qlen relative positions, computed by
// cuBLAS; the kernel reads row i's K entries at its shift (column
// j + qlen - pos_i for key j), so no [B, H, Lq, K] bias is written. bd is
// stored [G, H, n * Lq, R] where k_r has G = B / n groups of n consecutive
// samples (bi_data: 2 groups, each half of the batch; n = 1: per sample):
// one product per group and head, without a per-sample copy of k_r.
//
// Layouts: the [B, H, T, Dh] operands (qw, k, v, out and their gradients)
// at any element strides of batch, head and row (Layout) whose rows of Dh
// elements are contiguous and 16-byte aligned, so that a head-split
// projection [B, T, H, Dh] is read and written in place, without the
// transposing copies; the rest row-major and contiguous: bd (below);
// seg [B, H, Lq, 2]; masks and segment relations as bit words (PackBits);
// pos [B, Lq] int64.
#pragma once

#ifdef XLNET_CUDA_EMULATION  // the kernels on the CPU (emulation.h)
#include "model/cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <cstdint>

namespace xlnet::tc_attention {

// Query rows per block (4 warps x 16 rows: one m16n8k16 row block a warp)
// and keys per tile.
constexpr int kBlockRows = 64;
constexpr int kBlockKeys = 64;

enum class DType { kHalf, kBFloat16 };

// Element strides of a [B, H, T, Dh] operand (the Dh elements of a row are
// contiguous). Multiples of 8 with a 16-byte aligned base: 16-byte copies.
struct Layout {
  int64_t b = 0, h = 0, t = 0;
};

// The strides of a contiguous [B, H, T, Dh] tensor.
constexpr Layout ContiguousLayout(int64_t h, int64_t t, int64_t dh) {
  return Layout{h * t * dh, t * dh, dh};
}

struct Params {
  DType dtype = DType::kBFloat16;
  int64_t b = 0, h = 0, lq = 0, klen = 0, rlen = 0, dh = 0, qlen = 0;
  const void* qw = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  Layout qw_layout, k_layout, v_layout;
  const void* bd = nullptr;
  int64_t bd_group = 1;       // n: samples a k_r group; divides b
  const void* seg = nullptr;  // null = no segment term
  // Bit j % 32 of word j / 32 of row (b, i): key j blocked (masked, or at
  // or past K); [blocked_b, Lq, kw] with blocked_b = 1 (shared) or B; kw
  // = BitWords(K). PackBits writes them.
  const uint32_t* blocked = nullptr;
  int64_t blocked_b = 1;
  // The same for "key j is in the other segment", [B, Lq, kw], with seg.
  const uint32_t* other = nullptr;
  const int64_t* pos = nullptr;  // null: query i is at position i
  float scale = 1;
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
  // The dropout decisions, [B, H, Lq, kw] words, bit j % 32 of word j / 32
  // set where key j's probability is kept: Forward writes them when not
  // null (and dropout > 0; with XLNET_CUDA_PENDING a draw kernel writes
  // them and the forward reads them, so then they are required with
  // dropout); Backward reads them (required with dropout).
  // 1 bit a score: 22 MB a layer's content stream at the base preset.
  uint32_t* keep = nullptr;
  // Forward outputs: out [B, H, Lq, Dh]; lse [B, H, Lq] fp32, each row's
  // log2-sum-exp2 of its scores in log2 units (+inf for a fully masked
  // row), written when not null.
  void* out = nullptr;
  Layout out_layout;
  float* lse = nullptr;
  // Backward inputs: the output's gradient dout [B, H, Lq, Dh], the
  // forward's lse, and dd [B, H, Lq] fp32 = rowsum(dout * out).
  const void* dout = nullptr;
  Layout dout_layout;
  const float* lse_in = nullptr;
  const float* dd = nullptr;
  // Backward outputs, all in the inputs' dtype, each element written once
  // (no atomics: two runs give the same bits): dqw [B, H, Lq, Dh]; dk, dv
  // [B, H, K, Dh]; dbd [B, H, Lq, R] (the K columns at each row's shift
  // hold its dS, the others zeros; stored as bd is); dseg [B, H, Lq, 2] with
  // seg.
  void *dqw = nullptr, *dk = nullptr, *dv = nullptr, *dbd = nullptr,
       *dseg = nullptr;
  Layout dqw_layout, dk_layout, dv_layout;
  // Without bd (null), where KernelsComputePositionProducts(): the
  // kernels compute the products themselves from qr [B, H, Lq, Dh] and k_r
  // [B / bd_group, H, R, Dh] (any Layout: k_r's b stride is per group);
  // only without pos (query i at position i: the content stream). dbd is
  // written as ever. Last, so that the other fields keep their offsets.
  const void* qr = nullptr;
  Layout qr_layout;
  const void* k_r = nullptr;
  Layout k_r_layout;
};

#if defined(__CUDACC__)
#define XLNET_TC_HOST_DEVICE __host__ __device__
#else
#define XLNET_TC_HOST_DEVICE
#endif

// 32-bit words of one row's key bits: whole 64-key tiles.
XLNET_TC_HOST_DEVICE constexpr int64_t BitWords(int64_t klen) {
  return (klen + kBlockKeys - 1) / kBlockKeys * (kBlockKeys / 32);
}

// Packs a bool tensor [rows_b, Lq, K] (element strides sb, si, sj) into
// words [rows_b, Lq, BitWords(K)]: bit set where the byte is nonzero, and
// for every key at or past K when `pad_blocked`. Null src: no byte set.
cudaError_t PackBits(const uint8_t* src, int64_t sb, int64_t si, int64_t sj,
                     int64_t rows_b, int64_t lq, int64_t klen, bool pad_blocked,
                     uint32_t* dst, cudaStream_t stream);

// Whether Forward takes this head size.
constexpr bool SupportsHeadSize(int64_t dh) { return dh == 64; }

// Whether Forward and Backward take qr and k_r in place of bd
// (Params::qr): in builds with -DXLNET_CUDA_PENDING=ON.
bool KernelsComputePositionProducts();

// softmax((qw.k^T + bd at the shift + segment term) * scale, masked) . v,
// dropout on the probabilities as the SIMT kernels and the CPU path draw it;
// fully masked rows give zeros.
cudaError_t Forward(const Params& p, cudaStream_t stream);

// dd [B, H, Lq] fp32 = rowsum(dout * out) over Dh, from p.dout and p.out
// (their layouts): the softmax backward's correction that Backward reads.
cudaError_t RowDots(const Params& p, float* dd, cudaStream_t stream);

// The gradients of Forward's output: one kernel over key tiles (dk, dv),
// one over query tiles (dqw, dbd at the shifted columns, dseg), both
// recomputing the probabilities from lse_in and taking the dropout
// decisions from the forward's keep bits.
cudaError_t Backward(const Params& p, cudaStream_t stream);

}  // namespace xlnet::tc_attention
