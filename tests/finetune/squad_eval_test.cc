// The official SQuAD evaluation on hand-computed cases.
#include "finetune/squad_eval.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_util.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/test_util.h"

namespace xlnet::finetune {
namespace {

TEST(SquadEvalTest, NormalizeAnswer) {
  // lower, drop ASCII punctuation, drop whole-word articles, squeeze spaces.
  EXPECT_EQ(NormalizeAnswer("The  Quick, brown fox!"), "quick brown fox");
  EXPECT_EQ(NormalizeAnswer("an apple a day"), "apple day");
  EXPECT_EQ(NormalizeAnswer("Theater and anthem"), "theater and anthem");
  EXPECT_EQ(NormalizeAnswer("U.S.A."), "usa");
  // "_" and "-" are punctuation: removed before the article test.
  EXPECT_EQ(NormalizeAnswer("the_end a-b"), "theend ab");
  // Unicode: lowercased, accents kept; "’" is not ASCII punctuation but is
  // not a word character either, so "the" before it is a whole word.
  EXPECT_EQ(NormalizeAnswer("Crème BRÛLÉE"), "crème brûlée");
  EXPECT_EQ(NormalizeAnswer("The’s"), "’s");
  // An accented "àn" is not the article "an"; a letter after "a" joins it.
  EXPECT_EQ(NormalizeAnswer("Àn aé"), "àn aé");
  // Python's whitespace set includes no-break and ideographic spaces.
  EXPECT_EQ(NormalizeAnswer("foo\u00a0bar\u3000 baz "), "foo bar baz");
  EXPECT_EQ(NormalizeAnswer("The"), "");
  // Full case mapping (İ -> i + U+0307), Roman numeral Ⅻ (a number, so a
  // word character), final sigma; a combining mark is not a word character,
  // so "the" before U+0301 is removed and the mark stays (Python: same).
  EXPECT_EQ(
      NormalizeAnswer("\u0130stanbul THE \u216B the\u0301 \u03A3\u0391\u03A3"),
      "i\u0307stanbul \u217B \u0301 \u03C3\u03B1\u03C2");
}

TEST(SquadEvalTest, ExactAndF1) {
  EXPECT_EQ(ExactMatchScore("The Cat.", "cat"), 1);
  EXPECT_EQ(ExactMatchScore("cat", "cats"), 0);
  // gold "the cat sat on the mat" -> [cat, sat, on, mat]; pred [cat, on,
  // mat]: overlap 3, precision 3/3, recall 3/4, F1 = 2·1·.75 / 1.75 = 6/7.
  EXPECT_NEAR(F1Score("the cat sat on the mat", "cat on mat"), 6.0 / 7.0,
              1e-12);
  // Multiset overlap: [x, x, y] vs [x, y, y] share min(2,1) + min(1,2) = 2,
  // precision = recall = 2/3 -> F1 2/3.
  EXPECT_NEAR(F1Score("x x y", "x y y"), 2.0 / 3.0, 1e-12);
  // No tokens on one side: 1 if both are empty, else 0.
  EXPECT_EQ(F1Score("", ""), 1.0);
  EXPECT_EQ(F1Score("", "x"), 0.0);
  EXPECT_EQ(F1Score("the", ""), 1.0);  // "the" normalises to nothing
  EXPECT_EQ(F1Score("cat", "dog"), 0.0);
}

SquadDataset TinyDataset() {
  SquadDataset d;
  d.paragraphs.push_back({"T", "unused"});
  auto add = [&](const std::string& id, std::vector<std::string> golds) {
    SquadExample ex;
    ex.qas_id = id;
    for (auto& g : golds) ex.answers.push_back({g, 0});
    ex.is_impossible = ex.answers.empty();
    d.examples.push_back(ex);
  };
  add("q1", {"Denver Broncos", "the Broncos"});
  add("q2", {"1998"});
  add("q3", {});
  add("q4", {});
  add("q5", {"never predicted"});
  return d;
}

TEST(SquadEvalTest, EvaluateWithoutNullOdds) {
  // q1: "Broncos" equals the second gold after normalisation: EM 1, F1 1.
  // q2: "in 1998" vs "1998": EM 0, F1 = 2·(1/2)·1 / 1.5 = 2/3.
  // q3: no answer, predicted "": EM 1, F1 1. q4: no answer, predicted
  // "something": 0, 0. q5: missing, left out.
  const std::map<std::string, std::string> preds = {
      {"q1", "Broncos"}, {"q2", "in 1998"}, {"q3", ""}, {"q4", "something"}};
  auto r = EvaluateSquad(TinyDataset(), preds, nullptr, {});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& m = r->metrics;
  EXPECT_DOUBLE_EQ(m.at("exact"), 100.0 * 2 / 4);
  EXPECT_NEAR(m.at("f1"), 100.0 * (1 + 2.0 / 3 + 1 + 0) / 4, 1e-9);
  EXPECT_EQ(m.at("total"), 4);
  EXPECT_DOUBLE_EQ(m.at("HasAns_exact"), 50.0);
  EXPECT_NEAR(m.at("HasAns_f1"), 100.0 * (1 + 2.0 / 3) / 2, 1e-9);
  EXPECT_EQ(m.at("HasAns_total"), 2);
  EXPECT_DOUBLE_EQ(m.at("NoAns_exact"), 50.0);
  EXPECT_DOUBLE_EQ(m.at("NoAns_f1"), 50.0);
  EXPECT_EQ(m.count("best_f1"), 0u);
  EXPECT_EQ(r->missing, (std::vector<std::string>{"q5"}));
}

TEST(SquadEvalTest, NullOddsThresholdAndBestThreshold) {
  const std::map<std::string, std::string> preds = {
      {"q1", "Broncos"}, {"q2", "in 1998"}, {"q3", ""}, {"q4", "something"}};
  const std::map<std::string, double> odds = {
      {"q1", -2.0}, {"q2", 0.5}, {"q3", 3.0}, {"q4", 1.5}};
  auto r = EvaluateSquad(TinyDataset(), preds, &odds, {});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& m = r->metrics;
  // Threshold 1.0: q3 (3) and q4 (1.5) become "no answer", both correct:
  // exact (1 + 0 + 1 + 1) / 4, f1 (1 + 2/3 + 1 + 1) / 4.
  EXPECT_DOUBLE_EQ(m.at("exact"), 75.0);
  EXPECT_NEAR(m.at("f1"), 100.0 * (3 + 2.0 / 3) / 4, 1e-9);
  EXPECT_DOUBLE_EQ(m.at("NoAns_exact"), 100.0);
  // Best threshold, starting from "all unanswered" = 2 correct (q3, q4),
  // by increasing odds q1 (-2), q2 (0.5), q4 (1.5), q3 (3):
  //   exact: +1 -> 3 (thresh -2), +0 -> 3, -1 -> 2, +0 -> 2: best 3/4.
  //   f1:    +1 -> 3 (-2), +2/3 -> 3.67 (0.5), -1, +0: best 3.67/4 at 0.5.
  EXPECT_DOUBLE_EQ(m.at("best_exact"), 75.0);
  EXPECT_DOUBLE_EQ(m.at("best_exact_thresh"), -2.0);
  EXPECT_NEAR(m.at("best_f1"), 100.0 * (3 + 2.0 / 3) / 4, 1e-9);
  EXPECT_DOUBLE_EQ(m.at("best_f1_thresh"), 0.5);

  SquadEvalOptions loose;
  loose.na_prob_threshold = 10.0;  // nothing exceeds it: raw scores
  auto raw = EvaluateSquad(TinyDataset(), preds, &odds, loose);
  ASSERT_TRUE(raw.ok());
  EXPECT_DOUBLE_EQ(raw->metrics.at("exact"), 50.0);

  const std::map<std::string, double> partial = {{"q1", 0.0}};
  EXPECT_FALSE(EvaluateSquad(TinyDataset(), preds, &partial, {}).ok());
  EXPECT_FALSE(EvaluateSquad(TinyDataset(), {}, nullptr, {}).ok());
}

// 336 questions on Brown text (90 unanswerable) with predictions that stress
// the normalisation (case, articles, ASCII and curly punctuation, tabs and
// no-break spaces, accented capitals, empty answers) and null odds with
// ties; the expected values are what the official evaluate-v2.0.py printed
// for these files (tests/fixtures/finetune/README.md).
TEST(SquadEvalTest, MatchesTheOfficialScriptOnTheScoringFixture) {
  using ::xlnet::finetune::testing::FixturePath;
  auto read_json = [](const std::string& name) {
    return ::xlnet::testing::ReadJsonFile(FixturePath(name));
  };
  auto data = ReadSquad(FixturePath("squad_scoring.json"), {});
  ASSERT_TRUE(data.ok()) << data.status();
  const auto preds = read_json("squad_scoring_pred.json")
                         .get<std::map<std::string, std::string>>();
  const auto odds =
      read_json("squad_scoring_odds.json").get<std::map<std::string, double>>();
  const nlohmann::json official = read_json("squad_scoring_official.json");
  for (const bool with_odds : {true, false}) {
    SCOPED_TRACE(with_odds ? "with null odds" : "without null odds");
    auto r = EvaluateSquad(*data, preds, with_odds ? &odds : nullptr, {});
    ASSERT_TRUE(r.ok()) << r.status();
    const nlohmann::json& want =
        official[with_odds ? "with_null_odds" : "without_null_odds"];
    EXPECT_EQ(r->metrics.size(), want.size());
    for (const auto& [key, value] : want.items()) {
      ASSERT_EQ(r->metrics.count(key), 1u) << key;
      EXPECT_NEAR(r->metrics.at(key), value.get<double>(), 1e-9) << key;
    }
    EXPECT_TRUE(r->missing.empty());
  }
}

// Prediction and null-odds files: a repeated question id or a value of the
// wrong type is an error naming the file (before: the last one won, and a
// number as an answer threw a bare type_error).
TEST(SquadEvalTest, BadPredictionFilesNameFileAndId) {
  using ::xlnet::finetune::testing::FixturePath;
  ::xlnet::testing::TempDir tmp;
  SquadEvalRunOptions run;
  run.data = FixturePath("squad_scoring.json");
  run.predictions = tmp.Join("pred.json");
  auto message = [&](const std::string& text) {
    EXPECT_TRUE(WriteFileAtomic(run.predictions, text).ok());
    std::ostringstream out;
    const absl::Status s = RunSquadEvaluation(run, out);
    EXPECT_FALSE(s.ok()) << text;
    return std::string(s.message());
  };
  EXPECT_EQ(message(R"({"q1": "a", "q1": "b"})"),
            run.predictions + ": duplicate key 'q1'");
  EXPECT_EQ(message(R"({"q1": 5})"),
            run.predictions + ": 'q1': expected a string, got 5");
  EXPECT_EQ(message("[]"),
            run.predictions + ": expected a JSON object {\"id\": ...}");
}

}  // namespace
}  // namespace xlnet::finetune
