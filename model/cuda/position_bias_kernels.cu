// The relative-position bias kernels of attention 'sdpa': see
// position_bias_kernels.h. One thread block per query row (b, h, i); its
// threads walk the row's keys (forward) or relative positions (backward)
// with consecutive threads on consecutive elements, so reads and writes are
// coalesced. Compiled as C++ with XLNET_CUDA_EMULATION, the same source
// runs on the CPU (model/cuda/emulation.h; the tests).
#include "model/cuda/device.h"
#include "model/cuda/dtype_convert.cuh"
#include "model/cuda/position_bias_kernels.h"

namespace xlnet::position_bias {
namespace {

constexpr int kThreads = 256;

// The row's first band column: bd column of key j is j + shift.
__device__ __forceinline__ int64_t RowShift(const Params& p, int64_t b,
                                            int64_t i) {
  const int64_t pos = p.pos ? p.pos[b * p.lq + i] : i;
  return p.qlen - pos;
}

template <typename T>
__global__ void ForwardKernel(Params p, T* __restrict__ bias) {
  const int64_t row = blockIdx.x;  // (b * H + h) * Lq + i
  const int64_t i = row % p.lq;
  const int64_t b = row / (p.lq * p.h);
  const int64_t shift = RowShift(p, b, i);
  const T* bd = static_cast<const T*>(p.bd) + row * p.rlen;
  float seg_same = 0, seg_diff = 0;
  if (p.seg) {
    const T* seg = static_cast<const T*>(p.seg) + row * 2;
    seg_same = ToFloat(seg[0]);
    seg_diff = ToFloat(seg[1]);
  }
  const uint8_t* mask = p.mask ? p.mask + b * p.mask_sb + i * p.klen : nullptr;
  const uint8_t* diff = p.seg ? p.diff + b * p.diff_sb + i * p.klen : nullptr;
  T* out = bias + row * p.klen;
  for (int64_t j = threadIdx.x; j < p.klen; j += blockDim.x) {
    const int64_t c = j + shift;
    float v = p.masked_value;
    if ((!mask || !mask[j]) && c >= 0 && c < p.rlen) {
      v = ToFloat(bd[c]);
      if (diff) v += diff[j] ? seg_diff : seg_same;
      v *= p.scale;
    }
    out[j] = FromFloat<T>(v);
  }
}

template <typename T>
__global__ void BackwardKernel(Params p, const T* __restrict__ grad_bias,
                               T* __restrict__ grad_bd,
                               T* __restrict__ grad_seg) {
  const int64_t row = blockIdx.x;
  const int64_t i = row % p.lq;
  const int64_t b = row / (p.lq * p.h);
  const int64_t shift = RowShift(p, b, i);
  const T* g = grad_bias + row * p.klen;
  const uint8_t* mask = p.mask ? p.mask + b * p.mask_sb + i * p.klen : nullptr;
  const uint8_t* diff = p.seg ? p.diff + b * p.diff_sb + i * p.klen : nullptr;
  T* out = grad_bd + row * p.rlen;
  float sum_same = 0, sum_diff = 0;
  for (int64_t c = threadIdx.x; c < p.rlen; c += blockDim.x) {
    const int64_t j = c - shift;
    float v = 0;
    if (j >= 0 && j < p.klen && (!mask || !mask[j])) {
      v = ToFloat(g[j]) * p.scale;
      if (diff) {
        if (diff[j]) {
          sum_diff += v;
        } else {
          sum_same += v;
        }
      }
    }
    out[c] = FromFloat<T>(v);
  }
  if (!grad_seg) return;
  // Block sums: warp shuffles, then one value per warp in shared memory.
  __shared__ float warp_same[kThreads / 32], warp_diff[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    sum_same += __shfl_down_sync(0xffffffffu, sum_same, o);
    sum_diff += __shfl_down_sync(0xffffffffu, sum_diff, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_same[warp] = sum_same;
    warp_diff[warp] = sum_diff;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0, d = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      s += warp_same[w];
      d += warp_diff[w];
    }
    grad_seg[row * 2] = FromFloat<T>(s);
    grad_seg[row * 2 + 1] = FromFloat<T>(d);
  }
}

template <typename T>
cudaError_t LaunchForward(const Params& p, void* bias, cudaStream_t s) {
  const int64_t rows = p.b * p.h * p.lq;
  if (rows == 0 || p.klen == 0) return cudaSuccess;
  XLNET_LAUNCH(ForwardKernel<T>, rows, kThreads, 0, s, p,
               static_cast<T*>(bias));
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBackward(const Params& p, const void* grad_bias,
                           void* grad_bd, void* grad_seg, cudaStream_t s) {
  const int64_t rows = p.b * p.h * p.lq;
  if (rows == 0) return cudaSuccess;
  XLNET_LAUNCH(BackwardKernel<T>, rows, kThreads, 0, s, p,
               static_cast<const T*>(grad_bias), static_cast<T*>(grad_bd),
               p.seg ? static_cast<T*>(grad_seg) : nullptr);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Forward(const Params& p, void* bias, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchForward<float>(p, bias, stream);
    case DType::kHalf:
      return LaunchForward<__half>(p, bias, stream);
    case DType::kBFloat16:
      return LaunchForward<__nv_bfloat16>(p, bias, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t Backward(const Params& p, const void* grad_bias, void* grad_bd,
                     void* grad_seg, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat:
      return LaunchBackward<float>(p, grad_bias, grad_bd, grad_seg, stream);
    case DType::kHalf:
      return LaunchBackward<__half>(p, grad_bias, grad_bd, grad_seg, stream);
    case DType::kBFloat16:
      return LaunchBackward<__nv_bfloat16>(p, grad_bias, grad_bd, grad_seg,
                                           stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace xlnet::position_bias
