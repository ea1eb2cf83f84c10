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
    const int64_t base = j & ~int64_t{kKeysPerDraw - 1};
    const uint32_t bits =
        AttentionKeepBits8(d.seed, d.offset, bh, i, base, threshold);
    for (; j < base + kKeysPerDraw && j < j0 + m; ++j)
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

// -1 in the 16-bit lanes of x below `below` + 1 (the threshold): x <
// threshold iff max(x, threshold - 1) == threshold - 1, as AVX2 has no
// unsigned 16-bit compare.
__attribute__((target("avx2"))) inline __m256i Kept16(__m256i x,
                                                      __m256i below) {
  return _mm256_cmpeq_epi16(_mm256_max_epu16(x, below), below);
}

// KeepRowPortable with Philox on 8 counters (64 keys) per step in AVX2.
__attribute__((target("avx2"))) void KeepRowAvx2(const AttentionDropout& d,
                                                 uint32_t threshold, int64_t bh,
                                                 int64_t i, int64_t j0,
                                                 int64_t m, uint8_t* keep) {
  if (threshold == 0 || threshold > 0xFFFFu) {  // none or every key kept
    return KeepRowPortable(d, threshold, bh, i, j0, m, keep);
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i w0 = _mm256_set1_epi32(static_cast<int>(0x9E3779B9u));
  const __m256i w1 = _mm256_set1_epi32(static_cast<int>(0xBB67AE85u));
  const __m256i below = _mm256_set1_epi16(static_cast<int16_t>(threshold - 1u));
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i key0 = _mm256_set1_epi32(static_cast<int>(d.seed));
  const __m256i key1 = _mm256_set1_epi32(
      static_cast<int>(static_cast<uint32_t>(d.seed >> 32) ^
                       static_cast<uint32_t>(d.offset >> 32)));
  alignas(32) uint8_t block[64];
  for (int64_t g = j0 >> 3; 8 * g < j0 + m; g += 8) {
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
    // Word w of counter t keeps keys 8 (g + t) + 2w (low half) and + 2w + 1
    // (high half): as 16-bit lanes, a 32-bit lane t holds both in key order.
    const __m256i a = Kept16(c0, below), b = Kept16(c1, below),
                  c = Kept16(c2, below), e = Kept16(c3, below);
    // Transpose to counter-major order within each 128-bit half (32-bit
    // lanes: t0w0..t0w3, i.e. counter 0's 8 keys, then counter 1 ...;
    // half 1: counters 4..7), pack 16 -> 8 bits, and put the halves'
    // counters in order.
    const __m256i ab_lo = _mm256_unpacklo_epi32(a, b),
                  ab_hi = _mm256_unpackhi_epi32(a, b);
    const __m256i ce_lo = _mm256_unpacklo_epi32(c, e),
                  ce_hi = _mm256_unpackhi_epi32(c, e);
    const __m256i t0 = _mm256_unpacklo_epi64(ab_lo, ce_lo);  // 0 | 4
    const __m256i t1 = _mm256_unpackhi_epi64(ab_lo, ce_lo);  // 1 | 5
    const __m256i t2 = _mm256_unpacklo_epi64(ab_hi, ce_hi);  // 2 | 6
    const __m256i t3 = _mm256_unpackhi_epi64(ab_hi, ce_hi);  // 3 | 7
    const __m256i p01 = _mm256_packs_epi16(t0, t1);          // 0 1 | 4 5
    const __m256i p23 = _mm256_packs_epi16(t2, t3);          // 2 3 | 6 7
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(block),
        _mm256_and_si256(_mm256_permute2x128_si256(p01, p23, 0x20), one));
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(block + 32),
        _mm256_and_si256(_mm256_permute2x128_si256(p01, p23, 0x31), one));
    const int64_t first = std::max(j0, 8 * g),
                  last = std::min(j0 + m, 8 * g + 64);
    std::memcpy(keep + (first - j0), block + (first - 8 * g), last - first);
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
        const int64_t base = j & ~int64_t{kKeysPerDraw - 1};
        const uint32_t bits =
            AttentionKeepBits8(d.seed, d.offset, bh, i, base, threshold);
        data[(bh * lq + i) * k + j] = (bits >> (j - base)) & 1u;
      }
    }
  }
  return keep;
}

}  // namespace xlnet
