#include "model/question_answering.h"

#include <ATen/CPUGeneratorImpl.h>

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/head_ops.h"
#include "model/sequence_classification.h"

namespace xlnet {
namespace {

using heads::AtLeastFloat;
using heads::CheckContentStreamOnly;
using heads::ClsIndexOrLast;
using heads::GatherPositions;
using heads::GatherRows;
using heads::InitLinear;

// Masked logits, as HF's `x * (1 - p_mask) - 1e30 * p_mask` for 0/1 masks.
constexpr double kMaskedLogit = -1e30;

// logits [B, ..., L] with p_mask [B, L] (nonzero = excluded) -> fp32 or
// wider, excluded positions at -1e30 (representable in fp32 and bf16).
torch::Tensor MaskLogits(const torch::Tensor& logits,
                         const torch::Tensor& p_mask) {
  torch::Tensor x = AtLeastFloat(logits);
  if (!p_mask.defined()) return x;
  TORCH_CHECK(p_mask.dim() == 2 && p_mask.size(0) == x.size(0) &&
                  p_mask.size(1) == x.size(-1),
              "p_mask must be [B, L] = [", x.size(0), ", ", x.size(-1),
              "], got ", p_mask.sizes());
  torch::Tensor mask = p_mask.to(x.device()) != 0;  // [B, L]
  for (int64_t i = 2; i < x.dim(); ++i) mask = mask.unsqueeze(1);
  return x.masked_fill(mask, kMaskedLogit);
}

// sum_l softmax(start_logits)[b, l] * hidden[b, l]: [B, D].
torch::Tensor WeightedStart(const torch::Tensor& hidden,
                            const torch::Tensor& start_logits) {
  auto probs = torch::softmax(start_logits, -1).to(hidden.scalar_type());
  return torch::bmm(probs.unsqueeze(1), hidden).squeeze(1);
}

}  // namespace

PoolerStartLogitsImpl::PoolerStartLogitsImpl(const XLNetConfig& config) {
  dense = register_module("dense", torch::nn::Linear(config.d_model, 1));
}

torch::Tensor PoolerStartLogitsImpl::forward(const torch::Tensor& hidden,
                                             const torch::Tensor& p_mask) {
  TORCH_CHECK(hidden.dim() == 3, "start logits: hidden must be [B, L, D], got ",
              hidden.sizes());
  return MaskLogits(dense(hidden).squeeze(-1), p_mask);
}

PoolerEndLogitsImpl::PoolerEndLogitsImpl(const XLNetConfig& config) {
  dense_0 = register_module(
      "dense_0", torch::nn::Linear(2 * config.d_model, config.d_model));
  LayerNorm = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})
                               .eps(config.layer_norm_eps)));
  dense_1 = register_module("dense_1", torch::nn::Linear(config.d_model, 1));
}

torch::Tensor PoolerEndLogitsImpl::forward(const torch::Tensor& hidden,
                                           const torch::Tensor& start_states,
                                           const torch::Tensor& p_mask) {
  const int64_t d = hidden.size(-1);
  TORCH_CHECK(hidden.dim() == 3 && start_states.dim() == 3 &&
                  start_states.size(0) == hidden.size(0) &&
                  start_states.size(2) == d,
              "end logits: hidden [B, L, D] and start_states [B, K, D], got ",
              hidden.sizes(), " and ", start_states.sizes());
  namespace F = torch::nn::functional;
  // dense_0([h; s]) = W_h h + W_s s + b with W = [W_h | W_s].
  const auto& w = dense_0->weight;  // [D, 2D]
  auto from_hidden = F::linear(hidden, w.narrow(1, 0, d), dense_0->bias);
  auto from_start = F::linear(start_states, w.narrow(1, d, d));
  auto x = from_hidden.unsqueeze(1) + from_start.unsqueeze(2);  // [B, K, L, D]
  // LayerNorm in its parameters' dtype (x is bf16/fp16 under autocast).
  x = torch::tanh(x).to(LayerNorm->weight.scalar_type());
  x = dense_1(LayerNorm(x)).squeeze(-1);  // [B, K, L]
  return MaskLogits(x, p_mask);
}

PoolerAnswerClassImpl::PoolerAnswerClassImpl(const XLNetConfig& config) {
  dense_0 = register_module(
      "dense_0", torch::nn::Linear(2 * config.d_model, config.d_model));
  dense_1 = register_module(
      "dense_1", torch::nn::Linear(
                     torch::nn::LinearOptions(config.d_model, 1).bias(false)));
}

torch::Tensor PoolerAnswerClassImpl::forward(const torch::Tensor& start_states,
                                             const torch::Tensor& cls_states,
                                             double dropout) {
  TORCH_CHECK(
      start_states.dim() == 2 && start_states.sizes() == cls_states.sizes(),
      "answer class: start_states and cls_states must be [B, D], got ",
      start_states.sizes(), " and ", cls_states.sizes());
  auto x = torch::tanh(dense_0(torch::cat({start_states, cls_states}, -1)));
  x = torch::dropout(x, dropout, is_training());
  return dense_1(x).squeeze(-1);
}

torch::Tensor BeamToHfOrder(const torch::Tensor& end_top, int64_t start_n_top,
                            int64_t end_n_top) {
  TORCH_CHECK(end_top.dim() == 2 && end_top.size(1) == start_n_top * end_n_top,
              "BeamToHfOrder: expected [B, ", start_n_top * end_n_top,
              "], got ", end_top.sizes());
  return end_top.view({end_top.size(0), start_n_top, end_n_top})
      .transpose(1, 2)
      .reshape({end_top.size(0), start_n_top * end_n_top});
}

XLNetForQuestionAnsweringImpl::XLNetForQuestionAnsweringImpl(
    const XLNetConfig& config) {
  transformer = register_module("transformer", XLNetModel(config));
  start_logits = register_module("start_logits", PoolerStartLogits(config));
  end_logits = register_module("end_logits", PoolerEndLogits(config));
  answer_class = register_module("answer_class", PoolerAnswerClass(config));
  for (auto* linear :
       {&start_logits->dense, &end_logits->dense_0, &end_logits->dense_1,
        &answer_class->dense_0, &answer_class->dense_1}) {
    InitLinear(*linear, config.initializer_range, c10::nullopt);
  }
}

void XLNetForQuestionAnsweringImpl::ResetParameters() {
  transformer->ResetParameters();
  for (auto* linear :
       {&start_logits->dense, &end_logits->dense_0, &end_logits->dense_1,
        &answer_class->dense_0, &answer_class->dense_1}) {
    InitLinear(*linear, config().initializer_range, c10::nullopt);
  }
  torch::NoGradGuard no_grad;
  end_logits->LayerNorm->weight.fill_(1.0);
  end_logits->LayerNorm->bias.zero_();
}

void XLNetForQuestionAnsweringImpl::ResetHeadParameters(uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (auto* linear :
       {&start_logits->dense, &end_logits->dense_0, &end_logits->dense_1,
        &answer_class->dense_0, &answer_class->dense_1}) {
    InitLinear(*linear, config().initializer_range, generator);
  }
  torch::NoGradGuard no_grad;
  end_logits->LayerNorm->weight.fill_(1.0);
  end_logits->LayerNorm->bias.zero_();
}

QuestionAnsweringLoss XLNetForQuestionAnsweringImpl::HeadLoss(
    const torch::Tensor& hidden, const torch::Tensor& p_mask,
    const QuestionAnsweringLabels& labels) {
  TORCH_CHECK(hidden.dim() == 3, "QA head: hidden must be [B, L, D], got ",
              hidden.sizes());
  const int64_t b = hidden.size(0);
  TORCH_CHECK(
      labels.start_positions.defined() && labels.end_positions.defined() &&
          labels.start_positions.sizes() == torch::IntArrayRef{b} &&
          labels.end_positions.sizes() == torch::IntArrayRef{b},
      "QA loss: start_positions and end_positions must be [B = ", b, "]");
  QuestionAnsweringLoss out;
  out.start_logits = start_logits(hidden, p_mask);  // [B, L]
  // End logits given the gold start (HF and official).
  const auto gold_start = GatherRows(hidden, labels.start_positions);  // [B, D]
  out.end_logits =
      end_logits(hidden, gold_start.unsqueeze(1), p_mask).squeeze(1);
  out.loss =
      0.5 * (ClassificationLoss(out.start_logits, labels.start_positions) +
             ClassificationLoss(out.end_logits, labels.end_positions));
  if (labels.is_impossible.defined()) {
    TORCH_CHECK(labels.is_impossible.sizes() == torch::IntArrayRef{b},
                "QA loss: is_impossible must be [B = ", b, "], got ",
                labels.is_impossible.sizes());
    const bool official = answer_class_start == AnswerClassStart::kOfficial;
    const auto start_feature =
        official ? WeightedStart(hidden, out.start_logits) : gold_start;
    const auto cls_states =
        GatherRows(hidden, ClsIndexOrLast(labels.cls_index, hidden));
    out.cls_logits = answer_class(start_feature, cls_states,
                                  official ? config().dropout : 0.0);
    const auto logits = AtLeastFloat(out.cls_logits);
    out.loss = out.loss + 0.5 * torch::binary_cross_entropy_with_logits(
                                    logits,
                                    labels.is_impossible.to(
                                        logits.device(), logits.scalar_type()),
                                    /*weight=*/{}, /*pos_weight=*/{},
                                    at::Reduction::None);
  }
  return out;
}

QuestionAnsweringBeam XLNetForQuestionAnsweringImpl::HeadPredict(
    const torch::Tensor& hidden, const torch::Tensor& p_mask,
    const torch::Tensor& cls_index) {
  TORCH_CHECK(hidden.dim() == 3, "QA head: hidden must be [B, L, D], got ",
              hidden.sizes());
  const int64_t b = hidden.size(0), l = hidden.size(1);
  const int64_t ks = config().start_n_top, ke = config().end_n_top;
  TORCH_CHECK(ks <= l && ke <= l, "QA beam: start_n_top ", ks,
              " and end_n_top ", ke, " must not exceed the length L = ", l);
  QuestionAnsweringBeam out;
  const auto start = start_logits(hidden, p_mask);  // [B, L]
  std::tie(out.start_top_log_probs, out.start_top_index) =
      torch::log_softmax(start, -1).topk(ks, -1);  // [B, Ks]
  const auto start_states =
      GatherPositions(hidden, out.start_top_index);           // [B, Ks, D]
  const auto end = end_logits(hidden, start_states, p_mask);  // [B, Ks, L]
  std::tie(out.end_top_log_probs, out.end_top_index) =
      torch::log_softmax(end, -1).topk(ke, -1);  // [B, Ks, Ke]
  out.end_top_log_probs = out.end_top_log_probs.reshape({b, ks * ke});
  out.end_top_index = out.end_top_index.reshape({b, ks * ke});
  out.cls_logits =
      answer_class(WeightedStart(hidden, start),
                   GatherRows(hidden, ClsIndexOrLast(cls_index, hidden)));
  return out;
}

QuestionAnsweringLoss XLNetForQuestionAnsweringImpl::Loss(
    const XLNetInputs& inputs, const torch::Tensor& p_mask,
    const QuestionAnsweringLabels& labels) {
  CheckContentStreamOnly(inputs, "XLNetForQuestionAnswering");
  return HeadLoss(transformer->forward(inputs).last_hidden_state, p_mask,
                  labels);
}

QuestionAnsweringBeam XLNetForQuestionAnsweringImpl::Predict(
    const XLNetInputs& inputs, const torch::Tensor& p_mask,
    const torch::Tensor& cls_index) {
  CheckContentStreamOnly(inputs, "XLNetForQuestionAnswering");
  return HeadPredict(transformer->forward(inputs).last_hidden_state, p_mask,
                     cls_index);
}

}  // namespace xlnet
