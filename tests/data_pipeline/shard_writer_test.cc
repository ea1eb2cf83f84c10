// `xlnet-data prepare` on every input kind (data_pipeline/shard_writer.h):
// compressed files give the same shards, JSON Lines records become
// documents split into sentences, suspicious layouts are warned about, and
// documents without blank lines are cut to keep memory bounded.
#include "data_pipeline/shard_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/test_util.h"

namespace xlnet::data::testing {

std::vector<std::string> SampleDocuments() {
  std::vector<std::string> docs;
  std::istringstream in(ReadAll(SamplePath()));
  std::string line, doc;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!doc.empty()) docs.push_back(doc);
      doc.clear();
      continue;
    }
    doc += (doc.empty() ? "" : "\n") + line;
  }
  if (!doc.empty()) docs.push_back(doc);
  return docs;
}

PrepareOptions TestPrepareOptions(const std::vector<std::string>& inputs,
                                  const std::string& out_dir) {
  PrepareOptions p;
  p.inputs = inputs;
  p.tokenizer_path = TokenizerPath();
  p.out_dir = out_dir;
  p.workers = 2;
  p.shard_bytes = 60000;
  p.progress = false;
  return p;
}

namespace {

PrepareOptions Options(const std::vector<std::string>& inputs,
                       const std::string& out) {
  return TestPrepareOptions(inputs, out);
}

std::vector<std::string> ShardNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const std::string& name : DirFiles(dir)) {
    if (name.rfind("shard-", 0) == 0) names.push_back(name);
  }
  return names;
}

std::vector<int32_t> CorpusIds(const std::string& dir,
                               std::vector<uint8_t>* flags = nullptr) {
  auto set = ShardSet::Open(dir, /*verify=*/true);
  EXPECT_TRUE(set.ok()) << set.status();
  if (!set.ok()) return {};
  auto corpus = Corpus::Create(**set, Split::kTrain, 0.0);
  EXPECT_TRUE(corpus.ok()) << corpus.status();
  std::vector<int32_t> ids(corpus->size());
  corpus->CopyIds(0, corpus->size(), ids.data());
  if (flags) {
    flags->resize(corpus->size());
    corpus->CopyFlags(0, corpus->size(), flags->data());
  }
  return ids;
}

TEST(ShardWriterTest, CompressedInputsGiveTheSameShards) {
  ::xlnet::testing::TempDir tmp;
  const std::string text = ReadAll(SamplePath());
  WriteAll(tmp.Join("c.txt"), text);
  WriteGzip(tmp.Join("c.txt.gz"), text, 2);
  WriteZstd(tmp.Join("c.txt.zst"), text, 2);
  for (const char* name : {"c.txt", "c.txt.gz", "c.txt.zst"}) {
    auto r = PrepareShards(
        Options({tmp.Join(name)}, tmp.Join(std::string("out-") + name)));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->docs, 25);
    EXPECT_EQ(r->text_bytes, static_cast<int64_t>(text.size()));
    EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  }
  const auto names = ShardNames(tmp.Join("out-c.txt"));
  ASSERT_GE(names.size(), 4u);
  for (const char* name : {"c.txt.gz", "c.txt.zst"}) {
    const std::string dir = tmp.Join(std::string("out-") + name);
    ASSERT_EQ(ShardNames(dir), names);
    for (const std::string& shard : names) {
      EXPECT_EQ(ReadAll(dir + "/" + shard),
                ReadAll(tmp.Join("out-c.txt/" + shard)))
          << name << " " << shard;
    }
  }
}

TEST(ShardWriterTest, JsonLinesRecordsAreDocumentsOfSentences) {
  ::xlnet::testing::TempDir tmp;
  const std::string path = tmp.Join("docs.jsonl");
  WriteAll(path,
           "{\"id\": 1, \"body\": \"The jury met. Mr. Pye said \\\"no.\\\" "
           "It ended.\\nA new line.\"}\n"
           "\n"
           "{\"id\": 2, \"title\": \"no body\"}\n"
           "not json at all\n"
           "{\"id\": 3, \"body\": \"Second document.\"}\n");
  PrepareOptions p = Options({path}, tmp.Join("out"));
  p.json_key = "body";
  auto r = PrepareShards(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->docs, 2);
  EXPECT_EQ(r->skipped_records, 2);
  // Expected: sentence by sentence, flags alternating, <eod> after each
  // record.
  auto tok = Tokenizer::Load(TokenizerPath());
  ASSERT_TRUE(tok.ok());
  std::vector<int32_t> expected;
  std::vector<uint8_t> expected_flags;
  uint8_t flag = 0;
  for (const std::vector<std::string>& doc :
       {std::vector<std::string>{"The jury met.", "Mr. Pye said \"no.\"",
                                 "It ended.", "A new line."},
        std::vector<std::string>{"Second document."}}) {
    for (const std::string& sentence : doc) {
      std::vector<int32_t> ids;
      ASSERT_TRUE((*tok)->EncodeIds(sentence, &ids).ok());
      expected.insert(expected.end(), ids.begin(), ids.end());
      expected_flags.insert(expected_flags.end(), ids.size(), flag);
      flag ^= 1;
    }
    expected.push_back(kEodId);
    expected_flags.push_back(flag ^ 1);
  }
  std::vector<uint8_t> flags;
  EXPECT_EQ(CorpusIds(p.out_dir, &flags), expected);
  EXPECT_EQ(flags, expected_flags);
  // --strict names the record.
  p.strict = true;
  auto strict = PrepareShards(p);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find(path + ":3: the record has no "
                                                  "field 'body'"),
            std::string::npos)
      << strict.status();
}

TEST(ShardWriterTest, OneDocumentPerLineIsWarnedAbout) {
  ::xlnet::testing::TempDir tmp;
  std::string per_line;
  std::string no_blank;
  for (const std::string& doc : SampleDocuments()) {
    std::string joined = doc;
    std::replace(joined.begin(), joined.end(), '\n', ' ');
    per_line += joined + "\n";
    no_blank += doc + "\n";
  }
  WriteAll(tmp.Join("per_line.txt"), per_line);
  WriteAll(tmp.Join("no_blank.txt"), no_blank);
  auto r = PrepareShards(Options(
      {tmp.Join("per_line.txt"), tmp.Join("no_blank.txt")}, tmp.Join("out")));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_NE(r->warnings[0].find(tmp.Join("per_line.txt") + ": its lines hold"),
            std::string::npos)
      << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("one document or paragraph per line"),
            std::string::npos);
  EXPECT_NE(r->warnings[1].find(tmp.Join("no_blank.txt") + ": "),
            std::string::npos)
      << r->warnings[1];
  EXPECT_NE(r->warnings[1].find("no blank line: read as one document"),
            std::string::npos);
}

TEST(ShardWriterTest, DocumentsWithoutBlankLinesAreCutToBoundMemory) {
  ::xlnet::testing::TempDir tmp;
  std::string text;
  for (const std::string& doc : SampleDocuments()) text += doc + "\n";
  WriteAll(tmp.Join("one_doc.txt"), text);  // 295 KB, no blank line
  PrepareOptions p = Options({tmp.Join("one_doc.txt")}, tmp.Join("out"));
  p.shard_bytes = 20000;  // cut at 80 KB
  auto r = PrepareShards(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->split_documents, 3);
  EXPECT_EQ(r->docs, 4);
  EXPECT_EQ(r->shards, 4);
}

TEST(ShardWriterTest, AFileGivenTwiceIsRefused) {
  auto r = ExpandInputs({SamplePath(), SamplePath()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(SamplePath() + ": given twice"),
            std::string::npos)
      << r.status();
}

// A JSON Lines input none of whose records has --json_key is an error
// naming the file, the key and the fields there are, not a run that
// "succeeds" with 0 tokens.
TEST(ShardWriterTest, AJsonKeyNoRecordHasIsAnError) {
  ::xlnet::testing::TempDir tmp;
  const std::string path = tmp.Join("docs.jsonl");
  WriteAll(path,
           "{\"id\": 1, \"content\": \"One.\"}\n"
           "{\"id\": 2, \"content\": \"Two.\"}\n");
  auto r = PrepareShards(Options({path}, tmp.Join("out")));  // key "text"
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path +
                ": no JSON record has the field 'text' (--json_key); the "
                "first record's fields: content, id");
  EXPECT_FALSE(std::filesystem::exists(tmp.Join("out/manifest.json")));
  // The right key works.
  PrepareOptions p = Options({path}, tmp.Join("out"));
  p.json_key = "content";
  auto ok = PrepareShards(p);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->docs, 2);
}

}  // namespace
}  // namespace xlnet::data::testing
