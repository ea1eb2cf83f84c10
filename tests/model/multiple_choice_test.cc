// XLNetForMultipleChoice (model/multiple_choice.h): HF's layout (one shared
// summary head scoring every option of a question), its loss, and loading
// and saving through model_io (the head is fresh unless the directory says
// XLNetForMultipleChoice).
#include "model/multiple_choice.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"
#include "tests/model/test_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::ReadTensors;

class MultipleChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = ReadTensors(GoldenDir() + "/inputs.safetensors");
  }
  // The golden rows [2, L] as options: [1, 2, L] (one question, two
  // options) or, with `questions` = 2, [2, 2, L] (the second question has
  // the options swapped).
  XLNetInputs Choices(int questions) {
    XLNetInputs x;
    for (const char* name :
         {"input_ids", "token_type_ids", "attention_mask"}) {
      const torch::Tensor rows = in_.at(name);  // [2, L]
      torch::Tensor t = rows.unsqueeze(0);      // [1, 2, L]
      if (questions == 2) {
        t = torch::stack({rows, rows.flip({0})});  // [2, 2, L]
      }
      if (std::string(name) == "input_ids") x.input_ids = t;
      if (std::string(name) == "token_type_ids") x.token_type_ids = t;
      if (std::string(name) == "attention_mask") x.attention_mask = t;
    }
    return x;
  }
  XLNetForMultipleChoice Load(const std::string& dir, uint64_t seed = 3) {
    HeadLoadOptions options;
    options.seed = seed;
    auto model = LoadForMultipleChoice(dir, options);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    (*model)->eval();
    return *model;
  }
  std::map<std::string, torch::Tensor> in_;
};

TEST_F(MultipleChoiceTest, EveryOptionIsScoredByTheSharedHead) {
  XLNetForMultipleChoice model = Load(GoldenDir());
  ASSERT_TRUE(model);
  EXPECT_EQ(model->logits_proj->weight.sizes(),
            (std::vector<int64_t>{1, model->config().d_model}));
  EXPECT_EQ(model->logits_proj->bias.sizes(), (std::vector<int64_t>{1}));
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(Choices(2));
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 2}));
  // Option c of question b is the golden row scored alone: transformer,
  // summary (last position), logits_proj.
  for (int64_t row = 0; row < 2; ++row) {
    XLNetInputs one;
    one.input_ids = in_.at("input_ids").slice(0, row, row + 1);
    one.token_type_ids = in_.at("token_type_ids").slice(0, row, row + 1);
    one.attention_mask = in_.at("attention_mask").slice(0, row, row + 1);
    const torch::Tensor hidden =
        model->transformer->forward(one).last_hidden_state;
    const double alone =
        model->logits_proj(model->sequence_summary(hidden)).item<double>();
    EXPECT_NEAR(logits[0][row].item<double>(), alone, 1e-5) << row;
    EXPECT_NEAR(logits[1][1 - row].item<double>(), alone, 1e-5) << row;
  }
}

TEST_F(MultipleChoiceTest, LossIsCrossEntropyOverTheOptions) {
  XLNetForMultipleChoice model = Load(GoldenDir());
  ASSERT_TRUE(model);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(Choices(2));
  const torch::Tensor labels = torch::tensor({1, 0}, torch::kLong);
  const torch::Tensor loss = MultipleChoiceLoss(logits, labels);
  ASSERT_EQ(loss.sizes(), (std::vector<int64_t>{2}));
  const torch::Tensor expected = torch::nn::functional::cross_entropy(
      logits, labels,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  EXPECT_TRUE(torch::allclose(loss, expected, 1e-6, 1e-6));
  // Both questions have the same options, swapped, and the labels follow
  // them: the same loss.
  EXPECT_NEAR(loss[0].item<double>(), loss[1].item<double>(), 1e-5);
  EXPECT_THROW(MultipleChoiceLoss(logits.slice(1, 0, 1), labels.slice(0, 0, 1)),
               c10::Error);
  XLNetInputs flat;
  flat.input_ids = in_.at("input_ids");  // [2, L]: not [B, C, L]
  EXPECT_THROW(model->forward(flat), c10::Error);
}

TEST_F(MultipleChoiceTest, PretrainedBackboneWithASeededFreshHead) {
  XLNetForMultipleChoice a = Load(GoldenDir(), 5);
  torch::manual_seed(999);  // the head must not depend on the global stream
  XLNetForMultipleChoice b = Load(GoldenDir(), 5);
  XLNetForMultipleChoice c = Load(GoldenDir(), 6);
  ASSERT_TRUE(a && b && c);
  auto pb = b->named_parameters();
  for (const auto& item : a->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
  EXPECT_FALSE(torch::equal(a->logits_proj->weight, c->logits_proj->weight));
  EXPECT_TRUE(torch::equal(a->logits_proj->bias, torch::zeros({1})));
  const auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  EXPECT_TRUE(torch::equal(a->transformer->mask_emb,
                           golden.at("transformer.mask_emb")));
  EXPECT_TRUE(torch::equal(a->transformer->word_embedding->weight,
                           golden.at("transformer.word_embedding.weight")));
}

TEST_F(MultipleChoiceTest, SaveLoadRoundTripAndClassifierStart) {
  testing::TempDir tmp;
  // A fine-tuned 3-class classifier: its head has the same names, other
  // shapes; a multiple-choice model takes only its backbone.
  HeadLoadOptions three;
  three.labels = {"a", "b", "c"};
  three.seed = 11;
  auto cls = LoadForSequenceClassification(GoldenDir(), three);
  ASSERT_TRUE(cls.ok()) << cls.status();
  {
    torch::NoGradGuard no_grad;
    (*cls)->transformer->mask_emb.add_(0.5);  // differs from the golden one
  }
  ASSERT_TRUE(SavePretrained(**cls, tmp.Join("cls")).ok());
  XLNetForMultipleChoice from_cls = Load(tmp.Join("cls"), 7);
  ASSERT_TRUE(from_cls);
  EXPECT_TRUE(torch::equal(from_cls->transformer->mask_emb,
                           (*cls)->transformer->mask_emb));
  XLNetForMultipleChoice fresh = Load(GoldenDir(), 7);
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(torch::equal(from_cls->logits_proj->weight,
                           fresh->logits_proj->weight));
  EXPECT_FALSE(torch::equal(from_cls->sequence_summary->summary->weight,
                            (*cls)->sequence_summary->summary->weight));

  // Saved: XLNetForMultipleChoice with HF names; loaded back: the head too.
  ASSERT_TRUE(SavePretrained(*from_cls, tmp.Join("mc")).ok());
  auto json = ReadFile(tmp.Join("mc/config.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(absl::StrContains(*json, "\"XLNetForMultipleChoice\"")) << *json;
  EXPECT_FALSE(absl::StrContains(*json, "problem_type")) << *json;
  const auto stored = ReadTensors(tmp.Join("mc/model.safetensors"));
  EXPECT_EQ(stored.size(), from_cls->named_parameters().size());
  const int64_t d = from_cls->config().d_model;
  EXPECT_EQ(stored.at("logits_proj.weight").sizes(),
            (std::vector<int64_t>{1, d}));
  EXPECT_EQ(stored.at("logits_proj.bias").sizes(), (std::vector<int64_t>{1}));
  EXPECT_EQ(stored.at("sequence_summary.summary.weight").sizes(),
            (std::vector<int64_t>{d, d}));
  EXPECT_EQ(stored.count("transformer.word_embedding.weight"), 1u);
  {
    torch::NoGradGuard no_grad;
    from_cls->logits_proj->bias.fill_(0.25);  // not what a fresh head has
  }
  ASSERT_TRUE(SavePretrained(*from_cls, tmp.Join("mc2")).ok());
  XLNetForMultipleChoice loaded = Load(tmp.Join("mc2"), 99);
  ASSERT_TRUE(loaded);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(loaded->forward(Choices(2)),
                           from_cls->forward(Choices(2))));
  EXPECT_EQ(loaded->logits_proj->bias.item<float>(), 0.25f);

  // A classifier starting from the multiple-choice model's directory gets
  // its backbone as well.
  auto back = LoadForSequenceClassification(tmp.Join("mc2"), three);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->logits_proj->weight.size(0), 3);
  EXPECT_TRUE(torch::equal((*back)->transformer->mask_emb,
                           from_cls->transformer->mask_emb));
  EXPECT_TRUE(
      torch::equal((*back)->logits_proj->weight, (*cls)->logits_proj->weight));
}

}  // namespace
}  // namespace xlnet
