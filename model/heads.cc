#include "model/heads.h"

#include <ATen/CPUGeneratorImpl.h>

#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/model_dir.h"
#include "common/status.h"
#include "model/checkpoint.h"

namespace xlnet {
namespace {

constexpr char kTransformerPrefix[] = "transformer.";
// Masked logits, as HF's `x * (1 - p_mask) - 1e30 * p_mask` for 0/1 masks.
constexpr double kMaskedLogit = -1e30;

// Half and bfloat16 go to fp32; fp32 and fp64 stay (fp64 for gradcheck).
torch::Tensor AtLeastFloat(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat);
}

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

// hidden [B, L, D], index [B, K] int64 -> [B, K, D] (HF's gather). Indices
// are not range-checked here (that would sync a GPU every step): the
// readers produce them; on the CPU gather itself throws.
torch::Tensor GatherPositions(const torch::Tensor& hidden,
                              const torch::Tensor& index) {
  TORCH_CHECK(index.dim() == 2 && index.size(0) == hidden.size(0),
              "position index must be [B, K] with B = ", hidden.size(0),
              ", got ", index.sizes());
  return hidden.gather(
      1, index.to(hidden.device(), torch::kLong)
             .unsqueeze(-1)
             .expand({index.size(0), index.size(1), hidden.size(2)}));
}

// hidden [B, L, D], positions [B] -> [B, D].
torch::Tensor GatherRows(const torch::Tensor& hidden,
                         const torch::Tensor& positions) {
  TORCH_CHECK(positions.dim() == 1, "positions must be [B], got ",
              positions.sizes());
  return GatherPositions(hidden, positions.unsqueeze(1)).squeeze(1);
}

// cls_index [B], or the last position of every row when undefined.
torch::Tensor ClsIndexOrLast(const torch::Tensor& cls_index,
                             const torch::Tensor& hidden) {
  if (cls_index.defined()) return cls_index;
  return torch::full({hidden.size(0)}, hidden.size(1) - 1,
                     torch::dtype(torch::kLong).device(hidden.device()));
}

// sum_l softmax(start_logits)[b, l] * hidden[b, l]: [B, D].
torch::Tensor WeightedStart(const torch::Tensor& hidden,
                            const torch::Tensor& start_logits) {
  auto probs = torch::softmax(start_logits, -1).to(hidden.scalar_type());
  return torch::bmm(probs.unsqueeze(1), hidden).squeeze(1);
}

void InitLinear(torch::nn::Linear& linear, double std,
                c10::optional<at::Generator> generator) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, generator);
  if (linear->bias.defined()) linear->bias.zero_();
}

void CheckContentStreamOnly(const XLNetInputs& inputs, const char* model) {
  TORCH_CHECK(!inputs.perm_mask.defined() && !inputs.target_mapping.defined(),
              model,
              " runs the content stream only: perm_mask and target_mapping "
              "must be undefined");
}

bool HasAnyPrefix(const std::string& name,
                  const std::vector<std::string>& prefixes) {
  for (const auto& prefix : prefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

// Copies the backbone (and the head when `has_head`) into `model`: stored
// `transformer.*` or bare XLNetModel names, lm_loss.* skipped, other heads
// skipped with a warning. Without the head, its parameters keep their values.
absl::Status LoadBackboneAndHead(torch::nn::Module& model,
                                 const StoredWeights& weights,
                                 const std::vector<std::string>& head_prefixes,
                                 bool has_head) {
  bool has_prefix = false;
  for (const auto& [name, t] : weights.tensors) {
    if (absl::StartsWith(name, kTransformerPrefix)) has_prefix = true;
  }
  std::set<std::string> other_heads;
  const ParameterNameMap name_map = [&](const std::string& stored) {
    if (HasAnyPrefix(stored, head_prefixes)) return stored;
    if (absl::StartsWith(stored, "lm_loss.")) return std::string();
    if (HasAnyPrefix(stored, FineTuningHeadPrefixes())) {
      other_heads.insert(stored);
      return std::string();
    }
    return has_prefix ? stored : kTransformerPrefix + stored;
  };
  std::vector<std::string> may_be_missing;
  if (!has_head) {
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (HasAnyPrefix(item.key(), head_prefixes)) {
        may_be_missing.push_back(item.key());
      }
    }
  }
  XLNET_RETURN_IF_ERROR(LoadParameters(model, weights.tensors, weights.path,
                                       name_map, may_be_missing));
  if (!other_heads.empty()) {
    XLOG(WARNING) << weights.path << ": ignoring another task's head: "
                  << absl::StrJoin(other_heads, ", ");
  }
  return absl::OkStatus();
}

// config.json's problem_type (a HF key XLNetConfig does not hold) must agree
// with the number of labels: 1 = regression, more = single-label.
absl::Status CheckProblemType(const std::string& dir, int64_t num_labels) {
  const std::string path = dir + "/" + kConfigFile;
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  const auto root = nlohmann::json::parse(text, nullptr, false);
  if (!root.is_object() || !root.contains("problem_type") ||
      !root["problem_type"].is_string()) {
    return absl::OkStatus();
  }
  const std::string type = root["problem_type"].get<std::string>();
  if (type == "multi_label_classification") {
    return absl::UnimplementedError(absl::StrCat(
        path, ": problem_type \"", type,
        "\" is not supported (single-label classification or regression)"));
  }
  if (type == "regression" && num_labels != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": problem_type \"regression\" needs 1 label, the "
                     "model has ",
                     num_labels));
  }
  if (type == "single_label_classification" && num_labels < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": problem_type \"single_label_classification\" needs at least "
        "2 labels (1 label is regression)"));
  }
  return absl::OkStatus();
}

// The labels of a sequence classifier loaded from `dir`.
absl::StatusOr<std::vector<std::string>> ResolveLabels(
    const std::string& dir, const XLNetConfig& config,
    const StoredWeights& weights, bool has_head,
    const HeadLoadOptions& options) {
  std::vector<std::string> labels =
      options.labels.empty() ? config.id2label : options.labels;
  if (!has_head) return labels;
  int64_t stored = -1;
  for (const auto& [name, t] : weights.tensors) {
    if (name == "logits_proj.weight" && t.dim() == 2) stored = t.size(0);
  }
  if (stored < 0) return labels;  // LoadParameters reports it missing.
  if (static_cast<int64_t>(config.id2label.size()) != stored) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": config.json id2label has ", config.id2label.size(),
                     " labels but logits_proj.weight in ", weights.path,
                     " has ", stored, " rows"));
  }
  if (static_cast<int64_t>(labels.size()) != stored) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": the fine-tuned classification head has ", stored, " labels (",
        absl::StrJoin(config.id2label, ", "), ") but the task has ",
        labels.size(), " (", absl::StrJoin(labels, ", "),
        "); start from the pretrained model instead"));
  }
  if (labels != config.id2label) {
    XLOG(INFO) << dir << ": label names " << absl::StrJoin(labels, ", ")
               << " replace " << absl::StrJoin(config.id2label, ", ");
  }
  return labels;
}

template <typename Model>
absl::StatusOr<Model> BuildModel(const std::string& dir,
                                 const XLNetConfig& config) {
  Model model(nullptr);
  XLNET_RETURN_IF_ERROR(CatchExceptions(dir, [&]() -> absl::Status {
    model = Model(config);
    return absl::OkStatus();
  }));
  return model;
}

absl::Status SaveWithArchitecture(torch::nn::Module& model, XLNetConfig config,
                                  const std::string& architecture,
                                  const nlohmann::json& extra,
                                  const std::string& dir) {
  config.architectures = {architecture};
  XLNET_ASSIGN_OR_RETURN(std::string json, ModelConfigJsonWith(config, extra));
  return WriteModelDir(dir, json, HfStateDict(model));
}

}  // namespace

// ---------------------------------------------------------------------------
// Sequence classification.

SequenceSummaryImpl::SequenceSummaryImpl(const XLNetConfig& config)
    : type_(config.summary_type),
      activation_(config.summary_activation),
      last_dropout_(config.summary_last_dropout) {
  TORCH_CHECK(type_ == "last" || type_ == "first" || type_ == "mean" ||
                  type_ == "cls_index",
              "summary_type must be last, first, mean or cls_index, got ",
              type_);
  if (config.summary_use_proj) {
    summary = register_module(
        "summary", torch::nn::Linear(config.d_model, config.d_model));
  }
  ResetParameters(config.initializer_range);
}

void SequenceSummaryImpl::ResetParameters(
    double initializer_range, c10::optional<at::Generator> generator) {
  if (summary) InitLinear(summary, initializer_range, generator);
}

torch::Tensor SequenceSummaryImpl::forward(const torch::Tensor& hidden,
                                           const torch::Tensor& cls_index) {
  TORCH_CHECK(hidden.dim() == 3,
              "SequenceSummary: hidden must be [B, L, D], got ",
              hidden.sizes());
  torch::Tensor out;
  if (type_ == "last") {
    out = hidden.select(1, -1);
  } else if (type_ == "first") {
    out = hidden.select(1, 0);
  } else if (type_ == "mean") {
    out = hidden.mean(1);
  } else {
    out = GatherRows(hidden, ClsIndexOrLast(cls_index, hidden));
  }
  if (summary) out = summary(out);
  if (activation_ == "tanh") out = torch::tanh(out);
  return torch::dropout(out, last_dropout_, is_training());
}

XLNetForSequenceClassificationImpl::XLNetForSequenceClassificationImpl(
    const XLNetConfig& config)
    : num_labels_(static_cast<int64_t>(config.id2label.size())) {
  TORCH_CHECK(num_labels_ >= 1, "id2label must name at least one label");
  transformer = register_module("transformer", XLNetModel(config));
  sequence_summary =
      register_module("sequence_summary", SequenceSummary(config));
  logits_proj = register_module("logits_proj",
                                torch::nn::Linear(config.d_model, num_labels_));
  InitLinear(logits_proj, config.initializer_range, c10::nullopt);
}

void XLNetForSequenceClassificationImpl::ResetParameters() {
  transformer->ResetParameters();
  sequence_summary->ResetParameters(config().initializer_range);
  InitLinear(logits_proj, config().initializer_range, c10::nullopt);
}

void XLNetForSequenceClassificationImpl::ResetHeadParameters(uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  sequence_summary->ResetParameters(config().initializer_range, generator);
  InitLinear(logits_proj, config().initializer_range, generator);
}

SequenceClassificationOutputs XLNetForSequenceClassificationImpl::forward(
    const XLNetInputs& inputs, const torch::Tensor& cls_index,
    const XLNetForwardOptions& options) {
  CheckContentStreamOnly(inputs, "XLNetForSequenceClassification");
  XLNetOutputs out = transformer->forward(inputs, options);
  SequenceClassificationOutputs result;
  result.logits =
      logits_proj(sequence_summary(out.last_hidden_state, cls_index));
  result.new_mems = std::move(out.new_mems);
  return result;
}

torch::Tensor ClassificationLoss(const torch::Tensor& logits,
                                 const torch::Tensor& labels) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 &&
                  labels.size(0) == logits.size(0),
              "ClassificationLoss: logits [B, N] and labels [B], got ",
              logits.sizes(), " and ", labels.sizes());
  const auto index = labels.to(logits.device(), torch::kLong);
  return -torch::log_softmax(AtLeastFloat(logits), -1)
              .gather(1, index.unsqueeze(1))
              .squeeze(1);
}

torch::Tensor RegressionLoss(const torch::Tensor& logits,
                             const torch::Tensor& labels) {
  TORCH_CHECK(
      labels.dim() == 1 && logits.numel() == labels.size(0) &&
          (logits.dim() == 1 || (logits.dim() == 2 && logits.size(1) == 1)),
      "RegressionLoss: logits [B, 1] or [B] and labels [B], got ",
      logits.sizes(), " and ", labels.sizes());
  const auto x = AtLeastFloat(logits).reshape({-1});
  return (x - labels.to(x.device(), x.scalar_type())).pow(2);
}

// ---------------------------------------------------------------------------
// Question answering.

absl::StatusOr<AnswerClassStart> ParseAnswerClassStart(
    const std::string& name) {
  if (name == "official") return AnswerClassStart::kOfficial;
  if (name == "hf") return AnswerClassStart::kHf;
  return absl::InvalidArgumentError(absl::StrCat(
      "answer_class_start: expected \"official\" or \"hf\", got \"", name,
      "\""));
}

const char* AnswerClassStartName(AnswerClassStart start) {
  return start == AnswerClassStart::kOfficial ? "official" : "hf";
}

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

// ---------------------------------------------------------------------------
// Loading and saving.

const std::vector<std::string>& SequenceClassificationHeadPrefixes() {
  static const auto* prefixes =
      new std::vector<std::string>{"sequence_summary.", "logits_proj."};
  return *prefixes;
}

const std::vector<std::string>& QuestionAnsweringHeadPrefixes() {
  static const auto* prefixes = new std::vector<std::string>{
      "start_logits.", "end_logits.", "answer_class."};
  return *prefixes;
}

bool HasHead(const StoredWeights& weights,
             const std::vector<std::string>& prefixes) {
  for (const auto& [name, t] : weights.tensors) {
    if (HasAnyPrefix(name, prefixes)) return true;
  }
  return false;
}

absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const std::string& dir, const HeadLoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadPretrainedConfig(dir));
  XLNET_ASSIGN_OR_RETURN(StoredWeights weights, ReadStoredWeights(dir));
  return LoadForSequenceClassification(dir, std::move(config), weights,
                                       options);
}

absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const std::string& dir, XLNetConfig config, const StoredWeights& weights,
    const HeadLoadOptions& options) {
  const auto& prefixes = SequenceClassificationHeadPrefixes();
  const bool has_head = HasHead(weights, prefixes);
  XLNET_ASSIGN_OR_RETURN(
      config.id2label, ResolveLabels(dir, config, weights, has_head, options));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), dir));
  XLNET_RETURN_IF_ERROR(
      CheckProblemType(dir, static_cast<int64_t>(config.id2label.size())));
  XLNET_ASSIGN_OR_RETURN(
      auto model, BuildModel<XLNetForSequenceClassification>(dir, config));
  XLNET_RETURN_IF_ERROR(
      LoadBackboneAndHead(*model, weights, prefixes, has_head));
  if (!has_head) {
    model->ResetHeadParameters(options.seed);
    XLOG(INFO) << dir << ": new classification head, " << config.id2label.size()
               << " label(s), seed " << options.seed;
  }
  return model;
}

absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const std::string& dir, const HeadLoadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadPretrainedConfig(dir));
  XLNET_ASSIGN_OR_RETURN(StoredWeights weights, ReadStoredWeights(dir));
  return LoadForQuestionAnswering(dir, config, weights, options);
}

absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const std::string& dir, const XLNetConfig& config,
    const StoredWeights& weights, const HeadLoadOptions& options) {
  const auto& prefixes = QuestionAnsweringHeadPrefixes();
  const bool has_head = HasHead(weights, prefixes);
  XLNET_ASSIGN_OR_RETURN(auto model,
                         BuildModel<XLNetForQuestionAnswering>(dir, config));
  XLNET_RETURN_IF_ERROR(
      LoadBackboneAndHead(*model, weights, prefixes, has_head));
  if (!has_head) {
    model->ResetHeadParameters(options.seed);
    XLOG(INFO) << dir << ": new question-answering head, seed " << options.seed;
  }
  return model;
}

const char* ProblemType(int64_t num_labels) {
  return num_labels == 1 ? "regression" : "single_label_classification";
}

absl::Status SavePretrained(XLNetForSequenceClassificationImpl& model,
                            const std::string& dir) {
  return SaveWithArchitecture(
      model, model.config(), "XLNetForSequenceClassification",
      {{"problem_type", ProblemType(model.num_labels())}}, dir);
}

absl::Status SavePretrained(XLNetForQuestionAnsweringImpl& model,
                            const std::string& dir) {
  return SaveWithArchitecture(model, model.config(),
                              "XLNetForQuestionAnswering",
                              nlohmann::json::object(), dir);
}

}  // namespace xlnet
