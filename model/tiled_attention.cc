#include "model/tiled_attention.h"

#include <ATen/Parallel.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "model/counter_dropout.h"
#include "model/philox.h"
#include "model/relative_attention.h"

namespace xlnet {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What forward and backward share besides the saved tensors.
struct FusedState : torch::CustomClassHolder {
  AttentionBias
      bias;  // mask [B|1, 1, Lq, K], seg_diff [B, 1, Lq, K], query_pos [B, Lq]
  int64_t qlen = 0;
  double scale = 1;
  AttentionDropout dropout;
  AttentionTiles tiles;
  bool has_seg = false;
};

// The problem's sizes, checked once.
struct Geometry {
  int64_t b, h, lq, klen, dh, rlen, kr_batch;
};

Geometry CheckInputs(const torch::Tensor& qw, const torch::Tensor& qr,
                     const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& k_r, const torch::Tensor& seg,
                     const AttentionBias& bias, int64_t qlen) {
  TORCH_CHECK(qw.dim() == 4 && qr.sizes() == qw.sizes(), "fused attention: qw ",
              qw.sizes(), " qr ", qr.sizes());
  Geometry g{qw.size(0), qw.size(1),  qw.size(2), k.size(2),
             qw.size(3), k_r.size(2), k_r.size(0)};
  TORCH_CHECK(k.dim() == 4 && k.sizes() == v.sizes() && k.size(0) == g.b &&
                  k.size(1) == g.h && k.size(3) == g.dh,
              "fused attention: qw ", qw.sizes(), " k ", k.sizes(), " v ",
              v.sizes());
  TORCH_CHECK(k_r.dim() == 4 && g.kr_batch > 0 && g.b % g.kr_batch == 0 &&
                  k_r.size(1) == g.h && k_r.size(3) == g.dh &&
                  g.rlen >= g.klen + qlen,
              "fused attention: k_r ", k_r.sizes(), " for qw ", qw.sizes(),
              ", K ", g.klen, ", qlen ", qlen);
  for (const auto* t : {&qr, &k, &v, &k_r}) {
    TORCH_CHECK(
        t->scalar_type() == qw.scalar_type() && t->device() == qw.device(),
        "fused attention: inputs must share dtype and device, got ",
        t->scalar_type(), " on ", t->device(), " vs ", qw.scalar_type(), " on ",
        qw.device());
  }
  TORCH_CHECK(seg.defined() == bias.seg_diff.defined(),
              "fused attention: seg and bias.seg_diff go together");
  if (seg.defined()) {
    TORCH_CHECK(seg.dim() == 4 && seg.size(0) == g.b && seg.size(1) == g.h &&
                    seg.size(2) == g.lq && seg.size(3) == 2 &&
                    seg.scalar_type() == qw.scalar_type(),
                "fused attention: seg ", seg.sizes(), " for qw ", qw.sizes());
    TORCH_CHECK(
        bias.seg_diff.dim() == 4 && bias.seg_diff.size(0) == g.b &&
            bias.seg_diff.size(1) == 1 && bias.seg_diff.size(2) == g.lq &&
            bias.seg_diff.size(3) == g.klen,
        "fused attention: seg_diff ", bias.seg_diff.sizes(),
        " for [B, 1, Lq, K] = [", g.b, ", 1, ", g.lq, ", ", g.klen, "]");
  }
  if (bias.mask.defined()) {
    TORCH_CHECK(bias.mask.dim() == 4 &&
                    (bias.mask.size(0) == g.b || bias.mask.size(0) == 1) &&
                    bias.mask.size(1) == 1 && bias.mask.size(2) == g.lq &&
                    bias.mask.size(3) == g.klen &&
                    bias.mask.scalar_type() == torch::kBool,
                "fused attention: mask ", bias.mask.sizes(),
                " for [B|1, 1, Lq, K] = [", g.b, ", 1, ", g.lq, ", ", g.klen,
                "]");
  }
  if (bias.query_pos.defined()) {
    TORCH_CHECK(bias.query_pos.dim() == 2 && bias.query_pos.size(0) == g.b &&
                    bias.query_pos.size(1) == g.lq,
                "fused attention: query_pos ", bias.query_pos.sizes(),
                " for Lq ", g.lq);
  } else {
    TORCH_CHECK(g.lq == qlen, "fused attention: without query_pos Lq ", g.lq,
                " must equal qlen ", qlen);
  }
  return g;
}

// ------------------------------------------------------------ CPU, tiled
//
// Work items run on LibTorch's intra-op threads: forward one item per
// (b, h, query tile), backward one per (b, h) (it owns that slice's dk, dv
// and k_r gradient). Inside an item, matrix products go to BLAS through
// single-threaded ATen calls on tiles; the element-wise work of a tile
// (position band, segment term, masks, softmax bookkeeping, dropout, dS)
// runs in the loops below, so a tile costs a handful of dispatcher calls.

// A [rows, cols] bool matrix seen through its strides (undefined = none).
struct BoolView {
  const bool* data = nullptr;
  int64_t row_stride = 0, col_stride = 0;
  const bool* At(int64_t r, int64_t c) const {
    return data + r * row_stride + c * col_stride;
  }
};

BoolView ViewOf(const torch::Tensor& t) {  // t [Lq, K] bool
  BoolView v;
  if (!t.defined()) return v;
  v.data = t.data_ptr<bool>();
  v.row_stride = t.stride(0);
  v.col_stride = t.stride(1);
  return v;
}

// One (b, h) slice of every input, in the accumulation dtype. Strided views
// (the projections' [B, T, H, Dh] memory): mm takes them as they are.
struct HeadSlices {
  torch::Tensor qw, qr, k, v, kr;  // [Lq, Dh] x2, [K, Dh] x2, [R, Dh]
  torch::Tensor seg;               // [Lq, 2] or undefined
  BoolView mask, diff;             // [Lq, K]
  const int64_t* pos = nullptr;    // [Lq] query positions, null = 0..Lq-1
  int64_t bh = 0;                  // b * H + h, the dropout counter's word
};

struct Inputs {
  torch::Tensor qw, qr, k, v, kr, seg;  // accumulation dtype, detached; qw,
                                        // qr, seg times the scale
  torch::Tensor pos;                    // [B, Lq] int64 contiguous or undefined
};

HeadSlices Slice(const Inputs& in, const FusedState& st, int64_t b, int64_t h) {
  HeadSlices s;
  const int64_t heads = in.qw.size(1);
  s.qw = in.qw[b][h];
  s.qr = in.qr[b][h];
  s.k = in.k[b][h];
  s.v = in.v[b][h];
  s.kr = in.kr[in.kr.size(0) == 1 ? 0 : b][h];
  if (in.seg.defined()) s.seg = in.seg[b][h];
  if (st.bias.mask.defined()) {
    s.mask = ViewOf(st.bias.mask[st.bias.mask.size(0) == 1 ? 0 : b][0]);
  }
  if (st.bias.seg_diff.defined()) s.diff = ViewOf(st.bias.seg_diff[b][0]);
  if (in.pos.defined()) {
    s.pos = in.pos.data_ptr<int64_t>() + b * in.pos.size(1);
  }
  s.bh = b * heads + h;
  return s;
}

// Rows [i0, i0 + n) of a query tile: their scaled queries, segment terms and
// where each row's position term sits in the band of k_r rows.
template <typename T>
struct QueryTile {
  int64_t i0 = 0, n = 0;
  int64_t pmin = 0, pmax = 0;
  std::vector<int64_t> shift;  // pmax - pos_r: row r's offset in the band
  torch::Tensor qw, qr;        // [n, Dh] times scale (views)
  std::vector<T> same,
      delta;  // scale * seg[:, 0], scale * (seg[:, 1] - seg[:, 0])
};

template <typename T>
QueryTile<T> LoadQueryTile(const HeadSlices& hs, int64_t i0, int64_t n) {
  QueryTile<T> t;
  t.i0 = i0;
  t.n = n;
  t.shift.resize(n);
  if (hs.pos == nullptr) {
    t.pmin = i0;
    t.pmax = i0 + n - 1;
    for (int64_t r = 0; r < n; ++r) t.shift[r] = n - 1 - r;
  } else {
    const int64_t* p = hs.pos + i0;
    t.pmin = *std::min_element(p, p + n);
    t.pmax = *std::max_element(p, p + n);
    for (int64_t r = 0; r < n; ++r) t.shift[r] = t.pmax - p[r];
  }
  t.qw = hs.qw.narrow(0, i0, n);  // [n, Dh], scaled by ToAccumulation
  t.qr = hs.qr.narrow(0, i0, n);  // [n, Dh]
  if (hs.seg.defined()) {
    auto seg = hs.seg.narrow(0, i0, n).contiguous();  // [n, 2]
    const T* sg = seg.template data_ptr<T>();
    t.same.resize(n);
    t.delta.resize(n);
    for (int64_t r = 0; r < n; ++r) {
      t.same[r] = sg[2 * r];
      t.delta[r] = sg[2 * r + 1] - sg[2 * r];
    }
  }
  return t;
}

// Keys [j0, j0 + m) of a query tile: k_r rows [c_lo, c_lo + w) hold every
// relative index j + qlen - pos_r the tile needs.
struct KeyTile {
  int64_t j0 = 0, m = 0, c_lo = 0, w = 0;
};

KeyTile MakeKeyTile(int64_t j0, int64_t m, int64_t qlen, int64_t pmin,
                    int64_t pmax) {
  return {j0, m, j0 + qlen - pmax, m + pmax - pmin};
}

// Element-wise row helpers written so that the compiler vectorises them
// (branch-free selects; reductions over 8 independent partial results).
template <typename T>
void AddSegmentTerm(T* row, int64_t m, const bool* other, int64_t stride,
                    T same, T delta) {
  const auto* o = reinterpret_cast<const uint8_t*>(other);
  for (int64_t c = 0; c < m; ++c) {
    row[c] += same + delta * static_cast<T>(o[c * stride]);
  }
}

template <typename T>
void MaskRow(T* row, int64_t m, const bool* blocked, int64_t stride) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const auto* b = reinterpret_cast<const uint8_t*>(blocked);
  for (int64_t c = 0; c < m; ++c) row[c] = b[c * stride] ? kNegInf : row[c];
}

template <typename T>
T RowMax(const T* x, int64_t m) {
  T part[8];
  std::fill(part, part + 8, -std::numeric_limits<T>::infinity());
  int64_t c = 0;
  for (; c + 8 <= m; c += 8) {
    for (int k = 0; k < 8; ++k)
      part[k] = part[k] < x[c + k] ? x[c + k] : part[k];
  }
  for (; c < m; ++c) part[0] = part[0] < x[c] ? x[c] : part[0];
  return *std::max_element(part, part + 8);
}

template <typename T>
T RowSum(const T* x, int64_t m) {
  T part[8] = {};
  int64_t c = 0;
  for (; c + 8 <= m; c += 8) {
    for (int k = 0; k < 8; ++k) part[k] += x[c + k];
  }
  for (; c < m; ++c) part[0] += x[c];
  T sum = 0;
  for (int k = 0; k < 8; ++k) sum += part[k];
  return sum;
}

// sum of x[c] where other[c * stride].
template <typename T>
T MaskedRowSum(const T* x, int64_t m, const bool* other, int64_t stride) {
  const auto* o = reinterpret_cast<const uint8_t*>(other);
  T part[8] = {};
  int64_t c = 0;
  for (; c + 8 <= m; c += 8) {
    for (int k = 0; k < 8; ++k) {
      part[k] += x[c + k] * static_cast<T>(o[(c + k) * stride]);
    }
  }
  for (; c < m; ++c) part[0] += x[c] * static_cast<T>(o[c * stride]);
  T sum = 0;
  for (int k = 0; k < 8; ++k) sum += part[k];
  return sum;
}

// The scaled scores [n, m] of a tile: content product, the band of position
// products [n, w] shifted per row, segment term, masks (-inf). Writes each
// row's maximum to row_max when given.
template <typename T>
torch::Tensor Scores(const HeadSlices& hs, const QueryTile<T>& qt,
                     const KeyTile& kt, T* row_max) {
  auto s = torch::mm(qt.qw, hs.k.narrow(0, kt.j0, kt.m).t());      // [n, m]
  auto bd = torch::mm(qt.qr, hs.kr.narrow(0, kt.c_lo, kt.w).t());  // [n, w]
  T* sp = s.template data_ptr<T>();
  const T* bp = bd.template data_ptr<T>();
  const bool seg = !qt.same.empty();
  for (int64_t r = 0; r < qt.n; ++r) {
    T* row = sp + r * kt.m;
    const T* band = bp + r * kt.w + qt.shift[r];
    for (int64_t c = 0; c < kt.m; ++c) row[c] += band[c];
    if (seg) {
      AddSegmentTerm(row, kt.m, hs.diff.At(qt.i0 + r, kt.j0),
                     hs.diff.col_stride, qt.same[r], qt.delta[r]);
    }
    if (hs.mask.data != nullptr) {
      MaskRow(row, kt.m, hs.mask.At(qt.i0 + r, kt.j0), hs.mask.col_stride);
    }
    if (row_max != nullptr) row_max[r] = RowMax(row, kt.m);
  }
  return s;
}

// row[c] -= offset[r] for every row of x [n, m] (contiguous), then exp.
template <typename T>
void SubtractRowsThenExp(torch::Tensor& x, const T* offset) {
  const int64_t n = x.size(0), m = x.size(1);
  T* p = x.template data_ptr<T>();
  for (int64_t r = 0; r < n; ++r) {
    const T o = offset[r];
    for (int64_t c = 0; c < m; ++c) p[r * m + c] -= o;
  }
  x.exp_();
}

int64_t KeyTileSize(const AttentionTiles& tiles, int64_t klen) {
  return tiles.key > 0 ? std::min(tiles.key, klen) : klen;
}

// Runs f(item) for items [0, n) on the intra-op threads. Autocast (a
// thread-local setting of the calling thread) and autograd stay out.
template <typename F>
void ParallelItems(int64_t n, const F& f) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(
        c10::autocast_dispatch_keyset);
    torch::NoGradGuard no_grad;
    for (int64_t item = begin; item < end; ++item) f(item);
  });
}

// The op's inputs in the accumulation dtype, the query-side ones (qw, qr,
// seg) times the softmax scale, so tiles are views and score = qw.k + ...
Inputs ToAccumulation(const torch::Tensor& qw, const torch::Tensor& qr,
                      const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& k_r, const torch::Tensor& seg,
                      const AttentionBias& bias, double scale,
                      torch::ScalarType acc) {
  Inputs in;
  in.qw = qw.detach().to(acc) * scale;
  in.qr = qr.detach().to(acc) * scale;
  in.k = k.detach().to(acc);
  in.v = v.detach().to(acc);
  in.kr = k_r.detach().to(acc);
  if (seg.defined()) in.seg = seg.detach().to(acc) * scale;
  if (bias.query_pos.defined()) {
    in.pos = bias.query_pos.to(torch::kLong).contiguous();
  }
  return in;
}

torch::ScalarType AccumulationType(torch::ScalarType dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// [B, H, T, Dh] with [B, T, H, Dh] memory, the projections' layout: rows of
// one (b, h) are H * Dh apart, and PostAttention's transpose back to
// [B, T, H * Dh] costs no copy.
torch::Tensor EmptyHeadMajor(int64_t b, int64_t h, int64_t t, int64_t dh,
                             const torch::TensorOptions& opts) {
  return torch::empty_strided({b, h, t, dh}, {t * h * dh, dh, h * dh, 1}, opts);
}

// Writes src [n, Dh] (contiguous) times `scale` into dst [n, Dh] (any row
// stride, unit column stride).
template <typename T>
void StoreRows(const torch::Tensor& src, T scale, torch::Tensor dst) {
  const int64_t n = src.size(0), dh = src.size(1), ld = dst.stride(0);
  const T* s = src.template data_ptr<T>();
  T* d = dst.template data_ptr<T>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < dh; ++c) d[r * ld + c] = scale * s[r * dh + c];
  }
}

// Forward: out [B, H, Lq, Dh] and the log-sum-exp of each row's scaled
// scores [B, H, Lq] (+inf for a row with every key masked), both in the
// accumulation dtype T.
template <typename T>
void TiledForward(const Inputs& in, const FusedState& st, const Geometry& g,
                  torch::Tensor* out, torch::Tensor* lse) {
  const auto opts = in.qw.options();
  *out = EmptyHeadMajor(g.b, g.h, g.lq, g.dh, opts);
  *lse = torch::empty({g.b, g.h, g.lq}, opts);
  const int64_t tq = std::max<int64_t>(1, st.tiles.query);
  const int64_t tk = KeyTileSize(st.tiles, g.klen);
  const int64_t q_tiles = (g.lq + tq - 1) / tq;
  const bool drop = st.dropout.p > 0;
  const uint32_t threshold = AttentionKeepThreshold(st.dropout.p);
  const T kept = static_cast<T>(1.0 / (1.0 - st.dropout.p));
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  ParallelItems(g.b * g.h * q_tiles, [&](int64_t item) {
    const int64_t bh = item / q_tiles, b = bh / g.h, h = bh % g.h;
    const HeadSlices hs = Slice(in, st, b, h);
    const int64_t i0 = (item % q_tiles) * tq, n = std::min(tq, g.lq - i0);
    const QueryTile<T> qt = LoadQueryTile<T>(hs, i0, n);
    auto acc = torch::zeros({n, g.dh}, opts);  // [n, Dh]
    T* ap = acc.template data_ptr<T>();
    std::vector<T> m_run(n, kNegInf), l_run(n, 0), m_safe(n, 0), tile_max(n),
        alpha(n);
    std::vector<uint8_t> keep(drop ? tk : 0);
    for (int64_t j0 = 0; j0 < g.klen; j0 += tk) {
      const KeyTile kt =
          MakeKeyTile(j0, std::min(tk, g.klen - j0), st.qlen, qt.pmin, qt.pmax);
      auto s = Scores(hs, qt, kt, tile_max.data());  // [n, m]
      for (int64_t r = 0; r < n; ++r) {
        const T m_new = std::max(m_run[r], tile_max[r]);
        // A row with nothing visible so far keeps max -inf: subtract 0.
        m_safe[r] = m_new == kNegInf ? T(0) : m_new;
        alpha[r] = std::exp(m_run[r] - m_safe[r]);  // 0 while m_run is -inf
        m_run[r] = m_new;
      }
      SubtractRowsThenExp(s, m_safe.data());  // p~ [n, m]
      T* sp = s.template data_ptr<T>();
      for (int64_t r = 0; r < n; ++r) {
        T* row = sp + r * kt.m;
        l_run[r] = l_run[r] * alpha[r] + RowSum(row, kt.m);
        if (drop) {
          KeepRow(st.dropout, threshold, hs.bh, i0 + r, j0, kt.m, keep.data());
          for (int64_t c = 0; c < kt.m; ++c) row[c] *= kept * keep[c];
        }
        for (int64_t c = 0; c < g.dh; ++c) ap[r * g.dh + c] *= alpha[r];
      }
      acc.addmm_(s, hs.v.narrow(0, j0, kt.m));
    }
    T* lp = (*lse)[b][h].template data_ptr<T>() + i0;
    for (int64_t r = 0; r < n; ++r) {
      const bool none = l_run[r] == 0;
      const T inv = none ? T(0) : T(1) / l_run[r];
      for (int64_t c = 0; c < g.dh; ++c) ap[r * g.dh + c] *= inv;
      lp[r] = none ? std::numeric_limits<T>::infinity()
                   : m_safe[r] + std::log(l_run[r]);
    }
    StoreRows<T>(acc, T(1), (*out)[b][h].narrow(0, i0, n));
  });
}

struct Grads {
  torch::Tensor qw, qr, k, v, kr, seg;
};

// Backward by recomputation, parallel over (b, h): each item owns dk, dv
// and its k_r gradient slice; dqw, dqr, dseg rows are written once.
template <typename T>
Grads TiledBackward(const Inputs& in, const FusedState& st, const Geometry& g,
                    const torch::Tensor& out, const torch::Tensor& lse,
                    const torch::Tensor& dout) {
  const auto opts = in.qw.options();
  Grads gr;
  gr.qw = EmptyHeadMajor(g.b, g.h, g.lq, g.dh, opts);
  gr.qr = EmptyHeadMajor(g.b, g.h, g.lq, g.dh, opts);
  gr.k = EmptyHeadMajor(g.b, g.h, g.klen, g.dh, opts);
  gr.v = EmptyHeadMajor(g.b, g.h, g.klen, g.dh, opts);
  auto dkr = torch::zeros({g.b, g.h, g.rlen, g.dh}, opts);  // per sample
  if (st.has_seg) gr.seg = torch::empty({g.b, g.h, g.lq, 2}, opts);
  const int64_t tq = std::max<int64_t>(1, st.tiles.query);
  const int64_t tk = KeyTileSize(st.tiles, g.klen);
  const bool drop = st.dropout.p > 0;
  const uint32_t threshold = AttentionKeepThreshold(st.dropout.p);
  const T kept = static_cast<T>(1.0 / (1.0 - st.dropout.p));
  const T scale = static_cast<T>(st.scale);
  ParallelItems(g.b * g.h, [&](int64_t bh) {
    const int64_t b = bh / g.h, h = bh % g.h;
    const HeadSlices hs = Slice(in, st, b, h);
    auto dk = torch::zeros({g.klen, g.dh}, opts);
    auto dv = torch::zeros({g.klen, g.dh}, opts);
    auto dkr_bh = dkr[b][h];  // [R, Dh]
    const auto o_bh = out[b][h], do_bh = dout[b][h];
    const T* lse_bh = lse[b][h].template data_ptr<T>();
    std::vector<uint8_t> keep(drop ? tk : 0);
    for (int64_t i0 = 0; i0 < g.lq; i0 += tq) {
      const int64_t n = std::min(tq, g.lq - i0);
      const QueryTile<T> qt = LoadQueryTile<T>(hs, i0, n);
      const auto d_out = do_bh.narrow(0, i0, n).contiguous();  // [n, Dh]
      const auto o_t = o_bh.narrow(0, i0, n).contiguous();     // [n, Dh]
      const T* dop = d_out.template data_ptr<T>();
      const T* op = o_t.template data_ptr<T>();
      // D_r = sum_j P_rj dP_rj = dO_r . O_r (dropout included).
      std::vector<T> d_row(n, 0), dall(n, 0), dother(n, 0);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < g.dh; ++c) {
          d_row[r] += dop[r * g.dh + c] * op[r * g.dh + c];
        }
      }
      auto dqw = torch::zeros({n, g.dh}, opts);
      auto dqr = torch::zeros({n, g.dh}, opts);
      for (int64_t j0 = 0; j0 < g.klen; j0 += tk) {
        const KeyTile kt = MakeKeyTile(j0, std::min(tk, g.klen - j0), st.qlen,
                                       qt.pmin, qt.pmax);
        auto p = Scores<T>(hs, qt, kt, nullptr);  // [n, m]
        SubtractRowsThenExp(p, lse_bh + i0);      // P
        const auto v_j = hs.v.narrow(0, j0, kt.m),
                   k_j = hs.k.narrow(0, j0, kt.m);
        auto ds = torch::mm(d_out, v_j.t());  // dP (before dropout) [n, m]
        T* pp = p.template data_ptr<T>();
        T* dsp = ds.template data_ptr<T>();
        for (int64_t r = 0; r < n; ++r) {
          T* prow = pp + r * kt.m;
          T* drow = dsp + r * kt.m;
          if (drop) {
            KeepRow(st.dropout, threshold, hs.bh, i0 + r, j0, kt.m,
                    keep.data());
          }
          const T d = d_row[r];
          if (drop) {
            for (int64_t c = 0; c < kt.m; ++c) {
              const T z = kept * keep[c];
              drow[c] = prow[c] * (drow[c] * z - d);  // dL/dS
              prow[c] *= z;  // the dropped-out P that multiplied V
            }
          } else {
            for (int64_t c = 0; c < kt.m; ++c) {
              drow[c] = prow[c] * (drow[c] - d);
            }
          }
          if (st.has_seg) {
            dall[r] += RowSum(drow, kt.m);
            dother[r] += MaskedRowSum(drow, kt.m, hs.diff.At(i0 + r, j0),
                                      hs.diff.col_stride);
          }
        }
        dv.narrow(0, j0, kt.m).addmm_(p.t(), d_out);
        dqw.addmm_(ds, k_j);
        dk.narrow(0, j0, kt.m).addmm_(ds.t(), qt.qw);
        auto dbd = torch::zeros({n, kt.w}, opts);  // [n, w]
        T* bp = dbd.template data_ptr<T>();
        for (int64_t r = 0; r < n; ++r) {
          std::copy(dsp + r * kt.m, dsp + (r + 1) * kt.m,
                    bp + r * kt.w + qt.shift[r]);
        }
        const auto kr_band = hs.kr.narrow(0, kt.c_lo, kt.w);
        dqr.addmm_(dbd, kr_band);
        dkr_bh.narrow(0, kt.c_lo, kt.w).addmm_(dbd.t(), qt.qr);
      }
      StoreRows<T>(dqw, scale, gr.qw[b][h].narrow(0, i0, n));
      StoreRows<T>(dqr, scale, gr.qr[b][h].narrow(0, i0, n));
      if (st.has_seg) {
        T* sg = gr.seg[b][h].template data_ptr<T>() + 2 * i0;  // [n, 2]
        for (int64_t r = 0; r < n; ++r) {
          // seg_0 weighs same-segment keys, seg_1 the others.
          sg[2 * r] = scale * (dall[r] - dother[r]);
          sg[2 * r + 1] = scale * dother[r];
        }
      }
    }
    StoreRows<T>(dk, T(1), gr.k[b][h]);
    StoreRows<T>(dv, T(1), gr.v[b][h]);
  });
  gr.kr =
      g.kr_batch == 1 && g.b > 1 ? dkr.sum(0, true) : dkr;  // [Bk, H, R, Dh]
  return gr;
}

// The CPU op as an autograd node: saves its inputs, the output and the
// per-row log-sum-exp; backward recomputes every tile.
struct TiledAttentionFunction
    : public torch::autograd::Function<TiledAttentionFunction> {
  // inputs: qw, qr, k, v, k_r[, seg]
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx,
      c10::intrusive_ptr<FusedState> state, at::TensorList inputs) {
    const torch::Tensor seg = state->has_seg ? inputs[5] : torch::Tensor();
    const Geometry g = CheckInputs(inputs[0], inputs[1], inputs[2], inputs[3],
                                   inputs[4], seg, state->bias, state->qlen);
    const auto acc = AccumulationType(inputs[0].scalar_type());
    const Inputs in =
        ToAccumulation(inputs[0], inputs[1], inputs[2], inputs[3], inputs[4],
                       seg, state->bias, state->scale, acc);
    torch::Tensor out_acc, lse;
    AT_DISPATCH_FLOATING_TYPES(acc, "tiled_attention_forward", [&] {
      TiledForward<scalar_t>(in, *state, g, &out_acc, &lse);
    });
    std::vector<torch::Tensor> saved(inputs.begin(), inputs.end());
    saved.push_back(out_acc);
    saved.push_back(lse);
    ctx->save_for_backward(saved);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return {out_acc.to(inputs[3].scalar_type())};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<FusedState>(
        ctx->saved_data["state"].toCapsule());
    const auto saved = ctx->get_saved_variables();
    const size_t n_in = state->has_seg ? 6 : 5;
    torch::autograd::variable_list result(1 + n_in);
    if (!grad_outputs[0].defined()) return result;
    const torch::Tensor seg = state->has_seg ? saved[5] : torch::Tensor();
    const Geometry g = CheckInputs(saved[0], saved[1], saved[2], saved[3],
                                   saved[4], seg, state->bias, state->qlen);
    const auto acc = AccumulationType(saved[0].scalar_type());
    const Inputs in =
        ToAccumulation(saved[0], saved[1], saved[2], saved[3], saved[4], seg,
                       state->bias, state->scale, acc);
    Grads gr;
    AT_DISPATCH_FLOATING_TYPES(acc, "tiled_attention_backward", [&] {
      gr = TiledBackward<scalar_t>(in, *state, g, saved[n_in], saved[n_in + 1],
                                   grad_outputs[0].to(acc));
    });
    const torch::Tensor* grads[] = {&gr.qw, &gr.qr, &gr.k,
                                    &gr.v,  &gr.kr, &gr.seg};
    for (size_t i = 0; i < n_in; ++i) {
      result[1 + i] = grads[i]->to(saved[i].scalar_type());
    }
    return result;
  }
};

}  // namespace

void CheckFusedAttentionInputs(const torch::Tensor& qw, const torch::Tensor& qr,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& k_r,
                               const torch::Tensor& seg,
                               const AttentionBias& bias, int64_t qlen) {
  CheckInputs(qw, qr, k, v, k_r, seg, bias, qlen);
}

torch::Tensor TiledRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles) {
  TORCH_CHECK(dropout.p >= 0 && dropout.p < 1,
              "tiled attention: dropout must be in [0, 1), got ", dropout.p);
  TORCH_CHECK(tiles.query >= 1 && tiles.key >= 0,
              "tiled attention: tiles must be query >= 1, key >= 0, got ",
              tiles.query, ", ", tiles.key);
  TORCH_CHECK(qw.device().is_cpu(),
              "tiled attention: CPU tensors expected, got ", qw.device());
  TORCH_CHECK(at::isFloatingType(qw.scalar_type()),
              "tiled attention: floating inputs expected, got ",
              qw.scalar_type());
  auto state = c10::make_intrusive<FusedState>();
  state->bias = bias;
  state->qlen = qlen;
  state->scale = scale;
  state->dropout = dropout;
  state->tiles = tiles;
  state->has_seg = seg.defined();
  std::vector<torch::Tensor> inputs = {qw, qr, k, v,
                                       PositionsPerSample(k_r, qw.size(0))};
  if (seg.defined()) inputs.push_back(seg);
  return TiledAttentionFunction::apply(state, at::TensorList(inputs))[0];
}

}  // namespace xlnet
