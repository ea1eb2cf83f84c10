// The fused relative attention on CUDA, FlashAttention-style: one block per
// (16 query rows, batch x head); the keys stream through shared memory in
// tiles of 32 with an online softmax; backward recomputes each tile from
// the forward's per-row log-sum-exp. Inputs fp32/fp16/bf16, accumulation
// fp32, dropout from model/philox.h (the CPU path's stream, bit for bit).
//
// Correct on an H100, but slow: see attention_kernels.h.
//
// Plain SIMT fp32 arithmetic (no tensor cores): within a warp each lane owns
// one key of the tile for the scores and Dh / 32 output columns for
// probs x values. Backward has two phases per key tile: (1) per query row,
// dS and dropout-scaled P into shared memory and dQ in registers; (2) per
// (key, column), dK, dV and the k_r band's gradient summed over the tile's
// rows in a fixed order and added to global fp32 buffers with one atomicAdd
// per element and block (so their summation order across blocks, and only
// that, is not deterministic).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "model/cuda/attention_kernels.h"
#include "model/philox.h"

namespace xlnet::cuda_attention {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = kQueryTile / kWarps;
constexpr int kThreads = kWarps * 32;
constexpr unsigned kFull = 0xffffffffu;

template <typename T>
__device__ __forceinline__ float ToF(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return x;
  }
}

template <typename T>
__device__ __forceinline__ T FromF(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(x);
  } else {
    return x;
  }
}

__device__ __forceinline__ int64_t Min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__device__ __forceinline__ int64_t Max64(int64_t a, int64_t b) {
  return a < b ? b : a;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Shared-memory rows are padded to dh + 1 floats so that lanes reading
// consecutive rows at the same column hit different banks.
struct Layout {
  int64_t ld;
  float *qw, *qr, *dout;  // [kQueryTile][ld]
  float *k, *v;           // [kKeyTile][ld]
  float* kr;              // [band][ld]
  float *ds, *pz;         // [kQueryTile][kKeyTile + 1] (backward)
};

__host__ __device__ inline size_t SharedFloats(int64_t dh, int64_t band,
                                               bool backward) {
  const int64_t ld = dh + 1;
  int64_t n = (2 * kQueryTile + 2 * kKeyTile + band) * ld;
  if (backward) n += kQueryTile * ld + 2 * kQueryTile * (kKeyTile + 1);
  return static_cast<size_t>(n);
}

__device__ Layout MakeLayout(float* smem, int64_t dh, int64_t band,
                             bool backward) {
  Layout s;
  s.ld = dh + 1;
  s.qw = smem;
  s.qr = s.qw + kQueryTile * s.ld;
  s.k = s.qr + kQueryTile * s.ld;
  s.v = s.k + kKeyTile * s.ld;
  s.kr = s.v + kKeyTile * s.ld;
  s.dout = s.kr + band * s.ld;
  s.ds = backward ? s.dout + kQueryTile * s.ld : nullptr;
  s.pz = backward ? s.ds + kQueryTile * (kKeyTile + 1) : nullptr;
  return s;
}

// What one block needs of its (b, h) slice and query tile.
struct Tile {
  int64_t b, h, bh, i0, n, kr_offset;
  int64_t pmin, pmax;
};

__device__ Tile MakeTile(const Params& p) {
  Tile t;
  t.bh = blockIdx.y;
  t.b = t.bh / p.h;
  t.h = t.bh % p.h;
  t.i0 = static_cast<int64_t>(blockIdx.x) * kQueryTile;
  t.n = Min64(kQueryTile, p.lq - t.i0);
  t.kr_offset = ((p.kr_batch == 1 ? 0 : t.b) * p.h + t.h) * p.rlen * p.dh;
  t.pmin = p.pos ? p.pos[t.b * p.lq + t.i0] : t.i0;
  t.pmax = t.pmin;
  for (int64_t r = 1; r < t.n; ++r) {
    const int64_t q = p.pos ? p.pos[t.b * p.lq + t.i0 + r] : t.i0 + r;
    t.pmin = Min64(t.pmin, q);
    t.pmax = Max64(t.pmax, q);
  }
  return t;
}

__device__ __forceinline__ int64_t RowPos(const Params& p, const Tile& t,
                                          int64_t r) {
  return p.pos ? p.pos[t.b * p.lq + t.i0 + r] : t.i0 + r;
}

// Rows [row0, row0 + rows) of a [*, Dh] tensor into shared memory (times
// `scale`), zeros past `limit`.
template <typename T>
__device__ void LoadRows(float* dst, int64_t ld, const T* src, int64_t row0,
                         int64_t rows, int64_t limit, int64_t dh, float scale) {
  for (int64_t idx = threadIdx.x; idx < rows * dh; idx += blockDim.x) {
    const int64_t r = idx / dh, d = idx % dh;
    const int64_t row = row0 + r;
    dst[r * ld + d] =
        row >= 0 && row < limit ? ToF(src[row * dh + d]) * scale : 0.f;
  }
}

// Loads the key tile [j0, j0 + kKeyTile) and the k_r band of this tile.
template <typename T>
__device__ void LoadKeyTile(const Params& p, const Tile& t, const Layout& s,
                            int64_t j0, int64_t c_lo, int64_t w) {
  const int64_t kv_offset = t.bh * p.klen * p.dh;
  LoadRows(s.k, s.ld, static_cast<const T*>(p.k) + kv_offset, j0, kKeyTile,
           p.klen, p.dh, 1.f);
  LoadRows(s.v, s.ld, static_cast<const T*>(p.v) + kv_offset, j0, kKeyTile,
           p.klen, p.dh, 1.f);
  LoadRows(s.kr, s.ld, static_cast<const T*>(p.kr) + t.kr_offset, c_lo, w,
           p.rlen, p.dh, 1.f);
}

// The scaled, masked score of row r (query i at position pos) and key j;
// -inf when masked or past the keys. Also returns the band row of (i, j).
__device__ float Score(const Params& p, const Tile& t, const Layout& s,
                       int64_t r, int64_t pos, int64_t j, int64_t j0,
                       float seg_same, float seg_delta, int64_t* band_row) {
  *band_row = j - j0 + (t.pmax - pos);  // (j + qlen - pos) - c_lo
  if (j >= p.klen) return -INFINITY;
  const int64_t i = t.i0 + r;
  if (p.mask != nullptr &&
      p.mask[t.b * p.mask_sb + i * p.mask_si + j * p.mask_sj]) {
    return -INFINITY;
  }
  const float* qw = s.qw + r * s.ld;
  const float* qr = s.qr + r * s.ld;
  const float* k = s.k + (j - j0) * s.ld;
  const float* kr = s.kr + *band_row * s.ld;
  float acc = 0.f;
  for (int64_t d = 0; d < p.dh; ++d) acc += qw[d] * k[d] + qr[d] * kr[d];
  if (p.seg != nullptr) {
    const bool other = p.diff[t.b * p.diff_sb + i * p.diff_si + j * p.diff_sj];
    acc += seg_same + (other ? seg_delta : 0.f);
  }
  return acc;
}

// The dropout multiplier of (b, h, i, j): 0 or 1 / (1 - p).
__device__ __forceinline__ float DropoutScale(const Params& p, int64_t bh,
                                              int64_t i, int64_t j) {
  if (p.dropout <= 0) return 1.f;
  const uint32_t bits = AttentionKeepBits8(p.seed, p.offset, bh, i,
                                           j & ~int64_t{kKeysPerDraw - 1},
                                           AttentionKeepThreshold(p.dropout));
  return (bits >> (j & (kKeysPerDraw - 1))) & 1u
             ? static_cast<float>(1.0 / (1.0 - p.dropout))
             : 0.f;
}

template <typename T>
__device__ void SegTerms(const Params& p, const Tile& t, int64_t r, float* same,
                         float* delta) {
  *same = 0.f;
  *delta = 0.f;
  if (p.seg == nullptr) return;
  const T* seg = static_cast<const T*>(p.seg) + (t.bh * p.lq + t.i0 + r) * 2;
  *same = ToF(seg[0]) * p.scale;
  *delta = ToF(seg[1]) * p.scale - *same;
}

template <typename T, int kDv>
__global__ void __launch_bounds__(kThreads) ForwardKernel(const Params p) {
  extern __shared__ float smem[];
  const Tile t = MakeTile(p);
  const Layout s = MakeLayout(smem, p.dh, p.band, /*backward=*/false);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_offset = t.bh * p.lq * p.dh;
  LoadRows(s.qw, s.ld, static_cast<const T*>(p.qw) + q_offset, t.i0, t.n, p.lq,
           p.dh, p.scale);
  LoadRows(s.qr, s.ld, static_cast<const T*>(p.qr) + q_offset, t.i0, t.n, p.lq,
           p.dh, p.scale);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDv];
  float same[kRowsPerWarp], delta[kRowsPerWarp];
  int64_t pos[kRowsPerWarp];
#pragma unroll
  for (int u = 0; u < kRowsPerWarp; ++u) {
    const int64_t r = warp * kRowsPerWarp + u;
    m[u] = -INFINITY;
    l[u] = 0.f;
#pragma unroll
    for (int e = 0; e < kDv; ++e) acc[u][e] = 0.f;
    pos[u] = r < t.n ? RowPos(p, t, r) : 0;
    if (r < t.n) {
      SegTerms<T>(p, t, r, &same[u], &delta[u]);
    } else {
      same[u] = delta[u] = 0.f;
    }
  }
  for (int64_t j0 = 0; j0 < p.klen; j0 += kKeyTile) {
    const int64_t c_lo = j0 + p.qlen - t.pmax;
    const int64_t w = kKeyTile + t.pmax - t.pmin;
    __syncthreads();  // the previous tile is no longer read
    LoadKeyTile<T>(p, t, s, j0, c_lo, w);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kRowsPerWarp; ++u) {
      const int64_t r = warp * kRowsPerWarp + u;
      if (r >= t.n) continue;  // warp-uniform
      const int64_t j = j0 + lane;
      int64_t band_row;
      const float sc =
          Score(p, t, s, r, pos[u], j, j0, same[u], delta[u], &band_row);
      const float m_new = fmaxf(m[u], WarpMax(sc));
      const float m_safe = m_new == -INFINITY ? 0.f : m_new;
      float pr = sc == -INFINITY ? 0.f : expf(sc - m_safe);
      const float alpha = expf(m[u] - m_safe);  // 0 while m is -inf
      l[u] = l[u] * alpha + WarpSum(pr);
      if (j < p.klen) pr *= DropoutScale(p, t.bh, t.i0 + r, j);
#pragma unroll
      for (int e = 0; e < kDv; ++e) acc[u][e] *= alpha;
      for (int jj = 0; jj < kKeyTile; ++jj) {
        const float pj = __shfl_sync(kFull, pr, jj);
        const float* v = s.v + jj * s.ld;
#pragma unroll
        for (int e = 0; e < kDv; ++e) {
          const int64_t d = lane + 32 * e;
          if (d < p.dh) acc[u][e] += pj * v[d];
        }
      }
      m[u] = m_new;
    }
  }
#pragma unroll
  for (int u = 0; u < kRowsPerWarp; ++u) {
    const int64_t r = warp * kRowsPerWarp + u;
    if (r >= t.n) continue;
    const int64_t row = t.bh * p.lq + t.i0 + r;
    const float inv = l[u] > 0.f ? 1.f / l[u] : 0.f;
    T* out = static_cast<T*>(p.out) + row * p.dh;
#pragma unroll
    for (int e = 0; e < kDv; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < p.dh) out[d] = FromF<T>(acc[u][e] * inv);
    }
    if (lane == 0) p.lse[row] = l[u] > 0.f ? m[u] + logf(l[u]) : INFINITY;
  }
}

template <typename T, int kDv>
__global__ void __launch_bounds__(kThreads) BackwardKernel(const Params p) {
  extern __shared__ float smem[];
  const Tile t = MakeTile(p);
  const Layout s = MakeLayout(smem, p.dh, p.band, /*backward=*/true);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_offset = t.bh * p.lq * p.dh;
  LoadRows(s.qw, s.ld, static_cast<const T*>(p.qw) + q_offset, t.i0, t.n, p.lq,
           p.dh, p.scale);
  LoadRows(s.qr, s.ld, static_cast<const T*>(p.qr) + q_offset, t.i0, t.n, p.lq,
           p.dh, p.scale);
  LoadRows(s.dout, s.ld, static_cast<const T*>(p.dout) + q_offset, t.i0, t.n,
           p.lq, p.dh, 1.f);
  __syncthreads();

  float lse[kRowsPerWarp], drow[kRowsPerWarp];
  float dqw[kRowsPerWarp][kDv], dqr[kRowsPerWarp][kDv];
  float same[kRowsPerWarp], delta[kRowsPerWarp];
  float dsame[kRowsPerWarp], ddelta[kRowsPerWarp];
  int64_t pos[kRowsPerWarp];
#pragma unroll
  for (int u = 0; u < kRowsPerWarp; ++u) {
    const int64_t r = warp * kRowsPerWarp + u;
    const bool valid = r < t.n;
    const int64_t row = t.bh * p.lq + t.i0 + r;
    lse[u] = valid ? p.lse[row] : INFINITY;
    pos[u] = valid ? RowPos(p, t, r) : 0;
    same[u] = delta[u] = dsame[u] = ddelta[u] = 0.f;
    if (valid) SegTerms<T>(p, t, r, &same[u], &delta[u]);
    // D_r = dO_r . O_r (= sum_j P_rj dP_rj, dropout included).
    float part = 0.f;
    if (valid) {
      const T* o = static_cast<const T*>(p.out) + row * p.dh;
      for (int64_t d = lane; d < p.dh; d += 32) {
        part += s.dout[r * s.ld + d] * ToF(o[d]);
      }
    }
    drow[u] = WarpSum(part);
#pragma unroll
    for (int e = 0; e < kDv; ++e) dqw[u][e] = dqr[u][e] = 0.f;
  }

  const int64_t kr_offset = t.kr_offset;
  for (int64_t j0 = 0; j0 < p.klen; j0 += kKeyTile) {
    const int64_t c_lo = j0 + p.qlen - t.pmax;
    const int64_t w = kKeyTile + t.pmax - t.pmin;
    __syncthreads();
    LoadKeyTile<T>(p, t, s, j0, c_lo, w);
    __syncthreads();
    // Phase 1: per row, dS and dropout-scaled P of this key tile.
#pragma unroll
    for (int u = 0; u < kRowsPerWarp; ++u) {
      const int64_t r = warp * kRowsPerWarp + u;
      if (r >= t.n) {
        s.ds[r * (kKeyTile + 1) + lane] = 0.f;
        s.pz[r * (kKeyTile + 1) + lane] = 0.f;
        continue;
      }
      const int64_t j = j0 + lane;
      int64_t band_row;
      const float sc =
          Score(p, t, s, r, pos[u], j, j0, same[u], delta[u], &band_row);
      const float pr = sc == -INFINITY ? 0.f : expf(sc - lse[u]);
      float dp = 0.f, z = 0.f;
      if (j < p.klen) {
        z = DropoutScale(p, t.bh, t.i0 + r, j);
        const float* v = s.v + lane * s.ld;
        const float* dout = s.dout + r * s.ld;
        for (int64_t d = 0; d < p.dh; ++d) dp += dout[d] * v[d];
        dp *= z;
      }
      const float ds = pr * (dp - drow[u]);
      s.ds[r * (kKeyTile + 1) + lane] = ds;
      s.pz[r * (kKeyTile + 1) + lane] = pr * z;
      const bool other =
          p.seg != nullptr && j < p.klen &&
          p.diff[t.b * p.diff_sb + (t.i0 + r) * p.diff_si + j * p.diff_sj];
      dsame[u] += WarpSum(ds);
      ddelta[u] += WarpSum(other ? ds : 0.f);
      for (int jj = 0; jj < kKeyTile; ++jj) {
        const float dsj = __shfl_sync(kFull, ds, jj);
        const int64_t cj = jj + (t.pmax - pos[u]);
        const float* k = s.k + jj * s.ld;
        const float* kr = s.kr + cj * s.ld;
#pragma unroll
        for (int e = 0; e < kDv; ++e) {
          const int64_t d = lane + 32 * e;
          if (d < p.dh) {
            dqw[u][e] += dsj * k[d];
            dqr[u][e] += dsj * kr[d];
          }
        }
      }
    }
    __syncthreads();
    // Phase 2: dK, dV of the key tile and the band's dk_r, summed over the
    // tile's rows in order, one atomicAdd per element.
    for (int64_t idx = threadIdx.x; idx < kKeyTile * p.dh; idx += blockDim.x) {
      const int64_t jj = idx / p.dh, d = idx % p.dh, j = j0 + jj;
      if (j >= p.klen) continue;
      float dk = 0.f, dv = 0.f;
      for (int64_t r = 0; r < t.n; ++r) {
        dk += s.ds[r * (kKeyTile + 1) + jj] * s.qw[r * s.ld + d];
        dv += s.pz[r * (kKeyTile + 1) + jj] * s.dout[r * s.ld + d];
      }
      const int64_t g = (t.bh * p.klen + j) * p.dh + d;
      atomicAdd(p.dk + g, dk);
      atomicAdd(p.dv + g, dv);
    }
    for (int64_t idx = threadIdx.x; idx < w * p.dh; idx += blockDim.x) {
      const int64_t cc = idx / p.dh, d = idx % p.dh, c = c_lo + cc;
      if (c < 0 || c >= p.rlen) continue;
      float dkr = 0.f;
      for (int64_t r = 0; r < t.n; ++r) {
        const int64_t jj = cc - (t.pmax - RowPos(p, t, r));
        if (jj >= 0 && jj < kKeyTile && j0 + jj < p.klen) {
          dkr += s.ds[r * (kKeyTile + 1) + jj] * s.qr[r * s.ld + d];
        }
      }
      if (dkr != 0.f) atomicAdd(p.dkr + kr_offset + c * p.dh + d, dkr);
    }
  }
#pragma unroll
  for (int u = 0; u < kRowsPerWarp; ++u) {
    const int64_t r = warp * kRowsPerWarp + u;
    if (r >= t.n) continue;
    const int64_t row = t.bh * p.lq + t.i0 + r;
#pragma unroll
    for (int e = 0; e < kDv; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < p.dh) {
        p.dqw[row * p.dh + d] = dqw[u][e] * p.scale;
        p.dqr[row * p.dh + d] = dqr[u][e] * p.scale;
      }
    }
    if (p.seg != nullptr && lane == 0) {
      p.dseg[row * 2 + 0] = (dsame[u] - ddelta[u]) * p.scale;
      p.dseg[row * 2 + 1] = ddelta[u] * p.scale;
    }
  }
}

template <typename T, int kDv>
cudaError_t LaunchTyped(const Params& p, cudaStream_t stream, bool backward) {
  const size_t bytes = SharedBytes(p, backward);
  const dim3 grid(static_cast<unsigned>((p.lq + kQueryTile - 1) / kQueryTile),
                  static_cast<unsigned>(p.b * p.h));
  auto kernel = backward ? BackwardKernel<T, kDv> : ForwardKernel<T, kDv>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchHeadSize(const Params& p, cudaStream_t stream,
                           bool backward) {
  if (p.dh <= 32) return LaunchTyped<T, 1>(p, stream, backward);
  if (p.dh <= 64) return LaunchTyped<T, 2>(p, stream, backward);
  if (p.dh <= 96) return LaunchTyped<T, 3>(p, stream, backward);
  if (p.dh <= kMaxHeadSize) return LaunchTyped<T, 4>(p, stream, backward);
  return cudaErrorInvalidValue;
}

cudaError_t Launch(const Params& p, cudaStream_t stream, bool backward) {
  if (p.lq == 0 || p.b * p.h == 0) return cudaSuccess;
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchHeadSize<float>(p, stream, backward);
    case DType::kHalf:
      return LaunchHeadSize<__half>(p, stream, backward);
    case DType::kBFloat16:
      return LaunchHeadSize<__nv_bfloat16>(p, stream, backward);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

size_t SharedBytes(const Params& p, bool backward) {
  return SharedFloats(p.dh, p.band, backward) * sizeof(float);
}

cudaError_t Forward(const Params& p, cudaStream_t stream) {
  return Launch(p, stream, /*backward=*/false);
}

cudaError_t Backward(const Params& p, cudaStream_t stream) {
  return Launch(p, stream, /*backward=*/true);
}

}  // namespace xlnet::cuda_attention
