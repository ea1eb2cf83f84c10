// Start-up per slice: a prepared directory whose manifest records the split
// is placed from the manifest, and a rank reads only the shards its rows
// reach (shard_reader.h). The batches equal those of a manifest without
// the record (every shard's document table read at start-up) and, for a
// rank of 8, the rows it owns of one rank's batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/lm_stream_source.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/shard_writer.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/data_pipeline/sampler_test_util.h"

namespace xlnet::data::testing {
namespace {

constexpr int64_t kBatch = 8;

// The Brown sample in shards of about 20 kB of text (15 shards), the split
// recorded for TinyData's eval_fraction; and the same shards under a
// manifest without the record (as written before it was recorded).
class StartupSliceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir() + "/slice");
    old_dir_ = new std::string(TempDir() + "/slice_old");
    PrepareOptions p = TestPrepareOptions({SamplePath()}, *dir_);
    p.shard_bytes = 20000;
    p.eval_fraction = TinyData().eval_fraction;
    auto report = PrepareShards(p);
    ASSERT_TRUE(report.ok()) << report.status();
    std::filesystem::copy(*dir_, *old_dir_);
    auto manifest = ReadManifest(*old_dir_);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    manifest->split.reset();
    ASSERT_TRUE(WriteManifest(*old_dir_, *manifest).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete old_dir_;
  }

  // Built inside Next() on the calling thread, so the bytes read are this
  // sampler's alone.
  static DataConfig Data() {
    DataConfig d = TinyData();
    d.prefetch_batches = 0;
    d.loader_threads = 1;
    return d;
  }

  static std::unique_ptr<Sampler> Open(const std::string& dir, int rank,
                                       int world, Split split = Split::kTrain,
                                       const DataConfig& d = Data()) {
    SamplerOptions o;
    o.data = d;
    o.batch_size = kBatch;
    o.rank = rank;
    o.world_size = world;
    o.split = split;
    auto s = Sampler::Create(dir, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Shard bytes read by opening `dir` for `rank` of `world` and making its
  // first batch (into `first`).
  static int64_t StartupBytes(const std::string& dir, int rank, int world,
                              PlmBatch* first) {
    const int64_t before = ShardBytesRead();
    auto s = Open(dir, rank, world);
    if (s == nullptr) return -1;
    *first = s->Next();
    return ShardBytesRead() - before;
  }

  static std::string* dir_;
  static std::string* old_dir_;
};

std::string* StartupSliceTest::dir_ = nullptr;
std::string* StartupSliceTest::old_dir_ = nullptr;

TEST_F(StartupSliceTest, ManifestRecordsTheSplit) {
  auto manifest = ReadManifest(*dir_);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_TRUE(manifest->split.has_value());
  EXPECT_GE(manifest->shards.size(), 12u);
  EXPECT_EQ(manifest->split->eval_fraction, TinyData().eval_fraction);
  uint64_t tokens = 0, counted = 0;
  for (const auto& parts : manifest->split->shards) {
    tokens += parts[0].tokens + parts[1].tokens;
  }
  for (int64_t c : manifest->split->train_unigram) counted += c;
  EXPECT_EQ(tokens, static_cast<uint64_t>(manifest->totals.tokens));
  // The training split's counts add up to its tokens.
  auto train = Open(*dir_, 0, 1);
  ASSERT_NE(train, nullptr);
  EXPECT_TRUE(train->corpus().per_slice());
  EXPECT_EQ(static_cast<int64_t>(counted), train->corpus().size());
  auto old_train = Open(*old_dir_, 0, 1);
  ASSERT_NE(old_train, nullptr);
  EXPECT_FALSE(old_train->corpus().per_slice());
  EXPECT_EQ(old_train->corpus().recorded_unigram(), nullptr);
}

TEST_F(StartupSliceTest, RankOfEightReadsAQuarterOfOneRankWithItsRows) {
  PlmBatch full;
  const int64_t one = StartupBytes(*dir_, 0, 1, &full);
  PlmBatch old_full;
  const int64_t old_one = StartupBytes(*old_dir_, 0, 1, &old_full);
  ExpectBatchesEqual(full, old_full);
  ASSERT_GT(one, 0);
  // Without the record every shard's header and table is read as well.
  EXPECT_GT(old_one, one);
  for (int rank = 0; rank < 8; ++rank) {
    PlmBatch local;
    const int64_t bytes = StartupBytes(*dir_, rank, 8, &local);
    EXPECT_LE(bytes * 4, one) << "rank " << rank << " read " << bytes
                              << " bytes, one rank alone " << one;
    EXPECT_GT(bytes, 0);
    // Without the record the same rank also reads the header and document
    // table of every shard its rows do not reach.
    PlmBatch old_local;
    EXPECT_LT(bytes, StartupBytes(*old_dir_, rank, 8, &old_local))
        << "rank " << rank;
    ExpectBatchesEqual(local, old_local);
    const auto a = local.Named();
    const auto b = full.Named();
    for (size_t f = 0; f < a.size(); ++f) {
      EXPECT_TRUE(torch::equal(a[f].second, b[f].second.narrow(0, rank, 1)))
          << a[f].first << " of rank " << rank;
    }
  }
}

TEST_F(StartupSliceTest, SameBatchesAsWithoutTheRecordAcrossEpochsAndRanks) {
  for (Split split : {Split::kTrain, Split::kEval}) {
    for (int world : {1, 2}) {
      const int rank = world - 1;
      auto a = Open(*dir_, rank, world, split);
      auto b = Open(*old_dir_, rank, world, split);
      ASSERT_NE(a, nullptr);
      ASSERT_NE(b, nullptr);
      EXPECT_TRUE(a->corpus().per_slice());
      ASSERT_EQ(a->corpus().size(), b->corpus().size());
      EXPECT_EQ(a->corpus().num_docs(), b->corpus().num_docs());
      EXPECT_EQ(a->State().fingerprint, b->State().fingerprint);
      // The first steps, then across the first epoch's end.
      for (int64_t start : {int64_t{0}, a->steps_per_epoch() - 1}) {
        SamplerState state = a->State();
        state.step = start;
        ASSERT_TRUE(a->Restore(state).ok());
        ASSERT_TRUE(b->Restore(state).ok());
        for (int step = 0; step < 3; ++step) {
          ExpectBatchesEqual(a->Next(), b->Next());
        }
      }
      // Every token and sentence flag of the split.
      const int64_t n = a->corpus().size();
      std::vector<int32_t> ids_a(n), ids_b(n);
      std::vector<uint8_t> flags_a(n), flags_b(n);
      a->corpus().CopyIds(0, n, ids_a.data());
      b->corpus().CopyIds(0, n, ids_b.data());
      a->corpus().CopyFlags(0, n, flags_a.data());
      b->corpus().CopyFlags(0, n, flags_b.data());
      EXPECT_EQ(ids_a, ids_b);
      EXPECT_EQ(flags_a, flags_b);
    }
  }
}

TEST_F(StartupSliceTest, CausalStreamsAreTheSame) {
  SamplerOptions o;
  o.data = Data();
  o.batch_size = kBatch;
  o.rank = 1;
  o.world_size = 2;
  auto a = LmStreamSource::Create(*dir_, o);
  auto b = LmStreamSource::Create(*old_dir_, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*a)->corpus().per_slice());
  for (int step = 0; step < 3; ++step) {
    const LmBatch x = (*a)->Next(), y = (*b)->Next();
    EXPECT_TRUE(torch::equal(x.input_ids, y.input_ids));
    EXPECT_TRUE(torch::equal(x.target, y.target));
  }
}

TEST_F(StartupSliceTest, AnotherEvalFractionReadsEveryShard) {
  DataConfig d = Data();
  d.eval_fraction = 0.1;
  auto a = Open(*dir_, 0, 1, Split::kTrain, d);
  auto b = Open(*old_dir_, 0, 1, Split::kTrain, d);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(a->corpus().per_slice());
  ExpectBatchesEqual(a->Next(), b->Next());
}

TEST_F(StartupSliceTest, ARecordThatDisagreesWithTheShardStopsTheRead) {
  const std::string bad = TempDir() + "/slice_bad";
  std::filesystem::copy(*dir_, bad);
  auto manifest = ReadManifest(bad);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  manifest->split->shards[0][0].docs -= 1;
  ASSERT_TRUE(WriteManifest(bad, *manifest).ok());
  auto s = Open(bad, 0, 1);
  ASSERT_NE(s, nullptr);
  try {
    s->Next();
    ADD_FAILURE() << "expected CorruptShardError";
  } catch (const CorruptShardError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("shard-00000.bin"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace xlnet::data::testing
