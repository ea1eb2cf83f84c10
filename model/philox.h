// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11), the counter-based generator behind the fused attention's
// dropout. Header-only and free of LibTorch so the CPU path (C++) and the
// CUDA kernel (nvcc) draw the same stream from the same code.
//
// Dropout of attention probability (b, h, i, j) (batch, head, query row i of
// the stream's Lq rows, key j) keeps the element iff the 16-bit half
//   x = Philox(counter = {j / 8, i, b * H + h, offset_lo},
//              key = {seed_lo, seed_hi ^ offset_hi})[(j % 8) / 2]
//   x_j = j even ? x & 0xFFFF : x >> 16
// is below threshold = floor((1 - p) * 2^16) (AttentionKeepThreshold); kept
// values are scaled by 1 / (1 - p). The decision depends only on (seed,
// offset, b, h, i, j), so forward and its recomputation in backward agree
// whatever the tiling, thread count or device. One Philox block (10 rounds)
// decides 8 keys, two per 32-bit word: the keep probability is exact to
// 2^-16 (FlashAttention's 8-bit draws: 2^-8; cuDNN's: 1/16), at half the
// draws of one decision a word, which matters because the draws are the
// largest part of the fused forward's instructions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define XLNET_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define XLNET_HOST_DEVICE inline
#endif

namespace xlnet {

struct Philox4x32 {
  uint32_t x[4];
};

XLNET_HOST_DEVICE uint32_t PhiloxMulHiLo(uint32_t a, uint32_t b, uint32_t* hi) {
#if defined(__CUDA_ARCH__) && defined(XLNET_CUDA_PENDING)
  // The same bits through __umulhi: ptxas makes one IMAD.WIDE.U32 of it,
  // where the 64-bit product's shift costs an extra add (sm_90: 20
  // instructions fewer a Philox block). Built with XLNET_CUDA_PENDING only
  // (the tensor-core kernels), until it has run on a GPU.
  *hi = __umulhi(a, b);
  return a * b;
#else
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
#endif
}

// Philox4x32 with 10 rounds of `counter` under `key`.
XLNET_HOST_DEVICE Philox4x32 Philox4x32_10(uint32_t c0, uint32_t c1,
                                           uint32_t c2, uint32_t c3,
                                           uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = PhiloxMulHiLo(kM0, c0, &hi0);
    const uint32_t lo1 = PhiloxMulHiLo(kM1, c2, &hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// Keys decided by one Philox block.
constexpr int kKeysPerDraw = 8;

// The 16-bit threshold below which a draw keeps its element: keep
// probability (1 - p) up to 2^-16 (2^16, every draw kept, at p = 0).
XLNET_HOST_DEVICE uint32_t AttentionKeepThreshold(double p) {
  return static_cast<uint32_t>((1.0 - p) * 65536.0);
}

// Keep decisions of keys j0 .. j0 + 7 (j0 a multiple of 8) for row (b, h, i):
// bit t set = key j0 + t kept.
XLNET_HOST_DEVICE uint32_t AttentionKeepBits8(uint64_t seed, uint64_t offset,
                                              int64_t bh, int64_t i, int64_t j0,
                                              uint32_t threshold) {
  const Philox4x32 r = Philox4x32_10(
      static_cast<uint32_t>(j0 >> 3), static_cast<uint32_t>(i),
      static_cast<uint32_t>(bh), static_cast<uint32_t>(offset),
      static_cast<uint32_t>(seed),
      static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(offset >> 32));
  uint32_t bits = 0;
  for (int w = 0; w < 4; ++w) {
    bits |= ((r.x[w] & 0xFFFFu) < threshold ? 1u : 0u) << (2 * w);
    bits |= ((r.x[w] >> 16) < threshold ? 1u : 0u) << (2 * w + 1);
  }
  return bits;
}

}  // namespace xlnet
