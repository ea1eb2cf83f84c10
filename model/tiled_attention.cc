#include "model/tiled_attention.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "model/philox.h"
#ifdef XLNET_CUDA_ATTENTION
#include "model/cuda/cuda_attention.h"
#endif

namespace xlnet {

std::optional<AttentionImpl> ParseAttentionImpl(const std::string& name) {
  if (name == "unfused") return AttentionImpl::kUnfused;
  if (name == "tiled") return AttentionImpl::kTiled;
  if (name == "cuda") return AttentionImpl::kCuda;
  return std::nullopt;
}

const char* AttentionImplName(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kUnfused:
      return "unfused";
    case AttentionImpl::kTiled:
      return "tiled";
    case AttentionImpl::kCuda:
      return "cuda";
  }
  return "?";
}

bool CudaAttentionCompiled() {
#ifdef XLNET_CUDA_ATTENTION
  return true;
#else
  return false;
#endif
}

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
  TORCH_CHECK(k_r.dim() == 4 && (g.kr_batch == g.b || g.kr_batch == 1) &&
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

// One (b, h) slice of every input, in the accumulation dtype. Strided views
// (the projections' [B, T, H, Dh] memory): mm takes them as they are.
struct HeadSlices {
  torch::Tensor qw, qr, k, v, kr;  // [Lq, Dh] x2, [K, Dh] x2, [R, Dh]
  torch::Tensor seg;               // [Lq, 2] or undefined
  torch::Tensor mask, diff;        // [Lq, K] bool or undefined
  const int64_t* pos = nullptr;    // [Lq] query positions, null = 0..Lq-1
  int64_t bh = 0;                  // b * H + h, the dropout counter's word
};

struct Inputs {
  torch::Tensor qw, qr, k, v, kr, seg;  // accumulation dtype, detached
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
    s.mask = st.bias.mask[st.bias.mask.size(0) == 1 ? 0 : b][0];
  }
  if (st.bias.seg_diff.defined()) s.diff = st.bias.seg_diff[b][0];
  if (in.pos.defined()) s.pos = in.pos.data_ptr<int64_t>() + b * in.pos.size(1);
  s.bh = b * heads + h;
  return s;
}

// Rows [i0, i0 + n) of a query tile and their positions.
struct QueryTile {
  int64_t i0 = 0, n = 0;
  int64_t pmin = 0, pmax = 0;
  // pos_i = pmin + (i - i0): the shifted band is a strided view of the
  // band product; otherwise a gather with `shift` = pmax - pos_i.
  bool consecutive = true;
  torch::Tensor shift;  // [n, 1] int64 (only when !consecutive)
};

QueryTile MakeQueryTile(const HeadSlices& hs, int64_t i0, int64_t n) {
  QueryTile t;
  t.i0 = i0;
  t.n = n;
  if (hs.pos == nullptr) {
    t.pmin = i0;
    t.pmax = i0 + n - 1;
    return t;
  }
  const int64_t* p = hs.pos + i0;
  t.pmin = *std::min_element(p, p + n);
  t.pmax = *std::max_element(p, p + n);
  for (int64_t r = 0; r < n; ++r) t.consecutive &= p[r] == p[0] + r;
  if (!t.consecutive) {
    t.shift = torch::empty({n, 1}, torch::kLong);
    auto* s = t.shift.data_ptr<int64_t>();
    for (int64_t r = 0; r < n; ++r) s[r] = t.pmax - p[r];
  }
  return t;
}

// Where one key tile's position term comes from: k_r rows [c_lo, c_lo + w)
// hold every relative index j + qlen - pos_i of the tile.
struct Band {
  int64_t c_lo = 0, w = 0;
  torch::Tensor index;  // [n, m] column of (i, j) in the band (gather case)
};

// The shifted view of the band product bd [n, w] for keys [j0, j0 + m):
// element (r, c) is bd[r, c + pmax - pos_r].
torch::Tensor Shifted(const torch::Tensor& bd, const QueryTile& qt,
                      const Band& band, int64_t m) {
  if (qt.consecutive) {
    // pmax - pos_r = n - 1 - r: flat index r * (w - 1) + c + n - 1.
    return bd.as_strided({qt.n, m}, {band.w - 1, 1},
                         bd.storage_offset() + qt.n - 1);  // [n, m]
  }
  return bd.gather(1, band.index);  // [n, m]
}

// Per query tile: the scaled queries and segment terms.
struct TileQueries {
  torch::Tensor qw, qr;               // [n, Dh] times scale
  torch::Tensor seg_same, seg_delta;  // [n, 1] times scale (seg term only)
};

TileQueries LoadQueries(const HeadSlices& hs, const QueryTile& qt,
                        double scale) {
  TileQueries t;
  t.qw = hs.qw.narrow(0, qt.i0, qt.n) * scale;  // [n, Dh]
  t.qr = hs.qr.narrow(0, qt.i0, qt.n) * scale;  // [n, Dh]
  if (hs.seg.defined()) {
    auto seg = hs.seg.narrow(0, qt.i0, qt.n) * scale;  // [n, 2]
    t.seg_same = seg.narrow(1, 0, 1);                  // [n, 1]
    t.seg_delta = seg.narrow(1, 1, 1) - t.seg_same;    // [n, 1]
  }
  return t;
}

// Scaled, masked (-inf) scores of query tile x keys [j0, j0 + m): [n, m].
torch::Tensor Scores(const HeadSlices& hs, const QueryTile& qt,
                     const TileQueries& tq, int64_t qlen, int64_t j0, int64_t m,
                     Band* band) {
  auto s = torch::mm(tq.qw, hs.k.narrow(0, j0, m).t());  // [n, m]
  band->c_lo = j0 + qlen - qt.pmax;
  band->w = m + qt.pmax - qt.pmin;
  auto bd =
      torch::mm(tq.qr, hs.kr.narrow(0, band->c_lo, band->w).t());  // [n, w]
  if (!qt.consecutive) {
    band->index =
        torch::arange(m, torch::kLong).unsqueeze(0) + qt.shift;  // [n, m]
  }
  s.add_(Shifted(bd, qt, *band, m));
  if (tq.seg_same.defined()) {
    auto diff = hs.diff.narrow(0, qt.i0, qt.n).narrow(1, j0, m);  // [n, m]
    s.add_(tq.seg_same).addcmul_(diff.to(s.scalar_type()), tq.seg_delta);
  }
  if (hs.mask.defined()) {
    s.masked_fill_(hs.mask.narrow(0, qt.i0, qt.n).narrow(1, j0, m), -kInf);
  }
  return s;
}

// The dropout multipliers (0 or 1 / (1 - p)) of rows [i0, i0 + n) x keys
// [j0, j0 + m) of head slice bh: [n, m].
template <typename T>
void FillDropoutScale(T* out, const AttentionDropout& d, int64_t bh, int64_t i0,
                      int64_t n, int64_t j0, int64_t m) {
  const uint32_t threshold = AttentionKeepThreshold(d.p);
  const T kept = static_cast<T>(1.0 / (1.0 - d.p));
  for (int64_t r = 0; r < n; ++r) {
    T* row = out + r * m;
    int64_t j = j0;
    while (j < j0 + m) {
      const int64_t base = j & ~int64_t{3};
      const uint32_t bits =
          AttentionKeepBits4(d.seed, d.offset, bh, i0 + r, base, threshold);
      for (; j < base + 4 && j < j0 + m; ++j) {
        row[j - j0] = (bits >> (j - base)) & 1u ? kept : T(0);
      }
    }
  }
}

torch::Tensor DropoutScale(const AttentionDropout& d, int64_t bh, int64_t i0,
                           int64_t n, int64_t j0, int64_t m,
                           torch::ScalarType dtype) {
  auto z = torch::empty({n, m}, torch::TensorOptions().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES(dtype, "attention_dropout", [&] {
    FillDropoutScale<scalar_t>(z.data_ptr<scalar_t>(), d, bh, i0, n, j0, m);
  });
  return z;
}

int64_t KeyTile(const AttentionTiles& tiles, int64_t klen) {
  return tiles.key > 0 ? std::min(tiles.key, klen) : klen;
}

// Work items run on LibTorch's intra-op threads, each with single-threaded
// ops; autocast (thread-local, set only on the calling thread) and autograd
// stay out of them.
template <typename F>
void ParallelItems(int64_t n, const F& f) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(
        c10::autocast_dispatch_keyset);
    torch::NoGradGuard no_grad;
    for (int64_t item = begin; item < end; ++item) f(item);
  });
}

Inputs ToAccumulation(const torch::Tensor& qw, const torch::Tensor& qr,
                      const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& k_r, const torch::Tensor& seg,
                      const AttentionBias& bias, torch::ScalarType acc) {
  Inputs in;
  in.qw = qw.detach().to(acc);
  in.qr = qr.detach().to(acc);
  in.k = k.detach().to(acc);
  in.v = v.detach().to(acc);
  in.kr = k_r.detach().to(acc);
  if (seg.defined()) in.seg = seg.detach().to(acc);
  if (bias.query_pos.defined()) {
    in.pos = bias.query_pos.to(torch::kLong).contiguous();
  }
  return in;
}

torch::ScalarType AccumulationType(torch::ScalarType dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Forward: out [B, H, Lq, Dh] and the log-sum-exp of each row's scaled
// scores [B, H, Lq] (+inf for a row with every key masked), both in the
// accumulation dtype.
void TiledForward(const Inputs& in, const FusedState& st, const Geometry& g,
                  torch::Tensor* out, torch::Tensor* lse) {
  const auto opts = in.qw.options();
  // [B, Lq, H, Dh] memory seen as [B, H, Lq, Dh]: PostAttention's
  // transpose + reshape back to [B, Lq, H*Dh] is then free.
  *out = torch::empty_strided({g.b, g.h, g.lq, g.dh},
                              {g.lq * g.h * g.dh, g.dh, g.h * g.dh, 1}, opts);
  *lse = torch::empty({g.b, g.h, g.lq}, opts);
  const int64_t tq = std::max<int64_t>(1, st.tiles.query);
  const int64_t tk = KeyTile(st.tiles, g.klen);
  const int64_t q_tiles = (g.lq + tq - 1) / tq;
  ParallelItems(g.b * g.h * q_tiles, [&](int64_t item) {
    const int64_t bh = item / q_tiles, b = bh / g.h, h = bh % g.h;
    const HeadSlices hs = Slice(in, st, b, h);
    const int64_t i0 = (item % q_tiles) * tq, n = std::min(tq, g.lq - i0);
    const QueryTile qt = MakeQueryTile(hs, i0, n);
    const TileQueries q = LoadQueries(hs, qt, st.scale);
    auto acc = torch::zeros({n, g.dh}, opts);       // [n, Dh]
    auto m_run = torch::full({n, 1}, -kInf, opts);  // [n, 1]
    auto l_run = torch::zeros({n, 1}, opts);        // [n, 1]
    torch::Tensor m_safe = torch::zeros({n, 1}, opts);
    for (int64_t j0 = 0; j0 < g.klen; j0 += tk) {
      const int64_t m = std::min(tk, g.klen - j0);
      Band band;
      auto s = Scores(hs, qt, q, st.qlen, j0, m, &band);  // [n, m]
      auto m_new = torch::max(m_run, s.amax({1}, true));  // [n, 1]
      // A row with nothing visible so far keeps max -inf: subtract 0 then.
      m_safe = m_new.masked_fill(m_new == -kInf, 0.0);
      s.sub_(m_safe).exp_();                 // p~ [n, m]
      auto alpha = (m_run - m_safe).exp_();  // [n, 1]
      l_run.mul_(alpha).add_(s.sum(1, true));
      if (st.dropout.p > 0) {
        s.mul_(DropoutScale(st.dropout, hs.bh, i0, n, j0, m, s.scalar_type()));
      }
      acc.mul_(alpha).addmm_(s, hs.v.narrow(0, j0, m));
      m_run = m_new;
    }
    auto none = l_run == 0;  // [n, 1]
    auto inv = l_run.reciprocal().masked_fill_(none, 0.0);
    (*out)[b][h].narrow(0, i0, n).copy_(acc.mul_(inv));
    auto row_lse = (m_safe + l_run.log()).masked_fill_(none, kInf);  // [n, 1]
    (*lse)[b][h].narrow(0, i0, n).copy_(row_lse.squeeze(1));
  });
}

struct Grads {
  torch::Tensor qw, qr, k, v, kr, seg;
};

// Backward by recomputation, parallel over (b, h): each item owns dk, dv
// and its k_r gradient slice; dqw, dqr, dseg rows are written once.
Grads TiledBackward(const Inputs& in, const FusedState& st, const Geometry& g,
                    const torch::Tensor& out, const torch::Tensor& lse,
                    const torch::Tensor& dout) {
  const auto opts = in.qw.options();
  Grads gr;
  gr.qw = torch::empty({g.b, g.h, g.lq, g.dh}, opts);
  gr.qr = torch::empty({g.b, g.h, g.lq, g.dh}, opts);
  gr.k = torch::empty({g.b, g.h, g.klen, g.dh}, opts);
  gr.v = torch::empty({g.b, g.h, g.klen, g.dh}, opts);
  auto dkr = torch::zeros({g.b, g.h, g.rlen, g.dh}, opts);  // per sample
  if (st.has_seg) gr.seg = torch::empty({g.b, g.h, g.lq, 2}, opts);
  const int64_t tq = std::max<int64_t>(1, st.tiles.query);
  const int64_t tk = KeyTile(st.tiles, g.klen);
  ParallelItems(g.b * g.h, [&](int64_t bh) {
    const int64_t b = bh / g.h, h = bh % g.h;
    const HeadSlices hs = Slice(in, st, b, h);
    auto dk = torch::zeros({g.klen, g.dh}, opts);
    auto dv = torch::zeros({g.klen, g.dh}, opts);
    auto dkr_bh = dkr[b][h];  // [R, Dh]
    const auto o_bh = out[b][h], do_bh = dout[b][h], lse_bh = lse[b][h];
    for (int64_t i0 = 0; i0 < g.lq; i0 += tq) {
      const int64_t n = std::min(tq, g.lq - i0);
      const QueryTile qt = MakeQueryTile(hs, i0, n);
      const TileQueries q = LoadQueries(hs, qt, st.scale);
      auto d_out = do_bh.narrow(0, i0, n);  // [n, Dh]
      // D_i = sum_j P_ij dP_ij = dO_i . O_i (dropout included).
      auto d_row = (d_out * o_bh.narrow(0, i0, n)).sum(1, true);  // [n, 1]
      auto row_lse = lse_bh.narrow(0, i0, n).unsqueeze(1);        // [n, 1]
      auto dqw = torch::zeros({n, g.dh}, opts);
      auto dqr = torch::zeros({n, g.dh}, opts);
      torch::Tensor dseg_same, dseg_delta;
      if (st.has_seg) {
        dseg_same = torch::zeros({n, 1}, opts);
        dseg_delta = torch::zeros({n, 1}, opts);
      }
      for (int64_t j0 = 0; j0 < g.klen; j0 += tk) {
        const int64_t m = std::min(tk, g.klen - j0);
        Band band;
        auto p = Scores(hs, qt, q, st.qlen, j0, m, &band);  // [n, m]
        p.sub_(row_lse).exp_();                             // P
        auto v_j = hs.v.narrow(0, j0, m), k_j = hs.k.narrow(0, j0, m);
        auto dp = torch::mm(d_out, v_j.t());  // [n, m]
        if (st.dropout.p > 0) {
          auto z =
              DropoutScale(st.dropout, hs.bh, i0, n, j0, m, p.scalar_type());
          dv.narrow(0, j0, m).addmm_((p * z).t(), d_out);
          dp.mul_(z);
        } else {
          dv.narrow(0, j0, m).addmm_(p.t(), d_out);
        }
        auto ds = dp.sub_(d_row).mul_(p);  // dL/dS [n, m]
        dqw.addmm_(ds, k_j);
        dk.narrow(0, j0, m).addmm_(ds.t(), q.qw);
        auto dbd = torch::zeros({n, band.w}, opts);  // [n, w]
        if (qt.consecutive) {
          Shifted(dbd, qt, band, m).copy_(ds);
        } else {
          dbd.scatter_(1, band.index, ds);
        }
        dqr.addmm_(dbd, hs.kr.narrow(0, band.c_lo, band.w));
        dkr_bh.narrow(0, band.c_lo, band.w).addmm_(dbd.t(), q.qr);
        if (st.has_seg) {
          auto diff = hs.diff.narrow(0, i0, n).narrow(1, j0, m);
          dseg_same.add_(ds.sum(1, true));
          dseg_delta.add_((ds * diff.to(ds.scalar_type())).sum(1, true));
        }
      }
      gr.qw[b][h].narrow(0, i0, n).copy_(dqw.mul_(st.scale));
      gr.qr[b][h].narrow(0, i0, n).copy_(dqr.mul_(st.scale));
      if (st.has_seg) {
        auto dseg = gr.seg[b][h].narrow(0, i0, n);  // [n, 2]
        dseg.narrow(1, 0, 1).copy_((dseg_same - dseg_delta).mul_(st.scale));
        dseg.narrow(1, 1, 1).copy_(dseg_delta.mul_(st.scale));
      }
    }
    gr.k[b][h].copy_(dk);
    gr.v[b][h].copy_(dv);
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
    const Inputs in = ToAccumulation(inputs[0], inputs[1], inputs[2], inputs[3],
                                     inputs[4], seg, state->bias, acc);
    torch::Tensor out_acc, lse;
    TiledForward(in, *state, g, &out_acc, &lse);
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
    const Inputs in = ToAccumulation(saved[0], saved[1], saved[2], saved[3],
                                     saved[4], seg, state->bias, acc);
    const Grads gr = TiledBackward(in, *state, g, saved[n_in], saved[n_in + 1],
                                   grad_outputs[0].to(acc));
    const torch::Tensor* grads[] = {&gr.qw, &gr.qr, &gr.k,
                                    &gr.v,  &gr.kr, &gr.seg};
    for (size_t i = 0; i < n_in; ++i) {
      result[1 + i] = grads[i]->to(saved[i].scalar_type());
    }
    return result;
  }
};

}  // namespace

torch::Tensor FusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles) {
  TORCH_CHECK(dropout.p >= 0 && dropout.p < 1,
              "fused attention: dropout must be in [0, 1), got ", dropout.p);
  TORCH_CHECK(tiles.query >= 1 && tiles.key >= 0,
              "fused attention: tiles must be query >= 1, key >= 0, got ",
              tiles.query, ", ", tiles.key);
  if (qw.is_cuda()) {
#ifdef XLNET_CUDA_ATTENTION
    return CudaFusedRelativeAttention(qw, qr, k, v, k_r, seg, bias, qlen, scale,
                                      dropout);
#else
    TORCH_CHECK(false,
                "fused attention on CUDA tensors needs the kernel: build with "
                "-DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON");
#endif
  }
  TORCH_CHECK(qw.device().is_cpu(),
              "fused attention: the tiled path runs on CPU tensors, got ",
              qw.device());
  TORCH_CHECK(at::isFloatingType(qw.scalar_type()),
              "fused attention: floating inputs expected, got ",
              qw.scalar_type());
  auto state = c10::make_intrusive<FusedState>();
  state->bias = bias;
  state->qlen = qlen;
  state->scale = scale;
  state->dropout = dropout;
  state->tiles = tiles;
  state->has_seg = seg.defined();
  std::vector<torch::Tensor> inputs = {qw, qr, k, v, k_r};
  if (seg.defined()) inputs.push_back(seg);
  return TiledAttentionFunction::apply(state, at::TensorList(inputs))[0];
}

torch::Tensor FusedRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training, const AttentionOptions& options) {
  TORCH_CHECK(options.impl != AttentionImpl::kUnfused,
              "FusedRelativeAttentionCore: impl 'unfused' is "
              "RelativeAttentionCore");
  if (options.impl == AttentionImpl::kCuda) {
    TORCH_CHECK(CudaAttentionCompiled(),
                "attention 'cuda' needs a build with -DXLNET_WITH_CUDA=ON "
                "-DXLNET_CUDA_ATTENTION=ON (this build has no CUDA kernel)");
    TORCH_CHECK(q.is_cuda(), "attention 'cuda' needs CUDA tensors, got ",
                q.device(), " (use 'tiled' or 'unfused' on the CPU)");
  } else {
    TORCH_CHECK(!q.is_cuda(),
                "attention 'tiled' is the CPU implementation; CUDA tensors "
                "need 'cuda' or 'unfused'");
  }
  const int64_t h = q.size(1), dh = q.size(3);
  // One dtype for the op: the compute dtype of k (bf16/fp16 under autocast),
  // as the unfused path's autocast matmuls see q + bias.
  const auto dtype = k.scalar_type();
  const auto hd = [&](const torch::Tensor& t) {
    return t.view({1, h, 1, dh});  // [1, H, 1, Dh]
  };
  auto qw = (q + hd(r_w_bias)).to(dtype);  // [B, H, Lq, Dh]
  auto qr = (q + hd(r_r_bias)).to(dtype);  // [B, H, Lq, Dh]
  torch::Tensor seg;
  if (bias.seg_diff.defined()) {
    // [B, H, Lq, Dh] x [H, Dh, 2] -> [B, H, Lq, 2]
    seg =
        torch::matmul(q + hd(r_s_bias), seg_embed.permute({1, 2, 0})).to(dtype);
  }
  AttentionDropout drop;
  if (training && dropout > 0) {
    drop.p = dropout;
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    drop.seed = gen.get<at::CPUGeneratorImpl>()->random64();
  }
  return FusedRelativeAttention(qw, qr, k, v.to(dtype), k_r.to(dtype), seg,
                                bias, qlen, 1.0 / std::sqrt(double(dh)), drop,
                                options.tiles);
}

torch::Tensor AttentionDropoutKeepMask(int64_t b, int64_t h, int64_t lq,
                                       int64_t k, const AttentionDropout& d) {
  auto scale = torch::empty({b, h, lq, k}, torch::kDouble);
  auto* data = scale.data_ptr<double>();
  for (int64_t bh = 0; bh < b * h; ++bh) {
    FillDropoutScale<double>(data + bh * lq * k, d, bh, 0, lq, 0, k);
  }
  return scale > 0;
}

}  // namespace xlnet
