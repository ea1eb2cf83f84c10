// xlnet-finetune, xlnet-export and xlnet-baseline end to end, as a user runs
// them: a tiny model pretrained on the bundled Brown sample is fine-tuned on
// the bundled genre subset (classification), a derived regression task and
// the SQuAD v2 fixture; best checkpoints, eval_results.json, predictions,
// exact resume, export -> reload, and bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_util.h"
#include "common/safetensors.h"
#include "data_pipeline/tokenizer_rules.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::ReadJsonFile;
using testing::RunCommand;
using testing::SourcePath;
using testing::ToolPath;

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

class FinetuneE2ETest : public ::testing::Test {
 protected:
  // A tiny model pretrained for 60 steps; its last checkpoint carries
  // spiece.model, so fine-tuning needs nothing else.
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const std::string corpus = SourcePath("data/sample/brown_sample.txt");
    CommandResult r =
        RunCommand(ToolPath("data") + " tokenizer --input " + corpus +
                   " --vocab_size 1000 --out " + tmp_->Join("spiece.model"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunCommand(ToolPath("data") + " prepare --input " + corpus +
                   " --tokenizer " + tmp_->Join("spiece.model") + " --out " +
                   tmp_->Join("data"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunCommand(ToolPath("pretrain") + " --config " +
                   SourcePath("configs/tiny.yaml") + " --data " +
                   tmp_->Join("data") + " --out " + tmp_->Join("pretrain") +
                   " --set train.max_steps=60 --set train.eval_steps=0"
                   " --set train.threads=1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    checkpoint_ = tmp_->Join("pretrain/checkpoints/step_60");
    ASSERT_TRUE(PathExists(checkpoint_ + "/spiece.model"));
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::string Finetune(const std::string& task,
                              const std::string& extra) {
    return ToolPath("finetune") + " --config " +
           SourcePath("configs/tiny-finetune.yaml") + " --task " + task +
           " --init " + checkpoint_ + " --set train.threads=1 " + extra;
  }
  static std::string Genre(const std::string& split) {
    return SourcePath("data/sample/genre_" + split + ".tsv");
  }

  static void ExpectResumeEqualsUninterruptedRun(const std::string& extra);

  static testing::TempDir* tmp_;
  static std::string checkpoint_;
};
testing::TempDir* FinetuneE2ETest::tmp_ = nullptr;
std::string FinetuneE2ETest::checkpoint_;

TEST_F(FinetuneE2ETest, ClassificationBestCheckpointPredictionsAndExport) {
  testing::TempDir run;
  CommandResult r = RunCommand(
      Finetune("classification",
               "--train " + Genre("train") + " --dev " + Genre("dev") +
                   " --test " + Genre("test") + " --out " + run.path() +
                   " --set train.max_steps=40 --set train.eval_steps=20"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = ReadJsonFile(run.Join("eval_results.json"));
  for (const char* split : {"dev", "test"}) {
    ASSERT_TRUE(results.contains(split)) << results.dump();
    for (const char* key : {"accuracy", "macro_f1", "mcc", "loss"}) {
      EXPECT_TRUE(results[split].contains(key)) << split << " " << key;
    }
    const double acc = results[split]["accuracy"];
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
  }
  // RUN/best: the dev evaluation (steps 20, 40) with the highest accuracy.
  const nlohmann::json best = ReadJsonFile(run.Join("best/best.json"));
  EXPECT_EQ(best["metric"], "accuracy");
  double best_seen = -1;
  for (const std::string& line : Lines(run.Join("metrics.jsonl"))) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("eval_accuracy")) {
      best_seen = std::max(best_seen, j["eval_accuracy"].get<double>());
    }
  }
  EXPECT_DOUBLE_EQ(best["value"].get<double>(), best_seen);
  EXPECT_DOUBLE_EQ(results["dev"]["accuracy"].get<double>(), best_seen);
  const nlohmann::json config = ReadJsonFile(run.Join("best/config.json"));
  EXPECT_EQ(config["architectures"][0], "XLNetForSequenceClassification");
  EXPECT_EQ(config["id2label"]["0"], "learned");
  EXPECT_EQ(config["id2label"]["3"], "romance");
  EXPECT_TRUE(PathExists(run.Join("best/spiece.model")));
  // best/ carries the run's config (its text rules) as checkpoints do.
  EXPECT_TRUE(PathExists(run.Join("best/config.yaml")));
  // One prediction per test row, with the file's header: id, prediction,
  // then the softmax probability of every class in id order.
  const auto predictions = Lines(run.Join("predictions_test.tsv"));
  EXPECT_EQ(predictions.size(), Lines(Genre("test")).size());
  std::vector<std::string> labels;
  for (size_t i = 0; i < config["id2label"].size(); ++i) {
    labels.push_back(config["id2label"][std::to_string(i)]);
  }
  std::string header = "id\tprediction";
  for (const std::string& label : labels) header += "\tprob_" + label;
  EXPECT_EQ(predictions[0], header);
  for (size_t i = 1; i < predictions.size(); ++i) {
    const std::vector<std::string> cells = Split(predictions[i], '\t');
    ASSERT_EQ(cells.size(), 2 + labels.size()) << predictions[i];
    double sum = 0;
    size_t best_class = 0;
    for (size_t c = 0; c < labels.size(); ++c) {
      const double p = std::stod(cells[2 + c]);
      sum += p;
      if (p > std::stod(cells[2 + best_class])) best_class = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << predictions[i];
    EXPECT_EQ(cells[1], labels[best_class]) << predictions[i];
  }

  // Export the best model and evaluate the export: the same dev scores.
  r = RunCommand(ToolPath("export") + " --checkpoint " + run.Join("best") +
                 " --out " + run.Join("exported"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  testing::TempDir eval_run;
  r = RunCommand(Finetune("classification", "--init " + run.Join("exported") +
                                                " --dev " + Genre("dev") +
                                                " --out " + eval_run.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json again = ReadJsonFile(eval_run.Join("eval_results.json"));
  EXPECT_DOUBLE_EQ(again["dev"]["accuracy"].get<double>(),
                   results["dev"]["accuracy"].get<double>());
  EXPECT_NEAR(again["dev"]["loss"].get<double>(),
              results["dev"]["loss"].get<double>(), 1e-6);
}

// Runs 30 steps straight and 20 + 10 resumed (mid-epoch: 320 of 600 rows)
// with the settings `extra`; the weights and best.json must be identical.
void FinetuneE2ETest::ExpectResumeEqualsUninterruptedRun(
    const std::string& extra) {
  const std::string common =
      "--train " + Genre("train") + " --dev " + Genre("dev") +
      " --set train.eval_steps=10 --set train.save_steps=10 " + extra;
  testing::TempDir whole, split;
  CommandResult r =
      RunCommand(Finetune("classification", common + " --out " + whole.path() +
                                                " --set train.max_steps=30"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Finetune("classification", common + " --out " + split.path() +
                                                " --set train.max_steps=20"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Finetune("classification",
                          common + " --out " + split.path() +
                              " --set train.max_steps=30 --resume latest"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = SafetensorsFile::Open(
      whole.Join("checkpoints/step_30/model.safetensors"));
  auto b = SafetensorsFile::Open(
      split.Join("checkpoints/step_30/model.safetensors"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto ta = a->LoadAll();
  auto tb = b->LoadAll();
  ASSERT_TRUE(ta.ok() && tb.ok());
  ASSERT_EQ(ta->size(), tb->size());
  for (size_t i = 0; i < ta->size(); ++i) {
    EXPECT_TRUE(torch::equal((*ta)[i].second, (*tb)[i].second))
        << (*ta)[i].first;
  }
  EXPECT_EQ(ReadJsonFile(whole.Join("best/best.json")),
            ReadJsonFile(split.Join("best/best.json")));
}

// xlnet-data inspect and dump without --config say the shapes they assume
// (the defaults, with any --set) in one line; with --config they do not.
TEST_F(FinetuneE2ETest, DataInspectWithoutConfigNamesTheShapesItAssumes) {
  const std::string data = tmp_->Join("data");
  CommandResult r =
      RunCommand(ToolPath("data") + " inspect --data " + data +
                 " --set data.seq_len=64 --set data.reuse_len=32"
                 " --set data.perm_size=32 --set data.num_predict=10"
                 " --set data.bi_data=false --set train.batch_size=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("xlnet-data inspect: no --config: assuming "
                          "data.seq_len=64, train.batch_size=4 (the defaults "
                          "with any --set)"),
            std::string::npos)
      << r.output;
  testing::TempDir out;
  r = RunCommand(ToolPath("data") + " dump --data " + data + " --config " +
                 SourcePath("configs/tiny.yaml") + " --batches 1 --out " +
                 out.Join("b.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("no --config"), std::string::npos) << r.output;
}

// Training lines carry "epoch" (rows consumed / training rows) and
// "learning_rate"; the run ends with one summary line naming the best dev
// metric, printed once (not again by the tool).
TEST_F(FinetuneE2ETest, MetricsHaveEpochAndTheRunEndsWithASummary) {
  testing::TempDir run;
  // ctest runs at XLNET_LOG_LEVEL=warning; the summary is info.
  CommandResult r = RunCommand(
      "XLNET_LOG_LEVEL=info " +
      Finetune("classification",
               "--train " + Genre("train") + " --dev " + Genre("dev") +
                   " --out " + run.path() +
                   " --set train.max_steps=40 --set train.eval_steps=20"
                   " --set train.log_steps=10"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::pair<int64_t, double>> epochs;
  for (const std::string& line : Lines(run.Join("metrics.jsonl"))) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    ASSERT_TRUE(j.contains("epoch") && j.contains("learning_rate")) << line;
    epochs.emplace_back(j["step"].get<int64_t>(), j["epoch"].get<double>());
  }
  ASSERT_EQ(epochs.size(), 4u);
  // 16 rows a step: the epoch grows linearly and passes 1 (600 rows).
  for (const auto& [step, epoch] : epochs) {
    EXPECT_NEAR(epoch / step, epochs[0].second / epochs[0].first, 1e-12);
  }
  EXPECT_GT(epochs.back().second, 1.0);
  EXPECT_LT(epochs.back().second, 2.0);
  const size_t summary = r.output.find("run finished at step 40: 40 steps");
  ASSERT_NE(summary, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("best eval_accuracy ", summary), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("run finished", summary + 1), std::string::npos);
}

// --set train.num_epochs over the config's max_steps: 0.5 epochs of 600
// rows at 16 a step is ceil(18.75) = 19 steps, recorded in config.yaml;
// num_epochs and max_steps both set with --set and disagreeing is an error.
TEST_F(FinetuneE2ETest, NumEpochsSetsTheRunLength) {
  testing::TempDir run;
  CommandResult r =
      RunCommand("XLNET_LOG_LEVEL=info " +
                 Finetune("classification", "--train " + Genre("train") +
                                                " --out " + run.path() +
                                                " --set train.num_epochs=0.5"
                                                " --set train.log_steps=10"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train.num_epochs 0.5: 19 optimizer steps (37.5 "
                          "per epoch), replacing train.max_steps 200 (" +
                          SourcePath("configs/tiny-finetune.yaml") + ":10)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("run finished at step 19: 19 steps"),
            std::string::npos)
      << r.output;
  double last_epoch = 0;
  for (const std::string& line : Lines(run.Join("metrics.jsonl"))) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("epoch")) last_epoch = j["epoch"].get<double>();
  }
  EXPECT_NEAR(last_epoch, 19.0 * 16 / 600, 1e-12);
  const std::string yaml = *ReadFile(run.Join("config.yaml"));
  EXPECT_NE(yaml.find("max_steps: 19"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("num_epochs: 0.5"), std::string::npos) << yaml;

  testing::TempDir other;
  r = RunCommand(Finetune("classification", "--train " + Genre("train") +
                                                " --out " + other.path() +
                                                " --set train.num_epochs=0.5"
                                                " --set train.max_steps=40"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.max_steps 40 (--set train.max_steps=40) and "
                          "train.num_epochs 0.5"),
            std::string::npos)
      << r.output;
}

TEST_F(FinetuneE2ETest, ResumeEqualsUninterruptedRun) {
  ExpectResumeEqualsUninterruptedRun("");
}

// Segment recurrence (finetune/chunks.h): passages run as up to 3 chunks
// of 32 tokens with memory; resuming mid-epoch stays exact.
TEST_F(FinetuneE2ETest, ChunksResumeEqualsUninterruptedRun) {
  ExpectResumeEqualsUninterruptedRun(
      "--set finetune.long_inputs=chunks --set finetune.max_seq_length=32 "
      "--set finetune.max_chunks=3 --set finetune.mem_len=0");
}

// Fine-tuning resumed with other settings goes through the trainer's
// comparison as pretraining does: a key that makes the examples is refused
// naming both values and the flag, and nothing is written; a learning-rate
// change is reported and recorded, the old checkpoint's config.yaml kept.
TEST_F(FinetuneE2ETest, ResumeWithChangedSettingsIsReportedOrRefused) {
  testing::TempDir run;
  const std::string common =
      "--train " + Genre("train") + " --out " + run.path() +
      " --set train.save_steps=2 --set train.keep_checkpoints=0";
  CommandResult r = RunCommand(
      Finetune("classification", common + " --set train.max_steps=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string old_config =
      *ReadFile(run.Join("checkpoints/step_2/config.yaml"));
  const std::string run_config = *ReadFile(run.Join("config.yaml"));
  r = RunCommand(Finetune(
      "classification", common + " --set train.max_steps=4 --set "
                                 "finetune.max_seq_length=48 --resume latest"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("finetune.max_seq_length 64 -> 48"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--allow_changed_settings"), std::string::npos)
      << r.output;
  EXPECT_EQ(*ReadFile(run.Join("config.yaml")), run_config);
  EXPECT_FALSE(PathExists(run.Join("checkpoints/step_4")));

  r = RunCommand(
      Finetune("classification", common + " --set train.max_steps=4 --set "
                                          "train.lr=1e-4 --resume latest"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: train.lr 0.001 -> 0.0001"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(*ReadFile(run.Join("checkpoints/step_2/config.yaml")), old_config);
  const std::vector<nlohmann::json> changes =
      testing::ReadJsonLines(run.Join("config_changes.jsonl"));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0]["key"], "train.max_steps");
  EXPECT_EQ(changes[1]["key"], "train.lr");
  EXPECT_EQ(changes[1]["old"], "0.001");
  EXPECT_EQ(changes[1]["new"], "0.0001");
}

TEST_F(FinetuneE2ETest, RegressionReportsCorrelations) {
  // A derived regression task: the passage's length in words / 100.
  testing::TempDir run;
  for (const char* split : {"train", "dev"}) {
    std::ofstream out(run.Join(std::string(split) + ".tsv"));
    out << "sentence\tlabel\n";
    const auto lines = Lines(Genre(split));
    for (size_t i = 1; i < lines.size(); ++i) {
      const std::string text = lines[i].substr(0, lines[i].rfind('\t'));
      std::istringstream words(text);
      int n = 0;
      for (std::string w; words >> w;) ++n;
      out << text << "\t" << n / 100.0 << "\n";
    }
  }
  CommandResult r = RunCommand(Finetune(
      "regression", "--train " + run.Join("train.tsv") + " --dev " +
                        run.Join("dev.tsv") + " --out " + run.Join("run") +
                        " --set train.max_steps=30"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results =
      ReadJsonFile(run.Join("run/eval_results.json"));
  for (const char* key : {"pearson", "spearman", "mse", "loss"}) {
    EXPECT_TRUE(results["dev"].contains(key)) << key;
  }
  const nlohmann::json config = ReadJsonFile(run.Join("run/best/config.json"));
  EXPECT_EQ(config["problem_type"], "regression");
  EXPECT_EQ(config["id2label"].size(), 1u);
}

TEST_F(FinetuneE2ETest, SquadPredictionsAndOfficialScores) {
  testing::TempDir run;
  const std::string squad =
      SourcePath("tests/fixtures/finetune/squad_v2_small.json");
  CommandResult r = RunCommand(Finetune(
      "squad", "--train " + squad + " --dev " + squad + " --out " + run.path() +
                   " --set train.max_steps=20 --set finetune.doc_stride=24"
                   " --set finetune.max_query_length=16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = ReadJsonFile(run.Join("eval_results.json"));
  for (const char* key :
       {"exact", "f1", "total", "HasAns_f1", "NoAns_f1", "best_f1", "loss"}) {
    EXPECT_TRUE(results["dev"].contains(key)) << key << " " << results.dump();
  }
  const nlohmann::json predictions =
      ReadJsonFile(run.Join("predictions_dev/predictions.json"));
  const nlohmann::json data = ReadJsonFile(squad);
  size_t questions = 0;
  for (const auto& article : data["data"]) {
    for (const auto& paragraph : article["paragraphs"]) {
      for (const auto& qa : paragraph["qas"]) {
        ++questions;
        EXPECT_TRUE(predictions.contains(qa["id"].get<std::string>()));
      }
    }
  }
  EXPECT_EQ(predictions.size(), questions);
  EXPECT_EQ(results["dev"]["total"].get<double>(), questions);
  EXPECT_TRUE(PathExists(run.Join("predictions_dev/null_odds.json")));
  // The stand-alone evaluator (the official script's CLI) on the written
  // files gives the run's own scores.
  r = RunCommand(ToolPath("squad-eval") + " " + squad + " " +
                 run.Join("predictions_dev/predictions.json") +
                 " --null_odds " + run.Join("predictions_dev/null_odds.json") +
                 " --out " + run.Join("eval.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json eval = ReadJsonFile(run.Join("eval.json"));
  for (const char* key : {"exact", "f1", "best_f1", "HasAns_exact"}) {
    EXPECT_DOUBLE_EQ(eval[key].get<double>(), results["dev"][key].get<double>())
        << key;
  }
  const nlohmann::json config = ReadJsonFile(run.Join("best/config.json"));
  EXPECT_EQ(config["architectures"][0], "XLNetForQuestionAnswering");
}

TEST_F(FinetuneE2ETest, BadRowsAreNamedAndSkippable) {
  testing::TempDir run;
  {
    std::ofstream out(run.Join("bad.tsv"));
    const auto lines = Lines(Genre("train"));
    for (size_t i = 0; i < 40; ++i) out << lines[i] << "\n";
    out << "a row without its label column\n";  // line 41
  }
  CommandResult r = RunCommand(
      Finetune("classification", "--train " + run.Join("bad.tsv") + " --dev " +
                                     Genre("dev") + " --out " + run.Join("a") +
                                     " --set train.max_steps=2"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.tsv:41"), std::string::npos) << r.output;
  EXPECT_FALSE(PathExists(run.Join("a/best")));
  r = RunCommand(
      Finetune("classification", "--train " + run.Join("bad.tsv") + " --dev " +
                                     Genre("dev") + " --out " + run.Join("b") +
                                     " --set train.max_steps=2"
                                     " --set finetune.bad_rows=skip"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 1 bad rows"), std::string::npos) << r.output;
}

// Copies directory `from` to `to` (cp -a).
void CopyTree(const std::string& from, const std::string& to) {
  ASSERT_EQ(RunCommand("cp -a '" + from + "' '" + to + "'").exit_code, 0);
}

// A model pretrained uncased (its checkpoint's config.yaml says so, and its
// spiece.model records it as `xlnet-data tokenizer --uncased` does) is
// fine-tuned on lowercased text: "Hello" and "hello" get the same ids, so
// the same probabilities. Runs without --config (the defaults apply; the
// model section is --init's), with a CSV input.
TEST_F(FinetuneE2ETest, UncasedModelGetsLowercasedText) {
  testing::TempDir tmp;
  CopyTree(checkpoint_, tmp.Join("uncased"));
  auto yaml = ReadFile(tmp.Join("uncased/config.yaml"));
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  const size_t at = yaml->find("uncased: false");
  ASSERT_NE(at, std::string::npos) << *yaml;
  std::string uncased_yaml = *yaml;
  uncased_yaml.replace(at, 14, "uncased: true");
  ASSERT_TRUE(
      WriteFileAtomic(tmp.Join("uncased/config.yaml"), uncased_yaml).ok());
  auto tokenizer = ReadFile(tmp.Join("uncased/spiece.model"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto recorded = data::RecordTextRules(*tokenizer, {true, false});
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_TRUE(
      WriteFileAtomic(tmp.Join("uncased/spiece.model"), *recorded).ok());
  // Edited by hand: without the manifest that no longer matches it (read
  // unverified, as a HuggingFace directory is).
  ASSERT_TRUE(RemoveAll(tmp.Join("uncased/checksums.json")).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Join("test.csv"),
                              "id,sentence\n"
                              "upper,\"Hello there, Mr. Smith\"\n"
                              "lower,\"hello there, mr. smith\"\n")
                  .ok());
  // The probabilities of the two rows, from a run on `init`.
  auto probabilities = [&](const std::string& init, const std::string& out) {
    const CommandResult r = RunCommand(
        "XLNET_LOG_LEVEL=info " + ToolPath("finetune") +
        " --task classification --init " + init + " --labels a,b --test " +
        tmp.Join("test.csv") + " --do_predict --out " + tmp.Join(out) +
        " --set train.threads=1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto lines = Lines(tmp.Join(out + "/predictions_test.tsv"));
    EXPECT_EQ(lines.size(), 3u);
    std::vector<std::string> rows;
    for (size_t i = 1; i < lines.size(); ++i) {
      const auto cells = Split(lines[i], '\t');
      rows.push_back(cells.size() == 4 ? cells[2] + " " + cells[3] : "");
    }
    return std::make_pair(r.output, rows);
  };
  const auto [uncased_log, uncased] =
      probabilities(tmp.Join("uncased"), "uncased_run");
  ASSERT_EQ(uncased.size(), 2u);
  EXPECT_EQ(uncased[0], uncased[1]);
  EXPECT_NE(uncased_log.find("text rules: uncased=true keep_accents=false"),
            std::string::npos)
      << uncased_log;
  // The cased model tells them apart.
  const auto [cased_log, cased] = probabilities(checkpoint_, "cased_run");
  ASSERT_EQ(cased.size(), 2u);
  EXPECT_NE(cased[0], cased[1]);
}

TEST_F(FinetuneE2ETest, DoPredictOnUnlabeledInput) {
  testing::TempDir run;
  {
    std::ofstream out(run.Join("unlabeled.tsv"));
    const auto lines = Lines(Genre("test"));
    out << "sentence\n";
    for (size_t i = 1; i < 11; ++i) {
      out << lines[i].substr(0, lines[i].rfind('\t')) << "\n";
    }
  }
  // Without --do_predict an unlabeled --test is an error that says so.
  CommandResult r = RunCommand(Finetune(
      "classification", "--train " + Genre("train") + " --dev " + Genre("dev") +
                            " --test " + run.Join("unlabeled.tsv") + " --out " +
                            run.Join("refused") + " --set train.max_steps=5"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unlabeled.tsv:1 (header): no label field"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("add --do_predict"), std::string::npos) << r.output;
  r = RunCommand(Finetune(
      "classification", "--train " + Genre("train") + " --dev " + Genre("dev") +
                            " --test " + run.Join("unlabeled.tsv") +
                            " --do_predict --out " + run.Join("run") +
                            " --set train.max_steps=5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto predictions = Lines(run.Join("run/predictions_test.tsv"));
  ASSERT_EQ(predictions.size(), 11u);
  const nlohmann::json results =
      ReadJsonFile(run.Join("run/eval_results.json"));
  EXPECT_TRUE(results.contains("dev"));
  EXPECT_FALSE(results.contains("test"));
}

// Every file under `dir` with its bytes (to see that nothing changed), but
// run.lock: each process that takes the lock writes its own pid there.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  const CommandResult r =
      RunCommand("cd '" + dir + "' && find . -type f ! -name run.lock");
  std::istringstream names(r.output);
  for (std::string name; std::getline(names, name);) {
    files[name] = *ReadFile(dir + "/" + name);
  }
  return files;
}

// xlnet-finetune --out pointing at a pretraining run never touches it: not
// as a fresh run, not with --overwrite, not with --resume latest; nor one
// written before run.json existed (its kind comes from its checkpoints).
TEST_F(FinetuneE2ETest, FinetuneNeverWritesIntoAPretrainingRun) {
  testing::TempDir tmp;
  const std::string pretrain = tmp.Join("pretrain");
  CopyTree(tmp_->Join("pretrain"), pretrain);
  for (const bool legacy : {false, true}) {
    if (legacy) {
      ASSERT_TRUE(RemoveAll(pretrain + "/run.json").ok());
    }
    const auto before = Snapshot(pretrain);
    for (const char* how : {"", " --overwrite", " --resume latest"}) {
      const CommandResult r = RunCommand(Finetune(
          "classification", "--train " + Genre("train") + " --out " + pretrain +
                                " --set train.max_steps=2" + how));
      EXPECT_EQ(r.exit_code, 2) << how << ": " << r.output;
      EXPECT_NE(r.output.find(pretrain + " already holds a pretraining run"),
                std::string::npos)
          << how << ": " << r.output;
      EXPECT_EQ(Snapshot(pretrain), before) << legacy << how;
    }
  }
}

// xlnet-export checks spiece.model as the other tools do: garbage or an
// empty file is an error naming it, and nothing is written.
TEST_F(FinetuneE2ETest, ExportRefusesABadTokenizer) {
  testing::TempDir tmp;
  const std::string checkpoint = tmp.Join("step_60");
  CopyTree(checkpoint_, checkpoint);
  for (const std::string& bytes : {std::string("garbage\n"), std::string()}) {
    ASSERT_TRUE(WriteFileAtomic(checkpoint + "/spiece.model", bytes).ok());
    const CommandResult r = RunCommand(ToolPath("export") + " --checkpoint " +
                                       checkpoint + " --out " + tmp.Join("hf"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(checkpoint + "/spiece.model"), std::string::npos)
        << r.output;
    EXPECT_FALSE(PathExists(tmp.Join("hf")));
  }
}

// A bit flipped in a checkpoint's weights: xlnet-export, xlnet-finetune
// --init and xlnet-inspect each refuse it naming the file (its
// checksums.json), and nothing is written.
TEST_F(FinetuneE2ETest, BitFlippedCheckpointIsRefusedByEveryTool) {
  testing::TempDir tmp;
  const std::string checkpoint = tmp.Join("step_60");
  CopyTree(checkpoint_, checkpoint);
  const std::string weights = checkpoint + "/model.safetensors";
  auto bytes = ReadFile(weights);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  (*bytes)[bytes->size() / 2] ^= 0x04;
  ASSERT_TRUE(WriteFileAtomic(weights, *bytes).ok());
  const std::string needle = weights + ": checksum mismatch";
  CommandResult r = RunCommand(ToolPath("export") + " --checkpoint " +
                               checkpoint + " --out " + tmp.Join("hf"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_FALSE(PathExists(tmp.Join("hf")));
  r = RunCommand(Finetune("classification", "--init " + checkpoint +
                                                " --train " + Genre("train") +
                                                " --out " + tmp.Join("ft")));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  r = RunCommand(ToolPath("inspect") + " " + checkpoint);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
}

// A config.json that disagrees with its weights (n_layer 100000 beside a
// 2-layer model.safetensors) is an error naming the key, found before the
// model is built (the address-space cap makes a build that allocates first
// fail instead of taking the machine's memory).
TEST_F(FinetuneE2ETest, ConfigSizesAreCheckedAgainstTheWeights) {
  testing::TempDir tmp;
  const std::string checkpoint = tmp.Join("step_60");
  CopyTree(checkpoint_, checkpoint);
  nlohmann::json config = ReadJsonFile(checkpoint + "/config.json");
  config["n_layer"] = 100000;
  ASSERT_TRUE(WriteFileAtomic(checkpoint + "/config.json", config.dump()).ok());
  // Edited by hand: without the manifest that would refuse it first.
  ASSERT_TRUE(RemoveAll(checkpoint + "/checksums.json").ok());
  CommandResult r =
      RunCommand(testing::MemoryCap(4000000) + ToolPath("export") +
                 " --checkpoint " + checkpoint + " --out " + tmp.Join("hf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(checkpoint + "/config.json: n_layer 100000"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2 layers"), std::string::npos) << r.output;
  r = RunCommand(testing::MemoryCap(4000000) +
                 Finetune("classification", "--init " + checkpoint +
                                                " --train " + Genre("train") +
                                                " --out " + tmp.Join("ft")));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(checkpoint + "/config.json: n_layer 100000"),
            std::string::npos)
      << r.output;
}

// SQuAD window settings that leave no room are named by their keys.
TEST_F(FinetuneE2ETest, SquadLengthErrorsNameTheirKeys) {
  testing::TempDir run;
  const std::string squad =
      SourcePath("tests/fixtures/finetune/squad_v2_small.json");
  const CommandResult r =
      RunCommand(Finetune("squad", "--train " + squad + " --out " + run.path() +
                                       " --set finetune.max_seq_length=32"
                                       " --set finetune.max_query_length=40"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("finetune.max_query_length"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("finetune.max_seq_length"), std::string::npos)
      << r.output;
}

TEST_F(FinetuneE2ETest, BagOfWordsBaseline) {
  testing::TempDir run;
  CommandResult r =
      RunCommand(ToolPath("baseline") + " --train " + Genre("train") +
                 " --dev " + Genre("dev") + " --test " + Genre("test") +
                 " --out " + run.path() + " --epochs 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = ReadJsonFile(run.Join("eval_results.json"));
  // Four genres: chance is about 0.25; word counts do much better.
  EXPECT_GT(results["test"]["accuracy"].get<double>(), 0.5);
  EXPECT_GT(results["features"].get<int64_t>(), 1000);
}

}  // namespace
}  // namespace xlnet
