// HuggingFace's XLNetForQuestionAnswering (the SQuAD 2.0 beam head) on the
// XLNet backbone, with HF's module names, parameter names and numerics (see
// model/README.md, "Fine-tuning heads"):
//   transformer.*
//   start_logits.dense.{weight [1, D], bias [1]}
//   end_logits.dense_0.{weight [D, 2D], bias [D]}
//   end_logits.LayerNorm.{weight, bias} [D]
//   end_logits.dense_1.{weight [1, D], bias [1]}
//   answer_class.dense_0.{weight [D, 2D], bias [D]}
//   answer_class.dense_1.weight [1, D]              (no bias)
// Content stream only. Losses are per example ([B], fp32 or wider).
// Loading and saving: model_io/load.h, save.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "model/xlnet.h"

namespace xlnet {

// Where the answer class (is the question answerable?) gets its "start"
// feature while training:
//  kOfficial: the softmax(start_logits)-weighted sum of the hidden states,
//             as the official XLNet (function_builder.get_qa_outputs), which
//             also applies `dropout` between answer_class.dense_0 and dense_1
//             in training;
//  kHf:       the hidden state at the gold start position, as HF's
//             XLNetForQuestionAnswering (no dropout in the head).
// Inference always uses the weighted sum (both HF and official). The
// setting is AnswerClassStart (config/settings.h).

// HF PoolerStartLogits: dense [D -> 1].
class PoolerStartLogitsImpl : public torch::nn::Module {
 public:
  explicit PoolerStartLogitsImpl(const XLNetConfig& config);
  // hidden [B, L, D], p_mask [B, L] (undefined = none) -> [B, L] masked.
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& p_mask = {});
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(PoolerStartLogits);

// HF PoolerEndLogits: dense_1(LayerNorm(tanh(dense_0([h; s])))).
class PoolerEndLogitsImpl : public torch::nn::Module {
 public:
  explicit PoolerEndLogitsImpl(const XLNetConfig& config);
  // hidden [B, L, D], start_states [B, K, D] (K candidate starts), p_mask
  // [B, L] -> [B, K, L] masked end logits of every position for each start.
  // dense_0 is applied as W_h h + W_s s + b (its two halves), so the
  // [B, K, L, 2D] concatenation HF builds is never materialised.
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& start_states,
                        const torch::Tensor& p_mask = {});
  torch::nn::Linear dense_0{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // HF's name.
  torch::nn::Linear dense_1{nullptr};
};
TORCH_MODULE(PoolerEndLogits);

// HF PoolerAnswerClass: dense_1(tanh(dense_0([start; cls]))), no bias in
// dense_1.
class PoolerAnswerClassImpl : public torch::nn::Module {
 public:
  explicit PoolerAnswerClassImpl(const XLNetConfig& config);
  // start_states [B, D], cls_states [B, D] -> [B]; `dropout` is applied to
  // the dense_0 output in training (0 = none, HF).
  torch::Tensor forward(const torch::Tensor& start_states,
                        const torch::Tensor& cls_states, double dropout = 0.0);
  torch::nn::Linear dense_0{nullptr};
  torch::nn::Linear dense_1{nullptr};
};
TORCH_MODULE(PoolerAnswerClass);

// Gold labels of a QA batch.
struct QuestionAnsweringLabels {
  // [B] int64 gold start and end positions (the <cls> position for
  // unanswerable examples, as HF and the official code).
  torch::Tensor start_positions;
  torch::Tensor end_positions;
  // [B] int64 position of <cls>; undefined = the last position.
  torch::Tensor cls_index;
  // [B] float 1 = unanswerable; undefined = no answer-class loss (HF).
  torch::Tensor is_impossible;
};

struct QuestionAnsweringLoss {
  // [B] per example: (CE(start) + CE(end)) / 2 + 0.5 * BCE(cls, impossible).
  torch::Tensor loss;
  // [B, L] masked start logits; [B, L] masked end logits given the gold
  // start; [B] answer-class logits (undefined without is_impossible).
  torch::Tensor start_logits;
  torch::Tensor end_logits;
  torch::Tensor cls_logits;
};

// Beam-search outputs. Ks = start_n_top, Ke = end_n_top.
// **Log-probabilities**, as the official XLNet: HF's same-named outputs are
// softmax probabilities (exp of ours). The end beam is flattened in the
// official order, entry s * Ke + e = e-th best end of the s-th best start;
// HF flattens [B, Ke, Ks], i.e. entry e * Ks + s (see BeamToHfOrder).
struct QuestionAnsweringBeam {
  torch::Tensor start_top_log_probs;  // [B, Ks] fp32
  torch::Tensor start_top_index;      // [B, Ks] int64
  torch::Tensor end_top_log_probs;    // [B, Ks * Ke] fp32
  torch::Tensor end_top_index;        // [B, Ks * Ke] int64
  torch::Tensor cls_logits;           // [B]
};

// [B, Ks * Ke] in our (official) order -> HF's order.
torch::Tensor BeamToHfOrder(const torch::Tensor& end_top, int64_t start_n_top,
                            int64_t end_n_top);

// HF XLNetForQuestionAnswering. p_mask [B, L]: nonzero = the position cannot
// be in the answer (question, separators, padding); such logits become -1e30
// after a cast to at least fp32, so masking is safe in any compute dtype.
class XLNetForQuestionAnsweringImpl : public torch::nn::Module {
 public:
  explicit XLNetForQuestionAnsweringImpl(const XLNetConfig& config);
  void ResetParameters();
  // start_logits, end_logits, answer_class from a generator seeded with
  // `seed`: normal(initializer_range) weights, zero biases, LayerNorm 1/0.
  void ResetHeadParameters(uint64_t seed);

  // Training loss (content stream; no perm_mask/target_mapping).
  QuestionAnsweringLoss Loss(const XLNetInputs& inputs,
                             const torch::Tensor& p_mask,
                             const QuestionAnsweringLabels& labels);
  // Beam inference; cls_index [B] (undefined = the last position).
  QuestionAnsweringBeam Predict(const XLNetInputs& inputs,
                                const torch::Tensor& p_mask,
                                const torch::Tensor& cls_index = {});
  // The head alone on given hidden states [B, L, D] (any float dtype).
  QuestionAnsweringLoss HeadLoss(const torch::Tensor& hidden,
                                 const torch::Tensor& p_mask,
                                 const QuestionAnsweringLabels& labels);
  QuestionAnsweringBeam HeadPredict(const torch::Tensor& hidden,
                                    const torch::Tensor& p_mask,
                                    const torch::Tensor& cls_index = {});
  const XLNetConfig& config() const { return transformer->config(); }

  XLNetModel transformer{nullptr};
  PoolerStartLogits start_logits{nullptr};
  PoolerEndLogits end_logits{nullptr};
  PoolerAnswerClass answer_class{nullptr};
  // Not saved (HF's config has no such key); set by the trainer.
  AnswerClassStart answer_class_start = AnswerClassStart::kOfficial;
};
TORCH_MODULE(XLNetForQuestionAnswering);

}  // namespace xlnet
