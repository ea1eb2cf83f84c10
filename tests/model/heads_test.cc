// Fine-tuning heads against HuggingFace (tests/fixtures/hf_extra: 3-class and
// regression sequence classification, the QA beam head with loss, gradients
// and inference outputs; golden_tiny/heads.safetensors: 2-class), the
// official answer-class mode against a hand computation, p_mask, a
// double-precision gradient check of the QA head, loading and saving.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "model/precision.h"
#include "model/question_answering.h"
#include "model/sequence_classification.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"
#include "tests/model/test_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::GradCheck;
using testing::MaxAbsDiff;
using testing::ReadTensors;
using testing::ReportDiff;

// HF reference tolerance: fp32 on different BLAS and op orders.
constexpr double kTol = 1e-5;

std::string HfExtraPath() {
  return std::string(XLNET_SOURCE_DIR) +
         "/tests/fixtures/hf_extra/hf_extra.safetensors";
}

// Copies the tensors named `prefix` + parameter name into `model`; returns
// how many were copied.
int CopyWeights(torch::nn::Module& model,
                const std::map<std::string, torch::Tensor>& tensors,
                const std::string& prefix) {
  torch::NoGradGuard no_grad;
  auto params = model.named_parameters();
  int copied = 0;
  for (const auto& [name, t] : tensors) {
    if (!absl::StartsWith(name, prefix)) continue;
    auto* p = params.find(name.substr(prefix.size()));
    EXPECT_NE(p, nullptr) << name;
    if (p == nullptr) continue;
    p->copy_(t);
    ++copied;
  }
  return copied;
}

class HeadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = ReadTensors(GoldenDir() + "/inputs.safetensors");
    hf_ = ReadTensors(HfExtraPath());
  }
  XLNetInputs Inputs() {
    XLNetInputs x;
    x.input_ids = in_.at("input_ids");
    x.token_type_ids = in_.at("token_type_ids");
    x.attention_mask = in_.at("attention_mask");
    return x;
  }
  // The golden backbone with the head weights of `case_name` (eval mode).
  XLNetForSequenceClassification SeqCls(const std::string& case_name,
                                        std::vector<std::string> labels) {
    HeadLoadOptions options;
    options.labels = std::move(labels);
    auto model = LoadForSequenceClassification(GoldenDir(), options);
    EXPECT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(CopyWeights(**model, hf_, case_name + ".w."), 4);
    (*model)->eval();
    return *model;
  }
  XLNetForQuestionAnswering Qa() {
    auto model = LoadForQuestionAnswering(GoldenDir());
    EXPECT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(CopyWeights(**model, hf_, "qa.w."), 11);
    (*model)->eval();
    return *model;
  }
  QuestionAnsweringLabels QaLabels() {
    QuestionAnsweringLabels labels;
    labels.start_positions = hf_.at("qa.in.start_positions");
    labels.end_positions = hf_.at("qa.in.end_positions");
    labels.cls_index = hf_.at("qa.in.cls_index");
    labels.is_impossible = hf_.at("qa.in.is_impossible");
    return labels;
  }
  std::map<std::string, torch::Tensor> in_, hf_;
};

// ------------------------------------------------- sequence classification

TEST_F(HeadsTest, ThreeClassLogitsAndLossMatchHf) {
  auto model = SeqCls("seqcls3", {"a", "b", "c"});
  EXPECT_FALSE(model->is_regression());
  torch::NoGradGuard no_grad;
  auto logits = model->forward(Inputs()).logits;
  EXPECT_LT(ReportDiff("seqcls3.logits", logits, hf_.at("seqcls3.out.logits")),
            kTol);
  auto loss = ClassificationLoss(logits, hf_.at("seqcls3.in.labels"));
  ASSERT_EQ(loss.sizes(), torch::IntArrayRef{2});
  EXPECT_LT(ReportDiff("seqcls3.loss", loss.mean(), hf_.at("seqcls3.out.loss")),
            kTol);
}

TEST_F(HeadsTest, RegressionLogitsAndLossMatchHf) {
  auto model = SeqCls("regression", {"score"});
  EXPECT_TRUE(model->is_regression());
  torch::NoGradGuard no_grad;
  auto logits = model->forward(Inputs()).logits;
  EXPECT_LT(
      ReportDiff("regression.logits", logits, hf_.at("regression.out.logits")),
      kTol);
  auto loss = RegressionLoss(logits, hf_.at("regression.in.labels"));
  ASSERT_EQ(loss.sizes(), torch::IntArrayRef{2});
  EXPECT_LT(
      ReportDiff("regression.loss", loss.mean(), hf_.at("regression.out.loss")),
      kTol);
  // Per example, exactly the squared error.
  auto expected = (logits.squeeze(1) - hf_.at("regression.in.labels")).pow(2);
  EXPECT_TRUE(torch::allclose(loss, expected));
}

TEST_F(HeadsTest, TwoClassSharedGoldenHead) {
  auto heads = ReadTensors(GoldenDir() + "/heads.safetensors");
  auto out = ReadTensors(GoldenDir() + "/outputs.safetensors");
  auto model = LoadForSequenceClassification(GoldenDir());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_labels(), 2);  // config.json's id2label
  std::map<std::string, torch::Tensor> head;
  for (const auto& [name, t] : heads) {
    if (!absl::StartsWith(name, "qa_outputs.")) head["w." + name] = t;
  }
  EXPECT_EQ(CopyWeights(**model, head, "w."), 4);
  (*model)->eval();
  torch::NoGradGuard no_grad;
  auto logits = (*model)->forward(Inputs()).logits;
  EXPECT_LT(ReportDiff("seqcls.logits", logits, out.at("seqcls.logits")), kTol);
}

TEST_F(HeadsTest, SummaryTypes) {
  XLNetConfig config = testing::TinyConfig();
  config.summary_use_proj = false;
  config.summary_activation = "";
  auto hidden = torch::randn({2, 5, config.d_model});
  for (const std::string type : {"last", "first", "mean", "cls_index"}) {
    config.summary_type = type;
    SequenceSummary summary(config);
    summary->eval();
    auto out = summary(hidden, torch::tensor({1, 3}));
    torch::Tensor expected;
    if (type == "last") expected = hidden.select(1, 4);
    if (type == "first") expected = hidden.select(1, 0);
    if (type == "mean") expected = hidden.mean(1);
    if (type == "cls_index") {
      expected = torch::stack({hidden[0][1], hidden[1][3]});
    }
    EXPECT_TRUE(torch::equal(out, expected)) << type;
  }
  // cls_index absent: the last position (HF).
  config.summary_type = "cls_index";
  SequenceSummary summary(config);
  summary->eval();
  EXPECT_TRUE(torch::equal(summary(hidden), hidden.select(1, 4)));
  // In training, summary_last_dropout applies.
  summary->train();
  EXPECT_FALSE(torch::equal(summary(hidden), hidden.select(1, 4)));
}

TEST_F(HeadsTest, FreshHeadIsSeededAndInitialisedLikeHf) {
  HeadLoadOptions options;
  options.labels = {"neg", "neu", "pos"};
  options.seed = 5;
  auto a = LoadForSequenceClassification(GoldenDir(), options);
  torch::manual_seed(999);  // the head must not depend on the global stream
  auto b = LoadForSequenceClassification(GoldenDir(), options);
  options.seed = 6;
  auto c = LoadForSequenceClassification(GoldenDir(), options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status();
  EXPECT_EQ((*a)->num_labels(), 3);
  EXPECT_EQ((*a)->config().id2label, options.labels);
  auto pb = (*b)->named_parameters();
  auto pc = (*c)->named_parameters();
  for (const auto& item : (*a)->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
  const auto& w = (*a)->logits_proj->weight;
  EXPECT_FALSE(torch::equal(w, pc["logits_proj.weight"]));
  EXPECT_TRUE(torch::equal((*a)->logits_proj->bias, torch::zeros({3})));
  EXPECT_TRUE(
      torch::equal((*a)->sequence_summary->summary->bias, torch::zeros({64})));
  // normal(0, initializer_range = 0.02): 64 x 64 + 3 x 64 draws.
  const double std =
      (*a)->sequence_summary->summary->weight.std().item<double>();
  EXPECT_NEAR(std, 0.02, 0.002);
  // The backbone is the golden one.
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  EXPECT_TRUE(torch::equal((*a)->transformer->mask_emb,
                           golden.at("transformer.mask_emb")));
}

TEST_F(HeadsTest, SaveLoadFineTunedClassifier) {
  auto model = SeqCls("seqcls3", {"a", "b", "c"});
  testing::TempDir tmp;
  const std::string dir = tmp.Join("ft");
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  auto json = ReadFile(dir + "/config.json");
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(absl::StrContains(*json, "\"XLNetForSequenceClassification\""))
      << *json;
  EXPECT_TRUE(absl::StrContains(
      *json, "\"problem_type\": \"single_label_classification\""));
  EXPECT_TRUE(absl::StrContains(*json, "\"label2id\""));
  auto stored = ReadTensors(dir + "/model.safetensors");
  EXPECT_EQ(stored.size(), model->named_parameters().size());
  EXPECT_EQ(stored.count("logits_proj.weight"), 1u);
  EXPECT_EQ(stored.count("transformer.mask_emb"), 1u);

  auto loaded = LoadForSequenceClassification(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().id2label,
            (std::vector<std::string>{"a", "b", "c"}));
  (*loaded)->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal((*loaded)->forward(Inputs()).logits,
                           model->forward(Inputs()).logits));

  // A fine-tuned head with another number of labels is a clear error.
  HeadLoadOptions two;
  two.labels = {"x", "y"};
  auto bad = LoadForSequenceClassification(dir, two);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), dir)) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "has 3 labels"))
      << bad.status();
  // The same count with new names is fine.
  HeadLoadOptions renamed;
  renamed.labels = {"x", "y", "z"};
  auto ok = LoadForSequenceClassification(dir, renamed);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(
      torch::equal((*ok)->logits_proj->weight, model->logits_proj->weight));

  // Regression saves problem_type "regression" and loads back as such.
  auto reg = SeqCls("regression", {"score"});
  ASSERT_TRUE(SavePretrained(*reg, tmp.Join("reg")).ok());
  auto reg_json = ReadFile(tmp.Join("reg/config.json"));
  EXPECT_TRUE(absl::StrContains(*reg_json, "\"problem_type\": \"regression\""));
  auto reg2 = LoadForSequenceClassification(tmp.Join("reg"));
  ASSERT_TRUE(reg2.ok()) << reg2.status();
  EXPECT_TRUE((*reg2)->is_regression());

  // A QA model starts from the classifier's backbone (its head skipped).
  auto qa = LoadForQuestionAnswering(dir);
  ASSERT_TRUE(qa.ok()) << qa.status();
  EXPECT_TRUE(
      torch::equal((*qa)->transformer->mask_emb, model->transformer->mask_emb));
}

TEST_F(HeadsTest, LoadErrorsNameTheFile) {
  testing::TempDir tmp;
  // A partial head: the missing tensor is named with the weights file.
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  NamedTensors tensors(golden.begin(), golden.end());
  tensors.emplace_back("logits_proj.weight", torch::zeros({2, 64}));
  auto config = ReadModelConfigJson(GoldenDir() + "/config.json");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(WriteModelDir(tmp.Join("partial"), *config, tensors).ok());
  auto partial = LoadForSequenceClassification(tmp.Join("partial"));
  ASSERT_FALSE(partial.ok());
  const std::string msg(partial.status().message());
  EXPECT_TRUE(absl::StrContains(msg, tmp.Join("partial/model.safetensors")))
      << msg;
  EXPECT_TRUE(absl::StrContains(msg,
                                "missing: logits_proj.bias, "
                                "sequence_summary.summary.bias"))
      << msg;
  // Unsupported problem_type.
  ASSERT_TRUE(MakeDirs(tmp.Join("multi")).ok());
  std::string text = *ReadFile(GoldenDir() + "/config.json");
  text.insert(1, "\"problem_type\": \"multi_label_classification\",");
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("multi/config.json"), text).ok());
  ASSERT_TRUE(WriteSafetensors(tmp.Join("multi/model.safetensors"),
                               {golden.begin(), golden.end()}, {})
                  .ok());
  auto multi = LoadForSequenceClassification(tmp.Join("multi"));
  ASSERT_FALSE(multi.ok());
  EXPECT_TRUE(
      absl::StrContains(multi.status().message(), "multi_label_classification"))
      << multi.status();
  // No weights at all.
  ASSERT_TRUE(MakeDirs(tmp.Join("empty")).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("empty/config.json"),
                              *ReadFile(GoldenDir() + "/config.json"))
                  .ok());
  auto empty = LoadForQuestionAnswering(tmp.Join("empty"));
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(absl::StrContains(empty.status().message(), tmp.Join("empty")))
      << empty.status();
}

// ------------------------------------------------------ question answering

TEST_F(HeadsTest, QaLossAndGradientsMatchHf) {
  auto model = Qa();
  model->answer_class_start = AnswerClassStart::kHf;
  auto out = model->Loss(Inputs(), hf_.at("qa.in.p_mask"), QaLabels());
  ASSERT_EQ(out.loss.sizes(), torch::IntArrayRef{2});
  EXPECT_LT(ReportDiff("qa.loss", out.loss.mean(), hf_.at("qa.out.loss")),
            kTol);
  out.loss.mean().backward();
  auto params = model->named_parameters();
  int compared = 0;
  for (const auto& [name, g] : hf_) {
    if (!absl::StartsWith(name, "qa.grad.")) continue;
    const std::string param = name.substr(8);
    ASSERT_NE(params.find(param), nullptr) << param;
    EXPECT_LT(ReportDiff("qa.grad." + param, params[param].grad(), g), kTol)
        << param;
    ++compared;
  }
  EXPECT_EQ(compared, 12);  // 11 head tensors + one backbone weight
}

TEST_F(HeadsTest, QaBeamMatchesHf) {
  auto model = Qa();
  torch::NoGradGuard no_grad;
  auto beam = model->Predict(Inputs(), hf_.at("qa.in.p_mask"));
  const int64_t ks = 5, ke = 5;
  // Ours are log-probabilities, HF's probabilities.
  EXPECT_LT(ReportDiff("qa.start_top_probs", beam.start_top_log_probs.exp(),
                       hf_.at("qa.out.start_top_log_probs")),
            kTol);
  EXPECT_TRUE(
      torch::equal(beam.start_top_index, hf_.at("qa.out.start_top_index")));
  EXPECT_LT(ReportDiff("qa.end_top_probs",
                       BeamToHfOrder(beam.end_top_log_probs.exp(), ks, ke),
                       hf_.at("qa.out.end_top_log_probs")),
            kTol);
  EXPECT_TRUE(torch::equal(BeamToHfOrder(beam.end_top_index, ks, ke),
                           hf_.at("qa.out.end_top_index")));
  EXPECT_LT(
      ReportDiff("qa.cls_logits", beam.cls_logits, hf_.at("qa.out.cls_logits")),
      kTol);
  // Official order: entry s * Ke + e belongs to the s-th start.
  auto hidden = model->transformer->forward(Inputs()).last_hidden_state;
  auto p_mask = hf_.at("qa.in.p_mask");
  for (int64_t s = 0; s < ks; ++s) {
    auto start = beam.start_top_index.select(1, s);
    auto end = model->end_logits(
        hidden, hidden.gather(1, start.view({2, 1, 1}).expand({2, 1, 64})),
        p_mask);
    auto best = torch::log_softmax(end.squeeze(1), -1).topk(ke, -1);
    EXPECT_TRUE(torch::equal(std::get<1>(best),
                             beam.end_top_index.narrow(1, s * ke, ke)))
        << "start " << s;
  }
}

TEST_F(HeadsTest, OfficialAnswerClassIsTheSoftmaxWeightedStart) {
  auto model = Qa();
  torch::NoGradGuard no_grad;
  auto hidden = model->transformer->forward(Inputs()).last_hidden_state;
  auto p_mask = hf_.at("qa.in.p_mask");
  auto labels = QaLabels();
  model->answer_class_start = AnswerClassStart::kOfficial;
  auto official = model->HeadLoss(hidden, p_mask, labels);
  model->answer_class_start = AnswerClassStart::kHf;
  auto hf = model->HeadLoss(hidden, p_mask, labels);

  // By hand, element by element.
  const auto& ws = model->start_logits->dense->weight;  // [1, D]
  const auto& bs = model->start_logits->dense->bias;
  const auto& w0 = model->answer_class->dense_0->weight;  // [D, 2D]
  const auto& b0 = model->answer_class->dense_0->bias;
  const auto& w1 = model->answer_class->dense_1->weight;  // [1, D]
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<double> logit(12);
    double max_logit = -1e300;
    for (int64_t l = 0; l < 12; ++l) {
      logit[l] = p_mask[b][l].item<double>() != 0
                     ? -1e30
                     : (hidden[b][l] * ws[0]).sum().item<double>() +
                           bs[0].item<double>();
      max_logit = std::max(max_logit, logit[l]);
    }
    double z = 0;
    for (double v : logit) z += std::exp(v - max_logit);
    auto start = torch::zeros({64}, torch::kDouble);
    for (int64_t l = 0; l < 12; ++l) {
      start +=
          std::exp(logit[l] - max_logit) / z * hidden[b][l].to(torch::kDouble);
    }
    auto cls =
        hidden[b][labels.cls_index[b].item<int64_t>()].to(torch::kDouble);
    auto feature =
        torch::tanh(torch::mv(w0.to(torch::kDouble), torch::cat({start, cls})) +
                    b0.to(torch::kDouble));
    const double cls_logit =
        torch::dot(w1[0].to(torch::kDouble), feature).item<double>();
    EXPECT_NEAR(official.cls_logits[b].item<double>(), cls_logit, 1e-5) << b;
    // Only the answer-class term differs from HF's mode.
    const double y = labels.is_impossible[b].item<double>();
    const auto bce = [&](double x) {
      return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
    };
    EXPECT_NEAR(official.loss[b].item<double>() - hf.loss[b].item<double>(),
                0.5 * (bce(cls_logit) - bce(hf.cls_logits[b].item<double>())),
                1e-5)
        << b;
  }
  EXPECT_TRUE(torch::equal(official.start_logits, hf.start_logits));
  EXPECT_TRUE(torch::equal(official.end_logits, hf.end_logits));
  EXPECT_GT((official.cls_logits - hf.cls_logits).abs().max().item<double>(),
            1e-4)
      << "the two modes should differ on this data";
  // Inference uses the weighted start in both modes.
  auto beam = model->HeadPredict(hidden, p_mask, labels.cls_index);
  EXPECT_LT(MaxAbsDiff(beam.cls_logits, official.cls_logits), 1e-6);
  EXPECT_EQ(ParseEnum<AnswerClassStart>("official"),
            AnswerClassStart::kOfficial);
  EXPECT_EQ(ParseEnum<AnswerClassStart>("hf"), AnswerClassStart::kHf);
  EXPECT_FALSE(ParseEnum<AnswerClassStart>("HF!").has_value());
}

TEST_F(HeadsTest, PMaskExcludesPositionsInAnyDtype) {
  auto model = Qa();
  torch::NoGradGuard no_grad;
  auto p_mask = hf_.at("qa.in.p_mask");
  auto masked = p_mask != 0;
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    AutocastGuard autocast(torch::kCPU, dtype);
    auto beam = model->Predict(Inputs(), p_mask);
    EXPECT_TRUE(torch::isfinite(beam.start_top_log_probs).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(beam.end_top_log_probs).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(beam.cls_logits).all().item<bool>());
    for (int64_t b = 0; b < 2; ++b) {
      for (const auto& index :
           {beam.start_top_index[b], beam.end_top_index[b]}) {
        EXPECT_FALSE(masked[b].index_select(0, index).any().item<bool>())
            << "a masked position was predicted in row " << b;
      }
    }
    auto hidden = model->transformer->forward(Inputs()).last_hidden_state;
    auto start = model->start_logits(hidden, p_mask);
    EXPECT_EQ(start.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::all(start.masked_select(masked) == -1e30).item<bool>());
    auto loss = model->HeadLoss(hidden, p_mask, QaLabels()).loss;
    EXPECT_TRUE(torch::isfinite(loss).all().item<bool>());
  }
  // Without p_mask the masked positions do win some of the beam.
  auto beam = model->Predict(Inputs(), torch::Tensor());
  EXPECT_TRUE(masked.gather(1, beam.start_top_index).any().item<bool>());
}

TEST(HeadsGradCheck, QaHeadLossInDouble) {
  XLNetConfig config = testing::TinyConfig();
  config.d_model = 8;
  config.n_head = 2;
  config.d_head = 4;
  config.dropout = 0.0;
  config.start_n_top = 2;
  config.end_n_top = 2;
  torch::manual_seed(3);
  XLNetForQuestionAnswering model(config);
  model->ResetHeadParameters(4);
  model->to(torch::kDouble);
  model->eval();
  auto hidden = torch::randn({2, 6, 8}, torch::kDouble);
  auto p_mask = torch::zeros({2, 6});
  p_mask[0][1] = 1;
  p_mask[1][4] = 1;
  QuestionAnsweringLabels labels;
  labels.start_positions = torch::tensor({2, 5});
  labels.end_positions = torch::tensor({3, 5});
  labels.cls_index = torch::tensor({5, 5});
  labels.is_impossible = torch::tensor({0.0, 1.0});
  for (auto mode : {AnswerClassStart::kOfficial, AnswerClassStart::kHf}) {
    model->answer_class_start = mode;
    // d loss / d hidden through every op of the head (parameter gradients
    // are compared with HF's in QaLossAndGradientsMatchHf).
    const double diff = GradCheck(
        [&](const std::vector<torch::Tensor>& in) {
          return model->HeadLoss(in[0], p_mask, labels).loss.sum();
        },
        {hidden});
    std::printf("[ diff     ] gradcheck qa head (%s) max_abs_diff=%.3g\n",
                EnumName(mode), diff);
    EXPECT_LT(diff, 1e-6) << EnumName(mode);
  }
}

}  // namespace
}  // namespace xlnet
