// The tensor-core kernels of the fused relative attention, FlashAttention-2
// style. Forward: one block of 4 warps per (64 query rows, batch x head),
// each warp 16 rows; key tiles of 64 stream through shared memory
// (cp.async, the next tile copied while this one is used) with an online
// softmax kept in registers, in log2 units (exp2). Backward, without
// atomics: DkDvKernel per (64 keys, batch x head) over all query tiles,
// DqKernel per (64 query rows, batch x head) over all key tiles, both
// recomputing the probabilities from the forward's log-sum-exp and reading
// its dropout decisions as bits (each Philox block is drawn once, in the
// forward, or with kPendingKernels in DrawKeepKernel just before it).
// Masks and segment flags arrive as bits (PackBits: two 32-bit
// words a row and tile, not a byte a score), the position term through
// shared-memory windows of bd at each row's shift. B fragments of shared
// tiles come through ldmatrix.
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
//
// Compiled as C++ with XLNET_CUDA_EMULATION, the same source runs on the
// CPU through model/cuda/emulation.h (the tests' check of the kernels on a
// machine without a GPU): each PTX primitive below has its emulated twin.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/cuda/device.h"
#include "model/cuda/pending.h"
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
#ifdef XLNET_CUDA_EMULATION
  cuda_emulation::EmulatedMma(std::is_same_v<T, __half>, c, a, b0, b1);
#else
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
#endif
}

__device__ __forceinline__ uint32_t Load32(const void* p) {
  return *XLNET_VECTOR_AT(const uint32_t, p);
}

// 32 bits of global memory that no thread writes while the kernel runs,
// through the read-only path; one load instruction each (asm: the compiler
// does not merge neighbouring ones into a vector load).
__device__ __forceinline__ uint32_t LoadGlobal32(const void* p) {
#ifdef XLNET_CUDA_EMULATION
  return Load32(p);
#else
  uint32_t v;
  asm("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
#endif
}

// 16 bytes global -> shared without passing through registers (sm_80+):
// the first `bytes` (0 to 16) are read, the rest zero-filled.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src,
                                            int bytes) {
#ifdef XLNET_CUDA_EMULATION
  cuda_emulation::EmulatedCopyAsync(dst, src, 16, bytes);
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d),
               "l"(src), "r"(bytes));
#endif
}

// kBytes (4 or 8) global -> shared (sm_80+), through L1.
template <int kBytes>
__device__ __forceinline__ void CopyAsync(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca of 4 or 8 bytes");
#ifdef XLNET_CUDA_EMULATION
  cuda_emulation::EmulatedCopyAsync(dst, src, kBytes, kBytes);
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src),
               "n"(kBytes));
#endif
}

__device__ __forceinline__ void CopyAsyncCommit() {
#ifndef XLNET_CUDA_EMULATION  // one group is all the emulation keeps
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ __forceinline__ void CopyAsyncWaitAll() {
#ifdef XLNET_CUDA_EMULATION
  cuda_emulation::EmulatedCopyWaitAll();
#else
  asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Four 8 x 8 matrices of 16-bit values from shared memory (sm_75+): lane l
// gives the address of row l % 8 of matrix l / 8 (16 bytes, aligned) and
// receives r[m] = matrix m's row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1
// (with kTrans: column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1), the
// layout of a B fragment's register. One instruction for what would take
// eight 16-bit shared loads and four packs. (Not for ProductT's B
// fragments, which are 32-bit loads already: there it costs the backward
// spills.)
template <bool kTrans>
__device__ __forceinline__ void LoadMatrices(uint32_t r[4], unsigned row) {
#ifdef XLNET_CUDA_EMULATION
  cuda_emulation::EmulatedLoadMatrices(kTrans, r, row);
#else
  if constexpr (kTrans) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
        "[%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(row));
  } else {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(row));
  }
#endif
}

// The shared-state-space address of p (32 bits, as ldmatrix takes it).
__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Element offset of (batch x head) bh's [T, Dh] matrix in an operand of
// layout l (h heads).
__device__ __forceinline__ int64_t MatrixAt(const Layout& l, int64_t bh,
                                            int64_t h) {
  return (bh / h) * l.b + (bh % h) * l.h;
}

// Starts copying rows [row0, row0 + 64) of a [*, kDh] matrix with row
// stride ld (zeros at and past `limit`) into shared memory with row stride
// kDh + kPad. Each thread copies the same 16-byte column piece of every
// kPass-th row, so its addresses are one base and fixed steps: a few
// instructions a piece rather than a division and 64-bit index arithmetic.
template <typename T, int kDh>
__device__ __forceinline__ void LoadTileAsync(T* dst, const T* src, int64_t ld,
                                              int row0, int limit) {
  constexpr int kRows = 64;
  constexpr int kPieces = kDh / 8;           // 8 elements = 16 bytes
  constexpr int kPass = kThreads / kPieces;  // rows copied a pass
  static_assert(kThreads % kPieces == 0 && kRows % kPass == 0,
                "whole passes of whole rows");
  static_assert(kBlockRows == kRows && kBlockKeys == kRows, "64-row tiles");
  const int r = threadIdx.x / kPieces, c = threadIdx.x % kPieces * 8;
  const T* s = src + static_cast<int64_t>(row0 + r) * ld + c;
  T* d = dst + r * (kDh + kPad) + c;
#pragma unroll
  for (int i = 0; i < kRows / kPass; ++i) {
    const bool valid = row0 + r + i * kPass < limit;
    CopyAsync16(d + i * kPass * (kDh + kPad), valid ? s : src, valid ? 16 : 0);
    s += kPass * ld;
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x by the special-function unit alone (ex2.approx.ftz: relative error
// about 2^-22, results below 2^-126 flushed to zero, 2^-inf = 0). exp2f
// adds a range test and two multiplies around the same instruction for
// denormal results, which no probability here needs.
__device__ __forceinline__ float Exp2(float x) {
#ifdef XLNET_CUDA_EMULATION
  return std::exp2(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// The position products arrive through shared memory too: row r of a
// block needs, for key tile j0, the 64 values of bd from element
// start(r) + j0 on (start(r) = its row's offset + qlen - pos). The copy
// takes the 16-byte-aligned window of 72 values around them (9 pieces), and
// the row reads it at offset start(r) % 8. A tile's rows are kBdLd apart:
// the window's 72 values, or with kPendingKernels 88, room for FusedBd's
// 80 products a row (and 44 words apart, so that the 8 rows of a warp's
// 32-bit stores fall into different banks).
constexpr int kBdWindow = kBlockKeys + 8;
constexpr int kBdLd = kPendingKernels ? 88 : kBdWindow;

// A row's 32-bit words of a key tile in shared memory: blocked (2),
// other segment (2), the forward's keep bits (2).
constexpr int kWordsLd = 6;

// Shared memory of one block: window starts, queries, two buffers of keys
// and values, two of position products, two of the rows' words.
template <typename T, int kDh>
__host__ __device__ constexpr size_t SharedBytes() {
  return kBlockRows * sizeof(int64_t) +
         (kBlockRows * (kDh + kPad) + 4 * kBlockKeys * (kDh + kPad) +
          2 * kBlockRows * kBdLd) *
             sizeof(T) +
         2 * kBlockRows * kWordsLd * sizeof(uint32_t);
}

// Starts copying the bd windows of key tile j0 for the block's rows: two
// threads a row, pieces 0-4 and 5-8 of its window.
template <typename T>
__device__ __forceinline__ void LoadBdAsync(T* dst, const T* bd,
                                            const int64_t* win, int64_t j0,
                                            int64_t numel) {
  constexpr int kPieces = kBdWindow / 8;
  static_assert(kThreads == 2 * kBlockRows && kPieces == 9,
                "a row's 9 pieces between two threads");
  const int r = threadIdx.x / 2, half = threadIdx.x % 2;
  const int64_t start0 = win[r] + j0 + half * 40;  // multiples of 8
  T* d = dst + r * kBdLd + half * 40;
#pragma unroll
  for (int q = 0; q < 5; ++q) {
    if (half == 1 && q == 4) break;
    const int64_t start = start0 + q * 8;
    const int64_t left = numel - start;
    const int bytes =
        start < 0 || left <= 0 ? 0 : static_cast<int>(left < 8 ? left * 2 : 16);
    CopyAsync16(d + q * 8, bd + (bytes > 0 ? start : 0), bytes);
  }
}

// Element offset of (batch x head) bh's [Lq, R] matrix in bd and dbd,
// [B / n, H, n * Lq, R] for n = bd_group samples a k_r group.
__device__ __forceinline__ int64_t BdAt(const Params& p, int64_t bh) {
  const int64_t b = bh / p.h, h = bh % p.h, n = p.bd_group;
  return ((b / n * p.h + h) * n + b % n) * p.lq * p.rlen;
}

// Element start(r) of row r's bd window, 8-aligned, and the row's offset
// into it; rows past Lq read row Lq - 1. Floor division: a window may start
// before element 0.
__device__ __forceinline__ int64_t WindowStart(const Params& p, int64_t bh,
                                               int64_t r, int64_t* offset) {
  r = r < p.lq ? r : p.lq - 1;
  const int64_t b = bh / p.h;
  const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
  const int64_t start = BdAt(p, bh) + r * p.rlen + p.qlen - pos;
  *offset = ((start % 8) + 8) % 8;
  return start - *offset;
}

// Row r's segment terms in log2 units: `same` for keys of its segment,
// `other` for the others (zeros without seg).
template <typename T>
__device__ __forceinline__ void SegTerms(const Params& p, int64_t bh, int64_t r,
                                         float* same, float* other) {
  *same = *other = 0.f;
  if (p.seg == nullptr) return;
  const T* seg = static_cast<const T*>(p.seg) + (bh * p.lq + r) * 2;
  *same = ToF(seg[0]) * p.scale * kLog2e;
  *other = ToF(seg[1]) * p.scale * kLog2e;
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

// The shared memory of ForwardKernel and DqKernel (SharedBytes): window
// starts, a tile of 64 query rows (queries, or output gradients), and two
// buffers of a key tile's keys, values, bd windows and the rows' mask words,
// so that the next tile is copied while this one is used (the words too,
// so that no tile waits on global memory for them). Buffer x is found by
// offset (an array of pointers indexed by x would live in local memory).
template <typename T, int kDh>
struct KeyTiles {
  static constexpr int kTile = kBlockKeys * (kDh + kPad);
  int64_t* win;     // [kBlockRows]
  T* rows;          // [kBlockRows][kDh + kPad]
  T* kv;            // [2][keys, values][kBlockKeys][kDh + kPad]
  T* bd;            // [2][kBlockRows][kBdLd]
  uint32_t* words;  // [2][kBlockRows][kWordsLd]

  const T* k;  // bh's keys, values, the position products
  const T* v;
  const T* bd_all;
  int64_t bd_numel;
  // This thread's word copies, of row threadIdx.x / 2 (rows past Lq read
  // row Lq - 1): even threads its blocked words and, with `keep`, its keep
  // words; odd threads its other-segment words (null without segments).
  const uint32_t* word_src;
  const uint32_t* keep_src;

  // keep: copy the forward's keep bits too (the query-tile backward with
  // dropout).
  __device__ KeyTiles(unsigned char* smem, const Params& p, int64_t bh,
                      int64_t i0, bool keep)
      : win(reinterpret_cast<int64_t*>(smem)),
        rows(reinterpret_cast<T*>(win + kBlockRows)),
        kv(rows + kBlockRows * (kDh + kPad)),
        bd(kv + 4 * kTile),
        words(reinterpret_cast<uint32_t*>(bd + 2 * kBlockRows * kBdLd)),
        k(static_cast<const T*>(p.k) + MatrixAt(p.k_layout, bh, p.h)),
        v(static_cast<const T*>(p.v) + MatrixAt(p.v_layout, bh, p.h)),
        bd_all(static_cast<const T*>(p.bd)),
        bd_numel(p.b * p.h * p.lq * p.rlen) {
    static_assert(kThreads == 2 * kBlockRows, "two threads a row");
    const int64_t r = min(i0 + threadIdx.x / 2, p.lq - 1);
    const int64_t b = bh / p.h, kw = BitWords(p.klen);
    if (threadIdx.x % 2 == 0) {
      word_src = p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + r) * kw;
      keep_src = keep ? p.keep + (bh * p.lq + r) * kw : nullptr;
    } else {
      word_src = p.other != nullptr ? p.other + (b * p.lq + r) * kw : nullptr;
      keep_src = nullptr;
    }
  }

  __device__ const T* Keys(int x) const { return kv + x * 2 * kTile; }
  __device__ const T* Values(int x) const { return Keys(x) + kTile; }
  __device__ const T* Bd(int x) const { return bd + x * kBlockRows * kBdLd; }
  __device__ const uint32_t* Words(int x) const {
    return words + x * kBlockRows * kWordsLd;
  }

  // Starts copying key tile j0's keys, values, the rows' bd windows and
  // words into buffer x (InitWindows done); the caller commits.
  __device__ void LoadAsync(int x, const Params& p, int j0) {
    T* dst = kv + x * 2 * kTile;
    const int klen = static_cast<int>(p.klen);
    LoadTileAsync<T, kDh>(dst, k, p.k_layout.t, j0, klen);
    LoadTileAsync<T, kDh>(dst + kTile, v, p.v_layout.t, j0, klen);
    // Without bd (the forward computing its position products, FusedBd),
    // no windows to copy.
    if (!kPendingKernels || bd_all != nullptr) {
      LoadBdAsync(bd + x * kBlockRows * kBdLd, bd_all, win, j0, bd_numel);
    }
    uint32_t* w = words + (x * kBlockRows + threadIdx.x / 2) * kWordsLd;
    if (word_src != nullptr) {
      CopyAsync<8>(w + 2 * (threadIdx.x % 2), word_src + j0 / 32);
    }
    if (keep_src != nullptr) CopyAsync<8>(w + 4, keep_src + j0 / 32);
  }
};

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

// c = a . b^T: 16 rows (A fragments) x the first kRows (64 or 32) rows of
// b in shared memory, over kDh; c[n] is the C fragment of b's rows
// 8n .. 8n + 7.
template <typename T, int kDh, int kRows = 64, bool kLdsmB = false>
__device__ __forceinline__ void ProductT(float c[kRows / 8][4],
                                         const uint32_t a[kDh / 16][4],
                                         const T* b_s, int lane) {
  static_assert(kRows == 64 || kRows == 32, "a tile or its first half");
  const int g = lane / 4, t = lane % 4;
  constexpr int kLd = kDh + kPad;
  if constexpr (kLdsmB) {
    // Lane l gives row l % 8 of matrix l / 8: k-step 2m's columns 0-7 and
    // 8-15, then k-step 2m + 1's, of rows 8n .. 8n + 7.
    const unsigned row = SharedAddress(b_s + (lane % 8) * kLd + (lane / 8) * 8);
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n) {
      c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
#pragma unroll
      for (int m = 0; m < kDh / 32; ++m) {
        uint32_t b[4];
        LoadMatrices<false>(b, row + (n * 8 * kLd + m * 32) * sizeof(T));
        Mma<T>(c[n], a[2 * m], b[0], b[1]);
        Mma<T>(c[n], a[2 * m + 1], b[2], b[3]);
      }
    }
  } else {
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n) {
      c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
      const T* b0 = b_s + (n * 8 + g) * kLd + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kDh / 16; ++kk) {
        Mma<T>(c[n], a[kk], Load32(b0 + kk * 16), Load32(b0 + kk * 16 + 8));
      }
    }
  }
}

// acc += x . b: x the 16 x kRows C fragments of ProductT (blocks 2kk,
// 2kk + 1, packed to 16 bits, are the A fragment of k-step kk), b's first
// kRows rows x kDh in shared memory. b's B fragments by transposing
// ldmatrix: matrices (rows 16kk.., 16kk + 8.., columns 8n.., then 8n +
// 8..) are n-blocks n, n + 1.
template <typename T, int kDh, int kRows = 64>
__device__ __forceinline__ void ProductAcc(float acc[kDh / 8][4],
                                           const float x[kRows / 8][4],
                                           const T* b_s, int lane) {
  constexpr int kLd = kDh + kPad;
  static_assert(kDh % 16 == 0, "n-blocks in pairs");
  static_assert(kRows == 64 || kRows == 32, "a tile or its first half");
  const unsigned row = SharedAddress(b_s + (lane % 16) * kLd + (lane / 16) * 8);
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk) {
    const uint32_t xa[4] = {Pack<T>(x[2 * kk][0], x[2 * kk][1]),
                            Pack<T>(x[2 * kk][2], x[2 * kk][3]),
                            Pack<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                            Pack<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < kDh / 8; n += 2) {
      uint32_t b[4];
      LoadMatrices<true>(b, row + (kk * 16 * kLd + n * 8) * sizeof(T));
      Mma<T>(acc[n], xa, b[0], b[1]);
      Mma<T>(acc[n + 1], xa, b[2], b[3]);
    }
  }
}

// Whether the forward takes its score product's B fragments by ldmatrix
// (ProductT's kLdsmB; the query-tile backward and the key-tile backward do,
// for their first product, with kPendingKernels): on sm_80 the forward
// with the position products then spills 12 bytes, so there it keeps the
// 32-bit loads. (The host pass and the CPU emulation see kPendingKernels.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kForwardLdsm = false;
#else
constexpr bool kForwardLdsm = kPendingKernels;
#endif

template <int kBlocks>
__device__ __forceinline__ void Zero(float c[kBlocks][4]) {
#pragma unroll
  for (int n = 0; n < kBlocks; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
}

// Whether the forward reads its dropout decisions as keep words drawn
// before it (DrawKeepKernel) rather than drawing them between its
// products and writing the words for the backward; the same decisions.
constexpr bool kDrawnKeep = kPendingKernels;

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
// 32-bit indices, not 64-bit pointers (ValidShapes bounds them): registers.
struct Rows {
  int row[2];
  bool live[2];
  int shift[2];            // bd column of key j: j + shift
  int bd_at[2];            // offset of the row's window in a bd tile
  float same[2], diff[2];  // SegTerms' same and other
};

template <typename T>
__device__ Rows MakeRows(const Params& p, int64_t bh, int64_t i0, int warp,
                         int g) {
  Rows rows;
  const int64_t b = bh / p.h;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int local = warp * 16 + g + 8 * u;
    rows.row[u] = static_cast<int>(i0) + local;
    rows.live[u] = rows.row[u] < p.lq;
    const int64_t r = rows.live[u] ? rows.row[u] : p.lq - 1;
    const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
    rows.shift[u] = static_cast<int>(p.qlen - pos);
    int64_t offset;
    WindowStart(p, bh, rows.row[u], &offset);
    rows.bd_at[u] = local * kBdLd + static_cast<int>(offset);
    SegTerms<T>(p, bh, r, &rows.same[u], &rows.diff[u]);
  }
  return rows;
}

// The rows' mask, segment and (with `keep`) keep words of a key tile, from
// its shared-memory copy (KeyTiles::Words).
struct Words {
  uint32_t blocked[2][2], other[2][2], keep[2][2];
};

__device__ __forceinline__ Words LoadWords(const Params& p, const Rows& rows,
                                           const uint32_t* tile, int warp,
                                           int g, bool keep) {
  Words w;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const uint32_t* row = tile + (warp * 16 + g + 8 * u) * kWordsLd;
    const uint2 wb = *XLNET_VECTOR_AT(const uint2, row);
    w.blocked[u][0] = rows.live[u] ? wb.x : ~0u;
    w.blocked[u][1] = rows.live[u] ? wb.y : ~0u;
    w.other[u][0] = w.other[u][1] = 0;
    if (p.other != nullptr) {
      const uint2 wo = *XLNET_VECTOR_AT(const uint2, row + 2);
      w.other[u][0] = wo.x;
      w.other[u][1] = wo.y;
    }
    w.keep[u][0] = w.keep[u][1] = ~0u;
    if (keep) {
      const uint2 wk = *XLNET_VECTOR_AT(const uint2, row + 4);
      w.keep[u][0] = wk.x;
      w.keep[u][1] = wk.y;
    }
  }
  return w;
}

__device__ __forceinline__ bool Bit(const uint32_t words[2], int jj) {
  return (words[jj / 32] >> (jj % 32)) & 1u;
}

// Row u's score of key jj of tile j0 in log2 units, (product + bd) scale
// + segment term, or -inf when blocked. Relative positions past R are the
// SIMT kernel's zero rows. Selects, no branch: every lane runs the same
// instructions.
template <typename T, bool kProducts = false>
__device__ __forceinline__ float ScoreLog2(const Rows& rows, const Words& w,
                                           int u, int jj, int j0,
                                           const T* bd_tile, int rlen,
                                           float scale2, float product) {
  const int c = j0 + jj + rows.shift[u];
  // kProducts: the tile holds FusedBd's products, zero outside [0, R)
  // already (their k_r rows are zeros), so no test.
  const float pos_term =
      kProducts || static_cast<unsigned>(c) < static_cast<unsigned>(rlen)
          ? ToF(bd_tile[rows.bd_at[u] + jj])
          : 0.f;
  const float x = fmaf(product + pos_term, scale2,
                       Bit(w.other[u], jj) ? rows.diff[u] : rows.same[u]);
  return Bit(w.blocked[u], jj) ? -INFINITY : x;
}

// Keep bits of keys j, j + 1 (j = j0 + 8n + 2t) for the thread's two rows
// u and the n-blocks n = 2m + x: keep[x][u], bit 0 = key j, bit 1 = key
// j + 1. A Philox block decides one row's 8 keys of an n-block, so the 4
// lanes of a group need 4 blocks for the pair (2 rows x 2 n-blocks); lane
// t draws row t & 1's of n-block 2m + (t >> 1), and the group shares them,
// so no block is drawn twice. All lanes call. Returns the lane's own draw.
__device__ __forceinline__ uint32_t PairKeep(uint32_t keep[2][2],
                                             const Params& p, const Rows& rows,
                                             int64_t bh, int j0, int m,
                                             int lane, int klen,
                                             uint32_t threshold) {
  const int t = lane % 4;
  const int block = j0 + (2 * m + (t >> 1)) * kKeysPerDraw;
  // Selects, not rows.live[t & 1]: a runtime index would put Rows in local
  // memory.
  const bool live = t & 1 ? rows.live[1] : rows.live[0];
  const int row = t & 1 ? rows.row[1] : rows.row[0];
  const uint32_t mine =
      live && block < klen
          ? AttentionKeepBits8(p.seed, p.offset, bh, row, block, threshold)
          : 0xFFu;
  const int group = lane & ~3;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      keep[x][u] = __shfl_sync(0xffffffffu, mine, group + 2 * x + u) >> (2 * t);
    }
  }
  return mine;
}

// The keep words of row t & 1 and a 64-key tile from the group's draws:
// byte m of `mine` is PairKeep's draw m (keys 8 (2m + (t >> 1)) .. + 7), so
// lanes t and t ^ 2 hold alternate bytes of each word. All lanes call.
__device__ __forceinline__ uint2 KeepWords(uint32_t mine, int t) {
  const int s = t >> 1;
  uint32_t w[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {  // n-blocks 4x .. 4x + 3: draws 2x, 2x + 1
    const uint32_t v = ((mine >> (16 * x)) & 0xFFu) << (8 * s) |
                       ((mine >> (16 * x + 8)) & 0xFFu) << (8 * (2 + s));
    w[x] = v | __shfl_xor_sync(0xffffffffu, v, 2);
  }
  return make_uint2(w[0], w[1]);
}

// The 32-bit word w (0-7) of 16 16-bit values held as two uint4.
__device__ __forceinline__ uint32_t Word(const uint4 v[2], int w) {
  const uint4& x = v[w / 4];
  const int i = w % 4;
  return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}

// FusedBd's operands, found once a block rather than once a tile (bh's
// matrices take two 64-bit divisions): bh's qr and its group's k_r.
template <typename T>
struct BdOperands {
  const T* qr = nullptr;
  const T* kr = nullptr;
};

template <typename T>
__device__ __forceinline__ BdOperands<T> MakeBdOperands(const Params& p,
                                                        int64_t bh) {
  const int64_t b = bh / p.h, h = bh % p.h;
  BdOperands<T> ops;
  ops.qr = static_cast<const T*>(p.qr) + MatrixAt(p.qr_layout, bh, p.h);
  ops.kr = static_cast<const T*>(p.k_r) + (b / p.bd_group) * p.k_r_layout.b +
           h * p.k_r_layout.h;
  return ops;
}

// The position products of key tile j0 for the warp's 16 rows of query
// tile i0, computed here instead of read from bd (a content stream: query
// i at position i): P = qr . k_r^T over the 80 relative positions the
// rows need, base + 0 .. 79 with base = j0 + qlen - (first row) - 15, so
// that row r's key jj is P's column jj + 15 - r. P is written whole,
// rounded to T as cuBLAS's bd is, into the warp's 16 rows of the bd tile
// (a column pair a 32-bit store, no per-element bounds), and read skewed:
// row r of the warp at offset 15 - r (FusedBdOffset). Then __syncwarp
// (the forward and the query-tile backward read only their own rows; the
// key-tile backward has a block barrier before it reads). Positions
// outside [0, R) give 0, as bd's zero rows do; rows past Lq (blocked
// everywhere) are computed from row Lq - 1.
//
// Fragments straight from global memory (k_r of a group and head is
// ~180 KB and stays in L2; rows at any stride, as the head-split view of
// the position projection gives them), two 16-byte loads a row: the dot
// product over Dh does not depend on the order of its terms, so lane t
// takes Dh elements 16t .. 16t + 15 of its rows for all four k-steps
// (k-step kk's k-slices 2t, 2t + 1 and 2t + 8, 2t + 9 are elements
// 16t + 4kk + 0, 1 and 2, 3), in A (qr) and B (k_r) alike.
template <typename T, int kDh>
__device__ __forceinline__ void FusedBd(T* bd_tile, const BdOperands<T>& ops,
                                        const Params& p, int i0, int j0,
                                        int warp, int lane) {
  static_assert(kDh == 64, "four lanes x 16 elements a row");
  // (Without kPendingKernels it is never called.)
  static_assert(!kPendingKernels || (kBdLd >= 80 && kBdLd % 2 == 0),
                "80 columns a row, 32-bit aligned pairs");
  const int g = lane / 4, t = lane % 4;
  const int first = i0 + warp * 16;  // the warp's first row
  const int last = static_cast<int>(p.lq) - 1;
  const int64_t ldq = p.qr_layout.t;
  // Rows g, g + 8, at this lane's 16 elements.
  const T* q0 = ops.qr + 16 * t + min(first + g, last) * ldq;
  const T* q1 = ops.qr + 16 * t + min(first + g + 8, last) * ldq;
  // The A fragments of the four k-steps, a 32-bit load each straight into
  // the registers the products read (from 16-byte loads the compiler
  // copied them into place again for every product).
  uint32_t a[kDh / 16][4];
#pragma unroll
  for (int kk = 0; kk < kDh / 16; ++kk) {
    a[kk][0] = LoadGlobal32(q0 + 4 * kk);
    a[kk][1] = LoadGlobal32(q1 + 4 * kk);
    a[kk][2] = LoadGlobal32(q0 + 4 * kk + 2);
    a[kk][3] = LoadGlobal32(q1 + 4 * kk + 2);
  }
  const int rlen = static_cast<int>(p.rlen);
  const int64_t ldk = p.k_r_layout.t;
  // The k_r row of this lane's B column in n-block 0, c0, then 8 rows on
  // a block (a row outside [0, R) is not read: zeros).
  const int c0 = j0 + static_cast<int>(p.qlen) - first - 15 + g;
  const T* kr = ops.kr + 16 * t + c0 * ldk;
  T* const d = bd_tile + (warp * 16 + g) * kBdLd + 2 * t;  // row g; g + 8 below
  // Two n-blocks at a time: fully unrolled, the k_r loads run ahead of
  // the products and the forward spills.
#pragma unroll 2
  for (int n = 0; n < 10; ++n, kr += 8 * ldk) {
    const int c = c0 + 8 * n;
    uint4 k[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    if (static_cast<unsigned>(c) < static_cast<unsigned>(rlen)) {
      const auto* src = XLNET_VECTOR_AT(const uint4, kr);
      k[0] = src[0];
      k[1] = src[1];
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kk = 0; kk < kDh / 16; ++kk) {
      Mma<T>(acc, a[kk], Word(k, 2 * kk), Word(k, 2 * kk + 1));
    }
    *XLNET_VECTOR_AT(uint32_t, d + 8 * n) = Pack<T>(acc[0], acc[1]);
    *XLNET_VECTOR_AT(uint32_t, d + 8 * kBdLd + 8 * n) = Pack<T>(acc[2], acc[3]);
  }
  __syncwarp();
}

// Where row r of a block (0-63) reads key 0 of FusedBd's products in a bd
// tile: P's column 15 - (r % 16) of the row.
__device__ __forceinline__ int FusedBdOffset(int r) {
  return r * kBdLd + 15 - r % 16;
}

// ForwardKernel's body; kFused: the kernel computes the position
// products itself (FusedBd; p.bd is null), a separate kernel
// (ForwardProductsKernel), so that neither variant carries the other's code
// and the products' tile needs no range test a score.
template <typename T, int kDh, bool kFused>
__device__ __forceinline__ void ForwardBody(const Params p) {
  static_assert(kPendingKernels || !kFused, "FusedBd is a pending change");
  static_assert(kDh % 16 == 0, "head size: whole k-steps of 16");
  constexpr int kLd = kDh + kPad;
  constexpr int kKeyBlocks = kBlockKeys / 8;  // n-blocks of the scores
  constexpr int kOutBlocks = kDh / 8;         // n-blocks of the output
  static_assert(kBlockKeys == 64, "two 32-bit mask words a row and tile");
  static_assert((kLd * sizeof(T)) % 16 == 0, "16-byte aligned rows");
  static_assert(kBdLd % 8 == 0, "whole 16-byte pieces of bd");
  // Within the 227 KiB an H100 block may opt into, 3 blocks an SM.
  static_assert(3 * SharedBytes<T, kDh>() <= 227 * 1024, "shared memory");
  XLNET_DYNAMIC_SHARED(smem);

  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  // With kDrawnKeep the keep words come with each key tile's other words.
  const bool read_keep = kDrawnKeep && p.dropout > 0;
  KeyTiles<T, kDh> tiles(smem, p, bh, i0, read_keep);  // rows: queries
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int klen = static_cast<int>(p.klen), rlen = static_cast<int>(p.rlen);
  const int64_t kw = BitWords(p.klen);

  InitWindows(tiles.win, p, bh, i0);
  __syncthreads();
  LoadTileAsync<T, kDh>(
      tiles.rows, static_cast<const T*>(p.qw) + MatrixAt(p.qw_layout, bh, p.h),
      p.qw_layout.t, static_cast<int>(i0), static_cast<int>(p.lq));
  tiles.LoadAsync(0, p, 0);
  CopyAsyncCommit();

  Rows rows = MakeRows<T>(p, bh, i0, warp, g);
  // A warp whose 16 rows all lie past Lq (in the query stream's last tile)
  // skips the products and the softmax; it still copies and waits.
  const bool idle = kPendingKernels && i0 + warp * 16 >= p.lq;
  // The position products computed here (FusedBd) rather than read.
  constexpr bool fused = kFused;
  BdOperands<T> bd_ops;
  if (fused) {
    bd_ops = MakeBdOperands<T>(p, bh);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      rows.bd_at[u] = FusedBdOffset(warp * 16 + g + 8 * u);
    }
  }
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
  LoadA<T, kDh>(qa, tiles.rows, warp * 16, g, t);

  for (int j0 = 0, it = 0; j0 < klen; j0 += kBlockKeys, ++it) {
    const int buf = it & 1;
    const T* k_s = tiles.Keys(buf);
    const T* v_s = tiles.Values(buf);
    const T* bd_tile = tiles.Bd(buf);
    const bool more = j0 + kBlockKeys < klen;
    if (more) {
      tiles.LoadAsync(1 - buf, p, j0 + kBlockKeys);
      CopyAsyncCommit();
    }
    if (!idle) {
      if (fused) {
        FusedBd<T, kDh>(tiles.bd + buf * kBlockRows * kBdLd, bd_ops, p,
                        static_cast<int>(i0), j0, warp, lane);
      }
      // This tile's mask words (shared memory), then s = qw . k^T for the
      // warp's 16 rows and 64 keys.
      const Words w =
          LoadWords(p, rows, tiles.Words(buf), warp, g, /*keep=*/false);
      float s[kKeyBlocks][4];
      ProductT<T, kDh, kBlockKeys, kForwardLdsm>(s, qa, k_s, lane);

      // The position, segment and mask terms, then the online softmax.
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int u = e / 2;
          s[n][e] = ScoreLog2<T, fused>(rows, w, u, n * 8 + 2 * t + (e & 1), j0,
                                        bd_tile, rlen, scale2, s[n][e]);
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
        alpha[u] = Exp2(m[u] - m_safe[u]);  // 0 while m is -inf
        m[u] = m_new;
        l[u] *= alpha[u];
      }
      uint32_t mine = 0;  // this lane's draws, a byte a pair of n-blocks
      uint32_t pair[2][2];
      static_assert(kKeyBlocks % 2 == 0, "n-blocks in pairs");
      // The drawn keep words, read here rather than with the mask words so
      // that they take no registers through the score product.
      uint2 drawn[2] = {make_uint2(~0u, ~0u), make_uint2(~0u, ~0u)};
      if (read_keep) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          drawn[u] = *XLNET_VECTOR_AT(
              const uint2,
              tiles.Words(buf) + (warp * 16 + g + 8 * u) * kWordsLd + 4);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
        uint32_t keep[2] = {~0u, ~0u};
        if (kDrawnKeep) {
          // Bits j, j + 1 (j = 8 n + 2 t) of the tile's words, as PairKeep
          // gives them.
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            keep[u] =
                (n < 4 ? drawn[u].x : drawn[u].y) >> (8 * (n % 4) + 2 * t);
          }
        } else if (drop.threshold != 0) {
          if (n % 2 == 0) {
            mine |= PairKeep(pair, p, rows, bh, j0, n / 2, lane, klen,
                             drop.threshold)
                    << (8 * (n / 2));
          }
          keep[0] = pair[n % 2][0];
          keep[1] = pair[n % 2][1];
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int u = e / 2;
          float pr = Exp2(s[n][e] - m_safe[u]);  // 0 at -inf
          l[u] += pr;  // the softmax's sum counts dropped keys too
          if (drop.threshold != 0) {
            pr = (keep[u] >> (e & 1)) & 1u ? pr * drop.keep_scale : 0.f;
          }
          s[n][e] = pr;
        }
      }
      if (!kDrawnKeep && drop.threshold != 0 && p.keep != nullptr) {
        const uint2 words = KeepWords(mine, t);
        const bool live = t & 1 ? rows.live[1] : rows.live[0];
        if (t < 2 && live) {  // lane t writes row t's words
          const int row = t & 1 ? rows.row[1] : rows.row[0];
          *XLNET_VECTOR_AT(uint2, p.keep + (bh * p.lq + row) * kw + j0 / 32) =
              words;
        }
      }
#pragma unroll
      for (int n = 0; n < kOutBlocks; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
      ProductAcc<T, kDh>(o, s, v_s, lane);  // o += p . v
    }
    if (more) CopyAsyncWaitAll();
    __syncthreads();  // the next tile has arrived; this one is free
  }

  T* out = static_cast<T*>(p.out) + MatrixAt(p.out_layout, bh, p.h);
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
      *XLNET_VECTOR_AT(uint32_t, out + row * p.out_layout.t + n * 8 + 2 * t) =
          Pack<T>(o[n][2 * u] * inv, o[n][2 * u + 1] * inv);
    }
  }
}

// A query row's values in DkDvKernel, read as three vector loads: its
// terms, its bits of the key tile (half x: keys 32x .. 32x + 31; each
// warp's keys are in one half), its bd window offset. 80 bytes, not 64:
// the 4 rows 2t (or 2t + 1) that a quarter-warp reads at once then start
// 8 banks apart instead of all in the same 4 banks.
struct alignas(16) RowTerms {
  float lse, dd, same, other;  // lse_in, dd, SegTerms
  // keep: dropout keep bits (all set without dropout); blocked; other
  // segment; in_range: bd column in [0, R) (else the position term is 0).
  uint4 bits[2];  // {keep, blocked, other, in_range}
  int at;         // bd window offset in a tile
  int pad[7];
};
// What DkDvKernel keeps per query tile, twice (the next tile's copies run
// while this one is used): window starts, row terms, queries, output
// gradients, bd windows.
template <typename T, int kDh>
struct DkDvBuffer {
  int64_t win[kBlockRows];
  RowTerms rows[kBlockRows];
  T q[kBlockRows * (kDh + kPad)];
  T dout[kBlockRows * (kDh + kPad)];
  T bd[kBlockRows * kBdLd];
};

// Bit jj of the keys jj of a 64-key tile whose bd column base + jj (base =
// j0 + qlen - pos) is in [0, R): jj in [lo, hi).
__device__ __forceinline__ uint64_t InRange(const Params& p, int64_t base) {
  const int64_t lo = min(max(-base, int64_t{0}), int64_t{64});
  const int64_t hi = min(max(p.rlen - base, int64_t{0}), int64_t{64});
  const uint64_t below_hi = hi == 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
  return hi <= lo ? 0 : below_hi & ~((uint64_t{1} << lo) - 1);
}

// Row terms and window starts of query tile i0 for key tile j0 (the first
// kBlockRows threads, one row each); a __syncthreads must follow.
template <typename T>
__device__ void SetUpRows(RowTerms* rows_s, int64_t* win_s, const Params& p,
                          int64_t bh, int64_t i0, int j0, uint32_t threshold) {
  if (threadIdx.x >= kBlockRows) return;
  const int r = threadIdx.x;
  const int64_t b = bh / p.h, kw = BitWords(p.klen);
  const int64_t row = i0 + r;
  const bool live = row < p.lq;
  const int64_t rr = live ? row : p.lq - 1;
  RowTerms x;
  int64_t offset;
  win_s[r] = WindowStart(p, bh, row, &offset);
  x.at = kPendingKernels && p.bd == nullptr
             ? FusedBdOffset(r)
             : r * kBdLd + static_cast<int>(offset);
  x.lse = p.lse_in[bh * p.lq + rr];
  x.dd = live ? p.dd[bh * p.lq + rr] : 0.f;
  SegTerms<T>(p, bh, rr, &x.same, &x.other);
  const int64_t pos = p.pos ? p.pos[b * p.lq + rr] : rr;
  const uint64_t in_range = InRange(p, j0 + p.qlen - pos);
  const uint2 wb = *XLNET_VECTOR_AT(
      const uint2,
      p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + rr) * kw + j0 / 32);
  uint2 wo = make_uint2(0, 0);
  if (p.other != nullptr) {
    wo =
        *XLNET_VECTOR_AT(const uint2, p.other + (b * p.lq + rr) * kw + j0 / 32);
  }
  uint2 wk = make_uint2(~0u, ~0u);
  if (threshold != 0) {
    wk =
        *XLNET_VECTOR_AT(const uint2, p.keep + (bh * p.lq + rr) * kw + j0 / 32);
  }
  x.bits[0] = make_uint4(wk.x, live ? wb.x : ~0u, wo.x,
                         static_cast<uint32_t>(in_range));
  x.bits[1] = make_uint4(wk.y, live ? wb.y : ~0u, wo.y,
                         static_cast<uint32_t>(in_range >> 32));
  rows_s[r] = x;
}

// With kPendingKernels, DkDvKernel sets a query tile's rows up in two
// steps instead of SetUpRows' one: StageRows starts copying what each row
// reads from global memory into shared memory (cp.async) two tiles ahead,
// and ConvertRows, one tile ahead, turns the copy into the row's terms.
// The loads' latency then passes during a tile's products instead of
// holding the block at the barrier while two of its warps wait on them.
// Thread r stages and converts row r, so its own wait makes the copy
// visible to it without a barrier.
struct alignas(8) RowRaw {
  int64_t pos;    // with p.pos
  float lse, dd;  // lse_in, dd
  uint32_t seg;   // two T: the row's same- and other-segment terms (p.seg)
  uint32_t pad;
  uint2 blocked, other, keep;  // the key tile's words (other: p.other;
                               // keep: under dropout)
};
static_assert(sizeof(RowRaw) == 48, "8-byte fields, 8-byte aligned");

// Starts copying query tile i0's row inputs for key tile j0 (the first
// kBlockRows threads, one row each); rows past Lq read row Lq - 1.
template <typename T>
__device__ void StageRows(RowRaw* raw_s, const Params& p, int64_t bh,
                          int64_t i0, int j0, uint32_t threshold) {
  if (threadIdx.x >= kBlockRows) return;
  const int r = threadIdx.x;
  const int64_t b = bh / p.h, kw = BitWords(p.klen);
  const int64_t rr = min(i0 + r, p.lq - 1);
  RowRaw& x = raw_s[r];
  if (p.pos != nullptr) CopyAsync<8>(&x.pos, p.pos + b * p.lq + rr);
  CopyAsync<4>(&x.lse, p.lse_in + bh * p.lq + rr);
  CopyAsync<4>(&x.dd, p.dd + bh * p.lq + rr);
  if (p.seg != nullptr) {
    CopyAsync<4>(&x.seg, static_cast<const T*>(p.seg) + (bh * p.lq + rr) * 2);
  }
  CopyAsync<8>(
      &x.blocked,
      p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + rr) * kw + j0 / 32);
  if (p.other != nullptr) {
    CopyAsync<8>(&x.other, p.other + (b * p.lq + rr) * kw + j0 / 32);
  }
  if (threshold != 0) {
    CopyAsync<8>(&x.keep, p.keep + (bh * p.lq + rr) * kw + j0 / 32);
  }
}

// SetUpRows from StageRows' copy (after this thread's CopyAsyncWaitAll);
// a __syncthreads must follow.
template <typename T>
__device__ void ConvertRows(RowTerms* rows_s, int64_t* win_s,
                            const RowRaw* raw_s, const Params& p, int64_t bh,
                            int64_t i0, int j0, uint32_t threshold) {
  if (threadIdx.x >= kBlockRows) return;
  const int r = threadIdx.x;
  const RowRaw& raw = raw_s[r];
  const bool live = i0 + r < p.lq;
  const int64_t rr = live ? i0 + r : p.lq - 1;
  const int64_t pos = p.pos != nullptr ? raw.pos : rr;
  RowTerms x;
  if (p.bd == nullptr) {
    x.at = FusedBdOffset(r);  // FusedBd's products: no window to find
  } else {
    // WindowStart's window.
    const int64_t start = BdAt(p, bh) + rr * p.rlen + p.qlen - pos;
    const int64_t offset = ((start % 8) + 8) % 8;
    win_s[r] = start - offset;
    x.at = r * kBdLd + static_cast<int>(offset);
  }
  x.lse = raw.lse;
  x.dd = live ? raw.dd : 0.f;
  x.same = x.other = 0.f;
  if (p.seg != nullptr) {  // SegTerms
    const T* seg = reinterpret_cast<const T*>(&raw.seg);
    x.same = ToF(seg[0]) * p.scale * kLog2e;
    x.other = ToF(seg[1]) * p.scale * kLog2e;
  }
  const uint64_t in_range = InRange(p, j0 + p.qlen - pos);
  const uint2 wb = raw.blocked;
  const uint2 wo = p.other != nullptr ? raw.other : make_uint2(0, 0);
  const uint2 wk = threshold != 0 ? raw.keep : make_uint2(~0u, ~0u);
  x.bits[0] = make_uint4(wk.x, live ? wb.x : ~0u, wo.x,
                         static_cast<uint32_t>(in_range));
  x.bits[1] = make_uint4(wk.y, live ? wb.y : ~0u, wo.y,
                         static_cast<uint32_t>(in_range >> 32));
  rows_s[r] = x;
}

// One query tile's share of DkDvKernel for the warp's 16 keys: its first
// kRows rows, all 64 or 32 where the rest lie past Lq (every key is blocked
// for those, SetUpRows, so their P and dS are zero and add nothing).
template <typename T, int kDh, int kRows, bool kProducts>
__device__ __forceinline__ void DkDvTile(const DkDvBuffer<T, kDh>& buf,
                                         const uint32_t ka[kDh / 16][4],
                                         const uint32_t va[kDh / 16][4],
                                         const Dropout& drop, float scale2,
                                         int lane, float dk[kDh / 8][4],
                                         float dv[kDh / 8][4]) {
  const int warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  // s^T = k . qw^T and dP^T = v . dout^T: this warp's 16 keys x kRows rows.
  float st[kRows / 8][4], dpt[kRows / 8][4];
  ProductT<T, kDh, kRows, kPendingKernels>(st, ka, buf.q, lane);
  ProductT<T, kDh, kRows>(dpt, va, buf.dout, lane);
  // Element (key jj, row r): P from the forward's lse, then dS. The warp's
  // keys are all in word warp / 2 of a row's bits.
  const int word = warp / 2;
#pragma unroll
  for (int n = 0; n < kRows / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const RowTerms& row = buf.rows[n * 8 + 2 * t + (e & 1)];
      const float4 terms = *XLNET_VECTOR_AT(const float4, &row.lse);
      const uint4 bits = row.bits[word];
      const int jj = warp * 16 + g + 8 * (e / 2);
      const uint32_t mask = 1u << (jj % 32);
      // kProducts: FusedBd's, zero outside [0, R) already (ScoreLog2).
      float pos_term;
      if constexpr (kProducts) {
        pos_term = ToF(buf.bd[row.at + jj]);
      } else {
        pos_term = bits.w & mask ? ToF(buf.bd[row.at + jj]) : 0.f;
      }
      const float score =
          fmaf(st[n][e] + pos_term, scale2, bits.z & mask ? terms.w : terms.z);
      const float pr = bits.y & mask ? 0.f : Exp2(score - terms.x);
      const float z = bits.x & mask ? drop.keep_scale : 0.f;
      st[n][e] = pr * z;                           // dropped P
      dpt[n][e] = pr * (dpt[n][e] * z - terms.y);  // dS / scale
    }
  }
  // dv += P^T dout, dk += dS^T qw: the k-steps run over the kRows rows.
  ProductAcc<T, kDh, kRows>(dv, st, buf.dout, lane);
  ProductAcc<T, kDh, kRows>(dk, dpt, buf.q, lane);
}

// dk and dv of one tile of 64 keys (a warp per 16), over all query tiles:
// the transposed scores s^T = k . qw^T and dP^T = v . dout^T of each query
// tile, the probabilities from the forward's lse, then dv += P^T dout and
// dk += dS^T qw, in registers until the end (no atomics). The next query
// tile's copies run while this one is used.
// DkDvKernel's body; kFused as in ForwardBody.
template <typename T, int kDh, bool kFused>
__device__ __forceinline__ void DkDvBody(const Params& p) {
  static_assert(kPendingKernels || !kFused, "FusedBd is a pending change");
  constexpr int kKSteps = kDh / 16;
  constexpr int kOutBlocks = kDh / 8;
  static_assert(kBlockRows == 64 && kBlockKeys == 64, "one tile shape");
  static_assert(sizeof(RowTerms) == 80, "three vector loads, banks apart");
  static_assert(sizeof(DkDvBuffer<T, kDh>) % 16 == 0, "16-byte aligned");
  XLNET_DYNAMIC_SHARED(smem);
  auto* bufs = reinterpret_cast<DkDvBuffer<T, kDh>*>(smem);  // [2]
  // With kPendingKernels: [2][kBlockRows] rows staged, tile t in t % 2,
  // then FusedBd's operands for the block, found
  // once by thread 0 (two 64-bit divisions) and read back each tile: kept
  // in registers they make this kernel spill.
  auto* const raw = reinterpret_cast<RowRaw*>(bufs + 2);
  auto* const bd_ops_s = reinterpret_cast<BdOperands<T>*>(raw + 2 * kBlockRows);

  const int64_t bh = blockIdx.y;
  const int j0 = static_cast<int>(blockIdx.x) * kBlockKeys;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const T* k = static_cast<const T*>(p.k) + MatrixAt(p.k_layout, bh, p.h);
  const T* v = static_cast<const T*>(p.v) + MatrixAt(p.v_layout, bh, p.h);
  const T* qw = static_cast<const T*>(p.qw) + MatrixAt(p.qw_layout, bh, p.h);
  const T* dout =
      static_cast<const T*>(p.dout) + MatrixAt(p.dout_layout, bh, p.h);
  const T* bd = static_cast<const T*>(p.bd);
  const int64_t bd_numel = p.b * p.h * p.lq * p.rlen;
  // The position products computed here (FusedBd) rather than read.
  constexpr bool fused = kFused;
  const int lq = static_cast<int>(p.lq), klen = static_cast<int>(p.klen);
  const Dropout drop = MakeDropout(p);
  const float scale2 = p.scale * kLog2e;
  // Starts copying query tile i0 into buffer x (its rows set up).
  auto load_tile = [&](int x, int i0) {
    DkDvBuffer<T, kDh>& buf = bufs[x];
    LoadTileAsync<T, kDh>(buf.q, qw, p.qw_layout.t, i0, lq);
    LoadTileAsync<T, kDh>(buf.dout, dout, p.dout_layout.t, i0, lq);
    if (!fused) LoadBdAsync(buf.bd, bd, buf.win, j0, bd_numel);
    CopyAsyncCommit();
  };

  // This warp's 16 keys and values as A fragments (through buffer 1).
  LoadTileAsync<T, kDh>(bufs[1].q, k, p.k_layout.t, j0, klen);
  LoadTileAsync<T, kDh>(bufs[1].dout, v, p.v_layout.t, j0, klen);
  CopyAsyncCommit();
  SetUpRows<T>(bufs[0].rows, bufs[0].win, p, bh, 0, j0, drop.threshold);
  if (fused && threadIdx.x == 0) *bd_ops_s = MakeBdOperands<T>(p, bh);
  CopyAsyncWaitAll();
  __syncthreads();
  uint32_t ka[kKSteps][4], va[kKSteps][4];
  LoadA<T, kDh>(ka, bufs[1].q, warp * 16, g, t);
  LoadA<T, kDh>(va, bufs[1].dout, warp * 16, g, t);
  if constexpr (kPendingKernels) {
    if (kBlockRows < p.lq) {
      StageRows<T>(raw + kBlockRows, p, bh, kBlockRows, j0, drop.threshold);
    }
  }
  load_tile(0, 0);
  float dk[kOutBlocks][4], dv[kOutBlocks][4];
  Zero<kOutBlocks>(dk);
  Zero<kOutBlocks>(dv);

  for (int64_t i0 = 0, it = 0; i0 < p.lq; i0 += kBlockRows, ++it) {
    const int x = static_cast<int>(it & 1);
    const bool more = i0 + kBlockRows < p.lq;
    // Buffer 1 - x was last read by the previous tile, before the barrier
    // that ended it (and by LoadA above, before the one that started it).
    if constexpr (kPendingKernels) {
      // Buffer x, free since the barrier that ended the tile before last:
      // this tile's products, each warp its 16 rows, published by the
      // barrier below.
      if (fused) {
        const BdOperands<T> ops = *bd_ops_s;
#ifndef XLNET_CUDA_EMULATION
        // Global memory, which the compiler cannot tell of pointers read
        // from shared memory (it would make generic loads of them).
        __builtin_assume(__isGlobal(ops.qr) && __isGlobal(ops.kr));
#endif
        FusedBd<T, kDh>(bufs[x].bd, ops, p, static_cast<int>(i0), j0, warp,
                        lane);
      }
      CopyAsyncWaitAll();  // with the next tile's rows, staged
      if (more) {
        ConvertRows<T>(bufs[1 - x].rows, bufs[1 - x].win,
                       raw + (1 - x) * kBlockRows, p, bh, i0 + kBlockRows, j0,
                       drop.threshold);
      }
    } else {
      if (more) {
        SetUpRows<T>(bufs[1 - x].rows, bufs[1 - x].win, p, bh, i0 + kBlockRows,
                     j0, drop.threshold);
      }
      CopyAsyncWaitAll();
    }
    __syncthreads();  // tile x arrived; the next tile's rows set up
    if constexpr (kPendingKernels) {
      // The tile after next: staging x held this tile's rows, converted
      // before the barrier above.
      if (i0 + 2 * kBlockRows < p.lq) {
        StageRows<T>(raw + x * kBlockRows, p, bh, i0 + 2 * kBlockRows, j0,
                     drop.threshold);
      }
    }
    if (more) load_tile(1 - x, static_cast<int>(i0) + kBlockRows);

    // The tile's first 64 rows, or 32 where the rest lie past Lq (the
    // query stream's last tile; DkDvTile).
    if (kPendingKernels && i0 + 32 >= p.lq) {
      DkDvTile<T, kDh, 32, fused>(bufs[x], ka, va, drop, scale2, lane, dk, dv);
    } else {
      DkDvTile<T, kDh, kBlockRows, fused>(bufs[x], ka, va, drop, scale2, lane,
                                          dk, dv);
    }
    __syncthreads();  // buffer x is free for the tile after next
  }

  T* dk_out = static_cast<T*>(p.dk) + MatrixAt(p.dk_layout, bh, p.h);
  T* dv_out = static_cast<T*>(p.dv) + MatrixAt(p.dv_layout, bh, p.h);
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t key = j0 + warp * 16 + g + 8 * u;
    if (key >= p.klen) continue;
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      const int64_t at = n * 8 + 2 * t;
      *XLNET_VECTOR_AT(uint32_t, dk_out + key * p.dk_layout.t + at) =
          Pack<T>(dk[n][2 * u] * p.scale, dk[n][2 * u + 1] * p.scale);
      *XLNET_VECTOR_AT(uint32_t, dv_out + key * p.dv_layout.t + at) =
          Pack<T>(dv[n][2 * u], dv[n][2 * u + 1]);
    }
  }
}

// dqw, dbd and dseg of one tile of 64 query rows (a warp per 16), over all
// key tiles: the forward's scores again, dP = dout . v^T, dS, then
// dqw += dS k; dS itself is dbd at the row's shifted columns, and its sums
// over the row's same- and other-segment keys are dseg.
// Zeros into d[0, n) (16-bit elements) by the 32 lanes of a warp: the
// elements before the first 16-byte boundary and after the last one a lane
// each, the whole 16-byte pieces between a lane each (a store instruction
// writes 256 elements, not 32).
template <typename T>
__device__ __forceinline__ void ZeroRange(T* d, int64_t n, int lane) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  const auto misaligned = static_cast<int64_t>(
      (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16 / sizeof(T));
  const int64_t head = min(n, misaligned);
  if (lane < head) d[lane] = FromF<T>(0.f);
  const int64_t pieces = (n - head) / 8;
  uint4* v = reinterpret_cast<uint4*>(d + head);  // aligned where pieces > 0
  for (int64_t q = lane; q < pieces; q += 32) {
    *XLNET_VECTOR_AT(uint4, v + q) = make_uint4(0, 0, 0, 0);
  }
  const int64_t tail = head + pieces * 8;
  if (tail + lane < n) d[tail + lane] = FromF<T>(0.f);
}

// The 16-bit element offset of p from the 16-byte boundary at or before it.
template <typename T>
__device__ __forceinline__ int Misalignment(const T* p) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) % 16 / sizeof(T));
}

// Piece v, 8 values of T, to dst (16-byte aligned), which is column `col`
// of a row of n columns: one 16-byte store when the piece lies inside the
// row, else its elements inside the row one by one.
template <typename T>
__device__ __forceinline__ void StorePiece(T* dst, const uint4& v, int col,
                                           int n) {
  if (col >= 0 && col + 8 <= n) {
    *XLNET_VECTOR_AT(uint4, dst) = v;
    return;
  }
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (col + i >= 0 && col + i < n) dst[i] = e[i];
  }
}

// DqKernel's body; kFused as in ForwardBody.
template <typename T, int kDh, bool kFused>
__device__ __forceinline__ void DqBody(const Params p) {
  static_assert(kPendingKernels || !kFused, "FusedBd is a pending change");
  constexpr int kKeyBlocks = kBlockKeys / 8;
  constexpr int kOutBlocks = kDh / 8;
  XLNET_DYNAMIC_SHARED(smem);

  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  // Rows: queries, then output gradients; the words with the forward's
  // keep bits under dropout.
  const bool keep = p.dropout > 0;
  KeyTiles<T, kDh> tiles(smem, p, bh, i0, keep);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int klen = static_cast<int>(p.klen), rlen = static_cast<int>(p.rlen);

  InitWindows(tiles.win, p, bh, i0);
  __syncthreads();
  // Queries first (their fragments are taken before the buffer is
  // reused), then the output gradient into the same place.
  LoadTileAsync<T, kDh>(
      tiles.rows, static_cast<const T*>(p.qw) + MatrixAt(p.qw_layout, bh, p.h),
      p.qw_layout.t, static_cast<int>(i0), static_cast<int>(p.lq));
  CopyAsyncCommit();
  CopyAsyncWaitAll();
  __syncthreads();
  uint32_t qa[kDh / 16][4], da[kDh / 16][4];
  LoadA<T, kDh>(qa, tiles.rows, warp * 16, g, t);
  __syncthreads();
  LoadTileAsync<T, kDh>(
      tiles.rows,
      static_cast<const T*>(p.dout) + MatrixAt(p.dout_layout, bh, p.h),
      p.dout_layout.t, static_cast<int>(i0), static_cast<int>(p.lq));
  tiles.LoadAsync(0, p, 0);
  CopyAsyncCommit();

  Rows rows = MakeRows<T>(p, bh, i0, warp, g);
  // As in the forward: a warp with no row before Lq only copies and waits.
  const bool idle = kPendingKernels && i0 + warp * 16 >= p.lq;
  // As in the forward: the position products computed here (FusedBd).
  constexpr bool fused = kFused;
  BdOperands<T> bd_ops;
  if (fused) {
    bd_ops = MakeBdOperands<T>(p, bh);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      rows.bd_at[u] = FusedBdOffset(warp * 16 + g + 8 * u);
    }
  }
  T* const dbd = static_cast<T*>(p.dbd) + BdAt(p, bh);  // [Lq, R]
  float lse[2], dd[2], seg_sum[2][2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t r = rows.live[u] ? rows.row[u] : p.lq - 1;
    lse[u] = p.lse_in[bh * p.lq + r];
    dd[u] = p.dd[bh * p.lq + r];
    seg_sum[u][0] = seg_sum[u][1] = 0.f;
  }
  const float scale2 = p.scale * kLog2e;
  const Dropout drop = MakeDropout(p);
  // dbd is stored a pair of neighbouring columns a 32-bit store (half the
  // store instructions and L2 traffic of 16-bit ones). A row whose window
  // starts at an odd element pairs each lane's first column with the
  // column before it, held by the lane to its left or, for t = 0, by lane
  // 3 one n-block (or key tile) back: carry. It starts at +0, the column
  // before the window.
  bool odd[2];
  float carry[2] = {0.f, 0.f};
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    odd[u] =
        (reinterpret_cast<uintptr_t>(
             dbd + static_cast<int64_t>(rows.row[u]) * p.rlen + rows.shift[u]) &
         2) != 0;
  }
  // With kPendingKernels, dbd goes through shared memory instead, in
  // 16-byte pieces: a key tile's dS of the warp's rows, as T, into the
  // warp's own rows of the tile's bd buffer (its scores have read them),
  // each row from column o on, o being its window's offset from the
  // 16-byte boundary before it in dbd (stage_at: rows g, g + 8 of this
  // lane, column o + 2t); then lanes 2 rho and 2 rho + 1 copy row rho's
  // pieces 0-3 and 4-7 (columns 0-63) to dbd, and piece 8 (the tile's last
  // o values) stays in the second lane's registers (`held`) to become the
  // next tile's piece 0, whose first o columns it is. A piece crossing the
  // row's ends is written element by element (StorePiece). Rows past Lq
  // write nothing.
  const int piece_row = lane / 2, piece_half = lane % 2;
  int stage_at[2] = {0, 0};
  T* piece_dst = nullptr;  // row piece_row's piece 0 of key tile 0
  int piece_col = 0;       // its column in the row (may be negative)
  int piece_o = 0;         // the row's o
  bool piece_live = false;
  uint4 held = make_uint4(0, 0, 0, 0);  // +0: the columns before the window
  if constexpr (kPendingKernels) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t r = rows.live[u] ? rows.row[u] : p.lq - 1;
      stage_at[u] = (warp * 16 + g + 8 * u) * kBdLd + 2 * t +
                    Misalignment(dbd + r * p.rlen + rows.shift[u]);
    }
    const int64_t row = i0 + warp * 16 + piece_row;
    piece_live = row < p.lq;
    const int64_t rr = piece_live ? row : p.lq - 1;
    const int64_t pos = p.pos ? p.pos[bh / p.h * p.lq + rr] : rr;
    const int shift = static_cast<int>(p.qlen - pos);
    T* const at = dbd + rr * p.rlen + shift;
    piece_o = Misalignment(at);
    piece_col = shift - piece_o;
    piece_dst = at - piece_o;
  }
  float dq[kOutBlocks][4];
  Zero<kOutBlocks>(dq);
  CopyAsyncWaitAll();
  __syncthreads();
  LoadA<T, kDh>(da, tiles.rows, warp * 16, g, t);

  for (int j0 = 0, it = 0; j0 < klen; j0 += kBlockKeys, ++it) {
    const int buf = it & 1;
    const T* k_s = tiles.Keys(buf);
    const T* v_s = tiles.Values(buf);
    const T* bd_tile = tiles.Bd(buf);
    const bool more = j0 + kBlockKeys < klen;
    if (more) {
      tiles.LoadAsync(1 - buf, p, j0 + kBlockKeys);
      CopyAsyncCommit();
    }
    if (!idle) {
      if (fused) {
        FusedBd<T, kDh>(tiles.bd + buf * kBlockRows * kBdLd, bd_ops, p,
                        static_cast<int>(i0), j0, warp, lane);
      }
      const Words w = LoadWords(p, rows, tiles.Words(buf), warp, g, keep);
      // s = qw . k^T and dP = dout . v^T for 16 rows x 64 keys.
      float s[kKeyBlocks][4], dp[kKeyBlocks][4];
      ProductT<T, kDh, kBlockKeys, kPendingKernels>(s, qa, k_s, lane);
      ProductT<T, kDh>(dp, da, v_s, lane);
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int u = e / 2;
          const int jj = n * 8 + 2 * t + (e & 1);
          // Blocked: a score of -inf, so pr = 0 and ds = 0 (no branch).
          const float x = ScoreLog2<T, fused>(rows, w, u, jj, j0, bd_tile, rlen,
                                              scale2, s[n][e]);
          const float pr = Exp2(x - lse[u]);
          const float z = Bit(w.keep[u], jj) ? drop.keep_scale : 0.f;
          const float ds = pr * (dp[n][e] * z - dd[u]);  // dS / scale
          // Both sums take an add (a select, not an index: registers).
          const bool other = Bit(w.other[u], jj);
          seg_sum[u][0] += other ? 0.f : ds;
          seg_sum[u][1] += other ? ds : 0.f;
          s[n][e] = ds;
        }
        // dS into dbd at the rows' shifted columns: every key's, blocked ones
        // too (dS = 0), since dbd is not zeroed beforehand; +0 for keys past
        // K, whose columns the zero fill below writes +0 too. Not for rows
        // past Lq, which stand in for row Lq - 1 and would overwrite it.
        // (With kPendingKernels after this loop, by pieces.)
#pragma unroll
        for (int u = 0; u < 2 && !kPendingKernels; ++u) {
          const int jj = n * 8 + 2 * t;  // the lane's first key of the pair
          const float lo = j0 + jj < klen ? s[n][2 * u] * p.scale : 0.f;
          const float hi = j0 + jj + 1 < klen ? s[n][2 * u + 1] * p.scale : 0.f;
          const float left = __shfl_sync(0xffffffffu, hi, (lane + 31) % 32);
          const float last = __shfl_sync(0xffffffffu, hi, lane | 3);
          const int c = j0 + jj + rows.shift[u];  // lo's column, >= 1
          T* at = dbd + static_cast<int64_t>(rows.row[u]) * p.rlen + c;
          if (rows.live[u]) {
            if (odd[u]) {
              const float before = t == 0 ? carry[u] : left;  // column c - 1
              if (c < rlen) {
                *XLNET_VECTOR_AT(uint32_t, at - 1) = Pack<T>(before, lo);
              } else if (c - 1 < rlen) {
                at[-1] = FromF<T>(before);
              }
            } else if (c + 1 < rlen) {
              *XLNET_VECTOR_AT(uint32_t, at) = Pack<T>(lo, hi);
            } else if (c < rlen) {
              at[0] = FromF<T>(lo);
            }
          }
          carry[u] = last;
        }
      }
      if constexpr (kPendingKernels) {
        T* const stage = tiles.bd + buf * kBlockRows * kBdLd;
        T* const stage_row = stage + (warp * 16 + piece_row) * kBdLd;
        __syncwarp();  // the warp's scores have read its bd rows
        if (piece_half == 1) *XLNET_VECTOR_AT(uint4, stage_row) = held;
        __syncwarp();
#pragma unroll
        for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int jj = n * 8 + 2 * t + (e & 1);
            const float v = j0 + jj < klen ? s[n][e] * p.scale : 0.f;
            stage[stage_at[e / 2] + n * 8 + (e & 1)] = FromF<T>(v);
          }
        }
        __syncwarp();
        if (piece_live) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int piece = 4 * piece_half + q;
            StorePiece(piece_dst + j0 + 8 * piece,
                       *XLNET_VECTOR_AT(const uint4, stage_row + 8 * piece),
                       piece_col + j0 + 8 * piece, rlen);
          }
        }
        if (piece_half == 1) {
          held = *XLNET_VECTOR_AT(const uint4, stage_row + 8 * 8);
        }
      }
      ProductAcc<T, kDh>(dq, s, k_s, lane);  // dqw += dS k
    }
    if (more) CopyAsyncWaitAll();
    __syncthreads();
  }
  // With kPendingKernels, the last tile's piece 8: its first o values (the
  // rest was never written).
  if constexpr (kPendingKernels) {
    if (piece_half == 1 && piece_live) {
      const int end = (klen + kBlockKeys - 1) / kBlockKeys * kBlockKeys;
      const T* e = reinterpret_cast<const T*>(&held);
      for (int i = 0; i < piece_o; ++i) {
        const int col = piece_col + end + i;
        if (col >= 0 && col < rlen) piece_dst[end + i] = e[i];
      }
    }
  }
  // An odd row's last column (the last key tile's last key), paired with
  // the +0 after it.
#pragma unroll
  for (int u = 0; u < 2 && !kPendingKernels; ++u) {
    const int c =
        (klen + kBlockKeys - 1) / kBlockKeys * kBlockKeys - 1 + rows.shift[u];
    if (rows.live[u] && odd[u] && t == 3) {
      T* at = dbd + static_cast<int64_t>(rows.row[u]) * p.rlen + c;
      if (c + 1 < rlen) {
        *XLNET_VECTOR_AT(uint32_t, at) = Pack<T>(carry[u], 0.f);
      } else if (c < rlen) {
        at[0] = FromF<T>(carry[u]);
      }
    }
  }
  // The columns outside each row's window [shift, shift + K) get zeros, a
  // warp a row (coalesced), so that every element of dbd is written once.
  for (int r = warp; r < kBlockRows && i0 + r < p.lq; r += kWarps) {
    const int64_t row = i0 + r;
    const int64_t pos = p.pos ? p.pos[bh / p.h * p.lq + row] : row;
    const int64_t shift = p.qlen - pos;
    const int64_t lo = min(max(shift, int64_t{0}), p.rlen);
    const int64_t hi = min(max(shift + p.klen, lo), p.rlen);
    T* d = dbd + row * p.rlen;
    if constexpr (kPendingKernels) {
      ZeroRange(d, lo, lane);
      ZeroRange(d + hi, p.rlen - hi, lane);
    } else {
      for (int64_t c = lane; c < lo; c += 32) d[c] = FromF<T>(0.f);
      for (int64_t c = hi + lane; c < p.rlen; c += 32) d[c] = FromF<T>(0.f);
    }
  }

  T* dqw = static_cast<T*>(p.dqw) + MatrixAt(p.dqw_layout, bh, p.h);
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
      *XLNET_VECTOR_AT(uint32_t, dqw + row * p.dqw_layout.t + n * 8 + 2 * t) =
          Pack<T>(dq[n][2 * u] * p.scale, dq[n][2 * u + 1] * p.scale);
    }
    if (p.dseg != nullptr && t == 0) {
      T* dseg = static_cast<T*>(p.dseg) + (bh * p.lq + row) * 2;
      dseg[0] = FromF<T>(seg_sum[u][0] * p.scale);
      dseg[1] = FromF<T>(seg_sum[u][1] * p.scale);
    }
  }
}

// The kernels: with kPendingKernels, the *ProductsKernel variants run where
// the kernels compute the content stream's position products (p.bd null).
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 3) ForwardKernel(const Params p) {
  ForwardBody<T, kDh, false>(p);
}
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 3)
    ForwardProductsKernel(const Params p) {
  ForwardBody<T, kDh, true>(p);
}
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2) DkDvKernel(const Params p) {
  DkDvBody<T, kDh, false>(p);
}
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2)
    DkDvProductsKernel(const Params p) {
  DkDvBody<T, kDh, true>(p);
}
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2) DqKernel(const Params p) {
  DqBody<T, kDh, false>(p);
}
template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 2)
    DqProductsKernel(const Params p) {
  DqBody<T, kDh, true>(p);
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

// dd of one row a warp: rowsum(dout * out) over the kDh elements, each
// lane two neighbours (one 32-bit load of each), summed across the warp.
template <typename T, int kDh>
__global__ void RowDotsKernel(const Params p, float* dd) {
  static_assert(kDh == 64, "two elements a lane");
  const int64_t row =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.b * p.h * p.lq) return;  // the whole warp
  const int64_t bh = row / p.lq, i = row % p.lq;
  const T* dout = static_cast<const T*>(p.dout) +
                  MatrixAt(p.dout_layout, bh, p.h) + i * p.dout_layout.t;
  const T* out = static_cast<const T*>(p.out) +
                 MatrixAt(p.out_layout, bh, p.h) + i * p.out_layout.t;
  // fmaf: what nvcc makes of the plain expression, written out so that the
  // CPU emulation rounds as the GPU does.
  float s = fmaf(ToF(dout[2 * lane]), ToF(out[2 * lane]),
                 ToF(dout[2 * lane + 1]) * ToF(out[2 * lane + 1]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) dd[row] = s;
}

// RowDotsKernel's sums by 16-byte loads (with kPendingKernels): 8 lanes a
// row, lane m holding the element pairs 4 m .. 4 m + 3 (one load of each
// operand), a block 32 rows of one (batch x head), no 64-bit division a
// row. The pairs are added in RowDotsKernel's order, so the bits are its
// bits: across the lanes over bits 4, 3 and 2 of the pair's index (lane
// bits 2, 1, 0), then within the lane over bits 1 and 0.
constexpr int kRowDotsLanes = 8;
constexpr int kRowDotsRows = 32;  // rows a block

template <typename T, int kDh>
__global__ void __launch_bounds__(kRowDotsLanes* kRowDotsRows)
    RowDotsWideKernel(const Params p, float* dd) {
  static_assert(kDh == 8 * kRowDotsLanes, "8 elements a lane");
  const int64_t bh = blockIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowDotsRows +
                      threadIdx.x / kRowDotsLanes;
  const int m = threadIdx.x % kRowDotsLanes;
  // Every lane stays for the shuffles; rows past Lq read row Lq - 1.
  const bool live = row < p.lq;
  const int64_t i = live ? row : p.lq - 1;
  const uint4 dv =
      *XLNET_VECTOR_AT(const uint4, static_cast<const T*>(p.dout) +
                                        MatrixAt(p.dout_layout, bh, p.h) +
                                        i * p.dout_layout.t + 8 * m);
  const uint4 ov =
      *XLNET_VECTOR_AT(const uint4, static_cast<const T*>(p.out) +
                                        MatrixAt(p.out_layout, bh, p.h) +
                                        i * p.out_layout.t + 8 * m);
  const T* d = reinterpret_cast<const T*>(&dv);
  const T* o = reinterpret_cast<const T*>(&ov);
  float q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    q[k] = fmaf(ToF(d[2 * k]), ToF(o[2 * k]),
                ToF(d[2 * k + 1]) * ToF(o[2 * k + 1]));
  }
#pragma unroll
  for (int x = kRowDotsLanes / 2; x > 0; x >>= 1) {
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] += __shfl_xor_sync(0xffffffffu, q[k], x);
  }
  if (live && m == 0) dd[bh * p.lq + row] = (q[0] + q[2]) + (q[1] + q[3]);
}

// Shared memory of DkDvKernel: two buffers (and, with kPendingKernels, two
// tiles of staged rows).
template <typename T, int kDh>
__host__ __device__ constexpr size_t DkDvSharedBytes() {
  return 2 * sizeof(DkDvBuffer<T, kDh>) +
         (kPendingKernels
              ? 2 * kBlockRows * sizeof(RowRaw) + sizeof(BdOperands<T>)
              : 0);
}

// The forward's dropout decisions drawn before it (kDrawnKeep): every
// row's keep words, word w of row r of bh holding keys 32 w .. 32 w + 31
// (bit i: key 32 w + i kept), 8 keys a Philox block (AttentionKeepBits8)
// and blocks from klen on all kept, the bits ForwardKernel's own draws
// give (PairKeep, KeepWords). One thread a 64-key tile of a row: 8 blocks,
// one 8-byte store. The draws are integer work that the forward, with 2-3
// warps a scheduler waiting on its products, issued between them; here
// every warp of a full SM draws.
__global__ void __launch_bounds__(256)
    DrawKeepKernel(const Params p, uint32_t threshold) {
  const int64_t pairs = BitWords(p.klen) / 2;  // 64-key tiles a row
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.b * p.h * p.lq * pairs) return;
  const int64_t tile = i % pairs, rows = i / pairs;  // rows = bh * lq + r
  const int64_t r = rows % p.lq, bh = rows / p.lq;
  uint32_t w[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    w[x] = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t block = tile * kBlockKeys + 32 * x + 8 * k;
      const uint32_t bits =
          block < p.klen
              ? AttentionKeepBits8(p.seed, p.offset, bh, r, block, threshold)
              : 0xFFu;
      w[x] |= bits << (8 * k);
    }
  }
  *XLNET_VECTOR_AT(uint2, p.keep + rows * 2 * pairs + 2 * tile) =
      make_uint2(w[0], w[1]);
}

template <typename Kernel>
cudaError_t LaunchWithShared(Kernel kernel, dim3 grid, size_t bytes,
                             const Params& p, cudaStream_t stream) {
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  XLNET_LAUNCH(kernel, grid, kThreads, bytes, stream, p);
  return cudaGetLastError();
}

template <typename T, int kDh>
cudaError_t LaunchBackward(const Params& p, cudaStream_t stream) {
  const auto bh = static_cast<unsigned>(p.b * p.h);
  const dim3 key_grid(
      static_cast<unsigned>((p.klen + kBlockKeys - 1) / kBlockKeys), bh);
  const dim3 row_grid(
      static_cast<unsigned>((p.lq + kBlockRows - 1) / kBlockRows), bh);
  auto* dkdv = DkDvKernel<T, kDh>;
  auto* dq = DqKernel<T, kDh>;
  if constexpr (kPendingKernels) {
    if (p.bd == nullptr) {  // the kernels' own position products
      dkdv = DkDvProductsKernel<T, kDh>;
      dq = DqProductsKernel<T, kDh>;
    }
  }
  const cudaError_t e =
      LaunchWithShared(dkdv, key_grid, DkDvSharedBytes<T, kDh>(), p, stream);
  if (e != cudaSuccess) return e;
  return LaunchWithShared(dq, row_grid, SharedBytes<T, kDh>(), p, stream);
}

template <typename T, int kDh>
cudaError_t Launch(const Params& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.lq + kBlockRows - 1) / kBlockRows),
                  static_cast<unsigned>(p.b * p.h));
  auto* forward = ForwardKernel<T, kDh>;
  if constexpr (kPendingKernels) {
    if (p.bd == nullptr) forward = ForwardProductsKernel<T, kDh>;
  }
  if constexpr (kDrawnKeep) {
    // Whenever the forward reads the words (dropout > 0), so that it never
    // reads unwritten ones.
    if (p.dropout > 0) {
      const uint32_t threshold = AttentionKeepThreshold(p.dropout);
      constexpr int kBlock = 256;
      const int64_t threads = p.b * p.h * p.lq * (BitWords(p.klen) / 2);
      const auto blocks =
          static_cast<unsigned>((threads + kBlock - 1) / kBlock);
      XLNET_LAUNCH(DrawKeepKernel, blocks, kBlock, 0, stream, p, threshold);
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return e;
    }
  }
  return LaunchWithShared(forward, grid, SharedBytes<T, kDh>(), p, stream);
}

template <typename T, int kDh>
cudaError_t LaunchRowDots(const Params& p, float* dd, cudaStream_t stream) {
  if constexpr (kPendingKernels) {
    if (p.b * p.h > 65535) return cudaErrorInvalidValue;  // grid.y
    const dim3 grid(
        static_cast<unsigned>((p.lq + kRowDotsRows - 1) / kRowDotsRows),
        static_cast<unsigned>(p.b * p.h));
    auto* wide = RowDotsWideKernel<T, kDh>;
    XLNET_LAUNCH(wide, grid, kRowDotsLanes * kRowDotsRows, 0, stream, p, dd);
    return cudaGetLastError();
  }
  constexpr int kRowsABlock = 8;
  const int64_t rows = p.b * p.h * p.lq;
  const auto blocks =
      static_cast<unsigned>((rows + kRowsABlock - 1) / kRowsABlock);
  auto* kernel = RowDotsKernel<T, kDh>;
  XLNET_LAUNCH(kernel, blocks, kRowsABlock * 32, 0, stream, p, dd);
  return cudaGetLastError();
}

}  // namespace

cudaError_t PackBits(const uint8_t* src, int64_t sb, int64_t si, int64_t sj,
                     int64_t rows_b, int64_t lq, int64_t klen, bool pad_blocked,
                     uint32_t* dst, cudaStream_t stream) {
  const int64_t words = rows_b * lq * BitWords(klen);
  if (words == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  const auto blocks = static_cast<unsigned>((words + kBlock - 1) / kBlock);
  XLNET_LAUNCH(PackBitsKernel, blocks, kBlock, 0, stream, src, sb, si, sj,
               rows_b, lq, klen, pad_blocked, dst);
  return cudaGetLastError();
}

namespace {

// Whether an operand's rows are whole, aligned 16-byte pieces (cp.async;
// the 32-bit stores need less).
bool Aligned(const Layout& l, const void* data) {
  return l.b % 8 == 0 && l.h % 8 == 0 && l.t % 8 == 0 &&
         reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

// What both directions need: a head size the kernels have, the grid's
// limits, 32-bit row, key, position and bit-word indices inside the
// kernels, aligned inputs.
bool ValidShapes(const Params& p) {
  const int64_t words = std::max(p.b, p.blocked_b) * p.lq * BitWords(p.klen);
  return SupportsHeadSize(p.dh) && p.b * p.h <= 65535 && p.blocked != nullptr &&
         Aligned(p.qw_layout, p.qw) && Aligned(p.k_layout, p.k) &&
         Aligned(p.v_layout, p.v) && p.bd_group >= 1 && p.b % p.bd_group == 0 &&
         (p.seg != nullptr) == (p.other != nullptr) && p.rlen < (1 << 30) &&
         p.klen < (1 << 30) && p.lq >= 0 && p.lq < (1 << 30) &&
         p.qlen < (1 << 30) && words < (int64_t{1} << 31);
}

}  // namespace

bool KernelsComputePositionProducts() { return kPendingKernels; }

namespace {

// Without bd: the kernels' own position products from qr and k_r, in the
// content stream only.
bool ProductsFromQr(const Params& p) {
  return KernelsComputePositionProducts() && p.qr != nullptr &&
         p.k_r != nullptr && p.pos == nullptr && Aligned(p.qr_layout, p.qr) &&
         Aligned(p.k_r_layout, p.k_r);
}

}  // namespace

cudaError_t Backward(const Params& p, cudaStream_t stream) {
  if (!ValidShapes(p) || p.dout == nullptr || p.lse_in == nullptr ||
      p.dd == nullptr || p.dqw == nullptr || p.dk == nullptr ||
      p.dv == nullptr || p.dbd == nullptr ||
      (p.seg != nullptr) != (p.dseg != nullptr) ||
      (p.dropout > 0 && p.keep == nullptr) || !Aligned(p.dout_layout, p.dout) ||
      !Aligned(p.dqw_layout, p.dqw) || !Aligned(p.dk_layout, p.dk) ||
      !Aligned(p.dv_layout, p.dv)) {
    return cudaErrorInvalidValue;
  }
  if (p.bd == nullptr && !ProductsFromQr(p)) return cudaErrorInvalidValue;
  if (p.lq == 0 || p.klen == 0 || p.b * p.h == 0) return cudaSuccess;
  return p.dtype == DType::kHalf ? LaunchBackward<__half, 64>(p, stream)
                                 : LaunchBackward<__nv_bfloat16, 64>(p, stream);
}

cudaError_t RowDots(const Params& p, float* dd, cudaStream_t stream) {
  if (!SupportsHeadSize(p.dh) || p.dout == nullptr || p.out == nullptr ||
      dd == nullptr || !Aligned(p.dout_layout, p.dout) ||
      !Aligned(p.out_layout, p.out)) {
    return cudaErrorInvalidValue;
  }
  if (p.b * p.h * p.lq == 0) return cudaSuccess;
  return p.dtype == DType::kHalf
             ? LaunchRowDots<__half, 64>(p, dd, stream)
             : LaunchRowDots<__nv_bfloat16, 64>(p, dd, stream);
}

cudaError_t Forward(const Params& p, cudaStream_t stream) {
  if (!ValidShapes(p) || !Aligned(p.out_layout, p.out) ||
      (p.bd == nullptr && !ProductsFromQr(p)) ||
      (kDrawnKeep && p.dropout > 0 && p.keep == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.lq == 0 || p.b * p.h == 0) return cudaSuccess;
  return p.dtype == DType::kHalf ? Launch<__half, 64>(p, stream)
                                 : Launch<__nv_bfloat16, 64>(p, stream);
}

}  // namespace xlnet::tc_attention
