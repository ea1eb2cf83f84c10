#include "model/xlnet.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "model/activation_checkpoint.h"
#include "model/attention.h"
#include "model/counter_dropout.h"
#include "model/fused_elementwise.h"
#include "model/precision.h"
#include "model/weight_casts.h"

namespace xlnet {

// ---------------------------------------------------------------- feed-forward

FeedForwardImpl::FeedForwardImpl(const XLNetConfig& config)
    : activation(config.ff_activation), dropout(config.dropout) {
  TORCH_CHECK(
      activation == "gelu" || activation == "gelu_new" || activation == "relu",
      "unsupported ff_activation '", activation, "'");
  layer_1 = register_module("layer_1",
                            torch::nn::Linear(config.d_model, config.d_inner));
  layer_2 = register_module("layer_2",
                            torch::nn::Linear(config.d_inner, config.d_model));
  layer_norm = register_module(
      "layer_norm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})
                               .eps(config.layer_norm_eps)));
  ResetParameters(config.initializer_range);
}

void FeedForwardImpl::ResetParameters(double initializer_range) {
  torch::NoGradGuard no_grad;
  layer_1->weight.normal_(0.0, initializer_range);
  layer_1->bias.zero_();
  layer_2->weight.normal_(0.0, initializer_range);
  layer_2->bias.zero_();
  layer_norm->weight.fill_(1.0);
  layer_norm->bias.zero_();
}

std::pair<torch::Tensor, torch::Tensor> FeedForwardImpl::ForwardWithCopy(
    const torch::Tensor& x, const torch::Tensor& x_low, bool copy) {
  TORCH_CHECK(fused_elementwise,
              "FeedForward::ForwardWithCopy needs the fused element-wise ops");
  // layer_1 without its bias: the fused op adds it with the activation and
  // dropout in one pass; layer_2's dropout, the residual and the LayerNorm
  // are the second.
  auto y = torch::linear(x_low.defined() ? x_low : x,
                         layer_1->weight);  // [B, T, Di]
  y = BiasActivationDropout(y, layer_1->bias,
                            FusedActivationFromName(activation),
                            DrawElementwiseDropout(dropout, is_training()));
  y = layer_2(y);  // [B, T, D]
  const ElementwiseDropout drop =
      DrawElementwiseDropout(dropout, is_training());
  if (copy) {
    return DropoutResidualLayerNormWithCopy(y, x, layer_norm->weight,
                                            layer_norm->bias,
                                            layer_norm->options.eps(), drop);
  }
  return {DropoutResidualLayerNorm(y, x, layer_norm->weight, layer_norm->bias,
                                   layer_norm->options.eps(), drop),
          torch::Tensor()};
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  if (fused_elementwise) return ForwardWithCopy(x, {}, /*copy=*/false).first;
  auto y = layer_1(x);  // [B, T, Di]
  if (activation == "gelu") {
    y = torch::gelu(y);  // exact (erf)
  } else if (activation == "gelu_new") {
    y = torch::gelu(y, "tanh");  // tanh approximation
  } else {
    y = torch::relu(y);
  }
  y = BackboneDropout(y, dropout, is_training(), counter_dropout);
  y = layer_2(y);  // [B, T, D]
  y = BackboneDropout(y, dropout, is_training(), counter_dropout);
  return layer_norm(y + x);
}

XLNetLayerImpl::XLNetLayerImpl(const XLNetConfig& config) {
  rel_attn = register_module("rel_attn", RelativeAttention(config));
  ff = register_module("ff", FeedForward(config));
}

// ----------------------------------------------------------------- masks, mems

StreamMasks BuildStreamMasks(const XLNetInputs& inputs, int64_t mlen,
                             const std::string& attn_type, bool same_length) {
  const auto& ids = inputs.input_ids;
  const int64_t b = ids.size(0), l = ids.size(1), klen = mlen + l;
  const auto bool_opts = ids.options().dtype(torch::kBool);
  // HF: data_mask = input_mask[keys] + perm_mask > 0, input_mask = 1 - am.
  torch::Tensor data_blocked;  // [B, 1 or L, L] bool
  if (!inputs.attention_mask.defined() && inputs.perm_mask.defined() &&
      inputs.perm_mask.scalar_type() == torch::kBool) {
    data_blocked = inputs.perm_mask;  // already the set (a compact batch)
  } else {
    torch::Tensor data;
    if (inputs.attention_mask.defined()) {
      data = (1.0 - inputs.attention_mask.to(torch::kFloat))
                 .unsqueeze(1);  // [B, 1, L]
    }
    if (inputs.perm_mask.defined()) {
      auto perm = inputs.perm_mask.to(torch::kFloat);  // [B, L, L]
      data = data.defined() ? data + perm : perm;
    }
    if (data.defined()) data_blocked = data > 0;
  }
  torch::Tensor mem_blocked;  // [B, L, M]
  if (inputs.mems_attention_mask.defined() && mlen > 0) {
    const auto& mm = inputs.mems_attention_mask;
    TORCH_CHECK(mm.dim() == 2 && mm.size(0) == b && mm.size(1) == mlen,
                "mems_attention_mask must be [", b, ", ", mlen, "], got ",
                mm.sizes());
    mem_blocked = (mm.to(ids.device(), torch::kFloat) <= 0)
                      .unsqueeze(1)
                      .expand({b, l, mlen});  // [B, L, M]
  }
  torch::Tensor attn;  // [B or 1, L, K]
  if (data_blocked.defined() || mem_blocked.defined()) {
    auto blocked = data_blocked.defined() ? data_blocked.expand({b, l, l})
                                          : torch::zeros({b, l, l}, bool_opts);
    auto mem = mem_blocked.defined() ? mem_blocked
                                     : torch::zeros({b, l, mlen}, bool_opts);
    attn = torch::cat({mem, blocked}, 2);  // [B, L, K]
  }
  auto i = torch::arange(l, ids.options().dtype(torch::kLong)).view({l, 1});
  auto j =
      torch::arange(klen, ids.options().dtype(torch::kLong)).view({1, klen});
  if (attn_type == "uni") {
    auto causal = j > (i + mlen);  // [L, K]
    if (same_length) causal = causal | (j < i);
    causal = causal.unsqueeze(0);  // [1, L, K]
    attn = attn.defined() ? (attn | causal) : causal;
  } else {
    TORCH_CHECK(attn_type == "bi", "unknown attn_type '", attn_type, "'");
  }
  StreamMasks masks;
  if (!attn.defined()) return masks;
  masks.query = attn;
  masks.content = attn & (j != (i + mlen)).unsqueeze(0);  // [B|1, L, K]
  return masks;
}

torch::Tensor BuildSegmentDiff(const torch::Tensor& token_type_ids,
                               int64_t mlen,
                               const torch::Tensor& mems_token_type_ids) {
  if (!token_type_ids.defined()) return {};
  const int64_t b = token_type_ids.size(0);
  auto ids = token_type_ids.to(torch::kLong);  // [B, L]
  torch::Tensor mem_ids;                       // [B, M]
  if (mems_token_type_ids.defined() && mlen > 0) {
    TORCH_CHECK(mems_token_type_ids.dim() == 2 &&
                    mems_token_type_ids.size(0) == b &&
                    mems_token_type_ids.size(1) == mlen,
                "mems_token_type_ids must be [", b, ", ", mlen, "], got ",
                mems_token_type_ids.sizes());
    mem_ids = mems_token_type_ids.to(ids.device(), torch::kLong);
  } else {
    mem_ids = torch::zeros({b, mlen}, ids.options());
  }
  auto cat_ids = torch::cat({mem_ids, ids}, 1);     // [B, K]
  return ids.unsqueeze(2) != cat_ids.unsqueeze(1);  // [B, L, K]
}

namespace {

// The rows [start, end) of cat(memory of mlen rows, input of l rows) that
// the new memory keeps: the last mem_len of cat(memory, input[:reuse_len])
// (every row when mem_len is unset or 0).
std::pair<int64_t, int64_t> MemoryRows(int64_t mlen, int64_t l,
                                       const XLNetConfig& config) {
  const int64_t reuse = config.reuse_len.has_value() && *config.reuse_len > 0
                            ? std::min(*config.reuse_len, l)
                            : l;
  const int64_t end = mlen + reuse;
  const int64_t keep = config.mem_len.has_value() && *config.mem_len > 0
                           ? std::min(*config.mem_len, end)
                           : end;
  return {end - keep, end};
}

}  // namespace

torch::Tensor CacheMem(const torch::Tensor& cur, const torch::Tensor& prev,
                       const XLNetConfig& config,
                       std::optional<torch::ScalarType> dtype) {
  const torch::ScalarType type = dtype.value_or(cur.scalar_type());
  const int64_t mlen = prev.defined() ? prev.size(0) : 0;
  const auto [start, end] = MemoryRows(mlen, cur.size(0), config);
  // Only the rows kept are cast and copied. A cast writes time-major
  // [L', B, D] memory directly (cur is usually a transposed view of
  // [B, L, D]).
  const int64_t from_cur = std::max(start, mlen);
  torch::Tensor m = cur.narrow(0, from_cur - mlen, end - from_cur)
                        .to(type, /*non_blocking=*/false, /*copy=*/false,
                            c10::MemoryFormat::Contiguous);  // [L', B, D]
  if (start < mlen) {
    m = torch::cat({prev.narrow(0, start, mlen - start).to(type), m},
                   0);  // [end - start, B, D]
  }
  return m.detach().contiguous();
}

// ------------------------------------------------------------------- backbone

namespace {

// Everything a layer reads besides its weights, memory and streams; the same
// for every layer of one forward.
struct LayerContext {
  torch::Tensor pos_emb;     // [Bp, R, D]
  AttentionBias content_bias, query_bias;
  torch::Tensor target_mapping;  // [B, P, L]
  torch::Tensor target_valid;    // [B, 1, P, 1]
  int64_t qlen = 0;
  double dropout = 0;
  bool training = false;
  bool query_all_positions = false;
  AttentionOptions attention;
  // The layer's weight copies in the compute dtype (a copy per stream
  // where both streams read a weight) while RunLayer runs, or null: not
  // under activation checkpointing, whose replay runs after forward
  // returns.
  WeightCasts* casts = nullptr;
  // The layer's LayerNorms write their copies in the compute dtype
  // (XLNetModel::SetLayerNormCopies): the attention outputs' for the
  // feed-forward and, with `copy_outputs`, the layer outputs' for the next
  // layer.
  bool layer_norm_copies = false;
  bool copy_outputs = false;
};

// The streams between layers: fp32 h [B, L, D] and g [B, P, D] (undefined
// with one stream) and, where a LayerNorm wrote them
// (LayerContext::layer_norm_copies), their copies in the compute dtype
// (else undefined).
struct LayerStreams {
  torch::Tensor h, g, h_low, g_low;
};

// The dtype the matmuls of a layer on x run in: under autocast for x's
// device (CPU or CUDA) its lower-precision dtype when x is fp32 (the cast
// autocast itself would apply to x before each matmul; it leaves other
// dtypes alone), otherwise x's dtype. Read from the thread's autocast state
// rather than passed down, so every caller (pretraining, fine-tuning,
// xlnet-run, activation checkpointing's replay under the forward's state)
// gets exactly the dtype autocast would use.
torch::ScalarType ComputeDtype(const torch::Tensor& x) {
  if (x.scalar_type() != torch::kFloat) return x.scalar_type();
  return AutocastDtypeOf(x.device()).value_or(torch::kFloat);
}

// One layer on both streams: `in` -> the layer's outputs (g with g). `mem`
// [M, B, D] or undefined, any float dtype.
//
// Under autocast the streams stay fp32 (LayerNorm output) for the residual
// sums, and each is cast to the compute dtype once here for its projections
// unless the previous layer's LayerNorm wrote that copy (in.h_low,
// in.g_low); memory joins the content stream in the compute dtype, so the
// [B, K, D] keys/values input is written once, in bf16/fp16, and read by
// one product. Where `keys_values` is given it receives that input
// (cat(memory, content stream) batch-major, in the compute dtype), from
// which the new memory is a view (MemoryFromKeysValues).
LayerStreams RunLayer(XLNetLayerImpl& lay, const LayerContext& c,
                      const torch::Tensor& mem, const LayerStreams& in,
                      torch::Tensor* keys_values = nullptr) {
  auto& attn = lay.rel_attn;
  const torch::Tensor& h_in = in.h;
  const torch::ScalarType dtype = ComputeDtype(h_in);
  const torch::Tensor h_low =
      in.h_low.defined() ? in.h_low : h_in.to(dtype);  // [B, L, D]
  auto cat = mem.defined()
                 ? torch::cat({mem.transpose(0, 1).to(dtype), h_low}, 1)
                 : h_low;                                  // [B, K, D]
  if (keys_values) *keys_values = cat;
  auto [k_head, v_head] = attn->ProjectKeysValues(cat);    // [B, H, K, Dh] each
  // [Bp, H, R, Dh]: with bi_data, rows [0, B/2) of the batch take the
  // forward positions and [B/2, B) the backward ones (PositionsForCore).
  const auto k_r =
      PositionsForCore(c.attention.impl, attn->ProjectPositions(c.pos_emb),
                       k_head.scalar_type(), h_in.size(0));

  // The attention core for queries q [B, H, Lq, Dh] -> [B, H, Lq, Dh].
  auto core = [&](const torch::Tensor& q, const AttentionBias& bias) {
    return AttentionCore(c.attention, q, k_head, v_head, k_r, attn->r_w_bias,
                         attn->r_r_bias, attn->r_s_bias, attn->seg_embed, bias,
                         c.qlen, c.dropout, c.training);
  };
  // The attention output of a stream with input x [B, T, D] and attention
  // vectors vec -> {its LayerNorm's output, the output's copy or undefined}.
  auto post =
      [&](const torch::Tensor& x,
          const torch::Tensor& vec) -> std::pair<torch::Tensor, torch::Tensor> {
    if (!c.layer_norm_copies) return {attn->PostAttention(x, vec), {}};
    return attn->PostAttentionWithCopy(x, vec);  // [B, T, D] each
  };
  // The feed-forward on an attention output -> the layer's output and,
  // with c.copy_outputs, its copy.
  auto ff = [&](const std::pair<torch::Tensor, torch::Tensor>& a)
      -> std::pair<torch::Tensor, torch::Tensor> {
    if (!c.layer_norm_copies) return {lay.ff(a.first), {}};
    return lay.ff->ForwardWithCopy(a.first, a.second, c.copy_outputs);
  };
  LayerStreams out;
  if (c.casts) c.casts->UseStream(0);
  auto q_h = attn->Project(h_low, attn->q);  // [B, H, L, Dh]
  auto vec_h = core(q_h, c.content_bias);    // [B, H, L, Dh]
  const auto post_h = post(h_in, vec_h);     // [B, L, D]
  if (in.g.defined()) {
    const torch::Tensor& g_in = in.g;
    if (c.casts) c.casts->UseStream(1);
    auto q_g = attn->Project(
        in.g_low.defined() ? in.g_low : g_in.to(ComputeDtype(g_in)),
        attn->q);  // [B, H, P, Dh]
    torch::Tensor vec_g;
    if (c.query_all_positions) {
      auto tmq =
          c.target_mapping.to(q_g.scalar_type()).unsqueeze(1);  // [B, 1, P, L]
      auto q_all = torch::matmul(tmq.transpose(2, 3), q_g);     // [B, H, L, Dh]
      auto vec_all = core(q_all, c.query_bias);                 // [B, H, L, Dh]
      vec_g = torch::matmul(tmq.to(vec_all.scalar_type()),
                            vec_all);  // [B, H, P, Dh]
    } else {
      vec_g = core(q_g, c.query_bias);  // [B, H, P, Dh]
      // A padding target (all-zero row) gets no attention output, as HF.
      vec_g = vec_g * c.target_valid.to(vec_g.scalar_type());
    }
    std::tie(out.g, out.g_low) = ff(post(g_in, vec_g));  // [B, P, D]
    if (c.casts) c.casts->UseStream(0);
  }
  std::tie(out.h, out.h_low) = ff(post_h);  // [B, L, D]
  return out;
}

// CacheMem's rows without a copy: `keys_values` [B, M + L, D] is RunLayer's
// cat(memory of M rows, the layer's input), in which the rows CacheMem
// keeps, the last mem_len of cat(memory, input[:reuse_len]), are one
// contiguous range. A detached time-major view [M', B, D] of it: the
// memory keeps the whole tensor alive (its L - reuse_len rows too) until
// it is replaced.
torch::Tensor MemoryFromKeysValues(const torch::Tensor& keys_values,
                                   int64_t mlen, const XLNetConfig& config) {
  const auto [start, end] =
      MemoryRows(mlen, keys_values.size(1) - mlen, config);
  return keys_values.detach()
      .narrow(1, start, end - start)  // [B, M', D]
      .transpose(0, 1);               // [M', B, D]
}

// What new_mems keep: the config's mem_len/reuse_len, or the whole input
// and the last cache_mem_len rows.
XLNetConfig MemCacheConfig(const XLNetConfig& config,
                           const XLNetForwardOptions& options) {
  XLNetConfig cache_config;
  cache_config.mem_len = config.mem_len;
  cache_config.reuse_len = config.reuse_len;
  if (options.cache_mem_len) {
    cache_config.mem_len = *options.cache_mem_len;
    cache_config.reuse_len.reset();
  }
  return cache_config;
}

// The query stream's mask and segment relations. With
// `query_all_positions` every position is a query row (L x K, the content
// stream's relations); otherwise the P target rows of `tm` [B, P, L] are
// gathered (P x K) and `target_valid` [B, 1, P, 1] marks the rows that
// map a target (padding rows of target_mapping are all zero).
AttentionBias QueryStreamBias(const torch::Tensor& tm,
                              const StreamMasks& masks,
                              const AttentionBias& content_bias,
                              const torch::Tensor& seg_diff, int64_t klen,
                              bool query_all_positions,
                              torch::Tensor* target_valid) {
  AttentionBias query_bias;
  if (query_all_positions) {
    if (masks.query.defined())
      query_bias.mask = masks.query.unsqueeze(1);  // [B|1, 1, L, K]
    query_bias.seg_diff = content_bias.seg_diff;
    return query_bias;
  }
  const int64_t b = tm.size(0), p = tm.size(1), l = tm.size(2);
  auto pos = tm.argmax(2);                             // [B, P]
  *target_valid = (tm.sum(2) > 0).view({b, 1, p, 1});  // [B, 1, P, 1]
  auto rows = pos.unsqueeze(2).expand({b, p, klen});   // [B, P, K]
  if (masks.query.defined()) {
    query_bias.mask = masks.query.expand({b, l, klen})
                          .gather(1, rows)
                          .unsqueeze(1);  // [B, 1, P, K]
  }
  if (seg_diff.defined()) {
    query_bias.seg_diff = seg_diff.gather(1, rows).unsqueeze(1);  // [B, 1, P, K]
  }
  query_bias.query_pos = pos;
  return query_bias;
}

}  // namespace

XLNetModelImpl::XLNetModelImpl(const XLNetConfig& config) : config_(config) {
  TORCH_CHECK(config.d_model == config.n_head * config.d_head, "d_model ",
              config.d_model, " != n_head ", config.n_head, " * d_head ",
              config.d_head);
  word_embedding =
      register_module("word_embedding",
                      torch::nn::Embedding(config.vocab_size, config.d_model));
  mask_emb =
      register_parameter("mask_emb", torch::empty({1, 1, config.d_model}));
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t n = 0; n < config.n_layer; ++n) {
    layer->push_back(XLNetLayer(config));
  }
  ResetParameters();
}

void XLNetModelImpl::ResetParameters() {
  torch::NoGradGuard no_grad;
  const double std = config_.initializer_range;
  word_embedding->weight.normal_(0.0, std);
  mask_emb.normal_(0.0, std);
  for (size_t n = 0; n < layer->size(); ++n) {
    auto l = layer->ptr<XLNetLayerImpl>(n);
    l->rel_attn->ResetParameters(std);
    l->ff->ResetParameters(std);
  }
  if (!config_.untie_r && layer->size() > 1) {
    // untie_r=false: one set of r_*_bias for all layers in the official model.
    // Like HF we keep per-layer tensors (same names, HF-loadable) and start
    // them identical, as HF's converter does for such checkpoints.
    auto first = layer->ptr<XLNetLayerImpl>(0)->rel_attn;
    for (size_t n = 1; n < layer->size(); ++n) {
      auto a = layer->ptr<XLNetLayerImpl>(n)->rel_attn;
      a->r_w_bias.copy_(first->r_w_bias);
      a->r_r_bias.copy_(first->r_r_bias);
      a->r_s_bias.copy_(first->r_s_bias);
    }
  }
}

void XLNetModelImpl::SetFusedElementwise(bool on) {
  fused_elementwise_ = on;
  for (size_t n = 0; n < layer->size(); ++n) {
    auto l = layer->ptr<XLNetLayerImpl>(n);
    l->rel_attn->fused_elementwise = on;
    l->ff->fused_elementwise = on;
  }
}

void XLNetModelImpl::SetAttention(const AttentionOptions& options) {
  attention_ = options;
  for (size_t n = 0; n < layer->size(); ++n) {
    auto l = layer->ptr<XLNetLayerImpl>(n);
    l->rel_attn->counter_dropout = options.impl == AttentionImpl::kTiled;
    l->ff->counter_dropout = options.impl == AttentionImpl::kTiled;
  }
}

XLNetOutputs XLNetModelImpl::forward(const XLNetInputs& inputs,
                                     const XLNetForwardOptions& options) {
  const auto& ids = inputs.input_ids;
  TORCH_CHECK(ids.defined() && ids.dim() == 2, "input_ids must be [B, L]");
  const int64_t b = ids.size(0), l = ids.size(1);
  const int64_t d = config_.d_model, n_layer = config_.n_layer;
  const bool has_mems = !inputs.mems.empty();
  TORCH_CHECK(!has_mems || static_cast<int64_t>(inputs.mems.size()) == n_layer,
              "expected ", n_layer, " mems, got ", inputs.mems.size());
  const int64_t mlen = has_mems ? inputs.mems[0].size(0) : 0;
  const int64_t klen = mlen + l;
  for (const auto& m : inputs.mems) {
    TORCH_CHECK(
        m.dim() == 3 && m.size(0) == mlen && m.size(1) == b && m.size(2) == d,
        "mems must be [", mlen, ", ", b, ", ", d, "], got ", m.sizes());
  }
  const bool two_stream = inputs.target_mapping.defined();
  const bool training = is_training();
  const double p_drop = config_.dropout;

  // Masks and segment relations shared by all layers.
  const StreamMasks masks =
      BuildStreamMasks(inputs, mlen, config_.attn_type, config_.same_length);
  const torch::Tensor seg_diff =
      BuildSegmentDiff(inputs.token_type_ids, mlen, inputs.mems_token_type_ids);
  AttentionBias content_bias;
  if (masks.content.defined())
    content_bias.mask = masks.content.unsqueeze(1);  // [B|1, 1, L, K]
  if (seg_diff.defined())
    content_bias.seg_diff = seg_diff.unsqueeze(1);  // [B, 1, L, K]

  AttentionBias query_bias;  // P x K (default) or L x K (query_all_positions)
  torch::Tensor tm, target_valid;
  int64_t p = 0;
  if (two_stream) {
    // A compact batch's bool mapping as the float the products use.
    tm = inputs.target_mapping.is_floating_point()
             ? inputs.target_mapping
             : inputs.target_mapping.to(torch::kFloat);
    TORCH_CHECK(tm.dim() == 3 && tm.size(0) == b && tm.size(2) == l,
                "target_mapping must be [", b, ", P, ", l, "], got ",
                tm.sizes());
    p = tm.size(1);
    query_bias = QueryStreamBias(tm, masks, content_bias, seg_diff, klen,
                                 options.query_all_positions, &target_valid);
  }

  const bool counter = attention_.impl == AttentionImpl::kTiled;
  const auto drop = [&](const torch::Tensor& x) {
    return BackboneDropout(x, p_drop, training, counter);
  };
  auto h = drop(word_embedding(ids));  // [B, L, D]
  torch::Tensor g;
  if (two_stream) {
    g = drop(mask_emb.expand({b, p, d}));  // [B, P, D]
  }
  auto pos_emb =
      RelativePositionalEncoding(l, klen, d, config_.clamp_len, config_.bi_data,
                                 ids.device());  // [Bp, R, D]
  pos_emb = drop(pos_emb);
  if (config_.bi_data) {
    TORCH_CHECK(b % 2 == 0, "bi_data needs an even batch size, got ", b);
  }

  // Once for all layers, where the attention core reads masks as bits.
  PackAttentionBias(attention_.impl, &content_bias);
  if (two_stream) PackAttentionBias(attention_.impl, &query_bias);
  auto context = std::make_shared<LayerContext>();
  context->pos_emb = pos_emb;
  context->content_bias = content_bias;
  context->query_bias = query_bias;
  context->target_mapping = tm;
  context->target_valid = target_valid;
  context->qlen = l;
  context->dropout = p_drop;
  context->training = training;
  context->query_all_positions = options.query_all_positions;
  context->attention = attention_;
  context->attention.fused_query_biases = fused_elementwise_;

  const XLNetConfig cache_config = MemCacheConfig(config_, options);
  const bool checkpoint =
      activation_checkpointing_ && torch::GradMode::is_enabled();
  // The replay of a checkpointed layer takes and returns fp32 streams only.
  context->layer_norm_copies =
      layer_norm_copies_ && fused_elementwise_ && !checkpoint &&
      ComputeDtype(h) != h.scalar_type() && h.scalar_type() == torch::kFloat &&
      LayerNormCopyAvailable(h.device());
  XLNetOutputs out;
  LayerStreams streams;
  streams.h = h;
  if (two_stream) streams.g = g;
  for (int64_t n = 0; n < n_layer; ++n) {
    auto lay = layer->ptr<XLNetLayerImpl>(n);
    torch::Tensor mem;
    if (has_mems) mem = inputs.mems[n];
    // New memory in the compute dtype: memory only feeds the key/value
    // product, which would cast it there anyway (half the bytes under
    // bf16). Without activation checkpointing a view of the layer's
    // key/value input (MemoryFromKeysValues), else a copy (CacheMem; the
    // streams are then fp32 only).
    if (options.use_mems && checkpoint) {
      out.new_mems.push_back(CacheMem(streams.h.transpose(0, 1), mem,
                                      cache_config,
                                      ComputeDtype(streams.h)));  // [M', B, D]
    }
    context->copy_outputs = n + 1 < n_layer;
    // Under autocast, the weights this layer's products read cast together
    // (WeightCasts) rather than one kernel a weight and use each way: k, v
    // and r read once, the rest by each stream. Not layer_1's bias with the
    // fused tail (its op adds it in fp32), nor r_s_bias and seg_embed (their
    // product runs in fp32). A layer at a time, so that backward hands each
    // layer's gradients over as it finishes the layer (the gradient
    // reducer's buckets start while backward runs).
    std::vector<torch::Tensor*> cast_once, cast_per_stream;
    if (cast_weights_together_ && !checkpoint) {
      auto& a = *lay->rel_attn;
      auto& ff = *lay->ff;
      cast_once = {&a.k, &a.v, &a.r};
      cast_per_stream = {&a.q,
                         &a.o,
                         &a.r_w_bias,
                         &a.r_r_bias,
                         &ff.layer_1->weight,
                         &ff.layer_2->weight,
                         &ff.layer_2->bias};
      if (!ff.fused_elementwise) cast_per_stream.push_back(&ff.layer_1->bias);
    }
    WeightCasts casts(std::move(cast_once), std::move(cast_per_stream),
                      two_stream ? 2 : 1);
    context->casts = casts.active() ? &casts : nullptr;
    if (checkpoint) {
      std::vector<torch::Tensor> in = {streams.h};
      if (two_stream) in.push_back(streams.g);
      // The closure owns what it reads: backward runs after forward returns.
      const auto next = Checkpointed(
          [context, lay, mem](const std::vector<torch::Tensor>& x) {
            LayerStreams s;
            s.h = x[0];
            if (x.size() > 1) s.g = x[1];
            const LayerStreams o = RunLayer(*lay, *context, mem, s);
            if (!o.g.defined()) return std::vector<torch::Tensor>{o.h};
            return std::vector<torch::Tensor>{o.h, o.g};
          },
          in, lay->parameters());
      streams = LayerStreams();
      streams.h = next[0];
      if (two_stream) streams.g = next[1];
    } else {
      torch::Tensor keys_values;
      streams = RunLayer(*lay, *context, mem, streams,
                         options.use_mems ? &keys_values : nullptr);
      if (options.use_mems) {
        out.new_mems.push_back(MemoryFromKeysValues(
            keys_values, mem.defined() ? mem.size(0) : 0, cache_config));
      }
    }
    context->casts = nullptr;
  }
  out.last_hidden_state = drop(streams.h);
  if (two_stream) out.query_hidden_state = drop(streams.g);
  return out;
}

// -------------------------------------------------------------------- LM head

LMLossImpl::LMLossImpl(int64_t vocab_size) {
  bias = register_parameter("bias", torch::zeros({vocab_size}));
}

XLNetLMHeadModelImpl::XLNetLMHeadModelImpl(const XLNetConfig& config) {
  transformer = register_module("transformer", XLNetModel(config));
  lm_loss = register_module("lm_loss", LMLoss(config.vocab_size));
}

void XLNetLMHeadModelImpl::ResetParameters() {
  transformer->ResetParameters();
  torch::NoGradGuard no_grad;
  lm_loss->bias.zero_();
}

torch::Tensor XLNetLMHeadModelImpl::Logits(const torch::Tensor& h) {
  return torch::nn::functional::linear(h, transformer->word_embedding->weight,
                                       lm_loss->bias);  // [..., V]
}

XLNetLMOutputs XLNetLMHeadModelImpl::forward(
    const XLNetInputs& inputs, const XLNetForwardOptions& options) {
  XLNetLMOutputs out;
  static_cast<XLNetOutputs&>(out) = transformer->forward(inputs, options);
  out.logits = Logits(out.query_hidden_state.defined() ? out.query_hidden_state
                                                       : out.last_hidden_state);
  return out;
}

torch::Tensor PartialPredictionLoss(const torch::Tensor& logits,
                                    const torch::Tensor& labels,
                                    const torch::Tensor& target_mask) {
  TORCH_CHECK(logits.dim() == labels.dim() + 1 &&
                  logits.sizes().slice(0, labels.dim()).equals(labels.sizes()),
              "loss: logits ", logits.sizes(), " vs labels ", labels.sizes());
  auto valid = labels >= 0;  // HF ignore_index -100
  auto logp = torch::log_softmax(logits.to(torch::kFloat), -1);
  auto nll = -logp.gather(-1, labels.clamp_min(0).unsqueeze(-1))
                  .squeeze(-1);  // [B, P]
  auto weight = valid.to(torch::kFloat);
  if (target_mask.defined()) weight = weight * target_mask.to(torch::kFloat);
  return (nll * weight).sum() / weight.sum().clamp_min(1e-12);
}

}  // namespace xlnet
