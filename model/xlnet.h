// The XLNet backbone (HF `XLNetModel`, registered as `transformer`) and the
// LM-head model (HF `XLNetLMHeadModel`), with parameters registered under
// HuggingFace's names so `named_parameters()` maps 1:1 onto HF state dicts:
//
//   transformer.word_embedding.weight [V, D]      transformer.mask_emb [1, 1,
//   D] transformer.layer.N.rel_attn.{q,k,v,o,r} [D, H, Dh]
//   transformer.layer.N.rel_attn.{r_w_bias,r_r_bias,r_s_bias} [H, Dh]
//   transformer.layer.N.rel_attn.seg_embed [2, H, Dh]
//   transformer.layer.N.rel_attn.layer_norm.{weight,bias} [D]
//   transformer.layer.N.ff.layer_1.{weight [Di, D], bias [Di]}
//   transformer.layer.N.ff.layer_2.{weight [D, Di], bias [D]}
//   transformer.layer.N.ff.layer_norm.{weight,bias} [D]
//   lm_loss.bias [V]   (the LM head weight is the word embedding: tied)
//
// Shapes at this API are batch-first like HuggingFace, mems time-major; see
// model/README.md for the letters and the internal layout.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/attention_types.h"
#include "model/relative_attention.h"

namespace xlnet {

// Inputs of one forward pass. Only input_ids is required.
struct XLNetInputs {
  // [B, L] int64 token ids.
  torch::Tensor input_ids;
  // [B, L] integer segment ids (only equality matters); undefined = no
  // relative segment term at all (as HF with token_type_ids=None).
  torch::Tensor token_type_ids;
  // [B, L] 1 = real token, 0 = padding (float or integer).
  torch::Tensor attention_mask;
  // [B, L, L] perm_mask[b, i, j] = 1: position i may NOT attend to j (float
  // or bool).
  torch::Tensor perm_mask;
  // [B, P, L] one-hot rows: target_mapping[b, p, l] = 1 if prediction p is
  // position l; an all-zero row is a padding target. Given => query stream.
  // Float or bool (read as float).
  torch::Tensor target_mapping;
  // n_layer tensors [M, B, D] (time-major, HF), any float dtype (cast to the
  // compute dtype); empty = no memory.
  std::vector<torch::Tensor> mems;
  // [B, M] 1 = a real memory row, 0 = padding that no query may attend to
  // (float or integer); undefined = every memory row is visible (HF, which
  // has no such mask). Segment recurrence over left-padded inputs needs it.
  torch::Tensor mems_attention_mask;
  // [B, M] integer segment ids of the memory rows; undefined = memory is
  // segment 0 (HF, official). Segment recurrence over A/B inputs sets them so
  // a chunk relates to the memory of its own text as to itself.
  torch::Tensor mems_token_type_ids;
};

struct XLNetForwardOptions {
  // Return new mems (each layer's input, see CacheMem).
  bool use_mems = false;
  // Compute the query stream at all L positions and pick the targets with
  // target_mapping (HF's way, L x K attention) instead of only the P targets
  // (P x K). Same results; for tests and the benchmark.
  bool query_all_positions = false;
  // With use_mems: when set, new_mems cache the whole input of this call
  // (config.reuse_len is ignored) and keep the last `cache_mem_len` rows of
  // cat(mems, input); 0 keeps every row. Unset: config.mem_len/reuse_len.
  // Fine-tuning's segment recurrence (finetune/chunks.h) sets it.
  std::optional<int64_t> cache_mem_len = std::nullopt;
};

struct XLNetOutputs {
  // [B, L, D] content stream of the last layer.
  torch::Tensor last_hidden_state;
  // [B, P, D] query stream of the last layer (only with target_mapping).
  torch::Tensor query_hidden_state;
  // n_layer tensors [M', B, D], detached (only with use_mems), in the
  // compute dtype: bf16/fp16 under autocast (memory only feeds the key/value
  // product, which runs in that dtype), else the model's dtype. Any float
  // dtype and layout is accepted back as `mems`. Without activation
  // checkpointing each is a view of its layer's batch-major key/value input
  // [B, M + L, D] (not contiguous; no copy is made), else contiguous.
  std::vector<torch::Tensor> new_mems;
};

// Position-wise feed-forward (HF XLNetFeedForward): LN(x + W2 act(W1 x)).
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const XLNetConfig& config);
  void ResetParameters(double initializer_range);
  torch::Tensor forward(const torch::Tensor& x);
  // With the fused ops only: forward for x [B, T, D] fp32 whose products
  // read x_low, x's copy in the compute dtype (or x itself where
  // undefined), and the residual x. Returns {out, out's copy in the
  // compute dtype} from DropoutResidualLayerNormWithCopy with `copy`, else
  // {out, undefined}.
  std::pair<torch::Tensor, torch::Tensor> ForwardWithCopy(
      const torch::Tensor& x, const torch::Tensor& x_low, bool copy);

  torch::nn::Linear layer_1{nullptr}, layer_2{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  std::string activation;
  double dropout;
  // Dropouts from CounterDropout (attention 'tiled').
  bool counter_dropout = false;
  // Bias + activation + dropout and dropout + residual + LayerNorm as the
  // fused ops of model/fused_elementwise.h (train.fused_elementwise).
  bool fused_elementwise = false;
};
TORCH_MODULE(FeedForward);

// One XLNet layer: relative attention (both streams) then feed-forward.
class XLNetLayerImpl : public torch::nn::Module {
 public:
  explicit XLNetLayerImpl(const XLNetConfig& config);
  RelativeAttention rel_attn{nullptr};
  FeedForward ff{nullptr};
};
TORCH_MODULE(XLNetLayer);

// Attention masks [B or 1, L, K] bool (true = blocked) for the two streams,
// HF semantics: query-stream mask = pad keys | perm_mask (| causal for "uni"),
// content mask = the same with the diagonal (key M + i) cleared. Undefined
// when nothing is masked. Mem columns are never masked.
struct StreamMasks {
  torch::Tensor query;
  torch::Tensor content;
};
StreamMasks BuildStreamMasks(const XLNetInputs& inputs, int64_t mlen,
                             const std::string& attn_type, bool same_length);

// [B, L, K] bool "different segment", mem columns count as segment 0
// unless `mems_token_type_ids` [B, M] gives theirs; undefined when
// token_type_ids is.
torch::Tensor BuildSegmentDiff(const torch::Tensor& token_type_ids,
                               int64_t mlen,
                               const torch::Tensor& mems_token_type_ids = {});

// HF cache_mem: last mem_len rows of cat(prev [M, B, D], cur[:reuse_len]) with
// cur time-major [L, B, D]; mem_len unset or 0 keeps everything (as HF).
// Detached and contiguous, in `dtype` (default: cur's).
torch::Tensor CacheMem(const torch::Tensor& cur, const torch::Tensor& prev,
                       const XLNetConfig& config,
                       std::optional<torch::ScalarType> dtype = std::nullopt);

// HF XLNetModel.
class XLNetModelImpl : public torch::nn::Module {
 public:
  explicit XLNetModelImpl(const XLNetConfig& config);
  // XLNet init: normal(initializer_range) weights (incl. q,k,v,o,r, r_*_bias,
  // seg_embed, mask_emb), zero Linear biases, LayerNorm ones/zeros. Uses the
  // global generator (seed it with torch::manual_seed for determinism).
  void ResetParameters();
  XLNetOutputs forward(const XLNetInputs& inputs,
                       const XLNetForwardOptions& options = {});
  const XLNetConfig& config() const { return config_; }

  // Activation checkpointing (train.activation_checkpointing): while on and
  // grad mode is enabled, forward keeps only each layer's inputs (both
  // streams) and backward recomputes the layer from them, with the RNG
  // (dropout masks) and autocast state of the forward. Same values and
  // gradients; about one more forward of compute for a fraction of the
  // activation memory.
  void SetActivationCheckpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }

  // The attention core of every layer and both streams (train.attention):
  // unfused (default), the fused op's tiled CPU path, or its CUDA kernel.
  // Same results up to rounding with dropout 0; with dropout the fused op
  // draws its masks from its own counter-based stream (counter_dropout.h),
  // and with 'tiled' so does every other dropout of the backbone
  // (CounterDropout).
  void SetAttention(const AttentionOptions& options);
  const AttentionOptions& attention() const { return attention_; }

  // train.fused_elementwise: every layer's feed-forward and attention
  // output run their element-wise tails as the fused ops of
  // model/fused_elementwise.h (CUDA kernels on CUDA tensors, C++ loops on
  // CPU ones). Same results up to rounding with dropout 0; with dropout
  // those ops draw their masks from the counter-based generator, seeded
  // from the default CPU generator.
  void SetFusedElementwise(bool on);
  bool fused_elementwise() const { return fused_elementwise_; }

  // Under autocast, whether forward casts the layers' product weights to
  // the compute dtype together (model/weight_casts.h: one multi-tensor copy
  // each way a step) instead of autocast's kernel a weight. The same values
  // and gradients either way; on by default, off only to compare the two.
  void SetCastWeightsTogether(bool on) { cast_weights_together_ = on; }

  // Under autocast with the fused element-wise ops, where
  // LayerNormCopyAvailable and without activation checkpointing: whether
  // the streams between layers carry, besides the fp32 values the residual
  // sums read, the LayerNorms' copies in the compute dtype for the next
  // products (DropoutResidualLayerNormWithCopy), so that neither the casts
  // nor their gradients' casts and sums run. The same values and gradients
  // either way; on by default, off only to compare the two.
  void SetLayerNormCopies(bool on) { layer_norm_copies_ = on; }

  torch::nn::Embedding word_embedding{nullptr};
  torch::Tensor mask_emb;
  torch::nn::ModuleList layer{nullptr};

 private:
  XLNetConfig config_;
  bool activation_checkpointing_ = false;
  AttentionOptions attention_;
  bool fused_elementwise_ = false;
  bool cast_weights_together_ = true;
  bool layer_norm_copies_ = true;
};
TORCH_MODULE(XLNetModel);

// The LM head: logits = h W_emb^T + bias (weight tied to the word embedding).
class LMLossImpl : public torch::nn::Module {
 public:
  explicit LMLossImpl(int64_t vocab_size);
  torch::Tensor bias;
};
TORCH_MODULE(LMLoss);

struct XLNetLMOutputs : XLNetOutputs {
  // [B, P, V] with target_mapping (query stream), else [B, L, V].
  torch::Tensor logits;
};

// HF XLNetLMHeadModel: `transformer` + `lm_loss`.
class XLNetLMHeadModelImpl : public torch::nn::Module {
 public:
  explicit XLNetLMHeadModelImpl(const XLNetConfig& config);
  void ResetParameters();
  XLNetLMOutputs forward(const XLNetInputs& inputs,
                         const XLNetForwardOptions& options = {});
  // h [..., D] -> logits [..., V].
  torch::Tensor Logits(const torch::Tensor& h);
  const XLNetConfig& config() const { return transformer->config(); }

  XLNetModel transformer{nullptr};
  LMLoss lm_loss{nullptr};
};
TORCH_MODULE(XLNetLMHeadModel);

// Partial-prediction loss: sum(CE(logits, labels) * target_mask) /
// sum(target_mask). logits [B, P, V], labels [B, P] int64, target_mask [B, P]
// (undefined = all ones, i.e. the mean). Computed in fp32.
torch::Tensor PartialPredictionLoss(const torch::Tensor& logits,
                                    const torch::Tensor& labels,
                                    const torch::Tensor& target_mask = {});

}  // namespace xlnet
