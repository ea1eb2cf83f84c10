// Text files as prepare's ids, and xlnet-lm end to end on a small model
// directory with the sample tokenizer (tests/test_util.h PrepareSampleData).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/file_util.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/token_bytes.h"
#include "data_pipeline/tokenizer.h"
#include "lm/text_ids.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"
#include "tests/lm/lm_test_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::ToolPath;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// The first `lines` lines of the sample corpus.
std::string SampleSlice(int lines) {
  std::ifstream f(testing::SourcePath("data/sample/brown_sample.txt"));
  std::string line, out;
  for (int i = 0; i < lines && std::getline(f, line); ++i) out += line + "\n";
  return out;
}

class LmToolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::PrepareSampleData(dir_->path());
    // A causal-LM model directory over the sample tokenizer's 1000 pieces.
    XLNetLMHeadModel model = testing::TinyLm("uni", 1000);
    const std::string model_dir = dir_->Join("model");
    auto spiece = ReadFile(dir_->Join("spiece.model"), kNoSizeLimit);
    ASSERT_TRUE(spiece.ok()) << spiece.status();
    const absl::Status written =
        WriteModelDir(model_dir, model->config(), HfStateDict(*model),
                      [&](const AtomicDirWriter& w) {
                        return WriteFileAtomic(w.Path(kTokenizerFile), *spiece);
                      });
    ASSERT_TRUE(written.ok()) << written;
    WriteText(dir_->Join("text.txt"), SampleSlice(40));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) { return dir_->Join(name); }
  static std::string Lm(const std::string& args) {
    return ToolPath("lm") + " " + args + " --model " + Path("model");
  }

  static testing::TempDir* dir_;
};

testing::TempDir* LmToolTest::dir_ = nullptr;

TEST_F(LmToolTest, TextIdsAreWhatPrepareWrites) {
  auto tok = data::Tokenizer::Load(Path("spiece.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto text = TokenizeTextFile(
      testing::SourcePath("data/sample/brown_sample.txt"), **tok);
  ASSERT_TRUE(text.ok()) << text.status();
  auto shards = data::ShardSet::Open(Path("data"), /*verify=*/true);
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<int32_t> prepared;
  for (const data::ShardView& s : (*shards)->shards()) {
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      if (s.id_bytes == 2) {
        uint16_t v;
        std::memcpy(&v, s.ids + 2 * i, 2);
        prepared.push_back(v);
      } else {
        int32_t v;
        std::memcpy(&v, s.ids + 4 * i, 4);
        prepared.push_back(v);
      }
    }
  }
  EXPECT_EQ(text->ids, prepared);
  EXPECT_FALSE(text->truncated);
  // max_tokens stops early.
  TextIdsOptions first;
  first.max_tokens = 100;
  auto head = TokenizeTextFile(
      testing::SourcePath("data/sample/brown_sample.txt"), **tok, first);
  ASSERT_TRUE(head.ok());
  EXPECT_TRUE(head->truncated);
  EXPECT_EQ(head->ids,
            std::vector<int32_t>(prepared.begin(), prepared.begin() + 100));
  EXPECT_LT(head->lines, 20);
}

TEST_F(LmToolTest, EvalAllModesPrintsThreeRows) {
  const CommandResult r =
      RunCommand(Lm("eval --text " + Path("text.txt") +
                    " --mode all --seq_len 16 --mem_len 16 --batch_size 4 "
                    "--threads 1 --json " +
                    Path("eval.json")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());  // the table, for the test log
  for (const char* mode : {"\nmemory ", "\nnone ", "\nsliding "}) {
    EXPECT_NE(r.output.find(mode), std::string::npos) << mode << r.output;
  }
  EXPECT_NE(r.output.find("windows batched"), std::string::npos) << r.output;
  const nlohmann::json doc = testing::ReadJsonFile(Path("eval.json"));
  ASSERT_EQ(doc["rows"].size(), 3u);
  // Bytes: the sum of TokenTextBytes over the scored tokens.
  auto tok = data::Tokenizer::Load(Path("spiece.model"));
  ASSERT_TRUE(tok.ok());
  auto text = TokenizeTextFile(Path("text.txt"), **tok);
  ASSERT_TRUE(text.ok());
  const std::vector<int32_t> bytes = data::TokenTextBytes(**tok);
  int64_t expected = 0;
  for (size_t t = 1; t < text->ids.size(); ++t) expected += bytes[text->ids[t]];
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["tokens"].get<int64_t>(),
              static_cast<int64_t>(text->ids.size()) - 1);
    EXPECT_EQ(row["bytes"].get<int64_t>(), expected);
    EXPECT_EQ(row["stream"].get<std::string>(), "content");
    EXPECT_GT(row["perplexity"].get<double>(), 1.0);
  }
  EXPECT_EQ(doc["rows"][0]["mode"].get<std::string>(), "memory");
  EXPECT_EQ(doc["rows"][2]["mode"].get<std::string>(), "sliding");
  // bf16 autocast (memory kept in bf16) runs and stays near fp32.
  const CommandResult bf16 = RunCommand(
      Lm("eval --text " + Path("text.txt") +
         " --seq_len 16 --mem_len 16 --threads 1 --dtype bf16 --json " +
         Path("bf16.json")));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  const nlohmann::json low = testing::ReadJsonFile(Path("bf16.json"));
  ASSERT_EQ(low["rows"].size(), 1u);
  EXPECT_NEAR(low["rows"][0]["nll_per_token"].get<double>(),
              doc["rows"][0]["nll_per_token"].get<double>(), 0.1);
}

TEST_F(LmToolTest, GenerateGreedyPrintsText) {
  const CommandResult r =
      RunCommand(Lm("generate --prompt 'The jury said' --greedy "
                    "--max_new_tokens 8 --mem_len 32 --threads 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
  EXPECT_NE(r.output.find("generated 8 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ms/token"), std::string::npos);
  // The same continuation without the cache.
  const CommandResult no_cache = RunCommand(
      Lm("generate --prompt 'The jury said' --greedy --max_new_tokens 8 "
         "--mem_len 32 --threads 1 --no_cache"));
  ASSERT_EQ(no_cache.exit_code, 0) << no_cache.output;
  EXPECT_EQ(r.output.substr(0, r.output.find('\n')),
            no_cache.output.substr(0, no_cache.output.find('\n')));
  // Bad sampling options are usage errors naming the flag.
  const CommandResult bad = RunCommand(Lm("generate --prompt 'x' --top_p 1.5"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("top_p"), std::string::npos) << bad.output;
}

TEST_F(LmToolTest, BadTextFilesAreErrorsNamingThem) {
  WriteText(Path("empty.txt"), "");
  WriteText(Path("blank.txt"), "\n  \n\n");
  WriteText(Path("binary.txt"), std::string("\xff\xfe\x00\x81\n\xc3\x28\n", 8));
  for (const std::string name :
       {"missing.txt", "empty.txt", "blank.txt", "binary.txt"}) {
    const CommandResult r = RunCommand(Lm("eval --text " + Path(name)));
    EXPECT_NE(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_NE(r.output.find(Path(name)), std::string::npos) << name << "\n"
                                                            << r.output;
  }
  // A text cut to one token has nothing to predict.
  const CommandResult one =
      RunCommand(Lm("eval --text " + Path("text.txt") + " --max_tokens 1"));
  EXPECT_EQ(one.exit_code, 2) << one.output;
  // A model directory without spiece.model.
  const CommandResult no_tok =
      RunCommand(ToolPath("lm") + " eval --text " + Path("text.txt") +
                 " --model " + Path("data/nowhere"));
  EXPECT_NE(no_tok.exit_code, 0);
  EXPECT_NE(no_tok.output.find("spiece.model"), std::string::npos)
      << no_tok.output;
  // Unknown mode names the flag and the choices.
  const CommandResult mode =
      RunCommand(Lm("eval --text " + Path("text.txt") + " --mode fast"));
  EXPECT_EQ(mode.exit_code, 2);
  EXPECT_NE(mode.output.find("--mode"), std::string::npos) << mode.output;
}

}  // namespace
}  // namespace xlnet
