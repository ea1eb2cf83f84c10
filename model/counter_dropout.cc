#include "model/counter_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "model/philox.h"

namespace xlnet {

void KeepRowPortable(const AttentionDropout& d, uint32_t threshold, int64_t bh,
                     int64_t i, int64_t j0, int64_t m, uint8_t* keep) {
  int64_t j = j0;
  while (j < j0 + m) {
    const int64_t base = j & ~int64_t{3};
    const uint32_t bits =
        AttentionKeepBits4(d.seed, d.offset, bh, i, base, threshold);
    for (; j < base + 4 && j < j0 + m; ++j)
      keep[j - j0] = (bits >> (j - base)) & 1u;
  }
}

namespace {

#if defined(__GNUC__) && defined(__x86_64__)
#define XLNET_AVX2_PHILOX 1

// hi and lo 32 bits of a * m for eight 32-bit lanes (m in every lane).
__attribute__((target("avx2"))) inline void MulHiLo8(__m256i a, __m256i m,
                                                     __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);  // lanes 0, 2, 4, 6 (64-bit)
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// -1 in the lanes whose draw x keeps its key: (x >> 8) < threshold.
__attribute__((target("avx2"))) inline __m256i Kept8(__m256i x, __m256i thr) {
  return _mm256_cmpgt_epi32(thr, _mm256_srli_epi32(x, 8));
}

// KeepRowPortable with Philox on 8 counters (32 keys) per step in AVX2.
__attribute__((target("avx2"))) void KeepRowAvx2(const AttentionDropout& d,
                                                 uint32_t threshold, int64_t bh,
                                                 int64_t i, int64_t j0,
                                                 int64_t m, uint8_t* keep) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i w0 = _mm256_set1_epi32(static_cast<int>(0x9E3779B9u));
  const __m256i w1 = _mm256_set1_epi32(static_cast<int>(0xBB67AE85u));
  const __m256i thr = _mm256_set1_epi32(static_cast<int>(threshold));
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i key0 = _mm256_set1_epi32(static_cast<int>(d.seed));
  const __m256i key1 = _mm256_set1_epi32(
      static_cast<int>(static_cast<uint32_t>(d.seed >> 32) ^
                       static_cast<uint32_t>(d.offset >> 32)));
  alignas(32) uint8_t block[32];
  for (int64_t g = j0 >> 2; 4 * g < j0 + m; g += 8) {
    __m256i c0 =
        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(g)), lanes);
    __m256i c1 = _mm256_set1_epi32(static_cast<int>(i));
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(bh));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(d.offset));
    __m256i k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      __m256i hi0, lo0, hi1, lo1;
      MulHiLo8(c0, m0, &hi0, &lo0);
      MulHiLo8(c2, m1, &hi1, &lo1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0);
      c1 = lo1;
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), k1);
      c3 = lo0;
      k0 = _mm256_add_epi32(k0, w0);
      k1 = _mm256_add_epi32(k1, w1);
    }
    // Word w of counter t keeps key 4 (g + t) + w: (x >> 8) < threshold.
    const __m256i a = Kept8(c0, thr), b = Kept8(c1, thr), c = Kept8(c2, thr),
                  e = Kept8(c3, thr);
    // Transpose to counter-major order within each 128-bit half, then pack
    // 32 -> 16 -> 8 bits: bytes t0w0..t0w3 t1w0 .. t3w3 | t4w0 .. t7w3.
    const __m256i ab_lo = _mm256_unpacklo_epi32(a, b),
                  ab_hi = _mm256_unpackhi_epi32(a, b);
    const __m256i ce_lo = _mm256_unpacklo_epi32(c, e),
                  ce_hi = _mm256_unpackhi_epi32(c, e);
    const __m256i t0 = _mm256_unpacklo_epi64(ab_lo, ce_lo);
    const __m256i t1 = _mm256_unpackhi_epi64(ab_lo, ce_lo);
    const __m256i t2 = _mm256_unpacklo_epi64(ab_hi, ce_hi);
    const __m256i t3 = _mm256_unpackhi_epi64(ab_hi, ce_hi);
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(t0, t1),
                                             _mm256_packs_epi32(t2, t3));
    _mm256_store_si256(reinterpret_cast<__m256i*>(block),
                       _mm256_and_si256(bytes, one));
    const int64_t first = std::max(j0, 4 * g),
                  last = std::min(j0 + m, 4 * g + 32);
    std::memcpy(keep + (first - j0), block + (first - 4 * g), last - first);
  }
}
#endif

// CounterDropout's Philox stream: apart from every attention row's (bh <
// B * H), so its masks never repeat the attention op's of the same seed.
constexpr int64_t kCounterDropoutStream = 0xFFFFFFFF;

}  // namespace

void KeepRow(const AttentionDropout& d, uint32_t threshold, int64_t bh,
             int64_t i, int64_t j0, int64_t m, uint8_t* keep) {
#ifdef XLNET_AVX2_PHILOX
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return KeepRowAvx2(d, threshold, bh, i, j0, m, keep);
#endif
  KeepRowPortable(d, threshold, bh, i, j0, m, keep);
}

uint64_t DrawCpuSeed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

torch::Tensor CounterDropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  TORCH_CHECK(p < 1, "dropout must be in [0, 1), got ", p);
  TORCH_CHECK(x.device().is_cpu() && at::isFloatingType(x.scalar_type()),
              "CounterDropout: floating CPU tensors, got ", x.scalar_type(),
              " on ", x.device());
  AttentionDropout d;
  d.p = p;
  d.seed = DrawCpuSeed();
  const uint32_t threshold = AttentionKeepThreshold(p);
  auto mask = torch::empty(x.sizes(), x.options().requires_grad(false));
  const int64_t n = mask.numel();
  constexpr int64_t kRow = 4096;  // flat index = row * kRow + column
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, mask.scalar_type(), "counter_dropout", [&] {
        scalar_t* out = mask.data_ptr<scalar_t>();
        const scalar_t kept = static_cast<scalar_t>(1.0 / (1.0 - p));
        at::parallel_for(
            0, (n + kRow - 1) / kRow, 16, [&](int64_t r0, int64_t r1) {
              std::vector<uint8_t> keep(kRow);
              for (int64_t r = r0; r < r1; ++r) {
                const int64_t m = std::min(kRow, n - r * kRow);
                KeepRow(d, threshold, kCounterDropoutStream, r, 0, m,
                        keep.data());
                scalar_t* row = out + r * kRow;
                for (int64_t c = 0; c < m; ++c) {
                  row[c] = keep[c] ? kept : static_cast<scalar_t>(0);
                }
              }
            });
      });
  return x * mask;
}

torch::Tensor BackboneDropout(const torch::Tensor& x, double p, bool training,
                              bool counter) {
  return counter ? CounterDropout(x, p, training)
                 : torch::dropout(x, p, training);
}

torch::Tensor AttentionDropoutKeepMask(int64_t b, int64_t h, int64_t lq,
                                       int64_t k, const AttentionDropout& d) {
  // The scalar reference (philox.h), not the CPU path's vectorised rows.
  auto keep = torch::empty({b, h, lq, k}, torch::kBool);
  bool* data = keep.data_ptr<bool>();
  const uint32_t threshold = AttentionKeepThreshold(d.p);
  for (int64_t bh = 0; bh < b * h; ++bh) {
    for (int64_t i = 0; i < lq; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const uint32_t bits = AttentionKeepBits4(d.seed, d.offset, bh, i,
                                                 j & ~int64_t{3}, threshold);
        data[(bh * lq + i) * k + j] = (bits >> (j & 3)) & 1u;
      }
    }
  }
  return keep;
}

}  // namespace xlnet
