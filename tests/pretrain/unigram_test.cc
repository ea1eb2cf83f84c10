// The evaluation's unigram baseline from the counts xlnet-data prepare
// records in manifest.json equals the one counted by scanning the training
// split (what a manifest without the record still gets), for one corpus
// and for a blend, so eval_unigram_loss and eval_unigram_accuracy do not
// change.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "config/config.h"
#include "data_pipeline/open_batch_source.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "pretrain/plm_unit.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

class UnigramTest : public ::testing::Test {
 protected:
  // The Brown sample prepared by the tool (split recorded for the default
  // data.eval_fraction), and a copy whose manifest lacks the record.
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    testing::PrepareSampleData(tmp_->path());
    std::filesystem::copy(tmp_->Join("data"), tmp_->Join("old"));
    auto manifest = data::ReadManifest(tmp_->Join("old"));
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    ASSERT_TRUE(manifest->split.has_value());
    manifest->split.reset();
    ASSERT_TRUE(data::WriteManifest(tmp_->Join("old"), *manifest).ok());
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::unique_ptr<data::BatchSource> Open(
      const std::string& dir, const std::vector<DataSource>& sources = {}) {
    data::SamplerOptions o;
    o.data.seq_len = 64;
    o.data.reuse_len = 32;
    o.data.perm_size = 32;
    o.data.num_predict = 10;
    o.data.prefetch_batches = 0;
    o.data.sources = sources;
    o.batch_size = 4;
    auto source = data::OpenBatchSource(dir, o);
    EXPECT_TRUE(source.ok()) << source.status();
    return source.ok() ? std::move(source).value() : nullptr;
  }

  static testing::TempDir* tmp_;
};

testing::TempDir* UnigramTest::tmp_ = nullptr;

TEST_F(UnigramTest, RecordedCountsGiveTheScannedBaseline) {
  auto recorded = Open(tmp_->Join("data"));
  auto scanned = Open(tmp_->Join("old"));
  ASSERT_NE(recorded, nullptr);
  ASSERT_NE(scanned, nullptr);
  ASSERT_NE(recorded->Parts()[0].sampler->corpus().recorded_unigram(), nullptr);
  ASSERT_EQ(scanned->Parts()[0].sampler->corpus().recorded_unigram(), nullptr);
  // The tokenizer's vocabulary, and a model's larger one.
  for (int64_t vocab : {1000, 1024}) {
    const int64_t before = data::ShardBytesRead();
    const torch::Tensor a = UnigramLogProbs(recorded->Parts(), vocab);
    EXPECT_EQ(data::ShardBytesRead(), before) << "the record reads no shard";
    const torch::Tensor b = UnigramLogProbs(scanned->Parts(), vocab);
    // The scan verifies (reads) the shards the first time.
    if (vocab == 1000) {
      EXPECT_GT(data::ShardBytesRead(), before);
    }
    ASSERT_EQ(a.size(0), vocab);
    EXPECT_TRUE(torch::equal(a, b)) << "vocab " << vocab;
  }
}

TEST_F(UnigramTest, BlendOfRecordedAndScannedSources) {
  auto mixed =
      Open("", {{tmp_->Join("data"), 3.0, "a"}, {tmp_->Join("old"), 1.0, "b"}});
  auto scanned =
      Open("", {{tmp_->Join("old"), 3.0, "a"}, {tmp_->Join("old"), 1.0, "b"}});
  ASSERT_NE(mixed, nullptr);
  ASSERT_NE(scanned, nullptr);
  EXPECT_TRUE(torch::equal(UnigramLogProbs(mixed->Parts(), 1000),
                           UnigramLogProbs(scanned->Parts(), 1000)));
}

}  // namespace
}  // namespace xlnet
