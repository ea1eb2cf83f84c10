// Preparation split over hosts (prepare --num_tasks/--task, then
// CombineParts): the parts combine into exactly what one task writes, and a
// part that is missing, unfinished or made with another tokenizer is named.
#include "data_pipeline/shard_combine.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/file_util.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/test_util.h"

namespace xlnet::data::testing {
namespace {

// The sample as 7 files (some empty of documents) under `dir`.
std::vector<std::string> SplitSample(const std::string& dir) {
  const std::vector<std::string> docs = SampleDocuments();
  std::vector<std::string> paths;
  for (int f = 0; f < 7; ++f) {
    std::string text;
    for (size_t d = f; d < docs.size(); d += 7) text += docs[d] + "\n\n";
    paths.push_back(dir + "/part" + std::to_string(f) + ".txt");
    WriteAll(paths.back(), text);
  }
  return paths;
}

PrepareOptions Options(const std::vector<std::string>& inputs,
                       const std::string& out, int task, int num_tasks) {
  PrepareOptions p = TestPrepareOptions(inputs, out);
  p.shard_bytes = 20000;
  p.task = task;
  p.num_tasks = num_tasks;
  return p;
}

TEST(ShardCombineTest, PartsCombineIntoExactlyTheOneTaskOutput) {
  ::xlnet::testing::TempDir tmp;
  const std::vector<std::string> inputs = SplitSample(tmp.path());
  ASSERT_TRUE(PrepareShards(Options(inputs, tmp.Join("one"), 0, 1)).ok());
  const std::string split = tmp.Join("split");
  for (int task : {2, 0, 1}) {
    auto r = PrepareShards(Options(inputs, split, task, 3));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->dir, split + "/" + PartDirName(task, 3));
    // A part is not a prepared directory yet.
    auto part = ShardSet::Open(r->dir);
    ASSERT_FALSE(part.ok());
    EXPECT_NE(part.status().message().find("xlnet-data combine"),
              std::string::npos)
        << part.status();
  }
  auto combined = CombineParts(split);
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_EQ(combined->parts, 3);
  // Same files, byte for byte (manifest included), parts removed.
  const auto names = DirFiles(tmp.Join("one"));
  ASSERT_EQ(DirFiles(split), names);
  for (const std::string& name : names) {
    EXPECT_EQ(ReadAll(split + "/" + name), ReadAll(tmp.Join("one/" + name)))
        << name;
  }
  // So the sampler gives the same batches.
  SamplerOptions o;
  o.data.seq_len = 64;
  o.data.reuse_len = 32;
  o.data.perm_size = 16;
  o.data.num_predict = 10;
  o.batch_size = 4;
  auto a = Sampler::Create(tmp.Join("one"), o);
  auto b = Sampler::Create(split, o);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int step = 0; step < 3; ++step) {
    const auto x = (*a)->Next().Named();
    const auto y = (*b)->Next().Named();
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_TRUE(torch::equal(x[i].second, y[i].second)) << x[i].first;
    }
  }
}

TEST(ShardCombineTest, MissingUnfinishedAndMismatchedPartsAreNamed) {
  ::xlnet::testing::TempDir tmp;
  const std::vector<std::string> inputs = SplitSample(tmp.path());
  const std::string split = tmp.Join("split");
  const std::string part1 = split + "/" + PartDirName(1, 3);
  ASSERT_TRUE(PrepareShards(Options(inputs, split, 0, 3)).ok());
  ASSERT_TRUE(PrepareShards(Options(inputs, split, 2, 3)).ok());
  auto missing = CombineParts(split);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().find(part1 + ": missing: task 1 of 3"),
            0u)
      << missing.status();

  ASSERT_TRUE(PrepareShards(Options(inputs, split, 1, 3)).ok());
  std::filesystem::remove(part1 + "/manifest.json");
  auto unfinished = CombineParts(split);
  ASSERT_FALSE(unfinished.ok());
  EXPECT_EQ(unfinished.status().message().find(part1 + ": unfinished"), 0u)
      << unfinished.status();

  // Task 1 again, with another tokenizer.
  TokenizerTrainOptions t;
  t.inputs = {inputs[0]};
  t.vocab_size = 300;
  auto bytes = TrainTokenizer(t);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WriteAll(tmp.Join("other.model"), *bytes);
  PrepareOptions other = Options(inputs, split, 1, 3);
  other.tokenizer_path = tmp.Join("other.model");
  ASSERT_TRUE(PrepareShards(other).ok());
  auto mismatch = CombineParts(split);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(
      mismatch.status().message().find(part1 + ": made with another tokenizer"),
      0u)
      << mismatch.status();
  // Nothing was combined: no manifest, the parts are intact.
  EXPECT_FALSE(PathExists(split + "/manifest.json"));
  EXPECT_TRUE(PathExists(part1 + "/manifest.json"));

  // Parts of different splits.
  ASSERT_TRUE(PrepareShards(Options(inputs, split, 0, 2)).ok());
  auto mixed = CombineParts(split);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("parts of different splits"),
            std::string::npos)
      << mixed.status();
}

TEST(ShardCombineTest, CorruptShardsAndAFinishedDirectoryAreRefused) {
  ::xlnet::testing::TempDir tmp;
  const std::vector<std::string> all = SplitSample(tmp.path());
  const std::vector<std::string> inputs = {all[0], all[1]};
  const std::string split = tmp.Join("split");
  const std::string part1 = split + "/" + PartDirName(1, 2);
  for (int task : {0, 1}) {
    ASSERT_TRUE(PrepareShards(Options(inputs, split, task, 2)).ok());
  }
  // One flipped byte in a part's shard body: the checksum names the file.
  const std::string shard = part1 + "/shard-00000.bin";
  const std::string good = ReadAll(shard);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x5A;
  WriteAll(shard, bad);
  auto corrupt = CombineParts(split);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().message().find(shard + ": checksum mismatch"), 0u)
      << corrupt.status();
  EXPECT_FALSE(PathExists(split + "/manifest.json"));
  WriteAll(shard, good);

  // A part's totals that its shards do not add up to.
  const std::string manifest = part1 + "/manifest.json";
  const std::string good_manifest = ReadAll(manifest);
  auto m = ReadManifest(part1);
  ASSERT_TRUE(m.ok()) << m.status();
  m->totals.docs += 1;
  ASSERT_TRUE(WriteManifest(part1, *m).ok());
  auto counts = CombineParts(split);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().message().find(manifest + ": totals say"), 0u)
      << counts.status();
  WriteAll(manifest, good_manifest);

  // A finished directory at --out is never replaced.
  const std::string finished = ReadAll(all[0]);  // any content will do
  WriteAll(split + "/manifest.json", finished);
  auto exists = CombineParts(split);
  ASSERT_FALSE(exists.ok());
  EXPECT_NE(exists.status().message().find("already holds a prepared"),
            std::string::npos)
      << exists.status();
  EXPECT_EQ(ReadAll(split + "/manifest.json"), finished);
  std::filesystem::remove(split + "/manifest.json");
  auto combined = CombineParts(split);
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_EQ(combined->parts, 2);
  EXPECT_FALSE(PathExists(part1));
}

}  // namespace
}  // namespace xlnet::data::testing
