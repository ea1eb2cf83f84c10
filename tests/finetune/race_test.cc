// Multiple choice (finetune/race.h): the RACE directory and JSON Lines
// readers on the bundled sample (data/race_sample), bad questions named by
// file and question id, the official run_race.py encoding, the metrics with
// RACE's middle/high split, and a tiny xlnet-finetune run end to end
// (accuracy by level, predictions, RUN/best and its export).
#include "finetune/race.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "finetune/chunks.h"
#include "finetune/finetune.h"
#include "model/xlnet.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/export.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/model/test_util.h"
#include "tests/test_util.h"

namespace xlnet::finetune {
namespace {

using testing::SmallTokenizer;
using xlnet::testing::SourcePath;
using xlnet::testing::TempDir;

std::string Sample(const std::string& name) {
  return SourcePath("data/race_sample/" + name);
}

MultipleChoiceSet MustRead(const std::string& path,
                           MultipleChoiceReadOptions options = {}) {
  auto set = ReadMultipleChoice(path, options);
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? *set : MultipleChoiceSet{};
}

// Reads RACE JSON text as file `name` inside a temporary directory.
absl::StatusOr<MultipleChoiceSet> ReadText(const TempDir& tmp,
                                           const std::string& name,
                                           const std::string& text,
                                           MultipleChoiceReadOptions options) {
  const std::string path = tmp.Join(name);
  EXPECT_TRUE(MakeDirs(tmp.path()).ok());
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return ReadMultipleChoice(path, options);
}

// ------------------------------------------------------------------ reading

TEST(RaceReaderTest, OfficialLayoutAndJsonLinesAgree) {
  const MultipleChoiceSet dir = MustRead(Sample("train"));
  ASSERT_EQ(dir.examples.size(), 10u);
  EXPECT_EQ(dir.num_choices, 4);
  EXPECT_EQ(dir.skipped, 0);
  // Sorted paths: train/high/h001.txt first; ids "<file id>-<index>".
  const MultipleChoiceExample& first = dir.examples[0];
  EXPECT_EQ(first.id, "high001.txt-0");
  EXPECT_EQ(first.level, "high");
  EXPECT_EQ(first.options.size(), 4u);
  EXPECT_EQ(first.label, 1);  // "B"
  EXPECT_TRUE(absl::StrContains(first.location, "h001.txt"));
  int middle = 0;
  for (const auto& ex : dir.examples) middle += ex.level == "middle";
  EXPECT_EQ(middle, 5);

  const MultipleChoiceSet jsonl = MustRead(Sample("train.jsonl"));
  ASSERT_EQ(jsonl.examples.size(), dir.examples.size());
  for (size_t i = 0; i < dir.examples.size(); ++i) {
    const auto& a = dir.examples[i];
    const auto& b = jsonl.examples[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.article, b.article);
    EXPECT_EQ(a.question, b.question);
    EXPECT_EQ(a.options, b.options);
    EXPECT_EQ(a.label, b.label);
    EXPECT_EQ(a.level, b.level);  // JSON Lines: from the "high..." ids
  }
  EXPECT_EQ(jsonl.examples[0].location, Sample("train.jsonl") + ":1");

  // One file alone; its level comes from its directory.
  const MultipleChoiceSet one = MustRead(Sample("dev/middle/m101.txt"));
  ASSERT_EQ(one.examples.size(), 2u);
  EXPECT_EQ(one.examples[1].id, "middle101.txt-1");
  EXPECT_EQ(one.examples[1].level, "middle");
  EXPECT_EQ(one.examples[1].label, 0);
}

TEST(RaceReaderTest, JsonLinesLabelsAsLettersOrIndices) {
  TempDir tmp;
  MultipleChoiceReadOptions options;
  auto set = ReadText(tmp, "a.jsonl",
                      "{\"id\": 7, \"article\": \"x\", \"question\": \"q\", "
                      "\"options\": [\"a\", \"b\", \"c\"], \"label\": 2}\n"
                      "{\"article\": \"x\", \"question\": \"\", "
                      "\"options\": [\"a\", \"b\", \"c\"], \"label\": \"A\"}\n",
                      options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 2u);
  EXPECT_EQ(set->num_choices, 3);
  EXPECT_EQ(set->examples[0].id, "7");
  EXPECT_EQ(set->examples[0].label, 2);
  EXPECT_EQ(set->examples[0].level, "");
  EXPECT_EQ(set->examples[1].id, "1");  // the data line's index
  EXPECT_EQ(set->examples[1].label, 0);
}

// The error of reading `text` (a RACE file or, for a .jsonl name, JSON
// Lines) must name `name` and contain every one of `parts`.
void ExpectBad(const std::string& name, const std::string& text,
               const std::vector<std::string>& parts) {
  TempDir tmp;
  MultipleChoiceReadOptions options;
  auto set = ReadText(tmp, name, text, options);
  ASSERT_FALSE(set.ok()) << text;
  const std::string message(set.status().message());
  EXPECT_TRUE(absl::StrContains(message, tmp.Join(name))) << message;
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(message, part)) << message;
  }
  // With bad_rows: skip the same question is skipped and reported.
  options.bad_rows = BadRowPolicy::kSkip;
  auto skipped = ReadMultipleChoice(tmp.Join(name), options);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_GE(skipped->skipped, 1);
  ASSERT_FALSE(skipped->problems.empty());
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(skipped->problems[0], part))
        << skipped->problems[0];
  }
}

std::string RaceJson(const std::string& options, const std::string& answers) {
  return "{\"article\": \"An article.\", \"questions\": [\"Q1?\", \"Q2?\"], "
         "\"options\": " +
         options + ", \"answers\": " + answers + ", \"id\": \"high9.txt\"}";
}

TEST(RaceReaderTest, BadQuestionsNameTheFileAndQuestionId) {
  const std::string four = "[\"a\", \"b\", \"c\", \"d\"]";
  // Another number of options than the questions before it.
  ExpectBad("r.txt",
            RaceJson("[" + four + ", [\"a\", \"b\", \"c\"]]", "[\"A\", \"B\"]"),
            {"question 'high9.txt-1'", "has 3 options", "have 4"});
  // An answer letter outside the options.
  ExpectBad("r.txt", RaceJson("[" + four + ", " + four + "]", "[\"E\", \"B\"]"),
            {"question 'high9.txt-0'", "answer 'E'", "A..D"});
  // An option that is not a string, an empty option.
  ExpectBad(
      "r.txt",
      RaceJson("[" + four + ", [\"a\", 1, \"c\", \"d\"]]", "[\"A\", \"B\"]"),
      {"question 'high9.txt-1'", "option B is not a string"});
  ExpectBad("r.txt",
            RaceJson("[[\"a\", \" \", \"c\", \"d\"], " + four + "]",
                     "[\"A\", \"B\"]"),
            {"question 'high9.txt-0'", "option B is empty"});
  // Whole-file problems name the file and its id.
  ExpectBad("r.txt",
            "{\"questions\": [], \"options\": [], \"answers\": [], "
            "\"id\": \"high9.txt\"}",
            {"id 'high9.txt'", "no \"article\" string"});
  ExpectBad("r.txt", RaceJson("[" + four + "]", "[\"A\", \"B\"]"),
            {"id 'high9.txt'", "2 questions, 1 option lists"});
  // A key given twice: refused, not resolved.
  ExpectBad("r.txt",
            "{\"article\": \"a\", \"article\": \"b\", \"questions\": [], "
            "\"options\": [], \"answers\": [], \"id\": \"high9.txt\"}",
            {"id 'high9.txt'", "duplicate key 'article'"});
  // JSON Lines: file, line and question id.
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"label\": \"A\"}\n"
            "{\"id\": \"q2\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"label\": \"C\"}\n",
            {"q.jsonl:2", "question 'q2'", "answer 'C'"});
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"options\": [\"c\", \"d\"], "
            "\"label\": 0}\n",
            {"q.jsonl:1", "question 'q1'", "duplicate key 'options'"});
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"question\": \"q\", \"options\": [\"a\", "
            "\"b\"], \"label\": 0}\n",
            {"q.jsonl:1", "question 'q1'", "no \"article\" string"});
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"label\": 5}\n",
            {"q.jsonl:1", "question 'q1'", "label 5"});
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"label\": 0}\n"
            "{\"id\": \"q1\", \"article\": \"y\", \"question\": \"q\", "
            "\"options\": [\"a\", \"b\"], \"label\": 1}\n",
            {"q.jsonl:2", "question 'q1'", "duplicate question id"});
  ExpectBad("q.jsonl",
            "{\"id\": \"q1\", \"article\": \"x\", \"question\": \"q\", "
            "\"options\": [\"a\"], \"label\": 0}\n",
            {"q.jsonl:1", "question 'q1'", "has 1 options"});
}

TEST(RaceReaderTest, SkipKeepsTheGoodQuestionsAndUnlabeledNeedsAFlag) {
  TempDir tmp;
  MultipleChoiceReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  const std::string four = "[\"a\", \"b\", \"c\", \"d\"]";
  auto set = ReadText(
      tmp, "r.txt", RaceJson("[" + four + ", " + four + "]", "[\"A\", \"Z\"]"),
      options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 1u);
  EXPECT_EQ(set->examples[0].id, "high9.txt-0");
  EXPECT_EQ(set->skipped, 1);

  // Without answers: an error unless labels are optional.
  MultipleChoiceReadOptions labelled;
  labelled.unlabeled_hint = "add --do_predict";
  const std::string text =
      "{\"article\": \"An article.\", \"questions\": [\"Q?\"], \"options\": "
      "[" +
      four + "], \"id\": \"m1.txt\"}";
  auto bad = ReadText(tmp, "u.txt", text, labelled);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "add --do_predict"))
      << bad.status();
  MultipleChoiceReadOptions unlabeled;
  unlabeled.require_label = false;
  auto ok = ReadText(tmp, "u.txt", text, unlabeled);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->examples.size(), 1u);
  EXPECT_EQ(ok->examples[0].label, -1);
}

TEST(RaceReaderTest, BoundsAndMissingFiles) {
  TempDir tmp;
  MultipleChoiceReadOptions options;
  options.max_race_file_bytes = 10;
  auto big = ReadText(tmp, "big.txt", RaceJson("[]", "[]"), options);
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(absl::StrContains(big.status().message(), "big.txt"))
      << big.status();
  ASSERT_TRUE(MakeDirs(tmp.Join("empty/high")).ok());
  auto empty = ReadMultipleChoice(tmp.Join("empty"), {});
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(absl::StrContains(empty.status().message(), "no .txt files"))
      << empty.status();
  auto missing = ReadMultipleChoice(tmp.Join("missing.txt"), {});
  EXPECT_FALSE(missing.ok());
}

// ----------------------------------------------------------------- encoding

TEST(RaceEncodingTest, QuestionWithOptionAsOfficial) {
  EXPECT_EQ(QuestionWithOption("Where was it?", "In the park"),
            "Where was it? In the park");
  EXPECT_EQ(QuestionWithOption("It reached _ .", "the window"),
            "It reached the window .");
  EXPECT_EQ(QuestionWithOption("_ and _", "x"), "x and x");
}

TEST(RaceEncodingTest, PackLayoutAndOfficialTruncation) {
  bool article_cut = true;
  bool qa_cut = true;
  // Fits: [pad pad] a1 a2 <sep> q1 q2 <sep> <cls> in L = 9.
  PackedSequence p =
      PackMultipleChoice({11, 12}, {21, 22}, 9, 4, &article_cut, &qa_cut);
  EXPECT_FALSE(article_cut);
  EXPECT_FALSE(qa_cut);
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{data::kPadId, data::kPadId, 11,
                                               12, data::kSepId, 21, 22,
                                               data::kSepId, data::kClsId}));
  EXPECT_EQ(p.token_type_ids,
            (std::vector<int64_t>{4, 4, 0, 0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(p.attention_mask, (std::vector<float>{0, 0, 1, 1, 1, 1, 1, 1, 1}));
  // qa keeps its LAST max_qa_length tokens; the article its first
  // L - 3 - len(qa).
  p = PackMultipleChoice({11, 12, 13, 14, 15, 16}, {21, 22, 23, 24, 25}, 10, 3,
                         &article_cut, &qa_cut);
  EXPECT_TRUE(article_cut);
  EXPECT_TRUE(qa_cut);
  EXPECT_TRUE(p.truncated);
  EXPECT_EQ(p.input_ids,
            (std::vector<int64_t>{11, 12, 13, 14, data::kSepId, 23, 24, 25,
                                  data::kSepId, data::kClsId}));
  EXPECT_EQ(p.token_type_ids,
            (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1, 1, 2}));
  EXPECT_THROW(PackMultipleChoice({1}, {2}, 6, 3, &article_cut, &qa_cut),
               c10::Error);  // no room for the article
}

TEST(RaceEncodingTest, EveryOptionIsOneSequence) {
  const MultipleChoiceSet set = MustRead(Sample("dev"));
  ASSERT_EQ(set.examples.size(), 4u);
  MultipleChoiceFeatureOptions options;
  options.max_seq_length = 48;
  options.max_qa_length = 16;
  auto enc = EncodeMultipleChoice(set.examples, SmallTokenizer(), options);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids.sizes(), (std::vector<int64_t>{4, 4, 48}));
  EXPECT_EQ(enc->attention_mask.sizes(), (std::vector<int64_t>{4, 4, 48}));
  EXPECT_TRUE(torch::equal(enc->labels, torch::tensor({1, 0, 1, 0})));
  EXPECT_EQ(enc->levels,
            (std::vector<std::string>{"high", "high", "middle", "middle"}));
  // The articles are longer than 48 tokens: every sequence is cut.
  EXPECT_EQ(enc->truncated_articles, 16);
  // Each row: <cls> last, two <sep>, the article (segment 0) first.
  const auto& tok = SmallTokenizer();
  std::vector<int32_t> article;
  ASSERT_TRUE(tok.EncodeIds(set.examples[0].article, &article).ok());
  for (int64_t c = 0; c < 4; ++c) {
    const torch::Tensor ids = enc->input_ids[0][c];
    EXPECT_EQ(ids[47].item<int64_t>(), data::kClsId);
    EXPECT_EQ((ids == data::kSepId).sum().item<int64_t>(), 2);
    std::vector<int32_t> qa;
    ASSERT_TRUE(tok.EncodeIds(QuestionWithOption(set.examples[0].question,
                                                 set.examples[0].options[c]),
                              &qa)
                    .ok());
    const int64_t q = std::min<int64_t>(16, qa.size());
    const int64_t a = 48 - 3 - q;
    EXPECT_EQ(ids[0].item<int64_t>(), article[0]) << c;
    EXPECT_EQ(ids[a - 1].item<int64_t>(), article[a - 1]) << c;
    EXPECT_EQ(ids[a].item<int64_t>(), data::kSepId) << c;
    EXPECT_EQ(ids[a + q].item<int64_t>(), qa.back()) << c;
    EXPECT_EQ(enc->token_type_ids[0][c][a + 1].item<int64_t>(), 1) << c;
  }
  // Options differ, so the rows of one question differ.
  EXPECT_FALSE(torch::equal(enc->input_ids[0][0], enc->input_ids[0][1]));
  // Too short for max_qa_length: an error naming both keys.
  options.max_seq_length = 19;
  auto bad = EncodeMultipleChoice(set.examples, SmallTokenizer(), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "max_qa_length"))
      << bad.status();
}

// finetune.long_inputs: chunks: the article is kept up to K*C - qa - 3
// tokens and the sequence is read in chunks of C; leading chunks that are
// padding in every sequence are dropped.
TEST(RaceEncodingTest, ChunksKeepLongArticlesWhole) {
  FinetuneConfig ft;
  ft.max_seq_length = 16;
  ft.max_qa_length = 12;
  auto truncated = ReadMultipleChoiceTask(ft, SmallTokenizer(), "",
                                          Sample("dev"), "", false);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  ft.long_inputs = LongInputs::kChunks;
  ft.max_chunks = 16;
  auto chunked = ReadMultipleChoiceTask(ft, SmallTokenizer(), "", Sample("dev"),
                                        "", false);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  const TensorRows& t = truncated->dev->rows;
  const TensorRows& c = chunked->dev->rows;
  EXPECT_EQ(t.input_ids.sizes(), (std::vector<int64_t>{4, 4, 16}));
  const int64_t width = c.input_ids.size(2);
  EXPECT_EQ(width % 16, 0);
  EXPECT_GT(width, 16);
  EXPECT_LE(width, 16 * 16);
  EXPECT_EQ(FirstUsedChunk(c.attention_mask.flatten(0, 1), 16), 0);
  EXPECT_TRUE(torch::equal(c.targets.at("labels"), t.targets.at("labels")));
  // Every sequence of question 0 holds the whole article (segment 0 before
  // the first <sep>) and ends <sep> <cls>.
  const MultipleChoiceSet set = MustRead(Sample("dev"));
  std::vector<int32_t> article;
  ASSERT_TRUE(
      SmallTokenizer().EncodeIds(set.examples[0].article, &article).ok());
  ASSERT_LT(static_cast<int64_t>(article.size()) + 12 + 3, width);
  for (int64_t o = 0; o < 4; ++o) {
    const torch::Tensor ids = c.input_ids[0][o];
    const torch::Tensor mask = c.attention_mask[0][o];
    const int64_t real = mask.sum().item<float>();
    const int64_t start = width - real;
    EXPECT_EQ(ids[width - 1].item<int64_t>(), data::kClsId);
    EXPECT_EQ(ids[width - 2].item<int64_t>(), data::kSepId);
    for (size_t i = 0; i < article.size(); ++i) {
      ASSERT_EQ(ids[start + i].item<int64_t>(), article[i]) << o << " " << i;
    }
    EXPECT_EQ(ids[start + article.size()].item<int64_t>(), data::kSepId);
  }
  // Truncation at C kept less of every sequence.
  EXPECT_LT(t.attention_mask.sum().item<float>(),
            c.attention_mask.sum().item<float>());
}

TEST(RaceMetricsTest, AccuracyByLevel) {
  const auto m = MultipleChoiceMetrics({0, 1, 2, 3, 0}, {0, 1, 0, 3, 1},
                                       {"middle", "high", "high", "", "high"});
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 3.0 / 5);
  EXPECT_DOUBLE_EQ(m.at("accuracy_middle"), 1.0);
  EXPECT_DOUBLE_EQ(m.at("accuracy_high"), 1.0 / 3);
  const auto none = MultipleChoiceMetrics({1}, {1}, {""});
  EXPECT_EQ(none.count("accuracy_middle"), 0u);
  EXPECT_EQ(none.count("accuracy_high"), 0u);
  EXPECT_EQ(OptionName(3), "D");
}

// --------------------------------------------------------------- end to end

// A random tiny XLNetLMHeadModel with the test tokenizer, as --init.
void WriteInitModel(const std::string& dir) {
  XLNetConfig config = xlnet::testing::TinyConfig();
  config.vocab_size = 1000;  // the test tokenizer's
  torch::manual_seed(0);
  XLNetLMHeadModel model(config);
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/" + kTokenizerFile,
                              SmallTokenizer().model_bytes())
                  .ok());
  // Its manifest covers the tokenizer added, as a checkpoint's does.
  ASSERT_TRUE(WriteChecksums(dir).ok());
}

std::vector<std::vector<std::string>> ReadTsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) rows.push_back(absl::StrSplit(line, '\t'));
  return rows;
}

// A tiny run on the sample from a random init model written to
// TMP/init: 4 steps on train, dev evaluated every 2, and dev.jsonl (the
// same questions) as --test with --do_predict; `extra` overrides on top.
FinetuneOptions SampleRun(TempDir& tmp, const std::vector<std::string>& extra) {
  WriteInitModel(tmp.Join("init"));
  FinetuneOptions o;
  o.task = "multiple_choice";
  o.init_dir = tmp.Join("init");
  o.config_path = SourcePath("configs/tiny-finetune.yaml");
  o.overrides = {"train.max_steps=4", "train.eval_steps=2",
                 "train.batch_size=4", "train.warmup_steps=0",
                 "train.threads=1"};
  o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
  o.train = Sample("train");
  o.dev = Sample("dev");
  o.test = Sample("dev.jsonl");
  o.do_predict = true;
  o.out_dir = tmp.Join("run");
  return o;
}

// Evaluates `model_dir` on the dev sample with the settings of `run` and
// expects the dev scores of `results` (the run's eval_results.json).
void ExpectSameDevScores(const FinetuneOptions& run,
                         const std::string& model_dir,
                         const std::string& out_dir,
                         const nlohmann::json& results) {
  FinetuneOptions again;
  again.task = "multiple_choice";
  again.init_dir = model_dir;
  again.config_path = run.config_path;
  again.overrides = run.overrides;
  again.dev = Sample("dev");
  again.out_dir = out_dir;
  ASSERT_TRUE(RunFinetuning(again).ok());
  const nlohmann::json eval =
      xlnet::testing::ReadJsonFile(out_dir + "/eval_results.json");
  EXPECT_DOUBLE_EQ(eval["dev"]["accuracy"].get<double>(),
                   results["dev"]["accuracy"].get<double>());
  EXPECT_NEAR(eval["dev"]["loss"].get<double>(),
              results["dev"]["loss"].get<double>(), 1e-5);
}

TEST(RaceFinetuneTest, TinyRunReportsAccuracyByLevelAndExports) {
  TempDir tmp;
  const FinetuneOptions o = SampleRun(
      tmp, {"finetune.max_seq_length=96", "finetune.max_qa_length=24"});
  ASSERT_TRUE(RunFinetuning(o).ok());

  const nlohmann::json results =
      xlnet::testing::ReadJsonFile(tmp.Join("run/eval_results.json"));
  std::cout << "[ results  ] " << results.dump() << "\n";
  for (const char* split : {"dev", "test"}) {
    ASSERT_TRUE(results.contains(split)) << results.dump();
    for (const char* key :
         {"accuracy", "accuracy_middle", "accuracy_high", "loss"}) {
      ASSERT_TRUE(results[split].contains(key)) << split << " " << key;
      if (std::string(key) == "loss") continue;
      const double v = results[split][key];
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
    // 2 high and 2 middle questions: the overall accuracy is their mean.
    EXPECT_DOUBLE_EQ(results[split]["accuracy"].get<double>(),
                     (results[split]["accuracy_middle"].get<double>() +
                      results[split]["accuracy_high"].get<double>()) /
                         2);
    // A random 4-way guess has loss near ln 4; the run only took 4 steps.
    EXPECT_GT(results[split]["loss"].get<double>(), 0.5);
  }
  // The directory and the JSON Lines form are the same questions.
  EXPECT_EQ(results["dev"], results["test"]);

  // Predictions: id, the option letter, and a probability per option.
  const auto rows = ReadTsv(tmp.Join("run/predictions_test.tsv"));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"id", "prediction", "prob_A",
                                               "prob_B", "prob_C", "prob_D"}));
  std::set<std::string> ids;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 6u);
    ids.insert(rows[i][0]);
    double sum = 0;
    size_t best = 0;
    for (size_t c = 0; c < 4; ++c) {
      sum += std::stod(rows[i][2 + c]);
      if (std::stod(rows[i][2 + c]) > std::stod(rows[i][2 + best])) best = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(rows[i][1], OptionName(best));
  }
  EXPECT_EQ(ids, (std::set<std::string>{"high101.txt-0", "high101.txt-1",
                                        "middle101.txt-0", "middle101.txt-1"}));
  EXPECT_TRUE(PathExists(tmp.Join("run/predictions_dev.tsv")));

  // RUN/best is an HF XLNetForMultipleChoice directory...
  const nlohmann::json config =
      xlnet::testing::ReadJsonFile(tmp.Join("run/best/config.json"));
  EXPECT_EQ(config["architectures"][0], "XLNetForMultipleChoice");
  // ...and xlnet-export keeps it one, under HF's names.
  ExportOptions e;
  e.checkpoint = tmp.Join("run/best");
  e.out = tmp.Join("exported");
  e.tokenizer_pieces = [](const std::string& bytes,
                          const std::string& path) -> absl::StatusOr<int64_t> {
    auto tok = data::Tokenizer::FromBytes(bytes, path);
    if (!tok.ok()) return tok.status();
    return (*tok)->vocab_size();
  };
  auto summary = ExportModel(e);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetForMultipleChoice");
  const nlohmann::json exported =
      xlnet::testing::ReadJsonFile(tmp.Join("exported/config.json"));
  EXPECT_EQ(exported["architectures"],
            nlohmann::json::array({"XLNetForMultipleChoice"}));
  auto file = SafetensorsFile::Open(tmp.Join("exported/model.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::set<std::string> stored;
  for (const auto& entry : file->entries()) stored.insert(entry.name);
  for (const char* name :
       {"logits_proj.weight", "logits_proj.bias",
        "sequence_summary.summary.weight", "sequence_summary.summary.bias",
        "transformer.word_embedding.weight", "transformer.mask_emb"}) {
    EXPECT_EQ(stored.count(name), 1u) << name;
  }
  EXPECT_EQ(stored.count("lm_loss.bias"), 0u);
  auto w = file->Load("logits_proj.weight");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->sizes(), (std::vector<int64_t>{1, 32}));

  // The exported model evaluates to the same dev accuracy.
  ExpectSameDevScores(o, tmp.Join("exported"), tmp.Join("eval"), results);
}

// Long articles in chunks end to end: training, evaluation by level and
// predictions run with finetune.long_inputs: chunks (C = 32, up to 4
// chunks; the sample's articles need 2 to 4), and evaluating the same
// checkpoint again gives the same scores.
TEST(RaceFinetuneTest, LongArticlesInChunksTrainEvaluateAndPredict) {
  TempDir tmp;
  const FinetuneOptions o =
      SampleRun(tmp, {"finetune.long_inputs=chunks",
                      "finetune.max_seq_length=32", "finetune.max_chunks=4",
                      "finetune.max_qa_length=24", "finetune.mem_len=0"});
  ASSERT_TRUE(RunFinetuning(o).ok());
  const nlohmann::json results =
      xlnet::testing::ReadJsonFile(tmp.Join("run/eval_results.json"));
  std::cout << "[ results  ] " << results.dump() << "\n";
  for (const char* key : {"accuracy", "accuracy_middle", "accuracy_high"}) {
    ASSERT_TRUE(results["dev"].contains(key)) << key;
    EXPECT_GE(results["dev"][key].get<double>(), 0.0);
    EXPECT_LE(results["dev"][key].get<double>(), 1.0);
  }
  EXPECT_EQ(results["dev"], results["test"]);
  EXPECT_EQ(ReadTsv(tmp.Join("run/predictions_test.tsv")).size(), 5u);

  ExpectSameDevScores(o, tmp.Join("run/best"), tmp.Join("eval"), results);
}

}  // namespace
}  // namespace xlnet::finetune
