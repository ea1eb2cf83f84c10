// The permutation-LM sampler: masks, targets, spans, streams, ranks, resume.
#include "data_pipeline/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "common/safetensors.h"
#include "config/config.h"
#include "data_pipeline/data_commands.h"
#include "data_pipeline/plm_sample.h"
#include "tests/data_pipeline/data_test_env.h"
#include "tests/data_pipeline/sampler_test_util.h"

namespace xlnet::data::testing {
namespace {

std::unique_ptr<Sampler> MakeSampler(const DataConfig& d, int64_t batch,
                                     int rank = 0, int world = 1,
                                     int64_t seed = 1234,
                                     Split split = Split::kTrain) {
  SamplerOptions o;
  o.data = d;
  o.batch_size = batch;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  o.split = split;
  auto s = Sampler::Create(DataDir(), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Checks every property of sample k of `batch`.
void CheckSample(const PlmBatch& batch, int64_t k, const DataConfig& d) {
  const int64_t L = d.seq_len, R = d.reuse_len, P = d.num_predict;
  auto ids = batch.input_ids.accessor<int64_t, 2>()[k];
  auto types = batch.token_type_ids.accessor<int64_t, 2>()[k];
  auto pm = batch.perm_mask.accessor<float, 3>()[k];
  auto tm = batch.target_mapping.accessor<float, 3>()[k];
  auto tgt = batch.target.accessor<int64_t, 2>()[k];
  auto tmask = batch.target_mask.accessor<float, 2>()[k];
  auto masked = batch.is_masked.accessor<bool, 2>()[k];

  // Layout [reuse, A, <sep>, B, <sep>, <cls>] and segments 0/1/2.
  ASSERT_EQ(ids[L - 1], kClsId);
  ASSERT_EQ(ids[L - 2], kSepId);
  ASSERT_EQ(types[L - 1], 2);
  int64_t first_b = 0;
  while (first_b < L && types[first_b] == 0) ++first_b;
  ASSERT_GT(first_b, R);
  ASSERT_EQ(ids[first_b - 1], kSepId);
  for (int64_t i = first_b; i < L - 1; ++i) ASSERT_EQ(types[i], 1);
  std::vector<uint8_t> func(L), mof(L), target(L);
  int64_t n_func = 0, n_masked = 0, n_targets = 0;
  for (int64_t i = 0; i < L; ++i) {
    func[i] = ids[i] == kSepId || ids[i] == kClsId;
    mof[i] = func[i] || masked[i];
    target[i] = masked[i] && !func[i];
    n_func += func[i];
    n_masked += masked[i];
    n_targets += target[i];
  }
  ASSERT_EQ(n_func, 3);
  // Exactly num_predict positions chosen (both halves are long enough).
  ASSERT_EQ(n_masked, P);

  // Targets: one-hot rows in position order, equal to the original tokens.
  int64_t slot = 0;
  for (int64_t i = 0; i < L; ++i) {
    if (!target[i]) continue;
    ASSERT_EQ(tmask[slot], 1.0f);
    ASSERT_EQ(tgt[slot], ids[i]);
    for (int64_t j = 0; j < L; ++j)
      ASSERT_EQ(tm[slot][j], j == i ? 1.0f : 0.0f);
    ++slot;
  }
  ASSERT_EQ(slot, n_targets);
  for (; slot < P; ++slot) {
    ASSERT_EQ(tmask[slot], 0.0f);
    ASSERT_EQ(tgt[slot], 0);
    for (int64_t j = 0; j < L; ++j) ASSERT_EQ(tm[slot][j], 0.0f);
  }

  for (int64_t i = 0; i < L; ++i) {
    const bool reuse_row = i < R;
    for (int64_t j = 0; j < L; ++j) {
      const bool same_half = (j < R) == reuse_row;
      if (!same_half) {
        // Reuse rows never see the second half; the rest sees all the reuse.
        ASSERT_EQ(pm[i][j], reuse_row ? 1.0f : 0.0f) << i << "," << j;
        continue;
      }
      if (!mof[j]) {
        ASSERT_EQ(pm[i][j], 0.0f)
            << "context token " << j << " hidden from " << i;
      } else if (!mof[i]) {
        ASSERT_EQ(pm[i][j], 1.0f)
            << "context token " << i << " sees masked " << j;
      }
    }
    // A target never sees itself (query stream); functional tokens do.
    if (target[i]) {
      ASSERT_EQ(pm[i][i], 1.0f);
    } else if (mof[i]) {
      ASSERT_EQ(pm[i][i], 0.0f);
    }
  }
  // Among masked/functional positions of a half: a strict total order.
  for (int half = 0; half < 2; ++half) {
    std::vector<int64_t> m;
    for (int64_t i = half ? R : 0; i < (half ? L : R); ++i) {
      if (mof[i]) m.push_back(i);
    }
    std::vector<int64_t> rank(L, -1);
    std::set<int64_t> ranks;
    for (int64_t i : m) {
      int64_t seen = 0;
      for (int64_t j : m) {
        if (i == j) continue;
        ASSERT_EQ(pm[i][j] + pm[j][i], 1.0f) << i << " vs " << j;
        seen += pm[i][j] == 0.0f;
      }
      rank[i] = seen;
      ranks.insert(seen);
    }
    ASSERT_EQ(ranks.size(), m.size()) << "visibility is not a total order";
    for (int64_t i : m) {
      for (int64_t j : m) {
        if (i != j) {
          ASSERT_EQ(pm[i][j] == 0.0f, rank[j] < rank[i]);
        }
      }
    }
  }
}

TEST(SamplerTest, BatchesHaveTheDocumentedShapesAndProperties) {
  DataConfig d = TinyData();
  auto sampler = MakeSampler(d, 8);
  ASSERT_NE(sampler, nullptr);
  for (int step = 0; step < 3; ++step) {
    PlmBatch b = sampler->Next();
    EXPECT_EQ(b.input_ids.sizes(), (std::vector<int64_t>{8, 64}));
    EXPECT_EQ(b.input_ids.dtype(), torch::kInt64);
    EXPECT_EQ(b.token_type_ids.dtype(), torch::kInt64);
    EXPECT_EQ(b.perm_mask.sizes(), (std::vector<int64_t>{8, 64, 64}));
    EXPECT_EQ(b.perm_mask.dtype(), torch::kFloat32);
    EXPECT_EQ(b.target_mapping.sizes(), (std::vector<int64_t>{8, 10, 64}));
    EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{8, 10}));
    EXPECT_EQ(b.target.dtype(), torch::kInt64);
    EXPECT_EQ(b.target_mask.dtype(), torch::kFloat32);
    EXPECT_EQ(b.is_masked.dtype(), torch::kBool);
    for (int64_t k = 0; k < 8; ++k) {
      SCOPED_TRACE("step " + std::to_string(step) + " row " +
                   std::to_string(k));
      CheckSample(b, k, d);
    }
  }
}

TEST(SamplerTest, PropertiesHoldWithBiDataQuirksAndFullPermutation) {
  DataConfig d = TinyData();
  d.bi_data = true;
  d.official_span_quirks = true;
  d.perm_size = 32;
  auto sampler = MakeSampler(d, 8);
  ASSERT_NE(sampler, nullptr);
  for (int step = 0; step < 2; ++step) {
    PlmBatch b = sampler->Next();
    for (int64_t k = 0; k < 8; ++k) CheckSample(b, k, d);
  }
}

TEST(SamplerTest, RowsContinueAcrossSteps) {
  for (bool bi : {false, true}) {
    DataConfig d = TinyData();
    d.bi_data = bi;
    auto sampler = MakeSampler(d, 8);
    ASSERT_NE(sampler, nullptr);
    const int64_t R = d.reuse_len;
    std::vector<PlmBatch> batches;
    for (int t = 0; t < 4; ++t) batches.push_back(sampler->Next());
    const Corpus& corpus = sampler->corpus();
    for (int64_t row = 0; row < 8; ++row) {
      const bool backward = bi && row >= 4;
      for (int t = 0; t + 1 < 4; ++t) {
        // Stream positions t*R and (t+1)*R are adjacent in the corpus.
        const int64_t here = sampler->CorpusPosition(t, row, t * R);
        const int64_t next = sampler->CorpusPosition(t + 1, row, (t + 1) * R);
        EXPECT_EQ(next, backward ? here - R : here + R);
        // And the reuse part holds exactly those corpus tokens.
        std::vector<int32_t> ids(R);
        corpus.CopyIds(backward ? next - R + 1 : next, R, ids.data());
        if (backward) std::reverse(ids.begin(), ids.end());
        auto got = batches[t + 1].input_ids[row].slice(0, 0, R);
        for (int64_t i = 0; i < R; ++i) {
          ASSERT_EQ(got[i].item<int64_t>(), ids[i])
              << "row " << row << " step " << t + 1;
        }
      }
    }
    if (bi) {
      // Backward row r reads forward stream r reversed: the same tokens.
      const int64_t fwd_start = sampler->CorpusPosition(0, 1, 0);
      const int64_t bwd_end =
          sampler->CorpusPosition(0, 5, sampler->stream_length() - 1);
      EXPECT_EQ(fwd_start, bwd_end);
    }
  }
}

TEST(SamplerTest, RankSlicesPartitionTheGlobalBatch) {
  for (bool bi : {false, true}) {
    DataConfig d = TinyData();
    d.bi_data = bi;
    auto global = MakeSampler(d, 8);
    ASSERT_NE(global, nullptr);
    std::vector<PlmBatch> full = {global->Next(), global->Next()};
    for (int world : {2, 4}) {
      std::set<int64_t> seen;
      std::vector<PlmBatch> assembled(2);
      for (int step = 0; step < 2; ++step) {
        assembled[step] = PlmBatch{torch::zeros_like(full[step].input_ids),
                                   torch::zeros_like(full[step].token_type_ids),
                                   torch::zeros_like(full[step].perm_mask),
                                   torch::zeros_like(full[step].target_mapping),
                                   torch::zeros_like(full[step].target),
                                   torch::zeros_like(full[step].target_mask),
                                   torch::zeros_like(full[step].is_masked)};
      }
      for (int rank = 0; rank < world; ++rank) {
        auto local = MakeSampler(d, 8, rank, world);
        ASSERT_NE(local, nullptr);
        const auto rows = local->local_rows();
        ASSERT_EQ(static_cast<int>(rows.size()), 8 / world);
        for (int64_t r : rows)
          EXPECT_TRUE(seen.insert(r).second) << "row " << r << " twice";
        if (bi) {
          // Its forward rows, then the matching backward rows.
          const int64_t h = rows.size() / 2;
          for (int64_t k = 0; k < h; ++k) EXPECT_EQ(rows[h + k], rows[k] + 4);
        }
        for (int step = 0; step < 2; ++step) {
          PlmBatch b = local->Next();
          EXPECT_EQ(b.input_ids.size(0), 8 / world);
          const auto src = b.Named();
          const auto dst = assembled[step].Named();
          for (size_t f = 0; f < src.size(); ++f) {
            for (size_t k = 0; k < rows.size(); ++k) {
              dst[f].second[rows[k]].copy_(src[f].second[k]);
            }
          }
        }
      }
      EXPECT_EQ(seen.size(), 8u);
      for (int step = 0; step < 2; ++step)
        ExpectBatchesEqual(assembled[step], full[step]);
    }
  }
}

TEST(SamplerTest, ResumeReproducesTheNextBatches) {
  DataConfig d = TinyData();
  d.prefetch_batches = 3;
  auto a = MakeSampler(d, 8);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 3; ++i) a->Next();
  const std::string saved = a->State().ToString();
  const PlmBatch b3 = a->Next();
  const PlmBatch b4 = a->Next();

  DataConfig sync = d;
  sync.prefetch_batches = 0;  // a different loader setup resumes the same
  auto b = MakeSampler(sync, 8);
  ASSERT_NE(b, nullptr);
  b->Next();
  auto state = SamplerState::FromString(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, 3);
  ASSERT_TRUE(b->Restore(*state).ok());
  ExpectBatchesEqual(b->Next(), b3);
  ExpectBatchesEqual(b->Next(), b4);
  // Restoring rewinds a prefetching sampler too.
  ASSERT_TRUE(a->Restore(*state).ok());
  ExpectBatchesEqual(a->Next(), b3);

  auto other_seed = MakeSampler(d, 8, 0, 1, /*seed=*/99);
  ASSERT_NE(other_seed, nullptr);
  EXPECT_FALSE(other_seed->Restore(*state).ok());
  EXPECT_FALSE(SamplerState::FromString("{\"step\": 1}").ok());
  // Hand-edited or damaged states are refused, not cast.
  for (const char* bad :
       {R"({"version": 1, "step": -1, "fingerprint": "f"})",
        R"({"version": 1, "step": 1e300, "fingerprint": "f"})",
        R"({"version": 4294967297, "step": 1, "fingerprint": "f"})",
        R"({"version": 1, "step": 1, "step": 2, "fingerprint": "f"})"}) {
    auto refused = SamplerState::FromString(bad);
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().message().rfind("sampler state", 0), 0u)
        << refused.status();
  }
}

TEST(SamplerTest, ContentDependsOnlyOnSeedRowAndStep) {
  DataConfig d = TinyData();
  auto a = MakeSampler(d, 8);
  DataConfig threads = d;
  threads.prefetch_batches = 5;
  threads.loader_threads = 3;
  auto b = MakeSampler(threads, 8);
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 4; ++i) ExpectBatchesEqual(a->Next(), b->Next());
  ExpectBatchesEqual(a->BuildBatch(7, {3, 1}), b->BuildBatch(7, {3, 1}));
  auto c = MakeSampler(d, 8, 0, 1, /*seed=*/5);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(torch::equal(c->BuildBatch(0, {0}).perm_mask,
                            a->BuildBatch(0, {0}).perm_mask));
}

// Batches built for a CUDA consumer (pin_memory) are page-locked and hold
// the same content; needs a GPU to allocate page-locked memory.
TEST(SamplerTest, PinnedBatchesArePageLockedWithTheSameContent) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  DataConfig d = TinyData();
  d.prefetch_batches = 2;
  d.loader_threads = 1;
  SamplerOptions o;
  o.data = d;
  o.batch_size = 8;
  o.pin_memory = true;
  auto pinned = Sampler::Create(DataDir(), o);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  auto plain = MakeSampler(TinyData(), 8);
  ASSERT_NE(plain, nullptr);
  for (int i = 0; i < 3; ++i) {
    PlmBatch batch = (*pinned)->Next();
    for (const auto& [name, field] : kPlmBatchFields) {
      if ((batch.*field).defined()) {
        EXPECT_TRUE((batch.*field).is_pinned()) << name;
      }
    }
    ExpectBatchesEqual(batch, plain->Next());
  }
}

// Batches for the model (compact_masks) carry the 0/1 masks as bool with
// the same values, through the loader threads and after a restore, and
// keep the plain batches' fingerprint.
TEST(SamplerTest, CompactBatchesHoldTheSameMasksAsBool) {
  for (bool bi : {false, true}) {
    SCOPED_TRACE(bi ? "bi_data" : "one direction");
    DataConfig d = TinyData();
    d.bi_data = bi;
    SamplerOptions o;
    o.data = d;
    o.batch_size = 8;
    o.compact_masks = true;
    auto compact = Sampler::Create(DataDir(), o);
    ASSERT_TRUE(compact.ok()) << compact.status();
    auto plain = MakeSampler(d, 8);
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ((*compact)->State().fingerprint, plain->State().fingerprint);
    for (int i = 0; i < 3; ++i)
      ExpectCompactOf((*compact)->Next(), plain->Next());
    const SamplerState state{1, plain->State().fingerprint};
    ASSERT_TRUE((*compact)->Restore(state).ok());
    ASSERT_TRUE(plain->Restore(state).ok());
    ExpectCompactOf((*compact)->Next(), plain->Next());
  }
}

TEST(SamplerTest, SpansAreWholeWordsWithinBudget) {
  auto sampler = MakeSampler(TinyData(), 8);
  ASSERT_NE(sampler, nullptr);
  const Corpus& corpus = sampler->corpus();
  const Tokenizer& tok = sampler->tokenizer();
  std::vector<uint8_t> is_start(tok.vocab_size());
  for (int i = 0; i < tok.vocab_size(); ++i) is_start[i] = tok.IsStartPiece(i);
  const int64_t n = 256, goal = 43;
  int64_t multi_piece_words = 0;
  for (bool quirks : {false, true}) {
    for (bool reverse : {false, true}) {
      SpanOptions opt;
      opt.official_quirks = quirks;
      for (int w = 0; w < 150; ++w) {
        std::vector<int32_t> ids(n);
        corpus.CopyIds((w * 611) % (corpus.size() - n), n, ids.data());
        Rng rng = Rng::For({17, static_cast<uint64_t>(w), quirks, reverse});
        MaskResult r =
            SampleMask(ids.data(), n, is_start, reverse, goal, opt, rng);
        ASSERT_EQ(std::count(r.mask.begin(), r.mask.end(), 1), goal);
        std::vector<uint8_t> rebuilt(n, 0);
        int64_t prev_end = reverse ? n + 1 : -1;
        for (auto [b, e] : r.spans) {
          ASSERT_LT(b, e);
          // In reading order (flipped for backward streams) spans advance.
          if (!reverse) {
            ASSERT_GE(b, prev_end);
            prev_end = e;
          } else {
            ASSERT_LE(e, prev_end);
            prev_end = b;
          }
          // Word-start aligned in reading order.
          const int64_t first = reverse ? e - 1 : b;
          ASSERT_TRUE(is_start[ids[first]]) << "span starts mid-word";
          int64_t words = 0;
          for (int64_t i = b; i < e; ++i) {
            rebuilt[i] = 1;
            words += is_start[ids[i]];
          }
          if (quirks) {
            ASSERT_LE(e - b, opt.max_gram) << "official spans are n pieces";
          } else {
            ASSERT_LE(words, opt.max_gram);
            // Ends at a word boundary in reading order.
            if (!reverse) {
              ASSERT_TRUE(e == n || is_start[ids[e]]);
            } else {
              ASSERT_TRUE(b == 0 || is_start[ids[b - 1]]);
            }
            multi_piece_words += (e - b) > words;
          }
        }
        for (int64_t i : r.singles) rebuilt[i] = 1;
        ASSERT_EQ(rebuilt, r.mask);
      }
    }
  }
  EXPECT_GT(multi_piece_words, 0)
      << "the fix should mask whole multi-piece words";
}

TEST(SamplerTest, BudgetBeyondTheSegmentTerminates) {
  // XL #217: seq_len=64, num_predict=85 hangs upstream. Our validation
  // rejects num_predict > seq_len ...
  auto rejected = ParseConfig("", "test",
                              {"data.seq_len=64", "data.reuse_len=32",
                               "data.perm_size=32", "data.num_predict=85"});
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(std::string(rejected.status().message()).find("num_predict"),
            std::string::npos);
  // ... and budgets beyond a half (43 > reuse_len 32 here) terminate with
  // every position of that half masked.
  for (bool quirks : {false, true}) {
    DataConfig d = TinyData();
    d.num_predict = 64;
    d.official_span_quirks = quirks;
    auto sampler = MakeSampler(d, 2);
    ASSERT_NE(sampler, nullptr);
    PlmBatch b = sampler->Next();
    EXPECT_TRUE(b.is_masked.all().item<bool>());
    EXPECT_EQ(b.target_mask.sum().item<float>(), 2 * (64 - 3));
  }
  std::vector<int32_t> ids(10, 20);
  std::vector<uint8_t> is_start(1000, 1);
  Rng rng(3);
  MaskResult r =
      SampleMask(ids.data(), 10, is_start, false, 85, SpanOptions{}, rng);
  EXPECT_EQ(std::count(r.mask.begin(), r.mask.end(), 1), 10);
}

TEST(SamplerTest, EvalSplitAndBadSetupsAreHandled) {
  DataConfig d = TinyData();
  auto eval = MakeSampler(d, 2, 0, 1, 1234, Split::kEval);
  ASSERT_NE(eval, nullptr);
  auto train = MakeSampler(d, 2);
  ASSERT_NE(train, nullptr);
  EXPECT_LT(eval->corpus().size(), train->corpus().size() / 5);
  CheckSample(eval->Next(), 0, d);

  SamplerOptions o;
  o.data = d;
  o.batch_size = 6;
  o.world_size = 4;  // 6 rows do not split over 4 ranks
  EXPECT_EQ(Sampler::Create(DataDir(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.batch_size = 4000;  // streams shorter than seq_len
  o.world_size = 1;
  EXPECT_EQ(Sampler::Create(DataDir(), o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.batch_size = 8;
  o.data.tokenizer = TempDir() + "/missing.model";
  EXPECT_FALSE(Sampler::Create(DataDir(), o).ok());
}

TEST(SamplerTest, BasePresetBatch) {
  DataConfig d;  // defaults are the xlnet-base data recipe
  d.prefetch_batches = 0;
  auto sampler = MakeSampler(d, 32);
  ASSERT_NE(sampler, nullptr);
  PlmBatch b = sampler->BuildBatch(0, {0, 17});
  EXPECT_EQ(b.perm_mask.sizes(), (std::vector<int64_t>{2, 512, 512}));
  CheckSample(b, 0, d);
  CheckSample(b, 1, d);
}

TEST(DataCommandsTest, DumpAndInspect) {
  Config config;
  config.data = TinyData();
  config.train.batch_size = 8;
  DumpOptions o;
  o.data_dir = DataDir();
  o.config = config;
  o.batches = 3;
  o.out = TempDir() + "/dump.safetensors";
  o.rank = 1;
  o.world_size = 2;
  std::ostringstream log;
  ASSERT_TRUE(DumpBatches(o, log).ok());
  auto file = SafetensorsFile::Open(o.out);
  ASSERT_TRUE(file.ok()) << file.status();
  auto ids = file->Load("input_ids");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->sizes(), (std::vector<int64_t>{3, 4, 64}));
  auto pm = file->Load("perm_mask");
  ASSERT_TRUE(pm.ok());
  EXPECT_EQ(pm->sizes(), (std::vector<int64_t>{3, 4, 64, 64}));
  for (const char* name : {"token_type_ids", "target_mapping", "target",
                           "target_mask", "is_masked"}) {
    EXPECT_TRUE(file->Contains(name)) << name;
  }
  // Rank 1's rows of step 2 equal the global batch's rows 4..7.
  auto global = MakeSampler(config.data, 8);
  ASSERT_NE(global, nullptr);
  PlmBatch b = global->BuildBatch(2, {4, 5, 6, 7});
  EXPECT_TRUE(torch::equal((*ids)[2], b.input_ids));

  InspectOptions io;
  io.data_dir = DataDir();
  io.config = config;
  io.row = 3;
  std::ostringstream out;
  ASSERT_TRUE(InspectSample(io, out).ok());
  EXPECT_NE(out.str().find("factorisation order"), std::string::npos);
  EXPECT_NE(out.str().find("<cls>"), std::string::npos);
}

}  // namespace
}  // namespace xlnet::data::testing
