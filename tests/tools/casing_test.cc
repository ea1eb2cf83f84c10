// Casing is chosen once, when the tokenizer is trained: `xlnet-data
// tokenizer --uncased` records it in spiece.model, and prepare, pretraining
// and export take it from there (data_pipeline/tokenizer_rules.h). A flag or
// config key that contradicts the record is an error naming both; a
// tokenizer without a record (made elsewhere) still takes the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/tokenizer_rules.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::SourcePath;
using testing::ToolPath;

// Mixed-case lines: two documents.
const std::vector<std::string>& MixedLines() {
  static const auto* lines = new std::vector<std::string>{
      "The Jury Said That Fulton County Deserves PRAISE.",
      "Atlanta And Its Mayor Were Thanked.", "",
      "Mr. Jones Of The Senate Spoke On Friday."};
  return *lines;
}

class CasingE2ETest : public ::testing::Test {
 protected:
  // One uncased tokenizer of the Brown sample, and the mixed-case text.
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const CommandResult r =
        RunCommand(ToolPath("data") + " tokenizer --uncased --input " +
                   SourcePath("data/sample/brown_sample.txt") +
                   " --vocab_size 1000 --out " + tmp_->Join("uncased.model"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string text;
    for (const std::string& line : MixedLines()) text += line + "\n";
    ASSERT_TRUE(WriteFileAtomic(tmp_->Join("mixed.txt"), text).ok());
  }
  static void TearDownTestSuite() { delete tmp_; }

  static CommandResult Prepare(const std::string& tokenizer,
                               const std::string& out,
                               const std::string& extra) {
    return RunCommand(ToolPath("data") + " prepare --input " +
                      tmp_->Join("mixed.txt") + " --tokenizer " + tokenizer +
                      " --out " + out + " " + extra);
  }

  // The shards' token ids, document ends (<eod>, <eop>) left out, and their
  // manifest's rules.
  static std::vector<int32_t> ShardIds(const std::string& dir,
                                       data::TextRules* rules) {
    auto set = data::ShardSet::Open(dir, /*verify=*/true);
    EXPECT_TRUE(set.ok()) << set.status();
    if (!set.ok()) return {};
    *rules = (*set)->rules();
    auto corpus = data::Corpus::Create(**set, data::Split::kTrain, 0.0);
    EXPECT_TRUE(corpus.ok()) << corpus.status();
    if (!corpus.ok()) return {};
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < corpus->size(); ++i) {
      const int32_t id = corpus->Id(i);
      if (id != data::kEodId && id != data::kEopId) ids.push_back(id);
    }
    return ids;
  }

  // The mixed text's ids under `rules`.
  static std::vector<int32_t> Encoded(const std::string& tokenizer,
                                      const data::TextRules& rules) {
    auto tok = data::Tokenizer::Load(tokenizer, rules);
    EXPECT_TRUE(tok.ok()) << tok.status();
    if (!tok.ok()) return {};
    std::vector<int32_t> all, ids;
    for (const std::string& line : MixedLines()) {
      ids.clear();
      EXPECT_TRUE((*tok)->EncodeIds(line, &ids).ok());
      all.insert(all.end(), ids.begin(), ids.end());
    }
    return all;
  }

  static testing::TempDir* tmp_;
};
testing::TempDir* CasingE2ETest::tmp_ = nullptr;

TEST_F(CasingE2ETest, PrepareTakesTheTokenizersCasing) {
  const std::string tok = tmp_->Join("uncased.model");
  const std::vector<int32_t> lower = Encoded(tok, {true, false});
  ASSERT_NE(lower, Encoded(tok, {false, false})) << "the text must be cased";
  // No flag: the tokenizer's record (uncased) decides.
  CommandResult r = Prepare(tok, tmp_->Join("plain"), "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  data::TextRules rules;
  EXPECT_EQ(ShardIds(tmp_->Join("plain"), &rules), lower);
  EXPECT_TRUE(rules.uncased);
  // A flag that agrees is fine.
  r = Prepare(tok, tmp_->Join("agree"), "--uncased");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ShardIds(tmp_->Join("agree"), &rules), lower);
  // A flag or a config key that contradicts it is an error naming both.
  r = Prepare(tok, tmp_->Join("flag"), "--uncased=false");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--uncased says uncased=false but the tokenizer " +
                          tok + " was trained with uncased=true"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("xlnet-data tokenizer --uncased=false"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(PathExists(tmp_->Join("flag/manifest.json")));
  r = Prepare(tok, tmp_->Join("set"), "--set data.uncased=false");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("data.uncased (--set data.uncased=false) says "
                          "uncased=false but the tokenizer " +
                          tok),
            std::string::npos)
      << r.output;
}

TEST_F(CasingE2ETest, ATokenizerWithoutARecordTakesTheFlag) {
  // The uncased tokenizer without its record, as a tokenizer made elsewhere.
  auto bytes = ReadFile(tmp_->Join("uncased.model"));
  ASSERT_TRUE(bytes.ok());
  auto plain = data::WithoutTextRules(*bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_LT(plain->size(), bytes->size());
  const std::string tok = tmp_->Join("plain.model");
  ASSERT_TRUE(WriteFileAtomic(tok, *plain).ok());
  CommandResult r = Prepare(tok, tmp_->Join("flagged"), "--uncased");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  data::TextRules rules;
  EXPECT_EQ(ShardIds(tmp_->Join("flagged"), &rules),
            Encoded(tok, {true, false}));
  EXPECT_TRUE(rules.uncased);
  r = Prepare(tok, tmp_->Join("unflagged"), "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ShardIds(tmp_->Join("unflagged"), &rules),
            Encoded(tok, {false, false}));
  EXPECT_FALSE(rules.uncased);
}

// Pretrained from the uncased tokenizer's shards (prepared without a flag),
// the model exports with do_lower_case true; a pretraining config that
// says otherwise is refused, naming the config key and the tokenizer.
TEST_F(CasingE2ETest, PretrainingAndExportTakeTheTokenizersCasing) {
  const std::string tok = tmp_->Join("uncased.model");
  CommandResult r =
      RunCommand(ToolPath("data") + " prepare --input " +
                 SourcePath("data/sample/brown_sample.txt") + " --tokenizer " +
                 tok + " --out " + tmp_->Join("brown"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string pretrain =
      ToolPath("pretrain") + " --config " + SourcePath("configs/tiny.yaml") +
      " --data " + tmp_->Join("brown") +
      " --set train.max_steps=2 --set train.eval_steps=0"
      " --set train.threads=1 --out ";
  r = RunCommand(pretrain + tmp_->Join("cased_run") +
                 " --set data.uncased=false");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("data.uncased (--set data.uncased=false) says "
                          "uncased=false but the tokenizer "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("was trained with uncased=true"), std::string::npos)
      << r.output;
  r = RunCommand(pretrain + tmp_->Join("run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(ToolPath("export") + " --checkpoint " +
                 tmp_->Join("run/checkpoints/step_2") + " --out " +
                 tmp_->Join("export"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json config =
      testing::ReadJsonFile(tmp_->Join("export/tokenizer_config.json"));
  EXPECT_EQ(config["do_lower_case"], true);
  EXPECT_EQ(config["keep_accents"], false);
  // The flag that contradicts the record is refused.
  r = RunCommand(ToolPath("export") + " --checkpoint " +
                 tmp_->Join("run/checkpoints/step_2") + " --out " +
                 tmp_->Join("export2") + " --uncased=false");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--uncased=false disagrees with uncased: true in"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace xlnet
