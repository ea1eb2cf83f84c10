// Reading prepared directories (data_pipeline/shard_reader.h): shard content
// is verified on first use and errors name the shard; names read from the
// manifest stay inside the directory; special files and oversized files are
// refused.
#include "data_pipeline/shard_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/file_util.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_writer.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/test_util.h"

namespace xlnet::data::testing {
namespace {

// A private copy of the shared prepared directory.
std::string CopyOfData(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::copy(DataDir(), dir);
  return dir;
}

SamplerOptions SmallOptions() {
  SamplerOptions o;
  o.data.seq_len = 64;
  o.data.reuse_len = 32;
  o.data.perm_size = 16;
  o.data.num_predict = 10;
  o.data.bi_data = false;
  o.data.eval_fraction = 0;  // stream 0 starts at shard 0's first token
  o.data.prefetch_batches = 2;
  o.batch_size = 4;
  return o;
}

// Runs the sampler over a whole epoch; returns the first error message
// ("" when every batch was built).
std::string ErrorOfOneEpoch(const std::string& dir) {
  auto sampler = Sampler::Create(dir, SmallOptions());
  if (!sampler.ok()) return "Create: " + sampler.status().ToString();
  try {
    for (int64_t i = 0; i < (*sampler)->steps_per_epoch(); ++i) {
      (*sampler)->Next();
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void ReplaceInFile(const std::string& path, const std::string& from,
                   const std::string& to) {
  std::string text = ReadAll(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  text.replace(at, from.size(), to);
  WriteAll(path, text);
}

TEST(ShardReaderTest, ZeroedBytesFailOnFirstUseNamingTheShard) {
  const std::string dir = CopyOfData("zeroed");
  const std::string shard = dir + "/shard-00000.bin";
  std::string bytes = ReadAll(shard);
  ASSERT_GT(bytes.size(), 6000u);
  // Zeros inside the token ids: id 0 is <unk>, in range, so only the
  // checksum can tell.
  std::memset(&bytes[1000], 0, 4000);
  WriteAll(shard, bytes);
  // Opening reads no shard body (a 100 GB corpus opens at once) ...
  ASSERT_TRUE(ShardSet::Open(dir).ok());
  // ... and the first batch that reads the shard fails, naming it.
  const std::string error = ErrorOfOneEpoch(dir);
  EXPECT_NE(error.find(shard), std::string::npos) << error;
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

TEST(ShardReaderTest, OutOfVocabularyIdsFailNamingTheShard) {
  const std::string dir = CopyOfData("oov");
  const std::string shard = dir + "/shard-00001.bin";
  std::string bytes = ReadAll(shard);
  auto header = DecodeShardHeader(bytes.data(), bytes.size(), shard);
  ASSERT_TRUE(header.ok()) << header.status();
  const ShardLayout l = GetShardLayout(*header);
  // Token 5 gets id 4000 (the vocabulary has 1000), with a checksum that
  // matches, so only the range check can tell.
  const uint32_t bad = 4000;
  std::memcpy(&bytes[l.ids + 5 * l.id_bytes], &bad, l.id_bytes);
  const uint64_t checksum = ShardBodyChecksum(bytes.data(), bytes.size());
  std::memcpy(&bytes[40], &checksum, 8);
  WriteAll(shard, bytes);
  ReplaceInFile(dir + "/manifest.json", HexU64(header->checksum),
                HexU64(checksum));
  auto set = ShardSet::Open(dir);
  ASSERT_TRUE(set.ok()) << set.status();
  const absl::Status status = (*set)->Verify(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(shard + ": token 5 has id 4000"),
            std::string::npos)
      << status;
  EXPECT_TRUE((*set)->Verify(0).ok());
  const std::string error = ErrorOfOneEpoch(dir);
  EXPECT_NE(error.find(shard + ": token 5 has id 4000"), std::string::npos)
      << error;
}

TEST(ShardReaderTest, ManifestNamesStayInsideTheDirectory) {
  for (const std::string& name :
       {std::string("../shard-00000.bin"), std::string("/etc/passwd"),
        std::string("sub/shard-00000.bin"), std::string("..")}) {
    const std::string dir = CopyOfData("confined");
    ReplaceInFile(dir + "/manifest.json", "\"file\": \"shard-00000.bin\"",
                  "\"file\": \"" + name + "\"");
    auto set = ShardSet::Open(dir);
    ASSERT_FALSE(set.ok()) << name;
    const std::string msg(set.status().message());
    EXPECT_NE(msg.find(dir + "/manifest.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
  }
  const std::string dir = CopyOfData("confined_tokenizer");
  ReplaceInFile(dir + "/manifest.json", "\"file\": \"spiece.model\"",
                "\"file\": \"../../spiece.model\"");
  auto set = ShardSet::Open(dir);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("'../../spiece.model'"),
            std::string::npos)
      << set.status();
}

TEST(ShardReaderTest, SpecialAndOversizedFilesAreRefused) {
  const std::string dir = CopyOfData("special");
  const std::string shard = dir + "/shard-00000.bin";
  std::filesystem::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  auto fifo = ShardSet::Open(dir);  // must not block on the FIFO
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find(shard), std::string::npos)
      << fifo.status();
  std::filesystem::remove(shard);
  std::filesystem::copy(DataDir() + "/shard-00000.bin", shard);
  // A manifest far larger than any real one is refused without reading it
  // (a sparse file: no disk used).
  const std::string manifest = dir + "/manifest.json";
  ASSERT_EQ(::truncate(manifest.c_str(), kMaxManifestBytes + 1), 0);
  auto big = ShardSet::Open(dir);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find(manifest), std::string::npos)
      << big.status();
  EXPECT_NE(big.status().message().find("larger than"), std::string::npos)
      << big.status();
}

// tests/fixtures/shards_v1: the first two documents of the Brown sample,
// prepared by the format-version-1 writer (int32 ids) with the test
// tokenizer (vocab 1000, hash 223c65657ff1b3f4: the pieces of the one it was
// made with, plus its recorded casing).
TEST(ShardReaderTest, VersionOneShardsStillRead) {
  const std::string v1 = TempDir() + "/v1";
  std::filesystem::remove_all(v1);
  std::filesystem::copy(
      std::string(XLNET_SOURCE_DIR) + "/tests/fixtures/shards_v1", v1);
  std::filesystem::copy(TokenizerPath(), v1 + "/spiece.model");
  // The same text prepared now (version 2, uint16 ids).
  std::string text;
  int blank = 0;
  for (std::istringstream in(ReadAll(SamplePath())); blank < 2;) {
    std::string line;
    if (!std::getline(in, line)) break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) ++blank;
    if (blank < 2) text += line + "\n";
  }
  const std::string input = TempDir() + "/two_docs.txt";
  WriteAll(input, text);
  PrepareOptions p;
  p.inputs = {input};
  p.tokenizer_path = TokenizerPath();
  p.out_dir = TempDir() + "/v2";
  p.shard_bytes = 4000;
  p.progress = false;
  ASSERT_TRUE(PrepareShards(p).ok());

  auto old_set = ShardSet::Open(v1, /*verify=*/true);
  ASSERT_TRUE(old_set.ok()) << old_set.status();
  auto new_set = ShardSet::Open(p.out_dir, /*verify=*/true);
  ASSERT_TRUE(new_set.ok()) << new_set.status();
  ASSERT_EQ((*old_set)->tokenizer_hash(), (*new_set)->tokenizer_hash())
      << "the test tokenizer changed; re-make the fixture (see its README)";
  EXPECT_EQ((*old_set)->shards()[0].id_bytes, 4u);
  EXPECT_EQ((*new_set)->shards()[0].id_bytes, 2u);
  int64_t old_bytes = 0, new_bytes = 0;
  for (const auto& v : (*old_set)->shards()) {
    old_bytes += std::filesystem::file_size(v.path);
  }
  for (const auto& v : (*new_set)->shards()) {
    new_bytes += std::filesystem::file_size(v.path);
  }
  EXPECT_LT(new_bytes, old_bytes * 2 / 3);
  // Same tokens, flags and documents, so the same batches.
  for (Split split : {Split::kTrain, Split::kEval}) {
    auto a = Corpus::Create(**old_set, split, 0.01);
    auto b = Corpus::Create(**new_set, split, 0.01);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    std::vector<int32_t> ia(a->size()), ib(b->size());
    std::vector<uint8_t> fa(a->size()), fb(b->size());
    a->CopyIds(0, a->size(), ia.data());
    b->CopyIds(0, b->size(), ib.data());
    a->CopyFlags(0, a->size(), fa.data());
    b->CopyFlags(0, b->size(), fb.data());
    EXPECT_EQ(ia, ib);
    EXPECT_EQ(fa, fb);
  }
  SamplerOptions o = SmallOptions();
  auto old_sampler = Sampler::Create(v1, o);
  auto new_sampler = Sampler::Create(p.out_dir, o);
  ASSERT_TRUE(old_sampler.ok()) << old_sampler.status();
  ASSERT_TRUE(new_sampler.ok()) << new_sampler.status();
  for (int step = 0; step < 3; ++step) {
    const PlmBatch x = (*old_sampler)->Next();
    const PlmBatch y = (*new_sampler)->Next();
    for (size_t i = 0; i < x.Named().size(); ++i) {
      EXPECT_TRUE(torch::equal(x.Named()[i].second, y.Named()[i].second))
          << x.Named()[i].first;
    }
  }
}

}  // namespace
}  // namespace xlnet::data::testing
