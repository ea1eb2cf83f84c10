#include "data_pipeline/plm_sample.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "data_pipeline/tokenizer.h"

namespace xlnet::data {
namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// How far a sentence-boundary scan may run (see SplitAAndB).
int64_t ScanLimit(int64_t tot_len) { return std::max<int64_t>(4 * tot_len, 4096); }

// Trims the longer of A/B from the right until |A| + |B| <= tot_len, exactly
// as the official one-token-at-a-time loop does (ties trim B).
void TrimToLength(int64_t tot_len, ABSplit* s) {
  int64_t a = s->a_end - s->a_begin;
  int64_t b = s->b_end - s->b_begin;
  int64_t excess = a + b - tot_len;
  if (excess <= 0) return;
  if (a > b) {
    const int64_t d = std::min(excess, a - b);
    a -= d;
    excess -= d;
  } else {
    const int64_t d = std::min(excess, b - a);
    b -= d;
    excess -= d;
  }
  // Now a == b (or done): trims alternate B, A, B, ...
  b -= (excess + 1) / 2;
  a -= excess / 2;
  s->a_end = s->a_begin + a;
  s->b_end = s->b_begin + b;
}

// n in 1..max_gram with p proportional to 1/n.
int64_t SampleNgram(int64_t max_gram, Rng& rng) {
  double total = 0;
  for (int64_t n = 1; n <= max_gram; ++n) total += 1.0 / n;
  double u = rng.UniformDouble() * total;
  for (int64_t n = 1; n <= max_gram; ++n) {
    u -= 1.0 / n;
    if (u < 0) return n;
  }
  return max_gram;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix64(&x);
}

Rng Rng::For(std::initializer_list<uint64_t> keys) {
  uint64_t h = 0x6A09E667F3BCC909ULL;
  for (uint64_t k : keys) {
    uint64_t x = h ^ k;
    h = SplitMix64(&x) ^ Rotl(h, 17);
  }
  return Rng(h);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Uniform(uint64_t n) {
  TORCH_CHECK(n > 0, "Rng::Uniform(0)");
  // Lemire's multiply-shift with rejection: exactly uniform.
  uint64_t x = Next();
  __uint128_t m = static_cast<__uint128_t>(x) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = -n % n;
    while (low < threshold) {
      x = Next();
      m = static_cast<__uint128_t>(x) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::UniformDouble() {
  return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
}

ABSplit SplitAAndB(const StreamAccess& stream, int64_t begin, int64_t tot_len,
                   Rng& rng) {
  const int64_t data_len = stream.length();
  TORCH_CHECK(tot_len >= 2 && begin >= 0 && begin + tot_len < data_len,
              "SplitAAndB: window [", begin, ", ", begin + tot_len,
              ") does not fit a stream of ", data_len);
  const int64_t scan = ScanLimit(tot_len);
  const int64_t limit = std::min(data_len, begin + scan);
  int64_t end_idx = begin + 1;
  std::vector<int64_t> cut_points;
  uint8_t prev = stream.Flag(begin);
  while (end_idx < limit) {
    const uint8_t flag = stream.Flag(end_idx);
    if (flag != prev) {
      if (end_idx - begin >= tot_len) break;
      cut_points.push_back(end_idx);
    }
    prev = flag;
    ++end_idx;
  }

  ABSplit s;
  s.a_begin = begin;
  if (cut_points.empty() || rng.UniformDouble() < 0.5) {
    s.label = 0;
    s.a_end = cut_points.empty()
                  ? end_idx
                  : cut_points[rng.Uniform(cut_points.size())];
    const int64_t b_len = std::max<int64_t>(1, tot_len - (s.a_end - s.a_begin));
    // random.randint(0, data_len - 1 - b_len), both ends included.
    s.b_begin = static_cast<int64_t>(rng.Uniform(data_len - b_len));
    s.b_end = s.b_begin + b_len;
    const int64_t lo = std::max<int64_t>(0, s.b_begin - scan);
    while (s.b_begin > lo &&
           stream.Flag(s.b_begin - 1) == stream.Flag(s.b_begin)) {
      --s.b_begin;
    }
    const int64_t hi = std::min(data_len - 1, s.b_end + scan);
    while (s.b_end < hi && stream.Flag(s.b_end - 1) == stream.Flag(s.b_end)) {
      ++s.b_end;
    }
  } else {
    s.label = 1;
    s.a_end = cut_points[rng.Uniform(cut_points.size())];
    s.b_begin = s.a_end;
    s.b_end = end_idx;
  }
  TrimToLength(tot_len, &s);
  return s;
}

MaskResult SampleMask(const int32_t* ids, int64_t n,
                      const std::vector<uint8_t>& is_start_piece, bool reverse,
                      int64_t goal, const SpanOptions& options, Rng& rng) {
  MaskResult result;
  result.mask.assign(n, 0);
  if (n <= 0) return result;
  // Work on the flipped segment for backward streams.
  std::vector<int32_t> seg(ids, ids + n);
  if (reverse) std::reverse(seg.begin(), seg.end());
  auto is_start = [&](int64_t pos) {
    const int32_t id = seg[pos];
    return id >= 0 && id < static_cast<int32_t>(is_start_piece.size()) &&
           is_start_piece[id] != 0;
  };
  std::vector<uint8_t>& mask = result.mask;
  int64_t num_predict = 0;
  int64_t cur = 0;
  while (cur < n && num_predict < goal) {
    int64_t ngram = SampleNgram(options.max_gram, rng);
    ngram = std::min(ngram, goal - num_predict);
    const int64_t ctx_size = ngram * options.mask_alpha / options.mask_beta;
    const int64_t l_ctx =
        ctx_size > 0 ? static_cast<int64_t>(rng.Uniform(ctx_size)) : 0;
    const int64_t r_ctx = ctx_size - l_ctx;
    // The start of a complete word.
    int64_t beg = cur + l_ctx;
    while (beg < n && !is_start(beg)) ++beg;
    if (beg >= n) break;
    int64_t end = beg + 1;
    if (options.official_quirks) {
      // The official loop tests seg[beg] (always a start piece), so the
      // span is n pieces; one reaching the segment end is dropped.
      int64_t count = 1;
      while (end < n) {
        if (is_start(beg)) {
          ++count;
          if (count > ngram) break;
        }
        ++end;
      }
      if (end >= n) break;
    } else {
      // n whole words; the last word may end the segment. Keep as many
      // whole words as the remaining budget allows.
      const int64_t budget = goal - num_predict;
      int64_t count = 1;  // words in [beg, end)
      int64_t last_fit = -1;
      while (true) {
        if (end >= n || is_start(end)) {  // a word ends at `end`
          if (end - beg <= budget) last_fit = end;
          if (end >= n || count >= ngram || end - beg >= budget) break;
          ++count;
        }
        ++end;
      }
      if (last_fit < 0) {
        // Not even one word fits the budget: skip this word.
        int64_t next = beg + 1;
        while (next < n && !is_start(next)) ++next;
        cur = next;
        continue;
      }
      end = last_fit;
    }
    std::fill(mask.begin() + beg, mask.begin() + end, 1);
    result.spans.emplace_back(beg, end);
    num_predict += end - beg;
    cur = end + r_ctx;
  }
  // Random single positions up to the budget (uniform among the unmasked,
  // as the official rejection loop; stops when everything is masked).
  if (num_predict < goal) {
    std::vector<int64_t> free_positions;
    for (int64_t i = 0; i < n; ++i) {
      if (!mask[i]) free_positions.push_back(i);
    }
    while (num_predict < goal && !free_positions.empty()) {
      const size_t k = rng.Uniform(free_positions.size());
      const int64_t i = free_positions[k];
      free_positions[k] = free_positions.back();
      free_positions.pop_back();
      mask[i] = 1;
      result.singles.push_back(i);
      ++num_predict;
    }
  }
  if (reverse) {
    std::reverse(mask.begin(), mask.end());
    for (auto& [b, e] : result.spans) {
      const int64_t nb = n - e;
      const int64_t ne = n - b;
      b = nb;
      e = ne;
    }
    for (int64_t& i : result.singles) i = n - 1 - i;
  }
  return result;
}

void BuildSample(const StreamAccess& stream, int64_t pos, bool reverse,
                 const DataConfig& config,
                 const std::vector<uint8_t>& is_start_piece, Rng& rng,
                 const SampleOut& out, SampleDebug* debug) {
  const int64_t L = config.seq_len;
  const int64_t R = config.reuse_len;
  const int64_t P = config.num_predict;
  const int64_t tot_len = L - R - 3;

  // Tokens: [reuse, A, <sep>, B, <sep>, <cls>].
  std::vector<int32_t> cat(L);
  if (R > 0) stream.Ids(pos, R, cat.data());
  const ABSplit split = SplitAAndB(stream, pos + R, tot_len, rng);
  const int64_t a_len = split.a_end - split.a_begin;
  const int64_t b_len = split.b_end - split.b_begin;
  TORCH_CHECK(a_len + b_len == tot_len && a_len >= 0 && b_len >= 0,
              "A/B split of ", a_len, " + ", b_len, " tokens, expected ",
              tot_len);
  int64_t k = R;
  if (a_len > 0) stream.Ids(split.a_begin, a_len, cat.data() + k);
  k += a_len;
  cat[k++] = kSepId;
  if (b_len > 0) stream.Ids(split.b_begin, b_len, cat.data() + k);
  k += b_len;
  cat[k++] = kSepId;
  cat[k++] = kClsId;
  for (int64_t i = 0; i < L; ++i) {
    out.input_ids[i] = cat[i];
    out.token_type_ids[i] = i < R + a_len + 1 ? 0 : (i < L - 1 ? 1 : 2);
  }

  // Spans: the reuse half gets num_predict - num_predict // 2.
  SpanOptions span;
  span.mask_alpha = config.mask_alpha;
  span.mask_beta = config.mask_beta;
  span.max_gram = config.max_gram;
  span.official_quirks = config.official_span_quirks;
  const int64_t goal_rest = P / 2;
  const int64_t goal_reuse = P - goal_rest;
  MaskResult m0 = SampleMask(cat.data(), R, is_start_piece, reverse, goal_reuse,
                             span, rng);
  MaskResult m1 = SampleMask(cat.data() + R, L - R, is_start_piece, reverse,
                             goal_rest, span, rng);
  std::vector<uint8_t> masked(L);
  std::copy(m0.mask.begin(), m0.mask.end(), masked.begin());
  std::copy(m1.mask.begin(), m1.mask.end(), masked.begin() + R);

  // `_local_perm` on each half: position c*ps + r gets order c*ps + pi(r).
  std::vector<int64_t> rev(L);      // order, -1 for unmasked non-functional
  std::vector<int64_t> self_rev(L);  // what row i compares against
  std::vector<uint8_t> mof(L);       // masked or functional
  std::vector<uint8_t> is_target(L);
  const int64_t ps = config.perm_size;
  std::vector<int64_t> pi(ps);
  for (int half = 0; half < 2; ++half) {
    const int64_t off = half == 0 ? 0 : R;
    const int64_t n = half == 0 ? R : L - R;
    if (n == 0) continue;
    for (int64_t r = 0; r < ps; ++r) pi[r] = r;
    for (int64_t r = ps - 1; r > 0; --r) {
      std::swap(pi[r], pi[rng.Uniform(r + 1)]);
    }
    for (int64_t p = 0; p < n; ++p) {
      const int64_t i = off + p;
      const int64_t index = (p / ps) * ps + pi[p % ps];
      const bool func = cat[i] == kSepId || cat[i] == kClsId;
      mof[i] = masked[i] || func;
      is_target[i] = masked[i] && !func;
      rev[i] = mof[i] ? index : -1;
      self_rev[i] = is_target[i] ? rev[i] : rev[i] + 1;
    }
  }
  // perm_mask: 1 (blocked) iff j is masked-or-functional in the same half
  // and self_rev(i) <= rev(j); reuse rows never see the rest, rest rows see
  // all of the reuse half.
  // In float, or bool for a compact batch: the same values.
  const auto write_perm_mask = [&](auto* perm_mask) {
    using M = std::remove_pointer_t<decltype(perm_mask)>;
    for (int64_t i = 0; i < L; ++i) {
      M* row = perm_mask + i * L;
      const bool reuse_row = i < R;
      const int64_t lo = reuse_row ? 0 : R;
      const int64_t hi = reuse_row ? R : L;
      for (int64_t j = lo; j < hi; ++j) {
        row[j] = static_cast<M>(mof[j] && self_rev[i] <= rev[j]);
      }
      if (reuse_row) {
        std::fill(row + R, row + L, M(1));
      } else {
        std::fill(row, row + R, M(0));
      }
    }
  };
  TORCH_CHECK((out.perm_mask == nullptr) != (out.perm_mask_bool == nullptr) &&
                  (out.target_mapping == nullptr) !=
                      (out.target_mapping_bool == nullptr),
              "BuildSample: one of the float and bool outputs of perm_mask "
              "and of target_mapping");
  if (out.perm_mask != nullptr) {
    write_perm_mask(out.perm_mask);
  } else {
    write_perm_mask(out.perm_mask_bool);
  }
  if (out.target_mapping != nullptr) {
    std::fill(out.target_mapping, out.target_mapping + P * L, 0.0f);
  } else {
    std::fill(out.target_mapping_bool, out.target_mapping_bool + P * L, false);
  }
  // Targets in position order, padded to num_predict.
  int64_t t = 0;
  for (int64_t i = 0; i < L; ++i) {
    out.is_masked[i] = masked[i] != 0;
    if (!is_target[i]) continue;
    TORCH_CHECK(t < P, "more targets than num_predict=", P);
    if (out.target_mapping != nullptr) {
      out.target_mapping[t * L + i] = 1.0f;
    } else {
      out.target_mapping_bool[t * L + i] = true;
    }
    out.target[t] = cat[i];
    out.target_mask[t] = 1.0f;
    ++t;
  }
  for (; t < P; ++t) {
    out.target[t] = 0;
    out.target_mask[t] = 0.0f;
  }
  if (debug != nullptr) {
    debug->split = split;
    debug->reuse_begin = pos;
    debug->order = rev;
    debug->mask_reuse = std::move(m0);
    debug->mask_rest = std::move(m1);
    for (auto& [b, e] : debug->mask_rest.spans) b += R, e += R;
    for (int64_t& i : debug->mask_rest.singles) i += R;
  }
}

}  // namespace xlnet::data
