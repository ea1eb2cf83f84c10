// A CPU emulation of the part of CUDA that the tensor-core attention kernels
// (tc_attention_kernels.cu) and the fused element-wise kernels
// (fused_elementwise_kernels.cu) use, so that their own source, compiled
// as C++ with XLNET_CUDA_EMULATION defined (device.h), runs on a machine
// without a GPU: the tests check the kernels' maths (default and
// XLNET_CUDA_PENDING) against the CPU implementations before a GPU sees
// them.
//
// Why our own: no maintained library runs CUDA C++ with warp-level PTX
// (mma.sync, ldmatrix, cp.async) on a CPU. GPU Ocelot is unmaintained and
// stops at PTX 3; HIP-CPU and SYCL CPU back ends have no matrix fragments.
// The kernels need only a few primitives, and their semantics are
// documented in the PTX ISA, so emulating those is small.
//
// What is emulated: each block's threads run as cooperative fibers
// (ucontext) in one OS thread, one block at a time, with threadIdx,
// blockIdx, blockDim and gridDim; dynamic shared memory (filled with 0xff
// bytes, NaN in fp16/bf16, at each block's start, so a read of what no
// thread wrote shows) and static `__shared__` arrays (one instance);
// __syncthreads (threads that returned no longer count, as on the GPU);
// __syncwarp; __shfl_sync, __shfl_xor_sync and __shfl_down_sync with a full
// mask; and through the
// Emulated* functions: mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulation in k
// order), ldmatrix .x4 (with .trans), cp.async (16, 8 and 4 bytes, with zero
// fill) and cp.async.wait_group 0, ex2.approx (exp2f). Warp-wide operations
// check that all 32 lanes reach the same operation: a lane that diverges, a
// lane that returned, or a block whose threads wait on each other forever ends
// the launch with cudaErrorLaunchFailure and a message (LastLaunchMessage).
// So does a launch the GPU would refuse: more than 1024 threads a block, or
// more than 48 KiB of dynamic shared memory without the kernel's opt-in
// (cudaFuncSetAttribute, recorded per kernel), or more than 227 KiB.
//
// cp.async timing: copies are applied either where the issuing thread
// waits for them (CopyTiming::kAtWait, the default: a read of the
// destination before the wait sees the old bytes) or at once
// (CopyTiming::kAtIssue: a copy into a buffer other threads still read
// lands before they read it). Running a kernel both ways shows the two
// kinds of missing synchronisation.
//
// Schedules: kLockstep resumes every thread in turn, so the warps of a
// block move together; kWarpsInOrder and kWarpsReversed run one warp at a
// time as far as it goes before the next block barrier, first to last or
// last to first, so a write that another warp's read of the same bytes
// needs a barrier before (or after) shows as a different result.
//
// Not emulated: concurrency between blocks (they run one after another),
// memory-model effects beyond the above, atomics, wait_group N > 0.
// Streams: none; launches and cudaMemsetAsync are synchronous.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

// The 16-bit float conversions (before the keyword macros below).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

// --------------------------------------------------------- keywords
// Static shared memory: one instance, the blocks run one after another.
#define __shared__ static
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

// The dynamic shared memory of the running block (the kernels declare it
// through this macro; in CUDA it is `extern __shared__`).
#define XLNET_DYNAMIC_SHARED(name) \
  unsigned char* name = ::cuda_emulation::DynamicShared()

// kernel<<<grid, block, bytes, stream>>>(args...)
#define XLNET_LAUNCH(kernel, grid, block, bytes, stream, ...)               \
  ::cuda_emulation::Launch(::cuda_emulation::KernelKey(kernel), dim3(grid), \
                           dim3(block), (bytes),                            \
                           [&] { (kernel)(__VA_ARGS__); })

// ------------------------------------------------------ runtime types
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorLaunchFailure = 719,
};
using cudaStream_t = struct CUstream_emulated*;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1)
      : x(vx), y(vy), z(vz) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}

// ------------------------------------------------------ 16-bit floats
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half2 {
  __half x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

// Conversions as LibTorch's CPU code rounds: to nearest even.
inline float __bfloat162float(__nv_bfloat16 h) {
  return c10::detail::f32_from_bits(h.bits);
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return {c10::detail::round_to_nearest_even(f)};
}
inline float __half2float(__half h) {
  return c10::detail::fp16_ieee_to_fp32_value(h.bits);
}
inline __half __float2half(float f) {
  return {c10::detail::fp16_ieee_from_fp32_value(f)};
}

inline __half2 __floats2half2_rn(float lo, float hi) {
  return {__float2half(lo), __float2half(hi)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {__float2bfloat16(lo), __float2bfloat16(hi)};
}

namespace cuda_emulation {

// ------------------------------------------------------ the runtime
enum class CopyTiming { kAtWait, kAtIssue };
enum class Schedule { kLockstep, kWarpsInOrder, kWarpsReversed };

// The dynamic shared memory a block may ask for on the GPUs the kernels
// are built for: 48 KiB without opting in, at most 227 KiB with
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize)
// (sm_90; sm_80 allows 163 KiB).
inline constexpr size_t kDefaultDynamicShared = 48 * 1024;
inline constexpr size_t kMaxDynamicShared = 227 * 1024;

// A kernel's identity for its attributes: its address.
template <typename Kernel>
uintptr_t KernelKey(Kernel kernel) {
  return reinterpret_cast<uintptr_t>(kernel);
}

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// bytes): cudaErrorInvalidValue above kMaxDynamicShared.
cudaError_t SetMaxDynamicShared(uintptr_t kernel, int bytes);

// Runs body once on every thread of every block (grid x block threads,
// `shared_bytes` of dynamic shared memory a block) of `kernel`. Fails, as
// the GPU does, a block of more than 1024 threads and dynamic shared memory
// above kDefaultDynamicShared that the kernel did not opt into (or above
// kMaxDynamicShared). Returns cudaSuccess or cudaErrorLaunchFailure (see
// LastLaunchMessage); also what cudaGetLastError returns next.
cudaError_t Launch(uintptr_t kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   const std::function<void()>& body);
// The same for a body that is no kernel (tests of the emulation: no
// attributes).
inline cudaError_t Launch(dim3 grid, dim3 block, size_t shared_bytes,
                          const std::function<void()>& body) {
  return Launch(0, grid, block, shared_bytes, body);
}

// Why the last failed launch failed ("" after a successful one).
const std::string& LastLaunchMessage();

// How cp.async is applied and the order threads run in (this OS thread's
// launches; defaults kAtWait, kLockstep).
void SetCopyTiming(CopyTiming timing);
void SetSchedule(Schedule schedule);

// The running thread's and block's indices and sizes.
const uint3& ThreadIndex();
const uint3& BlockIndex();
const dim3& BlockDim();
const dim3& GridDim();
unsigned char* DynamicShared();

// __syncthreads.
void SyncThreads();

// The 32 lanes of a warp exchange `words` 32-bit words each: after the
// call, all[l * words + i] is lane l's word i. `op` names the operation
// (all lanes must give the same). Lanes must all reach it.
void WarpExchange(const char* op, const uint32_t* mine, int words,
                  uint32_t* all);

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 with
// c as both accumulator and result.
void EmulatedMma(bool half, float c[4], const uint32_t a[4], uint32_t b0,
                 uint32_t b1);

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 at this lane's row
// address (a shared-state-space address, SharedAddressOf).
void EmulatedLoadMatrices(bool trans, uint32_t r[4], unsigned row);

// cp.async of `size` bytes (reading the first `valid`, zero-filling the
// rest) and cp.async.wait_group 0.
void EmulatedCopyAsync(void* dst, const void* src, int size, int valid);
void EmulatedCopyWaitAll();

// A `bytes`-wide access (2, 4, 8 or 16 bytes) of global or shared memory
// at p: fails the launch unless p is a multiple of `bytes`, where the GPU
// faults with a misaligned address.
void EmulatedCheckAligned(const void* p, int bytes);

// The shared-state-space address of p (its offset in the block's shared
// memory), as __cvta_generic_to_shared gives it.
size_t SharedAddressOf(const void* p);

// Lane src_lane's v (__shfl_sync; __shfl_xor_sync with this lane ^ mask).
template <typename T>
T Shuffle(T v, int src_lane) {
  static_assert(sizeof(T) == 4, "32-bit shuffles");
  uint32_t mine, all[32];
  std::memcpy(&mine, &v, 4);
  WarpExchange("shfl", &mine, 1, all);
  T out;
  std::memcpy(&out, &all[static_cast<unsigned>(src_lane) % 32], 4);
  return out;
}

// A mask other than all 32 lanes ends the launch (the kernels use none).
void RequireFullMask(unsigned mask);

}  // namespace cuda_emulation

#define threadIdx (::cuda_emulation::ThreadIndex())
#define blockIdx (::cuda_emulation::BlockIndex())
#define blockDim (::cuda_emulation::BlockDim())
#define gridDim (::cuda_emulation::GridDim())

inline void __syncthreads() { ::cuda_emulation::SyncThreads(); }

// All 32 lanes (the kernels pass no mask).
inline void __syncwarp() {
  uint32_t none[32];
  ::cuda_emulation::WarpExchange("syncwarp", nullptr, 0, none);
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  ::cuda_emulation::RequireFullMask(mask);
  const auto lane = static_cast<int>(::cuda_emulation::ThreadIndex().x % 32);
  return ::cuda_emulation::Shuffle(v, lane ^ lane_mask);
}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane) {
  ::cuda_emulation::RequireFullMask(mask);
  return ::cuda_emulation::Shuffle(v, src_lane);
}

// Lane + delta's v; lanes past 31 keep their own (width 32).
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
  ::cuda_emulation::RequireFullMask(mask);
  const auto lane = static_cast<int>(::cuda_emulation::ThreadIndex().x % 32);
  const int src = lane + static_cast<int>(delta);
  return ::cuda_emulation::Shuffle(v, src < 32 ? src : lane);
}

inline size_t __cvta_generic_to_shared(const void* p) {
  return ::cuda_emulation::SharedAddressOf(p);
}

// CUDA's integer min/max overloads: the common type of the two.
template <typename A, typename B>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}
template <typename A, typename B>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}

cudaError_t cudaGetLastError();

// Synchronous here: the emulated launches are.
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes,
                                   cudaStream_t) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}

// CUDA's device math beyond C's.
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }

template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel kernel, cudaFuncAttribute attribute,
                                 int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    return cudaErrorInvalidValue;
  }
  return ::cuda_emulation::SetMaxDynamicShared(
      ::cuda_emulation::KernelKey(kernel), value);
}
