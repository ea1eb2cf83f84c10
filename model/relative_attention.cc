#include "model/relative_attention.h"

#include <cmath>

#include "model/counter_dropout.h"
#include "model/fused_elementwise.h"

namespace xlnet {

torch::Tensor RelShift(const torch::Tensor& x, int64_t klen) {
  TORCH_CHECK(x.dim() == 4, "RelShift expects [B, H, Lq, R], got ", x.sizes());
  const int64_t b = x.size(0), h = x.size(1), lq = x.size(2), r = x.size(3);
  TORCH_CHECK(klen <= r - 1, "RelShift: klen ", klen, " needs R > klen, R=", r);
  auto y = x.reshape({b, h, r, lq});  // [B, H, R, Lq]
  y = y.narrow(2, 1, r - 1);          // [B, H, R-1, Lq]
  y = y.reshape({b, h, lq, r - 1});   // [B, H, Lq, R-1]
  return y.narrow(3, 0, klen);        // [B, H, Lq, K]
}

torch::Tensor RelShiftAt(const torch::Tensor& x, const torch::Tensor& query_pos,
                         int64_t qlen, int64_t klen) {
  TORCH_CHECK(x.dim() == 4, "RelShiftAt expects [B, H, P, R], got ", x.sizes());
  TORCH_CHECK(query_pos.dim() == 2 && query_pos.size(0) == x.size(0) &&
                  query_pos.size(1) == x.size(2),
              "RelShiftAt: query_pos ", query_pos.sizes(), " vs x ", x.sizes());
  TORCH_CHECK(x.size(3) >= klen + qlen, "RelShiftAt: R ", x.size(3),
              " < klen + qlen ", klen + qlen);
  const int64_t b = x.size(0), h = x.size(1), p = x.size(2);
  auto j = torch::arange(klen, query_pos.options());  // [K]
  // index[b, p, j] = j + qlen - pos[b, p], in [1, klen + qlen - 1].
  auto index =
      (j.view({1, 1, klen}) + qlen - query_pos.unsqueeze(2));  // [B, P, K]
  index = index.unsqueeze(1).expand({b, h, p, klen});          // [B, H, P, K]
  return x.gather(3, index);                                   // [B, H, P, K]
}

torch::Tensor RelativePositionalEncoding(int64_t qlen, int64_t klen,
                                         int64_t d_model, int64_t clamp_len,
                                         bool bi_data, torch::Device device) {
  auto fopts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto freq_seq = torch::arange(0, d_model, 2, fopts);            // [D/2]
  auto inv_freq = 1.0 / torch::pow(10000.0, freq_seq / d_model);  // [D/2]
  // Positions klen, klen-1, ..., -qlen+1 (R = klen + qlen values).
  auto fwd = torch::arange(klen, -qlen, -1, fopts);  // [R]
  auto make = [&](torch::Tensor pos) {
    if (clamp_len > 0) pos = pos.clamp(-clamp_len, clamp_len);
    auto inp = pos.unsqueeze(1) * inv_freq.unsqueeze(0);  // [R, D/2]
    return torch::cat({inp.sin(), inp.cos()}, 1);         // [R, D]
  };
  if (!bi_data) return make(fwd).unsqueeze(0);      // [1, R, D]
  return torch::stack({make(fwd), make(-fwd)}, 0);  // [2, R, D]
}

double MaskedScoreValue(torch::ScalarType dtype) {
  // fp16 overflows beyond 65504; everything else (fp32, bf16, fp64) holds
  // -1e30. Scores are masked in fp32 here, but keep the helper honest.
  return dtype == torch::kHalf ? -65000.0 : -1e30;
}

torch::Tensor AddHeadBias(const torch::Tensor& q, const torch::Tensor& bias) {
  const int64_t h = q.size(1), dh = q.size(3);
  return q + bias.to(q.scalar_type()).view({1, h, 1, dh});  // [B, H, Lq, Dh]
}

torch::Tensor SegmentScores(const torch::Tensor& q,
                            const torch::Tensor& r_s_bias,
                            const torch::Tensor& seg_embed) {
  // [B, H, Lq, Dh] x [H, Dh, 2] -> [B, H, Lq, 2]
  return torch::matmul(AddHeadBias(q, r_s_bias),
                       seg_embed.to(q.scalar_type()).permute({1, 2, 0}));
}

torch::Tensor PositionsPerSample(const torch::Tensor& k_r, int64_t b) {
  const int64_t g = k_r.size(0);
  TORCH_CHECK(k_r.dim() == 4 && g > 0 && b % g == 0, "attention: k_r ",
              k_r.sizes(), " for a batch of ", b,
              " (groups of consecutive samples must divide it)");
  if (g == 1 || g == b) return k_r;
  return k_r.unsqueeze(1)
      .expand({g, b / g, k_r.size(1), k_r.size(2), k_r.size(3)})
      .reshape({b, k_r.size(1), k_r.size(2), k_r.size(3)});  // [B, H, R, Dh]
}

void CheckAttentionCoreShapes(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v,
                              const torch::Tensor& k_r) {
  TORCH_CHECK(q.dim() == 4, "attention: q must be [B, H, Lq, Dh], got ",
              q.sizes());
  const int64_t b = q.size(0), h = q.size(1), dh = q.size(3);
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == b && k.size(1) == h &&
                  k.size(3) == dh,
              "attention: q ", q.sizes(), " k ", k.sizes(), " v ", v.sizes());
  TORCH_CHECK(k_r.dim() == 4 && k_r.size(0) > 0 && b % k_r.size(0) == 0 &&
                  k_r.size(1) == h && k_r.size(3) == dh,
              "attention: k_r ", k_r.sizes(), " for q ", q.sizes());
}

torch::Tensor RelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r_groups, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training) {
  CheckAttentionCoreShapes(q, k, v, k_r_groups);
  const auto k_r =
      PositionsPerSample(k_r_groups, q.size(0));  // [B|1, H, R, Dh]
  const int64_t dh = q.size(3);
  const int64_t klen = k.size(2);
  // Content term: [B, H, Lq, Dh] x [B, H, Dh, K] -> [B, H, Lq, K].
  auto ac = torch::matmul(AddHeadBias(q, r_w_bias), k.transpose(2, 3));
  // Position term: [B, H, Lq, Dh] x [Bp, H, Dh, R] -> [B, H, Lq, R].
  auto bd = torch::matmul(AddHeadBias(q, r_r_bias), k_r.transpose(2, 3));
  bd = bias.query_pos.defined() ? RelShiftAt(bd, bias.query_pos, qlen, klen)
                                : RelShift(bd, klen);  // [B, H, Lq, K]
  // The score is built in place on ac's fresh buffer: none of add_, mul_ and
  // masked_fill_ needs its input for backward, so autograd stays exact and
  // three [B, H, Lq, K] temporaries are saved.
  auto score = ac;
  score.add_(bd);
  if (bias.seg_diff.defined()) {
    auto e = SegmentScores(q, r_s_bias, seg_embed);           // [B, H, Lq, 2]
    auto e_same = e.narrow(3, 0, 1);                          // [B, H, Lq, 1]
    auto e_diff = e.narrow(3, 1, 1);                          // [B, H, Lq, 1]
    score.add_(torch::where(bias.seg_diff, e_diff, e_same));  // [B, H, Lq, K]
  }
  // Normalise in fp32 (fp64 stays fp64) whatever the compute dtype, so bf16
  // and fp16 never overflow or lose the softmax.
  const auto acc =
      score.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  if (score.scalar_type() != acc) score = score.to(acc);
  score.mul_(1.0 / std::sqrt(static_cast<double>(dh)));
  if (bias.mask.defined()) {
    score.masked_fill_(bias.mask, MaskedScoreValue(acc));
  }
  auto prob = torch::softmax(score, 3);  // [B, H, Lq, K]
  prob = torch::dropout(prob, dropout, training);
  auto out = torch::matmul(prob.to(v.scalar_type()), v);  // [B, H, Lq, Dh]
  if (bias.mask.defined()) {
    // A query that may see no key at all attends to nothing (zero output)
    // instead of HF's uniform average over masked keys, which would leak
    // padding and, with attn_type "uni", future tokens.
    auto none_visible = bias.mask.all(3, /*keepdim=*/true);  // [B|1, 1, Lq, 1]
    out = out.masked_fill(none_visible, 0.0);
  }
  return out;
}

RelativeAttentionImpl::RelativeAttentionImpl(const XLNetConfig& config)
    : n_head(config.n_head),
      d_head(config.d_head),
      d_model(config.d_model),
      dropout(config.dropout) {
  const int64_t d = d_model, h = n_head, dh = d_head;
  q = register_parameter("q", torch::empty({d, h, dh}));
  k = register_parameter("k", torch::empty({d, h, dh}));
  v = register_parameter("v", torch::empty({d, h, dh}));
  o = register_parameter("o", torch::empty({d, h, dh}));
  r = register_parameter("r", torch::empty({d, h, dh}));
  r_r_bias = register_parameter("r_r_bias", torch::empty({h, dh}));
  r_s_bias = register_parameter("r_s_bias", torch::empty({h, dh}));
  r_w_bias = register_parameter("r_w_bias", torch::empty({h, dh}));
  seg_embed = register_parameter("seg_embed", torch::empty({2, h, dh}));
  layer_norm = register_module(
      "layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(
                        config.layer_norm_eps)));
  ResetParameters(config.initializer_range);
}

void RelativeAttentionImpl::ResetParameters(double initializer_range) {
  torch::NoGradGuard no_grad;
  for (auto* t :
       {&q, &k, &v, &o, &r, &r_r_bias, &r_s_bias, &r_w_bias, &seg_embed}) {
    t->normal_(0.0, initializer_range);
  }
  layer_norm->weight.fill_(1.0);
  layer_norm->bias.zero_();
}

torch::Tensor RelativeAttentionImpl::Project(const torch::Tensor& x,
                                             const torch::Tensor& w) const {
  const int64_t b = x.size(0), t = x.size(1);
  auto y =
      torch::matmul(x, w.view({d_model, n_head * d_head}));  // [B, T, H*Dh]
  return y.view({b, t, n_head, d_head}).transpose(1, 2);     // [B, H, T, Dh]
}

std::pair<torch::Tensor, torch::Tensor>
RelativeAttentionImpl::ProjectKeysValues(const torch::Tensor& x) const {
  const int64_t b = x.size(0), t = x.size(1), hdh = n_head * d_head;
  // Cast before the concatenation: under autocast x is already in the compute
  // dtype and the matmul would cast the [D, 2 * H * Dh] weight to it anyway.
  const auto dtype = x.scalar_type();
  auto w = torch::cat(
      {k.view({d_model, hdh}).to(dtype), v.view({d_model, hdh}).to(dtype)},
      1);                        // [D, 2 * H * Dh]
  auto y = torch::matmul(x, w);  // [B, K, 2 * H * Dh]
  // chunk (not select) so backward is one concatenation of the two
  // gradients rather than two zero-filled [B, K, 2 * H * Dh] buffers.
  auto kv = y.chunk(2, 2);  // 2 x [B, K, H * Dh]
  const auto heads = [&](const torch::Tensor& z) {
    return z.view({b, t, n_head, d_head}).transpose(1, 2);  // [B, H, K, Dh]
  };
  return {heads(kv[0]), heads(kv[1])};
}

torch::Tensor RelativeAttentionImpl::ProjectPositions(
    const torch::Tensor& pos_emb) const {
  const int64_t bp = pos_emb.size(0), rl = pos_emb.size(1);
  auto y = torch::matmul(pos_emb.to(r.scalar_type()),
                         r.view({d_model, n_head * d_head}));  // [Bp, R, H*Dh]
  return y.view({bp, rl, n_head, d_head}).transpose(1, 2);     // [Bp, H, R, Dh]
}

namespace {

// attn_vec [B, H, T, Dh] . o^T -> [B, T, D].
torch::Tensor OutputProjection(const torch::Tensor& attn_vec,
                               const torch::Tensor& o, int64_t d_model) {
  const int64_t b = attn_vec.size(0), h = attn_vec.size(1),
                t = attn_vec.size(2), dh = attn_vec.size(3);
  auto flat = attn_vec.transpose(1, 2).reshape({b, t, h * dh});  // [B, T, H*Dh]
  return torch::matmul(flat, o.view({d_model, h * dh}).t());
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor>
RelativeAttentionImpl::PostAttentionWithCopy(const torch::Tensor& x,
                                             const torch::Tensor& attn_vec) {
  TORCH_CHECK(fused_elementwise,
              "PostAttentionWithCopy needs the fused element-wise ops");
  return DropoutResidualLayerNormWithCopy(
      OutputProjection(attn_vec, o, d_model), x, layer_norm->weight,
      layer_norm->bias, layer_norm->options.eps(),
      DrawElementwiseDropout(dropout, is_training()));  // [B, T, D] each
}

torch::Tensor RelativeAttentionImpl::PostAttention(
    const torch::Tensor& x, const torch::Tensor& attn_vec) {
  auto out = OutputProjection(attn_vec, o, d_model);  // [B, T, D]
  if (fused_elementwise) {
    return DropoutResidualLayerNorm(
        out, x, layer_norm->weight, layer_norm->bias, layer_norm->options.eps(),
        DrawElementwiseDropout(dropout, is_training()));  // [B, T, D]
  }
  out = BackboneDropout(out, dropout, is_training(),
                        counter_dropout);  // [B, T, D]
  return layer_norm(out + x);
}

}  // namespace xlnet
