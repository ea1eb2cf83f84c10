// The tensor-core forward of the fused relative attention,
// FlashAttention-2 style: one block of 4 warps per (64 query rows,
// batch x head), each warp 16 rows; key tiles of 64 stream through shared
// memory (cp.async, the next tile copied while this one is used) with an
// online softmax kept in registers, in log2 units (exp2). Masks and
// segment flags arrive as bits (PackBits: two 32-bit words a row and tile,
// not a byte a score), the position term as one 16-bit load a score at
// the row's shift.
//
// Matrix units through inline PTX mma.sync.m16n8k16 (fp16/bf16 in, fp32
// accumulate) rather than CuTe: the kernel needs only two products with
// fixed tile shapes, and the accumulator layout of mma.sync is documented
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

template <typename T, int kDh>
__global__ void __launch_bounds__(kThreads, 3) ForwardKernel(const Params p) {
  static_assert(kDh % 16 == 0, "head size: whole k-steps of 16");
  constexpr int kLd = kDh + kPad;
  constexpr int kKSteps = kDh / 16;           // k-steps of q . k^T
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

  const int64_t bh = blockIdx.y, b = bh / p.h;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int klen = static_cast<int>(p.klen), rlen = static_cast<int>(p.rlen);
  const int kw = static_cast<int>(BitWords(p.klen));
  const T* qw = static_cast<const T*>(p.qw) + bh * p.lq * kDh;
  const T* k = static_cast<const T*>(p.k) + bh * p.klen * kDh;
  const T* v = static_cast<const T*>(p.v) + bh * p.klen * kDh;

  const T* bd = static_cast<const T*>(p.bd);
  const int64_t bd_numel = p.b * p.h * p.lq * p.rlen;
  // Element start(r) of each row's window, 8-aligned; rows past Lq read
  // row Lq - 1. Floor division: a window may start before element 0.
  auto window = [&](int64_t r, int64_t* offset) {
    r = r < p.lq ? r : p.lq - 1;
    const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
    const int64_t start = (bh * p.lq + r) * p.rlen + p.qlen - pos;
    *offset = ((start % 8) + 8) % 8;
    return start - *offset;
  };
  if (threadIdx.x < kBlockRows) {
    int64_t unused;
    win_s[threadIdx.x] = window(i0 + threadIdx.x, &unused);
  }
  __syncthreads();
  LoadTileAsync<T, kDh>(q_s, qw, i0, kBlockRows, p.lq);
  LoadTileAsync<T, kDh>(kv_s, k, 0, kBlockKeys, p.klen);
  LoadTileAsync<T, kDh>(kv_s + kTile, v, 0, kBlockKeys, p.klen);
  LoadBdAsync(bd_s, bd, win_s, 0, bd_numel);
  CopyAsyncCommit();

  // The two rows this thread holds: u = 0 is row g, u = 1 row g + 8. Rows
  // past Lq read row Lq - 1 and are blocked everywhere.
  int bd_at[2];  // this row's offset into its bd window
  const uint32_t* blocked_row[2];
  const uint32_t* other_row[2];
  int shift[2];
  bool live[2];
  float same[2], delta[2], m[2], l[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t row = i0 + warp * 16 + g + 8 * u;
    live[u] = row < p.lq;
    const int64_t r = live[u] ? row : p.lq - 1;
    const int64_t pos = p.pos ? p.pos[b * p.lq + r] : r;
    shift[u] = static_cast<int>(p.qlen - pos);  // bd column of key j
    int64_t offset;
    window(row, &offset);
    bd_at[u] = (warp * 16 + g + 8 * u) * kBdLd + static_cast<int>(offset);
    blocked_row[u] = p.blocked + ((p.blocked_b == 1 ? 0 : b) * p.lq + r) * kw;
    other_row[u] = p.other ? p.other + (b * p.lq + r) * kw : nullptr;
    same[u] = delta[u] = 0.f;
    if (p.seg != nullptr) {
      const T* seg = static_cast<const T*>(p.seg) + (bh * p.lq + r) * 2;
      same[u] = ToF(seg[0]) * p.scale * kLog2e;
      delta[u] = ToF(seg[1]) * p.scale * kLog2e - same[u];
    }
    m[u] = -INFINITY;  // in log2 units, as the scores below
    l[u] = 0.f;
  }
  const float scale2 = p.scale * kLog2e;
  float o[kOutBlocks][4];
#pragma unroll
  for (int n = 0; n < kOutBlocks; ++n) {
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  }
  const uint32_t threshold =
      p.dropout > 0 ? AttentionKeepThreshold(p.dropout) : 0;
  const float keep_scale =
      p.dropout > 0 ? static_cast<float>(1.0 / (1.0 - p.dropout)) : 1.f;

  CopyAsyncWaitAll();
  __syncthreads();
  // This warp's query rows as A fragments, kept for all key tiles.
  uint32_t qa[kKSteps][4];
  {
    const T* q0 = q_s + (warp * 16 + g) * kLd + 2 * t;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      qa[kk][0] = Load32(q0 + kk * 16);
      qa[kk][1] = Load32(q0 + 8 * kLd + kk * 16);
      qa[kk][2] = Load32(q0 + kk * 16 + 8);
      qa[kk][3] = Load32(q0 + 8 * kLd + kk * 16 + 8);
    }
  }

  for (int j0 = 0, it = 0; j0 < klen; j0 += kBlockKeys, ++it) {
    const int buf = it & 1;
    const T* k_s = kv_s + buf * 2 * kTile;
    const T* v_s = k_s + kTile;
    const T* bd_tile = bd_s + buf * kBlockRows * kBdLd;
    const bool more = j0 + kBlockKeys < klen;
    if (more) {
      T* next = kv_s + (1 - buf) * 2 * kTile;
      LoadTileAsync<T, kDh>(next, k, j0 + kBlockKeys, kBlockKeys, p.klen);
      LoadTileAsync<T, kDh>(next + kTile, v, j0 + kBlockKeys, kBlockKeys,
                            p.klen);
      LoadBdAsync(bd_s + (1 - buf) * kBlockRows * kBdLd, bd, win_s,
                  j0 + kBlockKeys, bd_numel);
      CopyAsyncCommit();
    }

    // This tile's mask words, read first so that the product hides their
    // latency.
    uint32_t blocked[2][2], other[2][2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const uint2 wb =
          *reinterpret_cast<const uint2*>(blocked_row[u] + j0 / 32);
      blocked[u][0] = live[u] ? wb.x : ~0u;
      blocked[u][1] = live[u] ? wb.y : ~0u;
      other[u][0] = other[u][1] = 0;
      if (other_row[u] != nullptr) {
        const uint2 wo =
            *reinterpret_cast<const uint2*>(other_row[u] + j0 / 32);
        other[u][0] = wo.x;
        other[u][1] = wo.y;
      }
    }
    // s = qw . k^T for this warp's 16 rows and the tile's 64 keys.
    float s[kKeyBlocks][4];
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      const T* k0 = k_s + (n * 8 + g) * kLd + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        Mma<T>(s[n], qa[kk], Load32(k0 + kk * 16), Load32(k0 + kk * 16 + 8));
      }
    }

    // The position, segment and mask terms (log2 units), then the online
    // softmax.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int u = e / 2;
        const int jj = n * 8 + 2 * t + (e & 1);  // key within the tile
        const int bit = jj % 32;
        float x = -INFINITY;
        if (!((blocked[u][jj / 32] >> bit) & 1u)) {
          // Relative positions past R are the SIMT kernel's zero rows.
          const int c = j0 + jj + shift[u];
          const float pos_term =
              static_cast<unsigned>(c) < static_cast<unsigned>(rlen)
                  ? ToF(bd_tile[bd_at[u] + jj])
                  : 0.f;
          x = (s[n][e] + pos_term) * scale2 + same[u] +
              ((other[u][jj / 32] >> bit) & 1u ? delta[u] : 0.f);
        }
        s[n][e] = x;
        tile_max[u] = fmaxf(tile_max[u], x);
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
      // Dropout decisions come in groups of 4 keys; 2t and 2t + 1 share one.
      uint32_t keep[2] = {~0u, ~0u};
      const int j = j0 + n * 8 + 2 * t;
      if (threshold != 0 && j < klen) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (live[u]) {
            keep[u] = AttentionKeepBits4(p.seed, p.offset, bh,
                                         i0 + warp * 16 + g + 8 * u, j & ~3,
                                         threshold) >>
                      (j & 3);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int u = e / 2;
        float pr = exp2f(s[n][e] - m_safe[u]);  // 0 at -inf
        l[u] += pr;  // the softmax's sum counts dropped keys too
        if (threshold != 0) {
          pr = (keep[u] >> (e & 1)) & 1u ? pr * keep_scale : 0.f;
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

    // o += p . v: the scores of key blocks 2kk, 2kk + 1 are the A fragment.
#pragma unroll
    for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
      const uint32_t pa[4] = {Pack<T>(s[2 * kk][0], s[2 * kk][1]),
                              Pack<T>(s[2 * kk][2], s[2 * kk][3]),
                              Pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              Pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const T* v0 = v_s + (kk * 16 + 2 * t) * kLd + g;
#pragma unroll
      for (int n = 0; n < kOutBlocks; ++n) {
        const T* vn = v0 + n * 8;
        Mma<T>(o[n], pa, Pack16(vn, vn + kLd),
               Pack16(vn + 8 * kLd, vn + 9 * kLd));
      }
    }
    if (more) CopyAsyncWaitAll();
    __syncthreads();  // the next tile has arrived; this one is free
  }

  T* out = static_cast<T*>(p.out) + bh * p.lq * kDh;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 1);
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 2);
    if (!live[u]) continue;
    const float inv = l[u] > 0.f ? 1.f / l[u] : 0.f;
    const int64_t row = i0 + warp * 16 + g + 8 * u;
#pragma unroll
    for (int n = 0; n < kOutBlocks; ++n) {
      *reinterpret_cast<uint32_t*>(out + row * kDh + n * 8 + 2 * t) =
          Pack<T>(o[n][2 * u] * inv, o[n][2 * u + 1] * inv);
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

template <typename T, int kDh>
cudaError_t Launch(const Params& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.lq + kBlockRows - 1) / kBlockRows),
                  static_cast<unsigned>(p.b * p.h));
  constexpr size_t kBytes = SharedBytes<T, kDh>();
  const cudaError_t e = cudaFuncSetAttribute(
      ForwardKernel<T, kDh>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(kBytes));
  if (e != cudaSuccess) return e;
  ForwardKernel<T, kDh><<<grid, kThreads, kBytes, stream>>>(p);
  return cudaGetLastError();
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

cudaError_t Forward(const Params& p, cudaStream_t stream) {
  // 32-bit key and position arithmetic inside the kernel.
  if (!SupportsHeadSize(p.dh) || p.b * p.h > 65535 || p.blocked == nullptr ||
      (p.seg != nullptr) != (p.other != nullptr) || p.rlen >= (1 << 30) ||
      p.klen >= (1 << 30) || p.lq < 0 || p.qlen >= (1 << 30)) {
    return cudaErrorInvalidValue;
  }
  if (p.lq == 0 || p.b * p.h == 0) return cudaSuccess;
  return p.dtype == DType::kHalf ? Launch<__half, 64>(p, stream)
                                 : Launch<__nv_bfloat16, 64>(p, stream);
}

}  // namespace xlnet::tc_attention
