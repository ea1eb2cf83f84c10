// The fused element-wise kernels of train.fused_elementwise: see
// fused_elementwise_kernels.h.
//
// BiasAct: a block of 256 threads covers 1024 columns of a chunk of rows;
// each thread owns 4 consecutive columns (half of one Philox draw's 8
// dropout decisions, one 4-wide load when cols % 4 == 0) and walks the
// chunk's rows, so its bias values stay in registers and backward sums
// its columns' bias gradient in registers before writing one partial row
// per chunk.
//
// BiasPair: as BiasAct, a thread owns 4 columns and walks a chunk of rows,
// in blocks of only the warps the columns need; forward reads x once for
// both sums, backward reads both gradients once for their sum and their
// column sums (partial rows, then ColumnSumKernel).
//
// ResidualLayerNorm: one warp per row; lane l holds columns 4l + 128g + t
// (t < 4) in registers, so the row is read once, mean and variance are
// exact two-pass sums over registers, and the output is written once.
// Backward gives each block a contiguous chunk of rows, its warps sum
// their rows' gamma/beta gradients in their own slab of shared memory
// (registers hold only the row, so two blocks fit an SM), the block adds
// its warps in warp order and writes one partial row.
//
// The partial rows are then added column by column in a fixed order
// (ColumnSumKernel: 32 columns x 16 contiguous slices of the partial rows
// per block, the slices added in order): the same inputs give the same
// bits on every run.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "model/cuda/device.h"
#include "model/cuda/dtype_convert.cuh"
#include "model/cuda/fused_elementwise_kernels.h"
#include "model/philox.h"

namespace xlnet::fused_elementwise {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Columns one BiasAct block covers.
constexpr int64_t kBiasActTile = 4 * kThreads;
// About how many blocks BiasAct launches (fills an H100's 132 SMs several
// times over); the partial rows of the bias gradient follow from it.
constexpr int64_t kBiasActBlocks = 1024;
// About how many blocks BiasPair launches (a wave of 132 SMs at ~4 blocks
// of 192 threads each at 768 columns); its partial rows follow from it.
constexpr int64_t kBiasPairBlocks = 512;
// At most this many blocks (and partial rows) in the LayerNorm backward.
constexpr int64_t kLayerNormBackwardBlocks = 512;

// Four consecutive elements, for one aligned load or store.
template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

// Loads elements c0 .. c0 + 3 of `row` as floats (0 past `cols`); `vec`:
// cols % 4 == 0 and the row is 4-element aligned.
template <typename T>
__device__ __forceinline__ void Load4(const T* row, int64_t c0, int64_t cols,
                                      bool vec, float* out) {
  if (vec) {
    const Pack4<T> p = *XLNET_VECTOR_AT(const Pack4<T>, row + c0);
#pragma unroll
    for (int t = 0; t < 4; ++t) out[t] = ToFloat(p.v[t]);
  } else {
#pragma unroll
    for (int t = 0; t < 4; ++t)
      out[t] = c0 + t < cols ? ToFloat(row[c0 + t]) : 0.f;
  }
}

template <typename T>
__device__ __forceinline__ void Store4(T* row, int64_t c0, int64_t cols,
                                       bool vec, const float* in) {
  if (vec) {
    Pack4<T> p;
#pragma unroll
    for (int t = 0; t < 4; ++t) p.v[t] = FromFloat<T>(in[t]);
    *XLNET_VECTOR_AT(Pack4<T>, row + c0) = p;
  } else {
#pragma unroll
    for (int t = 0; t < 4; ++t)
      if (c0 + t < cols) row[c0 + t] = FromFloat<T>(in[t]);
  }
}

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kTanhCubic = 0.044715f;

__device__ __forceinline__ float Act(Activation a, float u) {
  switch (a) {
    case Activation::kGelu:
      return 0.5f * u * (1.f + erff(u * kSqrtHalf));
    case Activation::kGeluTanh:
      return 0.5f * u *
             (1.f + tanhf(kSqrt2OverPi * (u + kTanhCubic * u * u * u)));
    case Activation::kRelu:
      break;
  }
  return u > 0.f ? u : 0.f;
}

// d act / du.
__device__ __forceinline__ float ActGrad(Activation a, float u) {
  switch (a) {
    case Activation::kGelu:
      return 0.5f * (1.f + erff(u * kSqrtHalf)) +
             u * kInvSqrt2Pi * expf(-0.5f * u * u);
    case Activation::kGeluTanh: {
      const float th = tanhf(kSqrt2OverPi * (u + kTanhCubic * u * u * u));
      return 0.5f * (1.f + th) + 0.5f * u * (1.f - th * th) * kSqrt2OverPi *
                                     (1.f + 3.f * kTanhCubic * u * u);
    }
    case Activation::kRelu:
      break;
  }
  return u > 0.f ? 1.f : 0.f;
}

// ------------------------------------------------------------------ BiasAct

struct ChunkGrid {
  int64_t col_tiles, chunks, rows_per_chunk;
};

// Blocks of `tile` columns and chunks of rows, about `blocks` in all.
ChunkGrid MakeChunkGrid(int64_t rows, int64_t cols, int64_t tile,
                        int64_t blocks) {
  ChunkGrid g;
  g.col_tiles = (cols + tile - 1) / tile;
  int64_t chunks = (blocks + g.col_tiles - 1) / g.col_tiles;
  chunks = chunks < rows ? chunks : rows;
  if (chunks < 1) chunks = 1;
  g.rows_per_chunk = (rows + chunks - 1) / chunks;
  if (g.rows_per_chunk < 1) g.rows_per_chunk = 1;
  g.chunks = (rows + g.rows_per_chunk - 1) / g.rows_per_chunk;
  return g;
}

ChunkGrid BiasActGrid(int64_t rows, int64_t cols) {
  return MakeChunkGrid(rows, cols, kBiasActTile, kBiasActBlocks);
}

// BiasAct's keep bits of rows r and r + 1 for the
// thread's 4 columns c0 .. c0 + 3 (bits 0-3: row r, 4-7: row r + 1).
// Threads 2m and 2m + 1 hold the two halves of one draw's 8 columns: the
// even thread draws row r, the odd one row r + 1, and one shuffle gives
// each its half of both, so a row takes half a draw a thread rather than
// one. Every thread of the warp calls (no early exit past cols).
__device__ __forceinline__ uint32_t RowPairKeepBits(const Dropout& d, int64_t r,
                                                    int64_t c0) {
  if (!d.on) return 0xFFu;
  const int odd = static_cast<int>(c0 >> 2) & 1;  // threadIdx.x & 1
  const uint32_t draw = AttentionKeepBits8(d.seed, d.offset, d.stream, r + odd,
                                           c0 & ~int64_t{7}, d.threshold);
  const uint32_t other = __shfl_xor_sync(0xffffffffu, draw, 1);
  const uint32_t first = odd ? other : draw, second = odd ? draw : other;
  return ((first >> (4 * odd)) & 0xFu) | ((second >> (4 * odd)) & 0xFu) << 4;
}

// Dropout factors of 4 columns from 4 keep bits.
__device__ __forceinline__ void FactorsOfBits(const Dropout& d, uint32_t bits,
                                              float* f) {
#pragma unroll
  for (int t = 0; t < 4; ++t)
    f[t] = !d.on ? 1.f : (bits >> t) & 1u ? d.scale : 0.f;
}

template <typename T>
__global__ void BiasActForwardKernel(BiasActParams p, int64_t rows_per_chunk,
                                     bool vec, T* __restrict__ out) {
  const int64_t c0 = 4 * (blockIdx.x * int64_t{kThreads} + threadIdx.x);
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(p.rows, r0 + rows_per_chunk);
  float bias[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bias[t] = c0 + t < p.cols ? p.bias[c0 + t] : 0.f;
  const T* y = static_cast<const T*>(p.y);
  // Rows in pairs, one draw a pair (RowPairKeepBits).
  const bool active = c0 < p.cols;
  for (int64_t r = r0; r < r1; r += 2) {
    const uint32_t keep = RowPairKeepBits(p.drop, r, c0);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (!active || r + k >= r1) continue;
      float v[4], f[4];
      Load4(y + (r + k) * p.cols, c0, p.cols, vec, v);
      FactorsOfBits(p.drop, keep >> (4 * k), f);
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = Act(p.act, v[t] + bias[t]) * f[t];
      Store4(out + (r + k) * p.cols, c0, p.cols, vec, v);
    }
  }
}

template <typename T>
__global__ void BiasActBackwardKernel(BiasActParams p, int64_t rows_per_chunk,
                                      bool vec, const T* __restrict__ grad_out,
                                      T* __restrict__ grad_y,
                                      float* __restrict__ partial) {
  const int64_t c0 = 4 * (blockIdx.x * int64_t{kThreads} + threadIdx.x);
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(p.rows, r0 + rows_per_chunk);
  float bias[4], sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int t = 0; t < 4; ++t) bias[t] = c0 + t < p.cols ? p.bias[c0 + t] : 0.f;
  const T* y = static_cast<const T*>(p.y);
  // Rows in pairs, one draw a pair (RowPairKeepBits); the sums still add
  // the rows in order.
  const bool active = c0 < p.cols;
  for (int64_t r = r0; r < r1; r += 2) {
    const uint32_t keep = RowPairKeepBits(p.drop, r, c0);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (!active || r + k >= r1) continue;
      float v[4], g[4], f[4];
      Load4(y + (r + k) * p.cols, c0, p.cols, vec, v);
      Load4(grad_out + (r + k) * p.cols, c0, p.cols, vec, g);
      FactorsOfBits(p.drop, keep >> (4 * k), f);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        g[t] *= f[t] * ActGrad(p.act, v[t] + bias[t]);
        sum[t] += g[t];
      }
      Store4(grad_y + (r + k) * p.cols, c0, p.cols, vec, g);
    }
  }
  if (!active) return;
  float* part = partial + blockIdx.y * p.cols;
#pragma unroll
  for (int t = 0; t < 4; ++t)
    if (c0 + t < p.cols) part[c0 + t] = sum[t];
}

// Column sums of partial rows: a block of kSumCols x kSumSlices threads
// covers kSumCols consecutive columns (consecutive lanes read consecutive
// columns); the parts are cut into kSumSlices contiguous slices, thread
// (x, y) adds slice y of column x in order, and thread y == 0 adds the
// slices in order. The order depends only on `parts`, so the bits do too.
constexpr int kSumCols = 32;
constexpr int kSumSlices = 16;

// Column c < cols of the partial rows (partial[k * stride + c], k < parts)
// goes to out_a[c] when c < split, else to out_b[c - split].
__global__ void __launch_bounds__(kSumCols* kSumSlices)
    ColumnSumKernel(const float* __restrict__ partial, int64_t parts,
                    int64_t cols, int64_t stride, int64_t split,
                    float* __restrict__ out_a, float* __restrict__ out_b) {
  __shared__ float slice_sum[kSumSlices][kSumCols];
  const int64_t c = blockIdx.x * int64_t{kSumCols} + threadIdx.x;
  const int64_t per_slice = (parts + kSumSlices - 1) / kSumSlices;
  const int64_t k0 = threadIdx.y * per_slice;
  const int64_t k1 = min(parts, k0 + per_slice);
  float s = 0.f;
  if (c < cols) {
#pragma unroll 8
    for (int64_t k = k0; k < k1; ++k) s += partial[k * stride + c];
  }
  slice_sum[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0.f;
#pragma unroll
  for (int y = 0; y < kSumSlices; ++y) total += slice_sum[y][threadIdx.x];
  if (c < split) {
    out_a[c] = total;
  } else {
    out_b[c - split] = total;
  }
}

// out_a[c] (c < split) and out_b[c - split] (split <= c < cols) = sum over
// k < parts of partial[k * stride + c].
cudaError_t ColumnSum(const float* partial, int64_t parts, int64_t cols,
                      int64_t stride, int64_t split, float* out_a, float* out_b,
                      cudaStream_t s) {
  const int64_t blocks = (cols + kSumCols - 1) / kSumCols;
  XLNET_LAUNCH(ColumnSumKernel, blocks, dim3(kSumCols, kSumSlices), 0, s,
               partial, parts, cols, stride, split, out_a, out_b);
  return cudaGetLastError();
}

// Whether 4-wide loads and stores are safe: cols % 4 == 0 and every base
// pointer aligned to 4 elements.
bool Vectorizable(int64_t cols, int64_t element_bytes,
                  std::initializer_list<const void*> ptrs) {
  if (cols % 4 != 0) return false;
  for (const void* q : ptrs) {
    if (reinterpret_cast<uintptr_t>(q) % (4 * element_bytes) != 0) return false;
  }
  return true;
}

template <typename T>
cudaError_t LaunchBiasActForward(const BiasActParams& p, void* out,
                                 cudaStream_t s) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const ChunkGrid g = BiasActGrid(p.rows, p.cols);
  const bool vec = Vectorizable(p.cols, sizeof(T), {p.y, out});
  const auto kernel = BiasActForwardKernel<T>;
  XLNET_LAUNCH(kernel, dim3(g.col_tiles, g.chunks), kThreads, 0, s, p,
               g.rows_per_chunk, vec, static_cast<T*>(out));
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBiasActBackward(const BiasActParams& p, const void* grad_out,
                                  void* grad_y, float* partial,
                                  float* grad_bias, cudaStream_t s) {
  if (p.cols == 0) return cudaSuccess;
  if (p.rows == 0) return cudaMemsetAsync(grad_bias, 0, p.cols * 4, s);
  const ChunkGrid g = BiasActGrid(p.rows, p.cols);
  const bool vec = Vectorizable(p.cols, sizeof(T), {p.y, grad_out, grad_y});
  const auto kernel = BiasActBackwardKernel<T>;
  XLNET_LAUNCH(kernel, dim3(g.col_tiles, g.chunks), kThreads, 0, s, p,
               g.rows_per_chunk, vec, static_cast<const T*>(grad_out),
               static_cast<T*>(grad_y), partial);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return ColumnSum(partial, g.chunks, p.cols, p.cols, p.cols, grad_bias,
                   nullptr, s);
}

// ----------------------------------------------------------------- BiasPair

// Threads of a BiasPair block: the warps that cover the row's groups of 4
// columns, at most kThreads (192 at 768 columns, so no warp idles).
// Rows a BiasPair thread loads before it stores.
constexpr int kBiasPairRows = 4;

int BiasPairThreads(int64_t cols) {
  const int64_t warps = ((cols + 3) / 4 + 31) / 32;
  return static_cast<int>(warps * 32 < kThreads ? warps * 32 : kThreads);
}

ChunkGrid BiasPairGrid(int64_t rows, int64_t cols) {
  return MakeChunkGrid(rows, cols, 4 * BiasPairThreads(cols), kBiasPairBlocks);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    BiasPairForwardKernel(BiasPairParams p, int64_t rows_per_chunk, bool vec,
                          T* __restrict__ out_a, T* __restrict__ out_b) {
  const int64_t c0 = 4 * (blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
  if (c0 >= p.cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(p.rows, r0 + rows_per_chunk);
  float a[4], b[4];
  Load4(static_cast<const T*>(p.bias_a), c0, p.cols, vec, a);
  Load4(static_cast<const T*>(p.bias_b), c0, p.cols, vec, b);
  const T* x = static_cast<const T*>(p.x);
  // As the backward, kBiasPairRows loads before the first store.
  for (int64_t rb = r0; rb < r1; rb += kBiasPairRows) {
    float v[kBiasPairRows][4];
#pragma unroll
    for (int k = 0; k < kBiasPairRows; ++k) {
      const int64_t r = rb + k < r1 ? rb + k : rb;
      Load4(x + r * p.cols, c0, p.cols, vec, v[k]);
    }
#pragma unroll
    for (int k = 0; k < kBiasPairRows; ++k) {
      if (rb + k >= r1) break;
      float va[4], vb[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        va[t] = v[k][t] + a[t];
        vb[t] = v[k][t] + b[t];
      }
      Store4(out_a + (rb + k) * p.cols, c0, p.cols, vec, va);
      Store4(out_b + (rb + k) * p.cols, c0, p.cols, vec, vb);
    }
  }
}

// grad_x = grad_a + grad_b; the chunk's column sums of grad_a and grad_b
// (in row order) into its partial row [sums of a (cols), sums of b (cols)].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    BiasPairBackwardKernel(BiasPairParams p, int64_t rows_per_chunk, bool vec,
                           const T* __restrict__ grad_a,
                           const T* __restrict__ grad_b, T* __restrict__ grad_x,
                           float* __restrict__ partial) {
  const int64_t c0 = 4 * (blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
  if (c0 >= p.cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(p.rows, r0 + rows_per_chunk);
  float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
  // kBiasPairRows rows at a time, all their loads before the first store,
  // so that each thread keeps 2 kBiasPairRows loads in flight.
  for (int64_t rb = r0; rb < r1; rb += kBiasPairRows) {
    float ga[kBiasPairRows][4], gb[kBiasPairRows][4];
#pragma unroll
    for (int k = 0; k < kBiasPairRows; ++k) {
      const int64_t r = rb + k < r1 ? rb + k : rb;
      Load4(grad_a + r * p.cols, c0, p.cols, vec, ga[k]);
      Load4(grad_b + r * p.cols, c0, p.cols, vec, gb[k]);
    }
#pragma unroll
    for (int k = 0; k < kBiasPairRows; ++k) {
      if (rb + k >= r1) break;
      float gx[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        sa[t] += ga[k][t];
        sb[t] += gb[k][t];
        gx[t] = ga[k][t] + gb[k][t];
      }
      Store4(grad_x + (rb + k) * p.cols, c0, p.cols, vec, gx);
    }
  }
  float* part = partial + blockIdx.y * 2 * p.cols;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (c0 + t < p.cols) {
      part[c0 + t] = sa[t];
      part[p.cols + c0 + t] = sb[t];
    }
  }
}

template <typename T>
cudaError_t LaunchBiasPairForward(const BiasPairParams& p, void* out_a,
                                  void* out_b, cudaStream_t s) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const ChunkGrid g = BiasPairGrid(p.rows, p.cols);
  const bool vec =
      Vectorizable(p.cols, sizeof(T), {p.x, p.bias_a, p.bias_b, out_a, out_b});
  const auto kernel = BiasPairForwardKernel<T>;
  XLNET_LAUNCH(kernel, dim3(g.col_tiles, g.chunks), BiasPairThreads(p.cols), 0,
               s, p, g.rows_per_chunk, vec, static_cast<T*>(out_a),
               static_cast<T*>(out_b));
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBiasPairBackward(const BiasPairParams& p, const void* grad_a,
                                   const void* grad_b, void* grad_x,
                                   float* partial, float* grad_bias_a,
                                   float* grad_bias_b, cudaStream_t s) {
  if (p.cols == 0) return cudaSuccess;
  if (p.rows == 0) {
    const cudaError_t e = cudaMemsetAsync(grad_bias_a, 0, p.cols * 4, s);
    if (e != cudaSuccess) return e;
    return cudaMemsetAsync(grad_bias_b, 0, p.cols * 4, s);
  }
  const ChunkGrid g = BiasPairGrid(p.rows, p.cols);
  const bool vec = Vectorizable(p.cols, sizeof(T), {grad_a, grad_b, grad_x});
  const auto kernel = BiasPairBackwardKernel<T>;
  XLNET_LAUNCH(kernel, dim3(g.col_tiles, g.chunks), BiasPairThreads(p.cols), 0,
               s, p, g.rows_per_chunk, vec, static_cast<const T*>(grad_a),
               static_cast<const T*>(grad_b), static_cast<T*>(grad_x), partial);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Row k of `partial` is [sums of a, sums of b]: one pass over its 2 * cols
  // columns writes both gradients.
  return ColumnSum(partial, g.chunks, 2 * p.cols, 2 * p.cols, p.cols,
                   grad_bias_a, grad_bias_b, s);
}

// -------------------------------------------------------------- CastTensors

// Elements a CastTensors thread handles at a time (16 bytes of fp32).
constexpr int kCastVector = 4;

// One tensor of a CastList a blockIdx.y; the x blocks stride over its
// elements, kCastVector a thread (4-wide accesses where every pointer of
// the tensor is aligned for them, else element by element).
template <typename TS, typename TD>
__global__ void __launch_bounds__(kThreads)
    CastTensorsKernel(const CastList list) {
  const int k = blockIdx.y;
  const int64_t n = list.numel[k];
  const TS* src = static_cast<const TS*>(list.src[k]);
  const TS* src2 = static_cast<const TS*>(list.src2[k]);
  TD* dst = static_cast<TD*>(list.dst[k]);
  TD* dst2 = static_cast<TD*>(list.dst2[k]);
  const bool vec =
      reinterpret_cast<uintptr_t>(src) % (kCastVector * sizeof(TS)) == 0 &&
      reinterpret_cast<uintptr_t>(src2) % (kCastVector * sizeof(TS)) == 0 &&
      reinterpret_cast<uintptr_t>(dst) % (kCastVector * sizeof(TD)) == 0 &&
      reinterpret_cast<uintptr_t>(dst2) % (kCastVector * sizeof(TD)) == 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * kCastVector;
  for (int64_t e0 =
           (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kCastVector;
       e0 < n; e0 += stride) {
    const bool whole = vec && e0 + kCastVector <= n;
    float v[kCastVector];
    Load4(src, e0, n, whole, v);
    if (src2 != nullptr) {
      float w[kCastVector];
      Load4(src2, e0, n, whole, w);
#pragma unroll
      for (int t = 0; t < kCastVector; ++t) v[t] += w[t];
    }
    Store4(dst, e0, n, whole, v);
    if (dst2 != nullptr) Store4(dst2, e0, n, whole, v);
  }
}

template <typename TS, typename TD>
cudaError_t LaunchCastTensors(const CastList& list, cudaStream_t s) {
  int64_t largest = 0;
  for (int k = 0; k < list.count; ++k) {
    largest = list.numel[k] > largest ? list.numel[k] : largest;
  }
  if (largest == 0) return cudaSuccess;
  // Enough blocks for the largest tensor's vectors, at most about two
  // waves of 132 SMs across all tensors.
  const int64_t per_block = int64_t{kThreads} * kCastVector;
  int64_t blocks = (largest + per_block - 1) / per_block;
  const int64_t cap = (2048 + list.count - 1) / list.count;
  blocks = blocks < cap ? blocks : cap;
  const auto kernel = CastTensorsKernel<TS, TD>;
  XLNET_LAUNCH(kernel, dim3(blocks, list.count), kThreads, 0, s, list);
  return cudaGetLastError();
}

template <typename TS>
cudaError_t CastFrom(const CastList& list, cudaStream_t s) {
  switch (list.dst_dtype) {
    case DType::kFloat:
      return LaunchCastTensors<TS, float>(list, s);
    case DType::kHalf:
      return LaunchCastTensors<TS, __half>(list, s);
    case DType::kBFloat16:
      return LaunchCastTensors<TS, __nv_bfloat16>(list, s);
  }
  return cudaErrorInvalidValue;
}

// -------------------------------------------------------- ResidualLayerNorm

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The keep bits of a row's kG groups of 4 columns a lane (bit 4g + t:
// column 4 (lane + 32 g) + t). One Philox draw
// decides 8 columns, groups g of lanes 2m and 2m + 1 (columns 8m + 128 g
// on): the even lane draws the pair's even groups, the odd lane the odd
// ones, and one shuffle a group pair gives each lane its half of both, so
// a row takes ceil(kG / 2) draws a lane rather than kG; the backward keeps
// the bits for its second pass instead of drawing again. All lanes call.
template <int kG>
using RowKeep = std::conditional_t<(kG <= 8), uint32_t, uint64_t>;

template <int kG>
__device__ __forceinline__ RowKeep<kG> RowKeepBits(const Dropout& d, int64_t r,
                                                   int lane) {
  using W = RowKeep<kG>;
  if (!d.on) return ~W{0};
  const int odd = lane & 1;
  W bits = 0;
  // One draw at a time: interleaving them (unrolled) raises the forward's
  // registers past what keeps 4 of its blocks an SM.
#pragma unroll 1
  for (int g = 0; g < kG; g += 2) {
    const int mine = g + odd;  // the group this lane draws for the pair
    uint32_t draw = 0;
    if (mine < kG) {
      draw = AttentionKeepBits8(d.seed, d.offset, d.stream, r,
                                8 * ((lane >> 1) + 16 * int64_t{mine}),
                                d.threshold);
    }
    const uint32_t other = __shfl_xor_sync(0xffffffffu, draw, 1);
    // Group g's 8 decisions are the even lane's draw, g + 1's the odd
    // lane's; this lane's 4 columns are half `odd` of each.
    const uint32_t first = odd ? other : draw, second = odd ? draw : other;
    bits |= static_cast<W>((first >> (4 * odd)) & 0xFu) << (4 * g);
    if (g + 1 < kG) {
      bits |= static_cast<W>((second >> (4 * odd)) & 0xFu) << (4 * (g + 1));
    }
  }
  return bits;
}

// Dropout factors of group g's 4 columns from RowKeepBits.
template <typename W>
__device__ __forceinline__ void KeptFactors(const Dropout& d, W keep, int g,
                                            float* f) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    f[t] = !d.on ? 1.f : (keep >> (4 * g + t)) & 1u ? d.scale : 0.f;
  }
}

// z = drop(y) + residual for the lane's columns of row r (0 past cols);
// kG groups of 4 columns per lane; the dropout factors come from `keep`
// (RowKeepBits).
template <typename TY, typename TR, int kG>
__device__ __forceinline__ void LoadRow(const LayerNormParams& p, int64_t r,
                                        int lane, bool vec, RowKeep<kG> keep,
                                        float* z) {
  const TY* y = static_cast<const TY*>(p.y) + r * p.cols;
  const TR* res = static_cast<const TR*>(p.residual) + r * p.cols;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int64_t c0 = 4 * (lane + 32 * int64_t{g});
    float* zg = z + 4 * g;
    if (c0 >= p.cols) {
#pragma unroll
      for (int t = 0; t < 4; ++t) zg[t] = 0.f;
      continue;
    }
    float yv[4], rv[4], f[4];
    Load4(y, c0, p.cols, vec, yv);
    Load4(res, c0, p.cols, vec, rv);
    KeptFactors(p.drop, keep, g, f);
#pragma unroll
    for (int t = 0; t < 4; ++t) zg[t] = yv[t] * f[t] + rv[t];
  }
}

// Mean and 1 / sqrt(variance + eps) of the row in z (two passes over the
// registers; padding columns hold 0 and are left out of the second pass).
template <int kG>
__device__ __forceinline__ void RowStats(const LayerNormParams& p,
                                         const float* z, int lane, float* mean,
                                         float* rstd) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4 * kG; ++k) s += z[k];
  const float m = WarpSum(s) / static_cast<float>(p.cols);
  float q = 0.f;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int64_t c0 = 4 * (lane + 32 * int64_t{g});
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float d = z[4 * g + t] - m;
      if (c0 + t < p.cols) q += d * d;
    }
  }
  *mean = m;
  *rstd = rsqrtf(WarpSum(q) / static_cast<float>(p.cols) + p.eps);
}

// Blocks of the LayerNorm forward kept resident per SM, for kG column
// groups per lane: 4 (at most 64 registers)
// up to 768 columns, 3 up to 1024; without the bound the compiler spends
// registers on loads hoisted above the row's draws (92 at 768 columns:
// half the resident warps). Wider rows keep their 64 values of z.
constexpr int LayerNormForwardMinBlocks(int groups) {
  return groups <= 6 ? 4 : groups <= 8 ? 3 : 1;
}

// kCopy: also write out's copy in TY to p.out_copy.
template <typename TY, typename TR, int kG, bool kCopy>
__global__ void __launch_bounds__(kThreads, LayerNormForwardMinBlocks(kG))
    LayerNormForwardKernel(LayerNormParams p, bool vec, TR* __restrict__ out,
                           float* __restrict__ mean_out,
                           float* __restrict__ rstd_out) {
  const int lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (r >= p.rows) return;
  float z[4 * kG];
  const RowKeep<kG> keep = RowKeepBits<kG>(p.drop, r, lane);
  LoadRow<TY, TR, kG>(p, r, lane, vec, keep, z);
  float mean, rstd;
  RowStats<kG>(p, z, lane, &mean, &rstd);
  TR* o = out + r * p.cols;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int64_t c0 = 4 * (lane + 32 * int64_t{g});
    if (c0 >= p.cols) continue;
    float gamma[4], beta[4], v[4];
    Load4(p.gamma, c0, p.cols, vec, gamma);
    Load4(p.beta, c0, p.cols, vec, beta);
#pragma unroll
    for (int t = 0; t < 4; ++t)
      v[t] = (z[4 * g + t] - mean) * rstd * gamma[t] + beta[t];
    Store4(o, c0, p.cols, vec, v);
    if constexpr (kCopy) {
      Store4(static_cast<TY*>(p.out_copy) + r * p.cols, c0, p.cols, vec, v);
    }
  }
  if (lane == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// The gradient of row r's output at columns c0 .. c0 + 3 (c0 < cols):
// grad_out's plus, with kCopy, the copy's (p.grad_copy), in fp32.
template <typename TY, typename TR, bool kCopy>
__device__ __forceinline__ void LoadGradOut(const LayerNormParams& p,
                                            const TR* grad_out, int64_t r,
                                            int64_t c0, bool vec, float* go) {
  Load4(grad_out + r * p.cols, c0, p.cols, vec, go);
  if constexpr (kCopy) {
    float gc[4];
    Load4(static_cast<const TY*>(p.grad_copy) + r * p.cols, c0, p.cols, vec,
          gc);
#pragma unroll
    for (int t = 0; t < 4; ++t) go[t] += gc[t];
  }
}

// Blocks of the LayerNorm backward resident per SM for kG column groups per
// lane: two fit the register file (<= 128 registers a thread) up to 1024
// columns; wider rows keep their 4 * kG values of z in registers.
constexpr int LayerNormBackwardMinBlocks(int groups) {
  return groups <= 8 ? 2 : 1;
}

// Shared memory of one LayerNorm backward block: per warp, its gamma and
// beta gradient sums over cols4 (cols rounded up to 4) columns.
int64_t LayerNormBackwardShared(int64_t cols4) {
  return kWarps * 2 * cols4 * int64_t{sizeof(float)};
}

// dz = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat =
// grad_out * gamma; grad_residual = dz, grad_y = dz * dropout factor.
// The gamma/beta gradient sums live in shared memory, one [2, cols4] slab
// per warp that only its own lanes (each on its own columns) read and
// write, so the registers hold just z: two blocks fit an SM.
// kCopy: grad_out plus the copy's gradient p.grad_copy.
template <typename TY, typename TR, int kG, bool kCopy>
__global__ void __launch_bounds__(kThreads, LayerNormBackwardMinBlocks(kG))
    LayerNormBackwardKernel(LayerNormParams p, int64_t rows_per_block,
                            int64_t cols4, bool vec,
                            const TR* __restrict__ grad_out,
                            const float* __restrict__ mean_in,
                            const float* __restrict__ rstd_in,
                            TY* __restrict__ grad_y, TR* __restrict__ grad_res,
                            float* __restrict__ partial) {
  // [kWarps, 2, cols4 / 4]: each warp's gamma and beta sums.
  XLNET_DYNAMIC_SHARED(warp_bytes);
  auto* const warp_sum = reinterpret_cast<float4*>(warp_bytes);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r0 = blockIdx.x * rows_per_block;
  const int64_t r1 = min(p.rows, r0 + rows_per_block);
  float4* const sum_gamma = warp_sum + warp * (cols4 / 2);
  float4* const sum_beta = sum_gamma + cols4 / 4;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int64_t c0 = 4 * (lane + 32 * int64_t{g});
    if (c0 < p.cols) {
      sum_gamma[c0 / 4] = make_float4(0.f, 0.f, 0.f, 0.f);
      sum_beta[c0 / 4] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  for (int64_t r = r0 + warp; r < r1; r += kWarps) {
    float z[4 * kG];
    const RowKeep<kG> keep = RowKeepBits<kG>(p.drop, r, lane);
    LoadRow<TY, TR, kG>(p, r, lane, vec, keep, z);
    const float mean = mean_in[r], rstd = rstd_in[r];
    float sum_dx = 0.f, sum_dx_xhat = 0.f;
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int64_t c0 = 4 * (lane + 32 * int64_t{g});
      float go[4] = {0.f, 0.f, 0.f, 0.f}, gamma[4] = {0.f, 0.f, 0.f, 0.f};
      if (c0 < p.cols) {
        LoadGradOut<TY, TR, kCopy>(p, grad_out, r, c0, vec, go);
        Load4(p.gamma, c0, p.cols, vec, gamma);
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int k = 4 * g + t;
        z[k] = (z[k] - mean) * rstd;  // xhat (garbage past cols, unused)
        const float dx = go[t] * gamma[t];  // 0 past cols
        if (c0 + t < p.cols) {
          sum_dx += dx;
          sum_dx_xhat += dx * z[k];
        }
      }
      // Columns past cols (at most 3, in the last group) add garbage to
      // slots that are never read.
      if (c0 < p.cols) {
        float4 sg = sum_gamma[c0 / 4], sb = sum_beta[c0 / 4];
        sg.x += go[0] * z[4 * g];
        sg.y += go[1] * z[4 * g + 1];
        sg.z += go[2] * z[4 * g + 2];
        sg.w += go[3] * z[4 * g + 3];
        sb.x += go[0];
        sb.y += go[1];
        sb.z += go[2];
        sb.w += go[3];
        sum_gamma[c0 / 4] = sg;
        sum_beta[c0 / 4] = sb;
      }
    }
    const float inv_cols = 1.f / static_cast<float>(p.cols);
    const float mean_dx = WarpSum(sum_dx) * inv_cols;
    const float mean_dx_xhat = WarpSum(sum_dx_xhat) * inv_cols;
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int64_t c0 = 4 * (lane + 32 * int64_t{g});
      if (c0 >= p.cols) continue;
      // grad_out and gamma again (cache hits): keeping dx in registers
      // too would cost 4 * kG more and spill at two blocks per SM.
      float go[4], gamma[4], dz[4], f[4], dy[4];
      LoadGradOut<TY, TR, kCopy>(p, grad_out, r, c0, vec, go);
      Load4(p.gamma, c0, p.cols, vec, gamma);
      KeptFactors(p.drop, keep, g, f);  // the first pass's decisions
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int k = 4 * g + t;
        dz[t] = rstd * (go[t] * gamma[t] - mean_dx - z[k] * mean_dx_xhat);
        dy[t] = dz[t] * f[t];
      }
      Store4(grad_res + r * p.cols, c0, p.cols, vec, dz);
      Store4(grad_y + r * p.cols, c0, p.cols, vec, dy);
    }
  }
  // The block's sums: the warps' sums added in warp order.
  __syncthreads();
  const float* const sums = reinterpret_cast<const float*>(warp_sum);
  float* const part = partial + blockIdx.x * 2 * p.cols;
  for (int64_t c = threadIdx.x; c < p.cols; c += kThreads) {
    float sg = sums[c], sb = sums[cols4 + c];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      sg += sums[2 * w * cols4 + c];
      sb += sums[(2 * w + 1) * cols4 + c];
    }
    part[c] = sg;
    part[p.cols + c] = sb;
  }
}

// Column groups per lane the kernels are built for: cols <= 128 * kG.
template <typename TY, typename TR, int kG, bool kCopy>
cudaError_t LaunchLayerNorm(const LayerNormParams& p, bool forward, void* out,
                            float* mean, float* rstd, const void* grad_out,
                            void* grad_y, void* grad_res, float* partial,
                            float* grad_gamma, float* grad_beta,
                            cudaStream_t s) {
  if (forward) {
    const bool vec = Vectorizable(p.cols, sizeof(TY), {p.y, p.out_copy}) &&
                     Vectorizable(p.cols, sizeof(TR), {p.residual, out}) &&
                     Vectorizable(p.cols, 4, {p.gamma, p.beta});
    const int64_t blocks = (p.rows + kWarps - 1) / kWarps;
    const auto kernel = LayerNormForwardKernel<TY, TR, kG, kCopy>;
    XLNET_LAUNCH(kernel, blocks, kThreads, 0, s, p, vec, static_cast<TR*>(out),
                 mean, rstd);
    return cudaGetLastError();
  }
  const bool vec =
      Vectorizable(p.cols, sizeof(TY), {p.y, grad_y, p.grad_copy}) &&
      Vectorizable(p.cols, sizeof(TR), {p.residual, grad_out, grad_res}) &&
      Vectorizable(p.cols, 4, {p.gamma});
  const int64_t blocks = ResidualLayerNormPartialRows(p.rows);
  const int64_t rows_per_block = (p.rows + blocks - 1) / blocks;
  const int64_t cols4 = (p.cols + 3) / 4 * 4;
  const int64_t shared = LayerNormBackwardShared(cols4);
  // Above 48 KiB (more than 768 columns) a kernel must opt in.
  constexpr int64_t kDefaultShared = 48 * 1024;
  cudaError_t e = cudaSuccess;
  if (shared > kDefaultShared) {
    e = cudaFuncSetAttribute(LayerNormBackwardKernel<TY, TR, kG, kCopy>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared));
    if (e != cudaSuccess) return e;
  }
  const auto kernel = LayerNormBackwardKernel<TY, TR, kG, kCopy>;
  XLNET_LAUNCH(kernel, blocks, kThreads, shared, s, p, rows_per_block, cols4,
               vec, static_cast<const TR*>(grad_out), mean, rstd,
               static_cast<TY*>(grad_y), static_cast<TR*>(grad_res), partial);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Row k of `partial` is [gamma sums, beta sums]: one pass over its
  // 2 * cols columns writes both gradients.
  return ColumnSum(partial, blocks, 2 * p.cols, 2 * p.cols, p.cols, grad_gamma,
                   grad_beta, s);
}

// The kernels with the copy (fp16/bf16 y with an fp32 residual, where asked
// for) or without it.
template <typename TY, typename TR, int kG>
cudaError_t LaunchCopyOrNot(const LayerNormParams& p, bool forward, void* out,
                            float* mean, float* rstd, const void* grad_out,
                            void* grad_y, void* grad_res, float* partial,
                            float* grad_gamma, float* grad_beta,
                            cudaStream_t s) {
  const bool copy = forward ? p.out_copy != nullptr : p.grad_copy != nullptr;
  if constexpr (std::is_same_v<TR, float> && !std::is_same_v<TY, float>) {
    if (copy) {
      return LaunchLayerNorm<TY, TR, kG, true>(
          p, forward, out, mean, rstd, grad_out, grad_y, grad_res, partial,
          grad_gamma, grad_beta, s);
    }
  }
  if (copy) return cudaErrorInvalidValue;
  return LaunchLayerNorm<TY, TR, kG, false>(p, forward, out, mean, rstd,
                                            grad_out, grad_y, grad_res, partial,
                                            grad_gamma, grad_beta, s);
}

template <typename TY, typename TR>
cudaError_t DispatchGroups(const LayerNormParams& p, bool forward, void* out,
                           float* mean, float* rstd, const void* grad_out,
                           void* grad_y, void* grad_res, float* partial,
                           float* grad_gamma, float* grad_beta,
                           cudaStream_t s) {
  const int64_t groups = (p.cols + 127) / 128;
#define XLNET_LN_GROUPS(G)                                                   \
  if (groups <= G)                                                           \
    return LaunchCopyOrNot<TY, TR, G>(p, forward, out, mean, rstd, grad_out, \
                                      grad_y, grad_res, partial, grad_gamma, \
                                      grad_beta, s);
  XLNET_LN_GROUPS(1)
  XLNET_LN_GROUPS(2)
  XLNET_LN_GROUPS(4)
  XLNET_LN_GROUPS(6)
  XLNET_LN_GROUPS(8)
  XLNET_LN_GROUPS(16)
#undef XLNET_LN_GROUPS
  static_assert(16 * 128 == kMaxLayerNormCols, "groups cover the max cols");
  return cudaErrorInvalidValue;
}

template <typename TY>
cudaError_t DispatchResidual(const LayerNormParams& p, bool forward, void* out,
                             float* mean, float* rstd, const void* grad_out,
                             void* grad_y, void* grad_res, float* partial,
                             float* grad_gamma, float* grad_beta,
                             cudaStream_t s) {
  if (p.res_dtype == DType::kFloat) {
    return DispatchGroups<TY, float>(p, forward, out, mean, rstd, grad_out,
                                     grad_y, grad_res, partial, grad_gamma,
                                     grad_beta, s);
  }
  if (p.res_dtype != p.y_dtype) return cudaErrorInvalidValue;
  return DispatchGroups<TY, TY>(p, forward, out, mean, rstd, grad_out, grad_y,
                                grad_res, partial, grad_gamma, grad_beta, s);
}

cudaError_t LayerNorm(const LayerNormParams& p, bool forward, void* out,
                      float* mean, float* rstd, const void* grad_out,
                      void* grad_y, void* grad_res, float* partial,
                      float* grad_gamma, float* grad_beta, cudaStream_t s) {
  if (p.cols < 1 || p.cols > kMaxLayerNormCols) return cudaErrorInvalidValue;
  if (p.rows == 0) {
    if (forward) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(grad_gamma, 0, p.cols * 4, s);
    if (e != cudaSuccess) return e;
    return cudaMemsetAsync(grad_beta, 0, p.cols * 4, s);
  }
  switch (p.y_dtype) {
    case DType::kFloat:
      return DispatchResidual<float>(p, forward, out, mean, rstd, grad_out,
                                     grad_y, grad_res, partial, grad_gamma,
                                     grad_beta, s);
    case DType::kHalf:
      return DispatchResidual<__half>(p, forward, out, mean, rstd, grad_out,
                                      grad_y, grad_res, partial, grad_gamma,
                                      grad_beta, s);
    case DType::kBFloat16:
      return DispatchResidual<__nv_bfloat16>(p, forward, out, mean, rstd,
                                             grad_out, grad_y, grad_res,
                                             partial, grad_gamma, grad_beta, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int64_t BiasActPartialRows(int64_t rows, int64_t cols) {
  if (rows == 0) return 0;
  return BiasActGrid(rows, cols).chunks;
}

cudaError_t BiasActForward(const BiasActParams& p, void* out,
                           cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchBiasActForward<float>(p, out, stream);
    case DType::kHalf:
      return LaunchBiasActForward<__half>(p, out, stream);
    case DType::kBFloat16:
      return LaunchBiasActForward<__nv_bfloat16>(p, out, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t BiasActBackward(const BiasActParams& p, const void* grad_out,
                            void* grad_y, float* partial, float* grad_bias,
                            cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchBiasActBackward<float>(p, grad_out, grad_y, partial,
                                          grad_bias, stream);
    case DType::kHalf:
      return LaunchBiasActBackward<__half>(p, grad_out, grad_y, partial,
                                           grad_bias, stream);
    case DType::kBFloat16:
      return LaunchBiasActBackward<__nv_bfloat16>(p, grad_out, grad_y, partial,
                                                  grad_bias, stream);
  }
  return cudaErrorInvalidValue;
}

int64_t BiasPairPartialRows(int64_t rows, int64_t cols) {
  if (rows == 0) return 0;
  return BiasPairGrid(rows, cols).chunks;
}

cudaError_t BiasPairForward(const BiasPairParams& p, void* out_a, void* out_b,
                            cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchBiasPairForward<float>(p, out_a, out_b, stream);
    case DType::kHalf:
      return LaunchBiasPairForward<__half>(p, out_a, out_b, stream);
    case DType::kBFloat16:
      return LaunchBiasPairForward<__nv_bfloat16>(p, out_a, out_b, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t BiasPairBackward(const BiasPairParams& p, const void* grad_a,
                             const void* grad_b, void* grad_x, float* partial,
                             float* grad_bias_a, float* grad_bias_b,
                             cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchBiasPairBackward<float>(p, grad_a, grad_b, grad_x, partial,
                                           grad_bias_a, grad_bias_b, stream);
    case DType::kHalf:
      return LaunchBiasPairBackward<__half>(p, grad_a, grad_b, grad_x, partial,
                                            grad_bias_a, grad_bias_b, stream);
    case DType::kBFloat16:
      return LaunchBiasPairBackward<__nv_bfloat16>(
          p, grad_a, grad_b, grad_x, partial, grad_bias_a, grad_bias_b, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t CastTensors(const CastList& list, cudaStream_t stream) {
  if (list.count < 0 || list.count > kMaxCastTensors) {
    return cudaErrorInvalidValue;
  }
  if (list.count == 0) return cudaSuccess;
  switch (list.src_dtype) {
    case DType::kFloat:
      return CastFrom<float>(list, stream);
    case DType::kHalf:
      return CastFrom<__half>(list, stream);
    case DType::kBFloat16:
      return CastFrom<__nv_bfloat16>(list, stream);
  }
  return cudaErrorInvalidValue;
}

int64_t ResidualLayerNormPartialRows(int64_t rows) {
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  if (blocks < 1) return 1;
  return blocks < kLayerNormBackwardBlocks ? blocks : kLayerNormBackwardBlocks;
}

cudaError_t ResidualLayerNormForward(const LayerNormParams& p, void* out,
                                     float* mean, float* rstd,
                                     cudaStream_t stream) {
  return LayerNorm(p, true, out, mean, rstd, nullptr, nullptr, nullptr, nullptr,
                   nullptr, nullptr, stream);
}

cudaError_t ResidualLayerNormBackward(const LayerNormParams& p,
                                      const void* grad_out, const float* mean,
                                      const float* rstd, void* grad_y,
                                      void* grad_residual, float* partial,
                                      float* grad_gamma, float* grad_beta,
                                      cudaStream_t stream) {
  return LayerNorm(p, false, nullptr, const_cast<float*>(mean),
                   const_cast<float*>(rstd), grad_out, grad_y, grad_residual,
                   partial, grad_gamma, grad_beta, stream);
}

}  // namespace xlnet::fused_elementwise
