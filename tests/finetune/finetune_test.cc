// The config and tokenizer of an xlnet-finetune run (finetune/finetune.h):
// the text rules (data.uncased, data.keep_accents) the model was pretrained
// with are the ones fine-tuning encodes with; and the predictions file
// (finetune_unit.h PredictionsTsv).
#include "finetune/finetune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "config/config.h"
#include "data_pipeline/tokenizer_rules.h"
#include "finetune/examples.h"
#include "finetune/finetune_unit.h"
#include "model_io/model_dir.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/model/test_util.h"
#include "tests/test_util.h"

namespace xlnet::finetune {
namespace {

using testing::SmallTokenizer;

// A model directory as --init sees it: config.json of a small model,
// spiece.model, and (unless `rules` is null) the config.yaml of the run that
// trained it with those text rules, its spiece.model recording them as
// `xlnet-data tokenizer` does; with null rules, a tokenizer made elsewhere
// (no record).
void WriteInitDir(const std::string& dir, const DataConfig* rules) {
  XLNetConfig model = xlnet::testing::TinyConfig();
  model.vocab_size = 1000;  // the test tokenizer's
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(
      WriteFileAtomic(dir + "/config.json", ModelConfigToJson(model)).ok());
  auto tokenizer =
      rules == nullptr
          ? data::WithoutTextRules(SmallTokenizer().model_bytes())
          : data::RecordTextRules(SmallTokenizer().model_bytes(),
                                  {rules->uncased, rules->keep_accents});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_TRUE(WriteFileAtomic(dir + "/spiece.model", *tokenizer).ok());
  if (rules != nullptr) {
    Config trained;
    trained.model = model;
    trained.data.uncased = rules->uncased;
    trained.data.keep_accents = rules->keep_accents;
    ASSERT_TRUE(
        WriteFileAtomic(dir + "/config.yaml", ConfigToYaml(trained)).ok());
  }
}

// The input ids of "Hello there" and "hello there" as fine-tuning encodes
// them with --init `dir`, the run config `overrides`.
std::vector<torch::Tensor> EncodeBothCases(
    const std::string& dir, const std::vector<std::string>& overrides) {
  auto config = LoadFinetuneConfig("", overrides, dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  auto tokenizer = LoadFinetuneTokenizer(*config, "", dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return {};
  std::vector<TextExample> examples(2);
  examples[0].text_a = "Hello there";
  examples[1].text_a = "hello there";
  auto enc = EncodeExamples(examples, **tokenizer, TaskKind::kClassification,
                            nullptr, FeatureOptions{16});
  EXPECT_TRUE(enc.ok()) << enc.status();
  if (!enc.ok()) return {};
  return {enc->input_ids[0], enc->input_ids[1]};
}

TEST(FinetuneTextRulesTest, UncasedModelEncodesBothCasesAlike) {
  xlnet::testing::TempDir tmp;
  DataConfig uncased;
  uncased.uncased = true;
  WriteInitDir(tmp.Join("uncased"), &uncased);
  const auto ids = EncodeBothCases(tmp.Join("uncased"), {});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_TRUE(torch::equal(ids[0], ids[1]));

  // The cased tokenizer tells them apart, so the test above means something.
  DataConfig cased;
  WriteInitDir(tmp.Join("cased"), &cased);
  const auto cased_ids = EncodeBothCases(tmp.Join("cased"), {});
  ASSERT_EQ(cased_ids.size(), 2u);
  EXPECT_FALSE(torch::equal(cased_ids[0], cased_ids[1]));
}

TEST(FinetuneTextRulesTest, ModelRulesAreTakenAndAContradictionRefused) {
  xlnet::testing::TempDir tmp;
  DataConfig uncased;
  uncased.uncased = true;
  uncased.keep_accents = true;
  WriteInitDir(tmp.path(), &uncased);
  auto config = LoadFinetuneConfig("", {"data.uncased=true"}, tmp.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->data.uncased);
  EXPECT_TRUE(config->data.keep_accents);
  // ...and the run records them (RUN/config.yaml, its checkpoints, best/).
  auto reparsed = ParseConfig(ConfigToYaml(*config), "resolved");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_TRUE(reparsed->data.uncased);
  auto tokenizer = LoadFinetuneTokenizer(*config, "", tmp.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->rules().uncased);
  EXPECT_TRUE((*tokenizer)->rules().keep_accents);
  // A run config that says otherwise is refused, naming it and the
  // tokenizer whose record decides.
  auto refused =
      LoadFinetuneConfig("", {"data.keep_accents=false"}, tmp.path());
  ASSERT_FALSE(refused.ok());
  const std::string msg(refused.status().message());
  EXPECT_NE(msg.find("data.keep_accents (--set data.keep_accents=false) says "
                     "keep_accents=false but the tokenizer " +
                     tmp.Join("spiece.model") +
                     " was trained with keep_accents=true"),
            std::string::npos)
      << msg;
}

TEST(FinetuneTextRulesTest, WithoutConfigYamlTheRunConfigDecides) {
  xlnet::testing::TempDir tmp;
  WriteInitDir(tmp.path(), nullptr);  // e.g. a HuggingFace directory
  auto config = LoadFinetuneConfig("", {}, tmp.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->data.uncased);
  const auto set = EncodeBothCases(tmp.path(), {"data.uncased=true"});
  ASSERT_EQ(set.size(), 2u);
  EXPECT_TRUE(torch::equal(set[0], set[1]));
  const auto unset = EncodeBothCases(tmp.path(), {});
  ASSERT_EQ(unset.size(), 2u);
  EXPECT_FALSE(torch::equal(unset[0], unset[1]));
}

// A HuggingFace directory (e.g. from xlnet-export) states its casing in
// tokenizer_config.json; it decides when there is no config.yaml.
TEST(FinetuneTextRulesTest, HfTokenizerConfigDecidesWithoutConfigYaml) {
  xlnet::testing::TempDir tmp;
  WriteInitDir(tmp.path(), nullptr);
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("tokenizer_config.json"),
                              R"({"tokenizer_class": "XLNetTokenizer",
                                  "do_lower_case": true,
                                  "keep_accents": false})")
                  .ok());
  auto config = LoadFinetuneConfig("", {}, tmp.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->data.uncased);
  auto refused = LoadFinetuneConfig("", {"data.uncased=false"}, tmp.path());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("says uncased=false but " +
                                            tmp.Join("tokenizer_config.json") +
                                            " says uncased=true"),
            std::string::npos)
      << refused.status();
  const auto ids = EncodeBothCases(tmp.path(), {});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_TRUE(torch::equal(ids[0], ids[1]));
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("tokenizer_config.json"),
                              R"({"do_lower_case": "yes"})")
                  .ok());
  auto bad = LoadFinetuneConfig("", {}, tmp.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("do_lower_case must be true or false"),
            std::string::npos)
      << bad.status();
}

// Keys fine-tuning does not read are errors naming the command and the key,
// in a file (with its line) and with --set; the keys it reads still work.
TEST(FinetuneConfigScopeTest, UnreadKeysAreErrorsNamingTheCommand) {
  xlnet::testing::TempDir tmp;
  WriteInitDir(tmp.path(), nullptr);
  for (const char* set :
       {"train.attention=tiled", "train.activation_checkpointing=true",
        "data.seq_len=64", "data.sources=[{path: x}]"}) {
    auto config = LoadFinetuneConfig("", {set}, tmp.path());
    ASSERT_FALSE(config.ok()) << set;
    const std::string message(config.status().message());
    EXPECT_NE(message.find("is not read by xlnet-finetune"), std::string::npos)
        << message;
    EXPECT_EQ(message.rfind(std::string("--set ") + set, 0), 0u) << message;
  }
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("ft.yaml"),
                              "train:\n  lr: 0.001\n  attention: sdpa\n")
                  .ok());
  auto config = LoadFinetuneConfig(tmp.Join("ft.yaml"), {}, tmp.path());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(std::string(config.status().message()),
            tmp.Join("ft.yaml") +
                ":3: train.attention is not read by xlnet-finetune "
                "(fine-tuning runs the unfused attention core); remove it");
  config = LoadFinetuneConfig(
      "", {"data.tokenizer=" + tmp.Join("spiece.model"), "train.lr=0.01"},
      tmp.path());
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST(FinetuneTextRulesTest, BadInitConfigYamlIsAnErrorNamingIt) {
  xlnet::testing::TempDir tmp;
  WriteInitDir(tmp.path(), nullptr);
  ASSERT_TRUE(
      WriteFileAtomic(tmp.Join("config.yaml"), "data:\n  uncased: maybe\n")
          .ok());
  auto config = LoadFinetuneConfig("", {}, tmp.path());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find(tmp.Join("config.yaml")),
            std::string::npos)
      << config.status();
}

TEST(FinetuneTextRulesTest, TokenizerLargerThanTheModelIsRefused) {
  xlnet::testing::TempDir tmp;
  WriteInitDir(tmp.path(), nullptr);
  auto config = LoadFinetuneConfig("", {}, tmp.path());
  ASSERT_TRUE(config.ok()) << config.status();
  config->model.vocab_size = 500;
  auto tokenizer = LoadFinetuneTokenizer(*config, "", tmp.path());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.status().message().find("vocab_size is 500"),
            std::string::npos)
      << tokenizer.status();
}

// --tokenizer or data.tokenizer beside an --init model that carries its own
// spiece.model: another tokenizer of the same size (here trained on the same
// text lowercased) is refused naming both files; the same file is fine.
TEST(FinetuneTokenizerTest, ADifferentTokenizerOfTheSameSizeIsRefused) {
  xlnet::testing::TempDir tmp;
  const std::string init = tmp.Join("init");
  WriteInitDir(init, nullptr);
  data::TokenizerTrainOptions options;
  options.inputs = {std::string(XLNET_SOURCE_DIR) +
                    "/data/sample/brown_sample.txt"};
  options.vocab_size = SmallTokenizer().vocab_size();
  options.rules.uncased = true;
  auto other_bytes = data::TrainTokenizer(options);
  ASSERT_TRUE(other_bytes.ok()) << other_bytes.status();
  auto other = data::Tokenizer::FromBytes(*other_bytes, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ((*other)->vocab_size(), SmallTokenizer().vocab_size());
  ASSERT_NE((*other)->hash(), SmallTokenizer().hash());
  const std::string other_path = tmp.Join("other.model");
  const std::string same_path = tmp.Join("same.model");
  ASSERT_TRUE(WriteFileAtomic(other_path, *other_bytes).ok());
  auto same = ReadFile(init + "/spiece.model");
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(WriteFileAtomic(same_path, *same).ok());

  auto config = LoadFinetuneConfig("", {}, init);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(LoadFinetuneTokenizer(*config, same_path, init).ok());
  auto refused = LoadFinetuneTokenizer(*config, other_path, init);
  Config from_data = *config;
  from_data.data.tokenizer = other_path;
  auto refused_too = LoadFinetuneTokenizer(from_data, "", init);
  for (const auto* result : {&refused, &refused_too}) {
    ASSERT_FALSE(result->ok());
    const absl::Status& s = result->status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find(other_path), std::string::npos) << s;
    EXPECT_NE(s.message().find(init + "/spiece.model"), std::string::npos) << s;
  }
}

TEST(PredictionsTsvTest, ClassificationProbabilitiesSumToOneAndMatchTheLabel) {
  Predictions p;
  p.ids = {"a", "b\tc", "d"};
  p.labels = {"neg", "neu", "pos"};
  p.logits = torch::tensor(
      {{2.0f, -1.0f, 0.5f}, {-3.0f, 0.0f, 7.25f}, {0.0f, 40.0f, -40.0f}});
  p.values = {"neg", "pos", "neu"};  // the argmax, as Score writes it
  const std::string text = PredictionsTsv(p, /*regression=*/false);
  const std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "id\tprediction\tprob_neg\tprob_neu\tprob_pos");
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = absl::StrSplit(lines[i], '\t');
    ASSERT_EQ(cells.size(), 5u) << lines[i];
    double sum = 0;
    size_t best = 0;
    std::vector<double> probs;
    for (size_t c = 2; c < cells.size(); ++c) {
      double v = 0;
      ASSERT_TRUE(absl::SimpleAtod(cells[c], &v)) << cells[c];
      EXPECT_GE(v, 0.0);
      probs.push_back(v);
      sum += v;
      if (v > probs[best]) best = probs.size() - 1;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << lines[i];
    EXPECT_EQ(cells[1], p.labels[best]) << lines[i];
  }
  // The id's tab is written as a space; 6 significant digits.
  EXPECT_EQ(lines[2].substr(0, 8), "b c\tpos\t");
  const double expected =
      std::exp(2.0) / (std::exp(2.0) + std::exp(-1.0) + std::exp(0.5));
  const std::vector<std::string> first = absl::StrSplit(lines[1], '\t');
  EXPECT_EQ(first[2], absl::StrFormat("%.6g", expected));
}

TEST(PredictionsTsvTest, RegressionWritesTheValueOnly) {
  Predictions p;
  p.ids = {"0", "1"};
  p.logits = torch::tensor({{0.25f}, {-1.5f}});
  p.values = {"0.25", "-1.5"};
  EXPECT_EQ(PredictionsTsv(p, /*regression=*/true),
            "id\tprediction\n0\t0.25\n1\t-1.5\n");
}

}  // namespace
}  // namespace xlnet::finetune
