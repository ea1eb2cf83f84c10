// model/cuda/emulation.h: the emulated primitives against their PTX ISA
// definitions (mma.sync.m16n8k16's fragments and product, ldmatrix .x4 and
// .trans, shuffles, cp.async timing, shared memory's fill), and launches
// that end with an error instead of hanging: lanes of a warp at different
// operations, a lane that returned before a warp-wide operation, a barrier
// some threads never reach, dynamic shared memory the kernel did not opt
// into, a vector access at a misaligned address.
#include "model/cuda/emulation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

// device.h as the kernel sources see it when compiled for the CPU.
#define XLNET_CUDA_EMULATION 1
#include "model/cuda/device.h"

namespace {

using cuda_emulation::CopyTiming;
using cuda_emulation::Schedule;

// Small deterministic values exactly representable in fp16 and bf16.
float Value(int i, int j, int salt) {
  return static_cast<float>((i * 7 + j * 3 + salt) % 9 - 4) * 0.25f;
}

template <typename T>
uint16_t Bits(float f);
template <>
uint16_t Bits<__half>(float f) {
  return __float2half(f).bits;
}
template <>
uint16_t Bits<__nv_bfloat16>(float f) {
  return __float2bfloat16(f).bits;
}

template <typename T>
uint32_t Pair(float lo, float hi) {
  return Bits<T>(lo) | static_cast<uint32_t>(Bits<T>(hi)) << 16;
}

// One warp multiplies A (16 x 16) by B (16 x 8) with fragments laid out as
// the PTX ISA's "Matrix Fragments for mma.m16n8k16" says, onto C = 1.
template <typename T>
void ExpectMmaIsTheProduct() {
  float got[16][8] = {};
  const auto error = cuda_emulation::Launch(dim3(1), dim3(32), 0, [&] {
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    const uint32_t a[4] = {
        Pair<T>(Value(g, 2 * t, 1), Value(g, 2 * t + 1, 1)),
        Pair<T>(Value(g + 8, 2 * t, 1), Value(g + 8, 2 * t + 1, 1)),
        Pair<T>(Value(g, 2 * t + 8, 1), Value(g, 2 * t + 9, 1)),
        Pair<T>(Value(g + 8, 2 * t + 8, 1), Value(g + 8, 2 * t + 9, 1))};
    const uint32_t b0 = Pair<T>(Value(2 * t, g, 2), Value(2 * t + 1, g, 2));
    const uint32_t b1 = Pair<T>(Value(2 * t + 8, g, 2), Value(2 * t + 9, g, 2));
    float c[4] = {1, 1, 1, 1};
    cuda_emulation::EmulatedMma(std::is_same_v<T, __half>, c, a, b0, b1);
    got[g][2 * t] = c[0];
    got[g][2 * t + 1] = c[1];
    got[g + 8][2 * t] = c[2];
    got[g + 8][2 * t + 1] = c[3];
  });
  ASSERT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      float want = 1;
      for (int k = 0; k < 16; ++k) want += Value(i, k, 1) * Value(k, j, 2);
      EXPECT_EQ(got[i][j], want) << i << ", " << j;
    }
  }
}

TEST(CudaEmulationTest, MmaIsTheMatrixProduct) {
  ExpectMmaIsTheProduct<__half>();
  ExpectMmaIsTheProduct<__nv_bfloat16>();
}

// ldmatrix .x4: lane l gives row l % 8 of matrix l / 8 and receives, of
// each matrix m, row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (.trans:
// column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
TEST(CudaEmulationTest, LoadMatricesGivesTheDocumentedFragments) {
  for (bool trans : {false, true}) {
    uint32_t got[32][4] = {};
    const auto error =
        cuda_emulation::Launch(dim3(1), dim3(32), 4 * 8 * 16, [&] {
          XLNET_DYNAMIC_SHARED(smem);
          const int lane = static_cast<int>(threadIdx.x);
          // Matrix m, row i, column j holds 256 m + 16 i + j; matrix m's row i
          // at byte 128 m + 16 i.
          auto* e = reinterpret_cast<uint16_t*>(smem);
          for (int j = 0; j < 8; ++j)
            e[lane * 8 + j] =
                static_cast<uint16_t>(256 * (lane / 8) + 16 * (lane % 8) + j);
          __syncthreads();
          cuda_emulation::EmulatedLoadMatrices(
              trans, got[lane],
              static_cast<unsigned>(
                  __cvta_generic_to_shared(smem + 16 * lane)));
        });
    ASSERT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
    for (int l = 0; l < 32; ++l) {
      for (int m = 0; m < 4; ++m) {
        const int a = l / 4, b = 2 * (l % 4);
        const uint32_t lo = trans ? 256 * m + 16 * b + a : 256 * m + 16 * a + b;
        const uint32_t hi = trans ? lo + 16 : lo + 1;
        EXPECT_EQ(got[l][m], lo | hi << 16)
            << "trans " << trans << " lane " << l << " matrix " << m;
      }
    }
  }
}

TEST(CudaEmulationTest, ShufflesAndIndices) {
  std::vector<int> xor_got(64), from_got(64), down_got(64), block_of(64);
  const auto error = cuda_emulation::Launch(dim3(2), dim3(32), 0, [&] {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    xor_got[i] = __shfl_xor_sync(0xffffffffu, i, 5);
    from_got[i] = __shfl_sync(0xffffffffu, i * 10, 3);
    down_got[i] = __shfl_down_sync(0xffffffffu, i, 6);
    block_of[i] = static_cast<int>(blockIdx.x + 10 * gridDim.x);
  });
  ASSERT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(xor_got[i], (i / 32) * 32 + ((i % 32) ^ 5));
    EXPECT_EQ(from_got[i], ((i / 32) * 32 + 3) * 10);
    // Lane + 6, or the lane's own value past lane 31 (width 32).
    EXPECT_EQ(down_got[i], i % 32 + 6 < 32 ? i + 6 : i);
    EXPECT_EQ(block_of[i], i / 32 + 20);
  }
}

// A copy's destination read before the wait: the old bytes (shared memory
// starts as 0xff) where copies land at the wait, the new ones where they
// land at issue; after the wait, the new ones (zero-filled past `valid`).
TEST(CudaEmulationTest, CopiesLandAtTheWaitOrAtIssue) {
  alignas(16) const uint8_t src[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                       9, 10, 11, 12, 13, 14, 15, 16};
  for (auto timing : {CopyTiming::kAtWait, CopyTiming::kAtIssue}) {
    cuda_emulation::SetCopyTiming(timing);
    uint8_t before = 0, after[16] = {};
    const auto error = cuda_emulation::Launch(dim3(1), dim3(32), 16, [&] {
      XLNET_DYNAMIC_SHARED(smem);
      if (threadIdx.x == 0) {
        cuda_emulation::EmulatedCopyAsync(smem, src, 16, 12);
        before = smem[0];
        cuda_emulation::EmulatedCopyWaitAll();
        std::memcpy(after, smem, 16);
      }
    });
    ASSERT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
    EXPECT_EQ(before, timing == CopyTiming::kAtWait ? 0xff : 1);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(after[i], i < 12 ? i + 1 : 0);
  }
  cuda_emulation::SetCopyTiming(CopyTiming::kAtWait);
}

// A write that another warp reads without a barrier between: lockstep
// hides it; one warp at a time shows it, in one order or the other.
TEST(CudaEmulationTest, WarpOrdersShowAMissingBarrier) {
  std::vector<int> seen;
  for (auto schedule : {Schedule::kLockstep, Schedule::kWarpsInOrder,
                        Schedule::kWarpsReversed}) {
    cuda_emulation::SetSchedule(schedule);
    int read = -1;
    const auto error = cuda_emulation::Launch(dim3(1), dim3(64), 4, [&] {
      XLNET_DYNAMIC_SHARED(smem);
      int* flag = reinterpret_cast<int*>(smem);
      if (threadIdx.x == 0) *flag = 0;
      __syncthreads();
      if (threadIdx.x == 32) *flag = 1;    // warp 1 writes ...
      if (threadIdx.x == 0) read = *flag;  // ... warp 0 reads: no barrier
    });
    ASSERT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
    seen.push_back(read);
  }
  cuda_emulation::SetSchedule(Schedule::kLockstep);
  EXPECT_NE(seen[1], seen[2]);
}

// A kernel for the launch limits below.
void EmptyKernel(int* runs) { ++*runs; }

// The GPU refuses more than 48 KiB of dynamic shared memory a block unless
// the kernel opted in (cudaFuncSetAttribute), and more than 227 KiB
// anyway; so does the emulation, kernel by kernel.
TEST(CudaEmulationTest, DynamicSharedMemoryNeedsTheKernelsOptIn) {
  int runs = 0;
  auto* kernel = EmptyKernel;
  const size_t big = 64 * 1024;
  auto error = XLNET_LAUNCH(kernel, 1, 32, big, nullptr, &runs);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(cuda_emulation::LastLaunchMessage().find("opts in"),
            std::string::npos)
      << cuda_emulation::LastLaunchMessage();
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(XLNET_LAUNCH(kernel, 1, 32, 48 * 1024, nullptr, &runs),
            cudaSuccess);
  EXPECT_EQ(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           228 * 1024),
      cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big),
            cudaSuccess);
  error = XLNET_LAUNCH(kernel, 1, 32, big, nullptr, &runs);
  EXPECT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
  EXPECT_EQ(runs, 32 + 32);
  // The opt-in is the kernel's, up to what it asked for.
  EXPECT_EQ(XLNET_LAUNCH(kernel, 1, 32, big + 16, nullptr, &runs),
            cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
}

TEST(CudaEmulationTest, BrokenLaunchesEndWithAnError) {
  // Lanes of one warp at different operations.
  auto error = cuda_emulation::Launch(dim3(1), dim3(32), 512, [&] {
    if (threadIdx.x < 16) {
      __shfl_xor_sync(0xffffffffu, 1, 1);
    } else {
      uint32_t r[4];
      cuda_emulation::EmulatedLoadMatrices(false, r, 16 * threadIdx.x);
    }
  });
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_NE(cuda_emulation::LastLaunchMessage().find("different operations"),
            std::string::npos)
      << cuda_emulation::LastLaunchMessage();

  // A lane that returned before a shuffle: the others would wait forever.
  error = cuda_emulation::Launch(dim3(1), dim3(32), 0, [&] {
    if (threadIdx.x == 7) return;
    __shfl_xor_sync(0xffffffffu, 1, 1);
  });
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(cuda_emulation::LastLaunchMessage().find("forever"),
            std::string::npos)
      << cuda_emulation::LastLaunchMessage();

  // Threads that returned no longer count at __syncthreads.
  int passed = 0;
  error = cuda_emulation::Launch(dim3(1), dim3(64), 0, [&] {
    if (threadIdx.x >= 32) return;
    __syncthreads();
    ++passed;
  });
  EXPECT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
  EXPECT_EQ(passed, 32);

  // A partial shuffle mask, a block that is not whole warps.
  error = cuda_emulation::Launch(dim3(1), dim3(32), 0,
                                 [&] { __shfl_sync(0xffffu, 1, 0); });
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  error = cuda_emulation::Launch(dim3(1), dim3(48), 0, [] {});
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  // A cp.async not waited for.
  alignas(16) static const uint8_t zeros[16] = {};
  error = cuda_emulation::Launch(dim3(1), dim3(32), 16, [&] {
    XLNET_DYNAMIC_SHARED(smem);
    if (threadIdx.x == 0)
      cuda_emulation::EmulatedCopyAsync(smem, zeros, 16, 16);
  });
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  // A vector access at an address that is not a multiple of its size (the
  // GPU faults); 8 bytes at an 8-byte boundary is fine.
  alignas(16) static uint32_t words[8] = {};
  error = cuda_emulation::Launch(dim3(1), dim3(32), 0, [&] {
    *XLNET_VECTOR_AT(uint2, words + 2) = make_uint2(1, 2);
  });
  EXPECT_EQ(error, cudaSuccess) << cuda_emulation::LastLaunchMessage();
  EXPECT_EQ(words[3], 2u);
  error = cuda_emulation::Launch(dim3(1), dim3(32), 0, [&] {
    *XLNET_VECTOR_AT(uint4, words + 2) = make_uint4(1, 2, 3, 4);
  });
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(cuda_emulation::LastLaunchMessage().find("misaligned 16-byte"),
            std::string::npos)
      << cuda_emulation::LastLaunchMessage();
  EXPECT_EQ(words[5], 0u);  // nothing written
  // And a good launch after them all.
  error = cuda_emulation::Launch(dim3(2), dim3(32), 0, [] {});
  EXPECT_EQ(error, cudaSuccess);
}

TEST(CudaEmulationTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(__float2half(1.0f).bits, 0x3c00);
  EXPECT_EQ(__float2half(65504.f).bits, 0x7bff);
  EXPECT_EQ(__float2half(65520.f).bits, 0x7c00);                 // overflow
  EXPECT_EQ(__float2half(1.0f + 1.0f / 2048).bits, 0x3c00);      // tie: even
  EXPECT_EQ(__float2half(1.0f + 3.0f / 2048).bits, 0x3c02);      // tie: even
  EXPECT_EQ(__float2half(5.960464477539063e-08f).bits, 0x0001);  // 2^-24
  EXPECT_EQ(__half2float(__half{0x0001}), 5.960464477539063e-08f);
  EXPECT_EQ(__half2float(__half{0xc000}), -2.0f);
  EXPECT_EQ(__float2bfloat16(1.0f + 1.0f / 256).bits, 0x3f80);  // tie: even
  EXPECT_EQ(__float2bfloat16(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_EQ(__bfloat162float(__nv_bfloat16{0xbf80}), -1.0f);
  for (int i = -2000; i <= 2000; ++i) {  // exact values round-trip
    const float f = static_cast<float>(i) / 64;
    EXPECT_EQ(__half2float(__float2half(f)), f);
  }
}

}  // namespace
