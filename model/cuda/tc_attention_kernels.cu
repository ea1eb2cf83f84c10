// The tensor-core kernels of the fused relative attention, FlashAttention-2
// style. Forward: one block of 4 warps per (64 query rows, batch x head),
// each warp 16 rows; key tiles of 64 stream through shared memory
// (cp.async, the next tile copied while this one is used) with an online
// softmax kept in registers, in log2 units (exp2). Backward, without
// atomics: DkDvKernel per (64 keys, batch x head) over all query tiles,
// DqKernel per (64 query rows, batch x head) over all key tiles, both
// recomputing the probabilities from the forward's log-sum-exp. Masks and
// segment flags arrive as bits (PackBits: two 32-bit words a row and tile,
// not a byte a score), the position term through shared-memory windows of
// bd at each row's shift.
//
// Matrix units through inline PTX mma.sync.m16n8k16 (fp16/bf16 in, fp32
// accumulate) rather than CuTe: each kernel needs two products with fixed
// tile shapes, and the accumulator layout of mma.sync is documented
// (PTX ISA, "Matrix Fragments for mma.m16n8k16"), which the score terms
// below rely on to know which (row, key) each register holds. WMMA hides
// that layout, so it would need a round trip through shared memory.
//
// Fragment layout (lane = 4 g + t): an A fragment (16 x 16, row-major)
// holds rows g and g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9; a B
// fragment (16 x 8, column-major) holds rows 2t, 2t + 1, 2t + 8, 2t + 9 of
// column g; a C fragment (16 x 8) holds rows g, g + 8, columns 2t, 2t + 1.
// So the scores of key blocks 2kk and 2kk + 1 are, packed to 16 bits, the A
// fragment of P . V's k-step kk: P never leaves registers.
//
// Shared-memory rows are padded to Dh + 8 elements (a 16-byte multiple):
// the 8 groups g of a warp reading the same column start 4 banks apart,
// so the 32 lanes' 32-bit reads hit 32 different banks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "model/cuda/tc_attention_kernels.h"
#include "model/philox.h"

namespace xlnet::tc_attention {
namespace {

constexpr int kWarps = kBlockRows / 16;
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;
static_assert(kBlockRows % 16 == 0 && kBlockKeys % 16 == 0,
              "tiles are whole m16n8k16 blocks");
static_assert(kThreads == 128, "the launch bounds assume 4 warps");

template <typename T>
__device__ __forceinline__ float ToF(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return __bfloat162float(x);
  }
}

template <typename T>
__device__ __forceinline__ T FromF(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(x);
  } else {
    return __float2bfloat16(x);
  }
}

// Two floats as one 32-bit register of two 16-bit values, the first in the
// low half (the lower column of a fragment).
template <typename T>
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// c += a . b on one m16n8k16 block.
template <typename T>
__device__ __forceinline__ void Mma(float c[4], const uint32_t a[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t Load32(const void* p) {
  return *static_cast<const uint32_t*>(p);
}

// Two 16-bit values from two addresses as one register (first = low half).
__device__ __forceinline__ uint32_t Pack16(const void* lo, const void* hi) {
  const uint32_t a = *static_cast<const uint16_t*>(lo);
  const uint32_t b = *static_cast<const uint16_t*>(hi);
  return a | (b << 16);
}

// 16 bytes global -> shared without passing through registers (sm_80+):
// the first `bytes` (0 to 16) are read, the rest zero-filled.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src,
                                            int bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d),
               "l"(src), "r"(bytes));
}

__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void CopyAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}

// Starts copying rows [row0, row0 + rows) of a [*, kDh] tensor (zeros at
// and past `limit`) into shared memory with row stride kDh + kPad.
template <typename T, int kDh>
__device__ void LoadTileAsync(T* dst, const T* src, int64_t row0, int rows,
                              int64_t limit) {
  constexpr int kPieces = kDh / 8;  // 8 elements = 16 bytes
  for (int idx = threadIdx.x; idx < rows * kPieces; idx += kThreads) {
    const int r = idx / kPieces, c = (idx % kPieces) * 8;
    const int64_t row = row0 + r;
    const bool valid = row < limit;
    CopyAsync16(dst + r * (kDh + kPad) + c, src + (valid ? row * kDh + c : 0),
                valid ? 16 : 0);
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// The position products arrive through shared memory too: row r of a
// block needs, for key tile j0, the 64 values of bd from element
// start(r) + j0 on (start(r) = its row's offset + qlen - pos). The copy
// takes the 16-byte-aligned window of 72 values around them (9 pieces), and
// the row reads it at offset start(r) % 8.
constexpr int kBdLd = kBlockKeys + 8;

// Shared memory of one block: window starts, queries, two buffers of keys
// and values, two of position products.
template <typename T, int kDh>
__host__ __device__ constexpr size_t SharedBytes() {
  return kBlockRows * sizeof(int64_t) +
         (kBlockRows * (kDh + kPad) + 4 * kBlockKeys * (kDh + kPad) +
          2 * kBlockRows * kBdLd) *
             sizeof(T);
}

// Starts copying the bd windows of key tile j0 for the block's rows.
template <typename T>
__device__ void LoadBdAsync(T* dst, const T* bd, const int64_t* win, int64_t j0,
                            int64_t numel) {
  constexpr int kPieces = kBdLd / 8;
  for (int idx = threadIdx.x; idx < kBlockRows * kPieces; idx += kThreads) {
    const int r = idx / kPieces, q = idx % kPieces;
    const int64_t start = win[r] + j0 + q * 8;  // a multiple of 8
    const int64_t left = numel - start;
    const int bytes =
        start < 0 || left <= 0 ? 0 : static_cast<int>(left < 8 ? left * 2 : 16);
    CopyAsync16(dst + r * kBdLd + q * 8, bd + (bytes > 0 ? start : 0), bytes);
  }
}

// Element start(r) of row r's bd window, 8-aligned, and the row's offset
// into it; rows past Lq read row Lq - 1. Floor division: a window may start
// before element 0.
__device__ __forceinline__ int64_t WindowStart(const Params& p, int64_t bh,
                                               int64_t r, int64_t* offset) {
  r = r < p.lq ? r : p.lq - 1;
  const int64_t b = bh / p.h;
  const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
  const int64_t start = (bh * p.lq + r) * p.rlen + p.qlen - pos;
  *offset = ((start % 8) + 8) % 8;
  return start - *offset;
}

// Row r's segment term in log2 units: `same` for keys of its segment,
// `same + delta` for the others (zeros without seg).
template <typename T>
__device__ __forceinline__ void SegTerms(const Params& p, int64_t bh, int64_t r,
                                         float* same, float* delta) {
  *same = *delta = 0.f;
  if (p.seg == nullptr) return;
  const T* seg = static_cast<const T*>(p.seg) + (bh * p.lq + r) * 2;
  *same = ToF(seg[0]) * p.scale * kLog2e;
  *delta = ToF(seg[1]) * p.scale * kLog2e - *same;
}

// Each row's bd window start for the block's rows i0 .. i0 + 63 (the first
// kBlockRows threads write one each); a __syncthreads must follow.
__device__ __forceinline__ void InitWindows(int64_t* win_s, const Params& p,
                                            int64_t bh, int64_t i0) {
  if (threadIdx.x < kBlockRows) {
    int64_t unused;
    win_s[threadIdx.x] = WindowStart(p, bh, i0 + threadIdx.x, &unused);
  }
}

// Starts copying key tile j0's keys and values (into kv_dst, then
// kv_dst + kBlockKeys (kDh + kPad)) and the rows' bd windows (bd_dst).
template <typename T, int kDh>
__device__ void LoadKeyTileAsync(T* kv_dst, T* bd_dst, const Params& p,
                                 int64_t bh, const int64_t* win_s, int j0) {
  const T* k = static_cast<const T*>(p.k) + bh * p.klen * kDh;
  const T* v = static_cast<const T*>(p.v) + bh * p.klen * kDh;
  LoadTileAsync<T, kDh>(kv_dst, k, j0, kBlockKeys, p.klen);
  LoadTileAsync<T, kDh>(kv_dst + kBlockKeys * (kDh + kPad), v, j0, kBlockKeys,
                        p.klen);
  LoadBdAsync(bd_dst, static_cast<const T*>(p.bd), win_s, j0,
              p.b * p.h * p.lq * p.rlen);
}

// A fragments of 16 rows (row0 ..) x kDh from shared memory.
template <typename T, int kDh>
__device__ __forceinline__ void LoadA(uint32_t a[kDh / 16][4], const T* src,
                                      int row0, int g, int t) {
  constexpr int kLd = kDh + kPad;
  const T* s0 = src + (row0 + g) * kLd + 2 * t;
#pragma unroll
  for (int kk = 0; kk < kDh / 16; ++kk) {
    a[kk][0] = Load32(s0 + kk * 16);
    a[kk][1] = Load32(s0 + 8 * kLd + kk * 16);
    a[kk][2] = Load32(s0 + kk * 16 + 8);
    a[kk][3] = Load32(s0 + 8 * kLd + kk * 16 + 8);
  }
}

// c = a . b^T: 16 rows (A fragments) x the 64 rows of b in shared memory,
// over kDh; c[n] is the C fragment of b's rows 8n .. 8n + 7.
template <typename T, int kDh>
__device__ __forceinline__ void ProductT(float c[8][4],
                                         const uint32_t a[kDh / 16][4],
                                         const T* b_s, int g, int t) {
  constexpr int kLd = kDh + kPad;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
    const T* b0 = b_s + (n * 8 + g) * kLd + 2 * t;
#pragma unroll
    for (int kk = 0; kk < kDh / 16; ++kk) {
      Mma<T>(c[n], a[kk], Load32(b0 + kk * 16), Load32(b0 + kk * 16 + 8));
    }
  }
}

// acc += x . b: x the 16 x 64 C fragments of ProductT (blocks 2kk, 2kk + 1,
// packed to 16 bits, are the A fragment of k-step kk), b 64 rows x kDh in
// shared memory.
template <typename T, int kDh>
__device__ __forceinline__ void ProductAcc(float acc[kDh / 8][4],
                                           const float x[8][4], const T* b_s,
                                           int g, int t) {
  constexpr int kLd = kDh + kPad;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t xa[4] = {Pack<T>(x[2 * kk][0], x[2 * kk][1]),
                            Pack<T>(x[2 * kk][2], x[2 * kk][3]),
                            Pack<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                            Pack<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
    const T* b0 = b_s + (kk * 16 + 2 * t) * kLd + g;
#pragma unroll
    for (int n = 0; n < kDh / 8; ++n) {
      const T* bn = b0 + n * 8;
      Mma<T>(acc[n], xa, Pack16(bn, bn + kLd),
             Pack16(bn + 8 * kLd, bn + 9 * kLd));
    }
  }
}

template <int kBlocks>
__device__ __forceinline__ void Zero(float c[kBlocks][4]) {
#pragma unroll
  for (int n = 0; n < kBlocks; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
}

// Dropout's draw threshold (0: no dropout) and the kept values' scale.
struct Dropout {
  uint32_t threshold = 0;
  float keep_scale = 1.f;
};

__device__ __forceinline__ Dropout MakeDropout(const Params& p) {
  Dropout d;
  if (p.dropout > 0) {
    d.threshold = AttentionKeepThreshold(p.dropout);
    d.keep_scale = static_cast<float>(1.0 / (1.0 - p.dropout));
  }
  return d;
}

// The two query rows a thread holds in ForwardKernel and DqKernel: u = 0
// is row g of its warp's 16, u = 1 row g + 8. Rows past Lq read row Lq - 1
// and are blocked everywhere.
struct Rows {
  int64_t row[2];
  bool live[2];
  int shift[2];  // bd column of key j: j + shift
  int bd_at[2];  // offset of the row's window in a bd tile
  const uint32_t* blocked[2];
  const uint32_t* other[2];  // null without seg
  float same[2], delta[2];   // SegTerms
};

template <typename T>
__device__ Rows MakeRows(const Params& p, int64_t bh, int64_t i0, int warp,
                         int g) {
  Rows rows;
  const int64_t b = bh / p.h, kw = BitWords(p.klen);
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int local = warp * 16 + g + 8 * u;
    rows.row[u] = i0 + local;
    rows.live[u] = rows.row[u] < p.lq;
    const int64_t r = rows.live[u] ? rows.row[u] : p.lq - 1;
    const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
    rows.shift[u] = static_cast<int>(p.qlen - pos);
    int64_t offset;
    WindowStart(p, bh, rows.row[u], &offset);
    rows.bd_at[u] = local * kBdLd + static_cast<int>(offset);
    rows.blocked[u] = p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + r) * kw;
    rows.other[u] = p.other ? p.other + (b * p.lq + r) * kw : nullptr;
    SegTerms<T>(p, bh, r, &rows.same[u], &rows.delta[u]);
  }
  return rows;
}

// The rows' mask and segment words of key tile j0.
struct Words {
  uint32_t blocked[2][2], other[2][2];
};

__device__ __forceinline__ Words LoadWords(const Rows& rows, int j0) {
  Words w;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const uint2 wb = *reinterpret_cast<const uint2*>(rows.blocked[u] + j0 / 32);
    w.blocked[u][0] = rows.live[u] ? wb.x : ~0u;
    w.blocked[u][1] = rows.live[u] ? wb.y : ~0u;
    w.other[u][0] = w.other[u][1] = 0;
    if (rows.other[u] != nullptr) {
      const uint2 wo = *reinterpret_cast<const uint2*>(rows.other[u] + j0 / 32);
      w.other[u][0] = wo.x;
      w.other[u][1] = wo.y;
    }
  }
  return w;
}

__device__ __forceinline__ bool Bit(const uint32_t words[2], int jj) {
  return (words[jj / 32] >> (jj % 32)) & 1u;
}

// Row u's score of key jj of tile j0 in log2 units, (product + bd) scale
// + segment term, or -inf when blocked. Relative positions past R are the
// SIMT kernel's zero rows.
template <typename T>
__device__ __forceinline__ float ScoreLog2(const Rows& rows, const Words& w,
                                           int u, int jj, int j0,
                                           const T* bd_tile, int rlen,
                                           float scale2, float product) {
  if (Bit(w.blocked[u], jj)) return -INFINITY;
  const int c = j0 + jj + rows.shift[u];
  const float pos_term = static_cast<unsigned>(c) < static_cast<unsigned>(rlen)
                             ? ToF(bd_tile[rows.bd_at[u] + jj])
                             : 0.f;
  return (product + pos_term) * scale2 + rows.same[u] +
         (Bit(w.other[u], jj) ? rows.delta[u] : 0.f);
}

// Keep bits of keys j, j + 1 (j even) for the two rows: bit 0 = key j,
// bit 1 = key j + 1 (one Philox block of 4 keys serves both).
__device__ __forceinline__ void PairKeep(uint32_t keep[2], const Params& p,
                                         const Rows& rows, int64_t bh, int j,
                                         int klen, uint32_t threshold) {
  keep[0] = keep[1] = ~0u;
  if (threshold == 0 || j >= klen) return;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    if (rows.live[u]) {
      keep[u] = AttentionKeepBits4(p.seed, p.offset, bh, rows.row[u], j & ~3,
                                   threshold) >>
                (j & 3);
    }
  }
}

template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 3) ForwardKernel(const Params p) {
  static_assert(kDh % 16 == 0, "head size: whole k-steps of 16");
  constexpr int kLd = kDh + kPad;
  constexpr int kKeyBlocks = kBlockKeys / 8;  // n-blocks of the scores
  constexpr int kOutBlocks = kDh / 8;         // n-blocks of the output
  constexpr int kTile = kBlockKeys * kLd;
  static_assert(kBlockKeys == 64, "two 32-bit mask words a row and tile");
  static_assert((kLd * sizeof(T)) % 16 == 0, "16-byte aligned rows");
  static_assert(kBdLd % 8 == 0, "whole 16-byte pieces of bd");
  // Within the 227 KiB an H100 block may opt into, 3 blocks an SM.
  static_assert(3 * SharedBytes<T, kDh>() <= 227 * 1024, "shared memory");
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t* win_s = reinterpret_cast<int64_t*>(smem);  // [kBlockRows]
  T* q_s = reinterpret_cast<T*>(win_s + kBlockRows);  // [kBlockRows][kLd]
  // Buffer x of keys and values at kv_s + 2 x kTile, of position products
  // at bd_s + x kBlockRows kBdLd (offsets, not arrays of pointers, which
  // would live in local memory).
  T* kv_s = q_s + kBlockRows * kLd;  // [2][keys, values]
  T* bd_s = kv_s + 4 * kTile;        // [2][kBlockRows][kBdLd]

  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int klen = static_cast<int>(p.klen), rlen = static_cast<int>(p.rlen);

  InitWindows(win_s, p, bh, i0);
  __syncthreads();
  LoadTileAsync<T, kDh>(q_s, static_cast<const T*>(p.qw) + bh * p.lq * kDh, i0,
                        kBlockRows, p.lq);
  LoadKeyTileAsync<T, kDh>(kv_s, bd_s, p, bh, win_s, 0);
  CopyAsyncCommit();

  const Rows rows = MakeRows<T>(p, bh, i0, warp, g);
  float m[2] = {-INFINITY, -INFINITY};  // in log2 units, as the scores
  float l[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const Dropout drop = MakeDropout(p);
  float o[kOutBlocks][4];
  Zero<kOutBlocks>(o);

  CopyAsyncWaitAll();
  __syncthreads();
  // This warp's query rows as A fragments, kept for all key tiles.
  uint32_t qa[kDh / 16][4];
  LoadA<T, kDh>(qa, q_s, warp * 16, g, t);

  for (int j0 = 0, it = 0; j0 < klen; j0 += kBlockKeys, ++it) {
    const int buf = it & 1;
    const T* k_s = kv_s + buf * 2 * kTile;
    const T* v_s = k_s + kTile;
    const T* bd_tile = bd_s + buf * kBlockRows * kBdLd;
    const bool more = j0 + kBlockKeys < klen;
    if (more) {
      LoadKeyTileAsync<T, kDh>(kv_s + (1 - buf) * 2 * kTile,
                               bd_s + (1 - buf) * kBlockRows * kBdLd, p, bh,
                               win_s, j0 + kBlockKeys);
      CopyAsyncCommit();
    }
    // This tile's mask words, read first so that the product hides their
    // latency; then s = qw . k^T for the warp's 16 rows and 64 keys.
    const Words w = LoadWords(rows, j0);
    float s[kKeyBlocks][4];
    ProductT<T, kDh>(s, qa, k_s, g, t);

    // The position, segment and mask terms, then the online softmax.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int u = e / 2;
        s[n][e] = ScoreLog2<T>(rows, w, u, n * 8 + 2 * t + (e & 1), j0, bd_tile,
                               rlen, scale2, s[n][e]);
        tile_max[u] = fmaxf(tile_max[u], s[n][e]);
      }
    }
    float alpha[2], m_safe[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      // The 4 lanes of a group hold the same rows.
      tile_max[u] =
          fmaxf(tile_max[u], __shfl_xor_sync(0xffffffffu, tile_max[u], 1));
      tile_max[u] =
          fmaxf(tile_max[u], __shfl_xor_sync(0xffffffffu, tile_max[u], 2));
      const float m_new = fmaxf(m[u], tile_max[u]);
      m_safe[u] = m_new == -INFINITY ? 0.f : m_new;
      alpha[u] = exp2f(m[u] - m_safe[u]);  // 0 while m is -inf
      m[u] = m_new;
      l[u] *= alpha[u];
    }
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
      uint32_t keep[2];
      PairKeep(keep, p, rows, bh, j0 + n * 8 + 2 * t, klen, drop.threshold);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int u = e / 2;
        float pr = exp2f(s[n][e] - m_safe[u]);  // 0 at -inf
        l[u] += pr;  // the softmax's sum counts dropped keys too
        if (drop.threshold != 0) {
          pr = (keep[u] >> (e & 1)) & 1u ? pr * drop.keep_scale : 0.f;
        }
        s[n][e] = pr;
      }
    }
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
    ProductAcc<T, kDh>(o, s, v_s, g, t);  // o += p . v
    if (more) CopyAsyncWaitAll();
    __syncthreads();  // the next tile has arrived; this one is free
  }

  T* out = static_cast<T*>(p.out) + bh * p.lq * kDh;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 1);
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 2);
    if (!rows.live[u]) continue;
    const float inv = l[u] > 0.f ? 1.f / l[u] : 0.f;
    const int64_t row = rows.row[u];
    if (p.lse != nullptr && t == 0) {
      p.lse[bh * p.lq + row] = l[u] > 0.f ? m[u] + log2f(l[u]) : INFINITY;
    }
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      *reinterpret_cast<uint32_t*>(out + row * kDh + n * 8 + 2 * t) =
          Pack<T>(o[n][2 * u] * inv, o[n][2 * u + 1] * inv);
    }
  }
}

// Dropout multipliers of a tile as bits: row r's words [2 r, 2 r + 1] hold
// keys j0 .. j0 + 63 (bit set = kept), for rows i0 .. i0 + 63. Each of the
// first 2 x kBlockRows threads draws one word (8 Philox blocks of 4 keys).
__device__ void DropoutWords(const Params& p, int64_t bh, int64_t i0,
                             int64_t j0, uint32_t threshold, uint32_t* dst) {
  const int idx = threadIdx.x;
  if (idx >= 2 * kBlockRows) return;
  const int r = idx / 2, half = idx % 2;
  uint32_t word = 0;
  for (int q = 0; q < 8; ++q) {
    const int64_t j = j0 + half * 32 + q * 4;
    word |= AttentionKeepBits4(p.seed, p.offset, bh, i0 + r, j, threshold)
            << (q * 4);
  }
  dst[idx] = word;
}

// dk and dv of one tile of 64 keys (a warp per 16), over all query tiles:
// the transposed scores s^T = k . qw^T and dP^T = v . dout^T of each query
// tile, the probabilities from the forward's lse, then dv += P^T dout and
// dk += dS^T qw, in registers until the end (no atomics).
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2) DkDvKernel(const Params p) {
  constexpr int kLd = kDh + kPad;
  constexpr int kKSteps = kDh / 16;
  constexpr int kRowBlocks = kBlockRows / 8;  // n-blocks over query rows
  constexpr int kOutBlocks = kDh / 8;
  static_assert(kBlockRows == 64 && kBlockKeys == 64, "one tile shape");
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t* win_s = reinterpret_cast<int64_t*>(smem);  // [kBlockRows]
  T* q_s = reinterpret_cast<T*>(win_s + kBlockRows);  // [kBlockRows][kLd]
  T* do_s = q_s + kBlockRows * kLd;                   // [kBlockRows][kLd]
  T* bd_s = do_s + kBlockRows * kLd;                  // [kBlockRows][kBdLd]
  uint32_t* blk_s = reinterpret_cast<uint32_t*>(bd_s + kBlockRows * kBdLd);
  uint32_t* oth_s = blk_s + 2 * kBlockRows;  // [kBlockRows][2] each
  uint32_t* drp_s = oth_s + 2 * kBlockRows;
  float* lse_s = reinterpret_cast<float*>(drp_s + 2 * kBlockRows);
  float* dd_s = lse_s + kBlockRows;
  float* same_s = dd_s + kBlockRows;
  float* delta_s = same_s + kBlockRows;
  int* at_s = reinterpret_cast<int*>(delta_s + kBlockRows);  // window offset
  int* shift_s = at_s + kBlockRows;

  const int64_t bh = blockIdx.y, b = bh / p.h;
  const int j0 = static_cast<int>(blockIdx.x) * kBlockKeys;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int rlen = static_cast<int>(p.rlen);
  const int64_t kw = BitWords(p.klen);
  const T* k = static_cast<const T*>(p.k) + bh * p.klen * kDh;
  const T* v = static_cast<const T*>(p.v) + bh * p.klen * kDh;
  const T* qw = static_cast<const T*>(p.qw) + bh * p.lq * kDh;
  const T* dout = static_cast<const T*>(p.dout) + bh * p.lq * kDh;
  const T* bd = static_cast<const T*>(p.bd);
  const int64_t bd_numel = p.b * p.h * p.lq * p.rlen;
  const Dropout drop = MakeDropout(p);
  const float scale2 = p.scale * kLog2e;

  // This warp's 16 keys and values as A fragments (through q_s and do_s).
  LoadTileAsync<T, kDh>(q_s, k, j0, kBlockKeys, p.klen);
  LoadTileAsync<T, kDh>(do_s, v, j0, kBlockKeys, p.klen);
  CopyAsyncCommit();
  CopyAsyncWaitAll();
  __syncthreads();
  uint32_t ka[kKSteps][4], va[kKSteps][4];
  LoadA<T, kDh>(ka, q_s, warp * 16, g, t);
  LoadA<T, kDh>(va, do_s, warp * 16, g, t);
  float dk[kOutBlocks][4], dv[kOutBlocks][4];
  Zero<kOutBlocks>(dk);
  Zero<kOutBlocks>(dv);

  for (int64_t i0 = 0; i0 < p.lq; i0 += kBlockRows) {
    __syncthreads();  // the previous query tile is no longer read
    if (threadIdx.x < kBlockRows) {
      const int r = threadIdx.x;
      const int64_t row = i0 + r;
      const bool live = row < p.lq;
      const int64_t rr = live ? row : p.lq - 1;
      int64_t offset;
      win_s[r] = WindowStart(p, bh, row, &offset);
      at_s[r] = r * kBdLd + static_cast<int>(offset);
      const int64_t pos = p.pos ? p.pos[b * p.lq + rr] : rr;
      shift_s[r] = static_cast<int>(p.qlen - pos);
      lse_s[r] = p.lse_in[bh * p.lq + rr];
      dd_s[r] = live ? p.dd[bh * p.lq + rr] : 0.f;
      SegTerms<T>(p, bh, rr, &same_s[r], &delta_s[r]);
      const uint2 wb = *reinterpret_cast<const uint2*>(
          p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + rr) * kw + j0 / 32);
      blk_s[2 * r] = live ? wb.x : ~0u;
      blk_s[2 * r + 1] = live ? wb.y : ~0u;
      uint2 wo = make_uint2(0, 0);
      if (p.other != nullptr) {
        wo = *reinterpret_cast<const uint2*>(p.other + (b * p.lq + rr) * kw +
                                             j0 / 32);
      }
      oth_s[2 * r] = wo.x;
      oth_s[2 * r + 1] = wo.y;
    }
    if (drop.threshold != 0) {
      DropoutWords(p, bh, i0, j0, drop.threshold, drp_s);
    }
    __syncthreads();
    LoadTileAsync<T, kDh>(q_s, qw, i0, kBlockRows, p.lq);
    LoadTileAsync<T, kDh>(do_s, dout, i0, kBlockRows, p.lq);
    LoadBdAsync(bd_s, bd, win_s, j0, bd_numel);
    CopyAsyncCommit();
    CopyAsyncWaitAll();
    __syncthreads();

    // s^T = k . qw^T and dP^T = v . dout^T: this warp's 16 keys x 64 rows.
    float st[kRowBlocks][4], dpt[kRowBlocks][4];
    ProductT<T, kDh>(st, ka, q_s, g, t);
    ProductT<T, kDh>(dpt, va, do_s, g, t);
    // Element (key jj, row r): P from the forward's lse, then dS.
#pragma unroll
    for (int n = 0; n < kRowBlocks; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = n * 8 + 2 * t + (e & 1);
        const int jj = warp * 16 + g + 8 * (e / 2);
        const int bit = jj % 32, word = 2 * r + jj / 32;
        float pr = 0.f;
        if (!((blk_s[word] >> bit) & 1u)) {
          const int c = j0 + jj + shift_s[r];
          const float pos_term =
              static_cast<unsigned>(c) < static_cast<unsigned>(rlen)
                  ? ToF(bd_s[at_s[r] + jj])
                  : 0.f;
          const float x = (st[n][e] + pos_term) * scale2 + same_s[r] +
                          ((oth_s[word] >> bit) & 1u ? delta_s[r] : 0.f);
          pr = exp2f(x - lse_s[r]);
        }
        const float z =
            drop.threshold == 0
                ? 1.f
                : ((drp_s[word] >> bit) & 1u ? drop.keep_scale : 0.f);
        st[n][e] = pr * z;                           // dropped P
        dpt[n][e] = pr * (dpt[n][e] * z - dd_s[r]);  // dS / scale
      }
    }
    // dv += P^T dout, dk += dS^T qw: the k-steps run over the 64 rows.
    ProductAcc<T, kDh>(dv, st, do_s, g, t);
    ProductAcc<T, kDh>(dk, dpt, q_s, g, t);
  }

  T* dk_out = static_cast<T*>(p.dk) + bh * p.klen * kDh;
  T* dv_out = static_cast<T*>(p.dv) + bh * p.klen * kDh;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t key = j0 + warp * 16 + g + 8 * u;
    if (key >= p.klen) continue;
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      const int64_t at = key * kDh + n * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(dk_out + at) =
          Pack<T>(dk[n][2 * u] * p.scale, dk[n][2 * u + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv_out + at) =
          Pack<T>(dv[n][2 * u], dv[n][2 * u + 1]);
    }
  }
}

// dqw, dbd and dseg of one tile of 64 query rows (a warp per 16), over all
// key tiles: the forward's scores again, dP = dout . v^T, dS, then
// dqw += dS k; dS itself is dbd at the row's shifted columns, and its sums
// over the row's same- and other-segment keys are dseg.
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2) DqKernel(const Params p) {
  constexpr int kLd = kDh + kPad;
  constexpr int kKeyBlocks = kBlockKeys / 8;
  constexpr int kOutBlocks = kDh / 8;
  constexpr int kTile = kBlockKeys * kLd;
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t* win_s = reinterpret_cast<int64_t*>(smem);  // [kBlockRows]
  T* q_s = reinterpret_cast<T*>(win_s + kBlockRows);  // [kBlockRows][kLd]
  T* kv_s = q_s + kBlockRows * kLd;                   // [2][keys, values]
  T* bd_s = kv_s + 4 * kTile;                         // [2][kBlockRows][kBdLd]

  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int klen = static_cast<int>(p.klen), rlen = static_cast<int>(p.rlen);

  InitWindows(win_s, p, bh, i0);
  __syncthreads();
  // Queries first (their fragments are taken before the buffer is
  // reused), then the output gradient into the same place.
  LoadTileAsync<T, kDh>(q_s, static_cast<const T*>(p.qw) + bh * p.lq * kDh, i0,
                        kBlockRows, p.lq);
  CopyAsyncCommit();
  CopyAsyncWaitAll();
  __syncthreads();
  uint32_t qa[kDh / 16][4], da[kDh / 16][4];
  LoadA<T, kDh>(qa, q_s, warp * 16, g, t);
  __syncthreads();
  LoadTileAsync<T, kDh>(q_s, static_cast<const T*>(p.dout) + bh * p.lq * kDh,
                        i0, kBlockRows, p.lq);
  LoadKeyTileAsync<T, kDh>(kv_s, bd_s, p, bh, win_s, 0);
  CopyAsyncCommit();

  const Rows rows = MakeRows<T>(p, bh, i0, warp, g);
  T* dbd_row[2];
  float lse[2], dd[2], seg_sum[2][2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t r = rows.live[u] ? rows.row[u] : p.lq - 1;
    dbd_row[u] = static_cast<T*>(p.dbd) + (bh * p.lq + r) * p.rlen;
    lse[u] = p.lse_in[bh * p.lq + r];
    dd[u] = p.dd[bh * p.lq + r];
    seg_sum[u][0] = seg_sum[u][1] = 0.f;
  }
  const float scale2 = p.scale * kLog2e;
  const Dropout drop = MakeDropout(p);
  float dq[kOutBlocks][4];
  Zero<kOutBlocks>(dq);
  CopyAsyncWaitAll();
  __syncthreads();
  LoadA<T, kDh>(da, q_s, warp * 16, g, t);

  for (int j0 = 0, it = 0; j0 < klen; j0 += kBlockKeys, ++it) {
    const int buf = it & 1;
    const T* k_s = kv_s + buf * 2 * kTile;
    const T* v_s = k_s + kTile;
    const T* bd_tile = bd_s + buf * kBlockRows * kBdLd;
    const bool more = j0 + kBlockKeys < klen;
    if (more) {
      LoadKeyTileAsync<T, kDh>(kv_s + (1 - buf) * 2 * kTile,
                               bd_s + (1 - buf) * kBlockRows * kBdLd, p, bh,
                               win_s, j0 + kBlockKeys);
      CopyAsyncCommit();
    }
    const Words w = LoadWords(rows, j0);
    // s = qw . k^T and dP = dout . v^T for 16 rows x 64 keys.
    float s[kKeyBlocks][4], dp[kKeyBlocks][4];
    ProductT<T, kDh>(s, qa, k_s, g, t);
    ProductT<T, kDh>(dp, da, v_s, g, t);
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
      uint32_t keep[2];
      PairKeep(keep, p, rows, bh, j0 + n * 8 + 2 * t, klen, drop.threshold);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int u = e / 2;
        const int jj = n * 8 + 2 * t + (e & 1);
        float ds = 0.f;
        if (!Bit(w.blocked[u], jj)) {
          const float x =
              ScoreLog2<T>(rows, w, u, jj, j0, bd_tile, rlen, scale2, s[n][e]);
          const float pr = exp2f(x - lse[u]);
          const float z =
              drop.threshold == 0
                  ? 1.f
                  : ((keep[u] >> (e & 1)) & 1u ? drop.keep_scale : 0.f);
          ds = pr * (dp[n][e] * z - dd[u]);  // dS / scale
          const int c = j0 + jj + rows.shift[u];
          if (static_cast<unsigned>(c) < static_cast<unsigned>(rlen)) {
            dbd_row[u][c] = FromF<T>(ds * p.scale);
          }
          // Both sums take an add (a select, not an index: registers).
          const bool other = Bit(w.other[u], jj);
          seg_sum[u][0] += other ? 0.f : ds;
          seg_sum[u][1] += other ? ds : 0.f;
        }
        s[n][e] = ds;
      }
    }
    ProductAcc<T, kDh>(dq, s, k_s, g, t);  // dqw += dS k
    if (more) CopyAsyncWaitAll();
    __syncthreads();
  }

  T* dqw = static_cast<T*>(p.dqw) + bh * p.lq * kDh;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      seg_sum[u][x] += __shfl_xor_sync(0xffffffffu, seg_sum[u][x], 1);
      seg_sum[u][x] += __shfl_xor_sync(0xffffffffu, seg_sum[u][x], 2);
    }
    if (!rows.live[u]) continue;
    const int64_t row = rows.row[u];
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      *reinterpret_cast<uint32_t*>(dqw + row * kDh + n * 8 + 2 * t) =
          Pack<T>(dq[n][2 * u] * p.scale, dq[n][2 * u + 1] * p.scale);
    }
    if (p.dseg != nullptr && t == 0) {
      T* dseg = static_cast<T*>(p.dseg) + (bh * p.lq + row) * 2;
      dseg[0] = FromF<T>(seg_sum[u][0] * p.scale);
      dseg[1] = FromF<T>(seg_sum[u][1] * p.scale);
    }
  }
}

// One thread per 32-bit word of [rows_b, Lq, kw].
__global__ void PackBitsKernel(const uint8_t* src, int64_t sb, int64_t si,
                               int64_t sj, int64_t rows_b, int64_t lq,
                               int64_t klen, bool pad_blocked, uint32_t* dst) {
  const int64_t kw = BitWords(klen);
  const int64_t idx =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows_b * lq * kw) return;
  const int64_t w = idx % kw, i = (idx / kw) % lq, b = idx / (kw * lq);
  uint32_t word = 0;
  for (int bit = 0; bit < 32; ++bit) {
    const int64_t j = w * 32 + bit;
    const bool set = j >= klen
                         ? pad_blocked
                         : src != nullptr && src[b * sb + i * si + j * sj];
    word |= static_cast<uint32_t>(set) << bit;
  }
  dst[idx] = word;
}

// Shared memory of DkDvKernel: window starts, queries, output gradients,
// bd windows, three words a row of mask, segment and dropout bits, four
// floats and two ints a row.
template <typename T, int kDh>
__host__ __device__ constexpr size_t DkDvSharedBytes() {
  return kBlockRows * sizeof(int64_t) +
         (2 * kBlockRows * (kDh + kPad) + kBlockRows * kBdLd) * sizeof(T) +
         kBlockRows *
             (6 * sizeof(uint32_t) + 4 * sizeof(float) + 2 * sizeof(int));
}

template <typename Kernel>
cudaError_t LaunchWithShared(Kernel kernel, dim3 grid, size_t bytes,
                             const Params& p, cudaStream_t stream) {
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int kDh>
cudaError_t LaunchBackward(const Params& p, cudaStream_t stream) {
  const auto bh = static_cast<unsigned>(p.b * p.h);
  const dim3 key_grid(
      static_cast<unsigned>((p.klen + kBlockKeys - 1) / kBlockKeys), bh);
  cudaError_t e = LaunchWithShared(DkDvKernel<T, kDh>, key_grid,
                                   DkDvSharedBytes<T, kDh>(), p, stream);
  if (e != cudaSuccess) return e;
  const dim3 row_grid(
      static_cast<unsigned>((p.lq + kBlockRows - 1) / kBlockRows), bh);
  return LaunchWithShared(DqKernel<T, kDh>, row_grid, SharedBytes<T, kDh>(), p,
                          stream);
}

template <typename T, int kDh>
cudaError_t Launch(const Params& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.lq + kBlockRows - 1) / kBlockRows),
                  static_cast<unsigned>(p.b * p.h));
  return LaunchWithShared(ForwardKernel<T, kDh>, grid, SharedBytes<T, kDh>(), p,
                          stream);
}

}  // namespace

cudaError_t PackBits(const uint8_t* src, int64_t sb, int64_t si, int64_t sj,
                     int64_t rows_b, int64_t lq, int64_t klen, bool pad_blocked,
                     uint32_t* dst, cudaStream_t stream) {
  const int64_t words = rows_b * lq * BitWords(klen);
  if (words == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  PackBitsKernel<<<static_cast<unsigned>((words + kBlock - 1) / kBlock), kBlock,
                   0, stream>>>(src, sb, si, sj, rows_b, lq, klen, pad_blocked,
                                dst);
  return cudaGetLastError();
}

namespace {

// What both directions need: a head size the kernels have, the grid's
// limits, 32-bit key and position arithmetic inside the kernels, the bit
// words.
bool ValidShapes(const Params& p) {
  return SupportsHeadSize(p.dh) && p.b * p.h <= 65535 && p.blocked != nullptr &&
         (p.seg != nullptr) == (p.other != nullptr) && p.rlen < (1 << 30) &&
         p.klen < (1 << 30) && p.lq >= 0 && p.qlen < (1 << 30);
}

}  // namespace

cudaError_t Backward(const Params& p, cudaStream_t stream) {
  if (!ValidShapes(p) || p.dout == nullptr || p.lse_in == nullptr ||
      p.dd == nullptr || p.dqw == nullptr || p.dk == nullptr ||
      p.dv == nullptr || p.dbd == nullptr ||
      (p.seg != nullptr) != (p.dseg != nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.lq == 0 || p.klen == 0 || p.b * p.h == 0) return cudaSuccess;
  return p.dtype == DType::kHalf ? LaunchBackward<__half, 64>(p, stream)
                                 : LaunchBackward<__nv_bfloat16, 64>(p, stream);
}

cudaError_t Forward(const Params& p, cudaStream_t stream) {
  if (!ValidShapes(p)) return cudaErrorInvalidValue;
  if (p.lq == 0 || p.b * p.h == 0) return cudaSuccess;
  return p.dtype == DType::kHalf ? Launch<__half, 64>(p, stream)
                                 : Launch<__nv_bfloat16, 64>(p, stream);
}

}  // namespace xlnet::tc_attention
