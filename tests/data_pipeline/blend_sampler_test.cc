// Blending prepared corpora by weight: identity with one source, weights,
// determinism, rank slices, resume, token counts, refusals; the batch-source
// factory and the data commands over a blend.
#include "data_pipeline/blend_sampler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "common/safetensors.h"
#include "data_pipeline/data_commands.h"
#include "data_pipeline/open_batch_source.h"
#include "data_pipeline/shard_format.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/data_pipeline/sampler_test_util.h"

namespace xlnet::data::testing {
namespace {

namespace fs = std::filesystem;

// Options of a blend that builds its batches inside Next().
SamplerOptions Options(const DataConfig& d, int64_t batch, int rank = 0,
                       int world = 1) {
  SamplerOptions o;
  o.data = d;
  o.data.prefetch_batches = 0;
  o.batch_size = batch;
  o.seed = 1234;
  o.rank = rank;
  o.world_size = world;
  return o;
}

// A copy of the test corpus under another name; the first of `edits`
// found in its manifest text is applied.
std::string CopyOfData(
    const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  const std::string dir = TempDir() + "/" + name;
  if (!fs::exists(dir)) {
    fs::copy(DataDir(), dir, fs::copy_options::recursive);
    if (!edits.empty()) {
      const std::string manifest = dir + "/" + kManifestName;
      const std::string text = ReadAll(manifest);
      bool edited = false;
      for (const auto& edit : edits) {
        if (text.find(edit.first) == std::string::npos) continue;
        WriteAll(manifest, absl::StrReplaceAll(text, {edit}));
        edited = true;
        break;
      }
      EXPECT_TRUE(edited) << manifest;
    }
  }
  return dir;
}

std::unique_ptr<BlendSampler> MakeBlend(std::vector<BlendSource> sources,
                                        const SamplerOptions& o,
                                        int64_t block_steps) {
  auto b = BlendSampler::Create(std::move(sources), o, block_steps);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(b).value() : nullptr;
}

std::vector<BlendSource> TwoSources() {
  return {{DataDir(), 0.75, "a"}, {CopyOfData("blend_b"), 0.25, ""}};
}

TEST(BlendSamplerTest, OneSourceGivesTheSingleDirectoryBatches) {
  for (bool bi : {false, true}) {
    DataConfig d = TinyData();
    d.bi_data = bi;
    auto single = Sampler::Create(DataDir(), Options(d, 8));
    ASSERT_TRUE(single.ok()) << single.status();
    auto blend = MakeBlend({{DataDir(), 1.0, ""}}, Options(d, 8), 3);
    ASSERT_NE(blend, nullptr);
    EXPECT_EQ(blend->State().fingerprint, (*single)->State().fingerprint);
    // Past several blocks and past the end of the first epoch.
    const int64_t steps = (*single)->steps_per_epoch() + 4;
    for (int64_t t = 0; t < steps; ++t) {
      ExpectBatchesEqual(blend->Next(), (*single)->Next());
    }
    EXPECT_EQ(blend->TokensConsumed(steps)[0], steps * 8 * d.seq_len);
  }
}

TEST(BlendSamplerTest, DrawsFollowTheWeights) {
  const DataConfig d = TinyData();
  auto blend = MakeBlend(TwoSources(), Options(d, 8), 5);
  ASSERT_NE(blend, nullptr);
  EXPECT_EQ(blend->sources()[1].name, "blend_b");
  // 8 rows x 2000 blocks = 16000 independent draws: the standard deviation
  // of the fraction is sqrt(0.75 * 0.25 / 16000) = 0.0034; allow 0.02.
  const int64_t blocks = 2000;
  int64_t first = 0;
  for (int64_t row = 0; row < 8; ++row) {
    for (int64_t b = 0; b < blocks; ++b) {
      first += blend->SourceOf(b * 5, row, nullptr) == 0;
    }
  }
  EXPECT_NEAR(static_cast<double>(first) / (8 * blocks), 0.75, 0.02);
  // The token counts agree with the draws.
  const std::vector<int64_t> tokens = blend->TokensConsumed(blocks * 5);
  EXPECT_EQ(tokens[0], first * 5 * d.seq_len);
  EXPECT_EQ(tokens[0] + tokens[1], blocks * 5 * 8 * d.seq_len);
}

TEST(BlendSamplerTest, RowsReadTheirSourceContiguously) {
  const DataConfig d = TinyData();
  const int64_t K = 4;
  auto blend = MakeBlend(TwoSources(), Options(d, 8), K);
  ASSERT_NE(blend, nullptr);
  for (int64_t row : {0, 5}) {
    std::vector<int64_t> next_step(2, 0);  // expected step in each source
    for (int64_t t = 0; t < 40 * K; ++t) {
      int64_t source_step = -1;
      const int s = blend->SourceOf(t, row, &source_step);
      // Same source for a whole block.
      EXPECT_EQ(s, blend->SourceOf(t - t % K, row, nullptr));
      // A source's stream advances only while the row reads it.
      ASSERT_EQ(source_step, next_step[s]) << "row " << row << " step " << t;
      ++next_step[s];
    }
    EXPECT_GT(next_step[0], 0);
    EXPECT_GT(next_step[1], 0);
    // Each row's sample is the source's sample at the source step.
    for (int64_t t : {0L, 7L, 33L, 150L}) {
      int64_t source_step = 0;
      const int s = blend->SourceOf(t, row, &source_step);
      ExpectBatchesEqual(blend->BuildBatch(t, {row}),
                         blend->source(s).BuildBatch(source_step, {row}));
    }
  }
  // Far steps (beyond many memo checkpoints) equal a fresh sampler's.
  auto fresh = MakeBlend(TwoSources(), Options(d, 8), K);
  ASSERT_NE(fresh, nullptr);
  ExpectBatchesEqual(blend->BuildBatch(5000, {1, 2}),
                     fresh->BuildBatch(5000, {1, 2}));
}

TEST(BlendSamplerTest, RankSlicesPartitionTheGlobalBatch) {
  const DataConfig d = TinyData();
  auto global = MakeBlend(TwoSources(), Options(d, 8), 2);
  ASSERT_NE(global, nullptr);
  for (int rank = 0; rank < 2; ++rank) {
    auto local = MakeBlend(TwoSources(), Options(d, 8, rank, 2), 2);
    ASSERT_NE(local, nullptr);
    EXPECT_EQ(local->State().fingerprint, global->State().fingerprint);
    const auto rows = local->local_rows();
    ASSERT_EQ(rows.size(), 4u);
    for (int64_t t = 0; t < 6; ++t) {
      ExpectBatchesEqual(local->Next(), global->BuildBatch(t, rows));
    }
  }
}

TEST(BlendSamplerTest, ResumeReproducesTheNextBatches) {
  const DataConfig d = TinyData();
  auto a = MakeBlend(TwoSources(), Options(d, 8), 3);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 7; ++i) a->Next();
  const std::string saved = a->State().ToString();
  const PlmBatch b7 = a->Next();
  const PlmBatch b8 = a->Next();
  auto state = SamplerState::FromString(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  auto b = MakeBlend(TwoSources(), Options(d, 8), 3);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->Restore(*state).ok());
  ExpectBatchesEqual(b->Next(), b7);
  ExpectBatchesEqual(b->Next(), b8);

  // Another block size, other weights or one source only: refused.
  auto other_block = MakeBlend(TwoSources(), Options(d, 8), 4);
  ASSERT_NE(other_block, nullptr);
  EXPECT_FALSE(other_block->Restore(*state).ok());
  auto sources = TwoSources();
  sources[1].weight = 0.5;
  auto other_weights = MakeBlend(sources, Options(d, 8), 3);
  ASSERT_NE(other_weights, nullptr);
  EXPECT_FALSE(other_weights->Restore(*state).ok());
  auto single = MakeBlend({{DataDir(), 1.0, ""}}, Options(d, 8), 3);
  ASSERT_NE(single, nullptr);
  EXPECT_FALSE(single->Restore(*state).ok());
}

TEST(BlendSamplerTest, PrefetchingGivesTheSameBatchesAndResumes) {
  const DataConfig d = TinyData();
  SamplerOptions threaded = Options(d, 8);
  threaded.data.loader_threads = 2;
  threaded.data.prefetch_batches = 4;
  auto a = MakeBlend(TwoSources(), threaded, 3);
  auto b = MakeBlend(TwoSources(), Options(d, 8), 3);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->State().fingerprint, b->State().fingerprint);
  constexpr int64_t kResumeStep = 5;
  SamplerState saved;
  std::vector<PlmBatch> batches;
  for (int64_t t = 0; t < 12; ++t) {
    if (t == kResumeStep) saved = a->State();
    batches.push_back(a->Next());
    ExpectBatchesEqual(batches.back(), b->Next());
  }
  EXPECT_EQ(saved.step, kResumeStep);
  // Both rewind to the saved step (the prefetched batches are dropped).
  ASSERT_TRUE(a->Restore(saved).ok());
  ASSERT_TRUE(b->Restore(saved).ok());
  for (int64_t t = kResumeStep; t < 12; ++t) {
    const PlmBatch again = a->Next();
    ExpectBatchesEqual(again, batches[t]);
    ExpectBatchesEqual(again, b->Next());
  }
  EXPECT_EQ(a->State().step, 12);
}

// A blend hands out compact batches (compact_masks) though its sources
// build plain ones: the plain blend's batches with bool masks.
TEST(BlendSamplerTest, CompactBatchesHoldTheSameMasksAsBool) {
  const DataConfig d = TinyData();
  SamplerOptions o = Options(d, 8);
  o.compact_masks = true;
  auto compact = MakeBlend(TwoSources(), o, 3);
  auto plain = MakeBlend(TwoSources(), Options(d, 8), 3);
  ASSERT_TRUE(compact && plain);
  EXPECT_EQ(compact->State().fingerprint, plain->State().fingerprint);
  for (int64_t t = 0; t < 4; ++t)
    ExpectCompactOf(compact->Next(), plain->Next());
}

TEST(BlendSamplerTest, BadBlendsAreRefusedNamingTheSource) {
  const DataConfig d = TinyData();
  auto expect_error = [&](std::vector<BlendSource> sources, int64_t block,
                          const std::string& needle) {
    auto b = BlendSampler::Create(std::move(sources), Options(d, 8), block);
    ASSERT_FALSE(b.ok()) << needle;
    EXPECT_NE(b.status().message().find(needle), std::string::npos)
        << b.status();
  };
  expect_error({}, 3, "data.sources");
  expect_error(TwoSources(), 0, "data.source_block_steps");
  expect_error({{DataDir(), 1, "x"}, {DataDir(), 0, "y"}}, 3,
               "data.sources[1]");
  expect_error({{DataDir(), 1, "x"}, {CopyOfData("blend_b"), 1, "x"}}, 3,
               "name 'x'");
  expect_error({{DataDir(), 1, "x"}, {TempDir() + "/nowhere", 1, "gone"}}, 3,
               "data source 'gone'");
  // A source whose manifest names another tokenizer.
  const std::string other_tok =
      CopyOfData("blend_other_tok", {{"\"hash\": \"", "\"hash\": \"0000"}});
  expect_error({{DataDir(), 1, "x"}, {other_tok, 1, "odd"}}, 3,
               "data source 'odd'");
  // A source prepared with other text rules.
  const std::string other_rules = CopyOfData(
      "blend_other_rules", {{"\"uncased\": false", "\"uncased\": true"},
                            {"\"uncased\": true", "\"uncased\": false"}});
  expect_error({{DataDir(), 1, "x"}, {other_rules, 1, "cased"}}, 3,
               "data source 'cased'");
}

TEST(BatchSourceTest, OpenBatchSourceTakesOneOfDataAndSources) {
  DataConfig d = TinyData();
  // --data: the single-directory sampler, one unnamed part.
  auto single = OpenBatchSource(DataDir(), Options(d, 8));
  ASSERT_TRUE(single.ok()) << single.status();
  auto reference = Sampler::Create(DataDir(), Options(d, 8));
  ASSERT_TRUE(reference.ok()) << reference.status();
  ExpectBatchesEqual((*single)->Next(), (*reference)->Next());
  ASSERT_EQ((*single)->Parts().size(), 1u);
  EXPECT_EQ((*single)->Parts()[0].name, "");
  EXPECT_EQ((*single)->Parts()[0].weight, 1.0);
  EXPECT_EQ((*single)->TokensConsumed(5),
            std::vector<int64_t>{5 * 8 * d.seq_len});
  const RowOrigin origin = (*single)->Origin(7, 3);
  EXPECT_EQ(origin.sampler, (*single)->Parts()[0].sampler);
  EXPECT_EQ(origin.step, 7);
  // data.sources: the blend of data.source_block_steps blocks.
  d.sources = TwoSources();
  d.source_block_steps = 4;
  auto blend = OpenBatchSource("", Options(d, 8));
  ASSERT_TRUE(blend.ok()) << blend.status();
  auto direct = MakeBlend(TwoSources(), Options(d, 8), 4);
  ASSERT_NE(direct, nullptr);
  EXPECT_EQ((*blend)->State().fingerprint, direct->State().fingerprint);
  for (int64_t t = 0; t < 10; ++t) {
    ExpectBatchesEqual((*blend)->Next(),
                       direct->BuildBatch(t, direct->local_rows()));
  }
  // Exactly one of the two.
  auto both = OpenBatchSource(DataDir(), Options(d, 8));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("both --data and data.sources"),
            std::string::npos);
  auto neither = OpenBatchSource("", Options(TinyData(), 8));
  ASSERT_FALSE(neither.ok());
  EXPECT_NE(neither.status().message().find("no data"), std::string::npos);
}

TEST(BatchSourceTest, BlendPartsAndOriginsNameTheSources) {
  const DataConfig d = TinyData();
  auto blend = MakeBlend(TwoSources(), Options(d, 8), 3);
  ASSERT_NE(blend, nullptr);
  const std::vector<SourcePart> parts = blend->Parts();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "a");
  EXPECT_EQ(parts[1].name, "blend_b");
  EXPECT_DOUBLE_EQ(parts[0].weight, 0.75);
  EXPECT_DOUBLE_EQ(parts[1].weight, 0.25);
  EXPECT_EQ(parts[0].sampler, &blend->source(0));
  // A row's origin rebuilds the blend's sample of that row.
  for (int64_t t : {0L, 5L, 40L}) {
    for (int64_t row : {0L, 6L}) {
      const RowOrigin origin = blend->Origin(t, row);
      int64_t source_step = 0;
      const int s = blend->SourceOf(t, row, &source_step);
      EXPECT_EQ(origin.sampler, parts[s].sampler);
      EXPECT_EQ(origin.step, source_step);
      EXPECT_EQ(origin.name, parts[s].name);
      ExpectBatchesEqual(origin.sampler->BuildRow(origin.step, row, nullptr),
                         blend->BuildBatch(t, {row}));
    }
  }
}

TEST(BatchSourceTest, DumpAndInspectReadABlend) {
  Config config;
  config.data = TinyData();
  config.data.sources = TwoSources();
  config.data.source_block_steps = 2;
  config.train.batch_size = 8;
  DumpOptions o;
  o.config = config;
  o.batches = 5;
  o.out = TempDir() + "/blend_dump.safetensors";
  std::ostringstream log;
  ASSERT_TRUE(DumpBatches(o, log).ok());
  auto file = SafetensorsFile::Open(o.out);
  ASSERT_TRUE(file.ok()) << file.status();
  auto ids = file->Load("input_ids");
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto blend = MakeBlend(TwoSources(), Options(config.data, 8), 2);
  ASSERT_NE(blend, nullptr);
  for (int64_t t = 0; t < 5; ++t) {
    EXPECT_TRUE(torch::equal(
        (*ids)[t], blend->BuildBatch(t, blend->local_rows()).input_ids))
        << "step " << t;
  }
  EXPECT_EQ(file->metadata().at("sources"), "a,blend_b");

  // Inspect names the source of a row read from the second corpus.
  int64_t step = 0;
  while (blend->SourceOf(step, 2, nullptr) != 1) ++step;
  InspectOptions io;
  io.config = config;
  io.step = step;
  io.row = 2;
  std::ostringstream out;
  ASSERT_TRUE(InspectSample(io, out).ok());
  EXPECT_NE(out.str().find("reads source 'blend_b'"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("factorisation order"), std::string::npos);
}

}  // namespace
}  // namespace xlnet::data::testing
