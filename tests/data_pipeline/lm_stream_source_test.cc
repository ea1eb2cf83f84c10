// The causal-LM ordered streams: continuity from step to step, the corpus
// positions rows read, ranks, resume, epoch wrap, prefetching.
#include "data_pipeline/lm_stream_source.h"

#include <gtest/gtest.h>

#include <sstream>

#include "config/config.h"
#include "data_pipeline/data_commands.h"
#include "data_pipeline/prepared_corpus.h"
#include "tests/data_pipeline/data_test_env.h"

namespace xlnet::data::testing {
namespace {

constexpr int64_t kSeqLen = 32;
constexpr int64_t kBatch = 8;

SamplerOptions Options(int rank = 0, int world = 1, int64_t threads = 1,
                       int64_t prefetch = 4) {
  SamplerOptions o;
  o.data.seq_len = kSeqLen;
  o.data.loader_threads = threads;
  o.data.prefetch_batches = prefetch;
  o.batch_size = kBatch;
  o.seed = 77;
  o.rank = rank;
  o.world_size = world;
  return o;
}

std::unique_ptr<LmStreamSource> Make(const SamplerOptions& o) {
  auto s = LmStreamSource::Create(DataDir(), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Every token of `batch` (the rows of `step` in `rows`) is the corpus token
// at the position the source says, and targets are inputs shifted by one.
void ExpectCorpusTokens(const LmStreamSource& s, const LmBatch& batch,
                        int64_t step, const std::vector<int64_t>& rows) {
  ASSERT_EQ(batch.input_ids.sizes(),
            torch::IntArrayRef({(int64_t)rows.size(), kSeqLen}));
  ASSERT_EQ(batch.target.sizes(), batch.input_ids.sizes());
  auto in = batch.input_ids.accessor<int64_t, 2>();
  auto tg = batch.target.accessor<int64_t, 2>();
  for (size_t k = 0; k < rows.size(); ++k) {
    for (int64_t i = 0; i < kSeqLen; ++i) {
      ASSERT_EQ(in[k][i], s.corpus().Id(s.CorpusPosition(step, rows[k], i)))
          << "step " << step << " row " << rows[k] << " position " << i;
      ASSERT_EQ(tg[k][i],
                s.corpus().Id(s.CorpusPosition(step, rows[k], i + 1)));
      if (i + 1 < kSeqLen) {
        ASSERT_EQ(tg[k][i], in[k][i + 1]);
      }
    }
  }
}

TEST(LmStreamSourceTest, RowsContinueFromStepToStepOverContiguousStreams) {
  auto s = Make(Options());
  ASSERT_NE(s, nullptr);
  const int64_t S = s->stream_length();
  EXPECT_EQ(S, s->corpus().size() / kBatch);
  EXPECT_EQ(s->steps_per_epoch(), (S - 1) / kSeqLen);
  ASSERT_GE(s->steps_per_epoch(), 3);
  LmBatch prev = s->Next();
  ExpectCorpusTokens(*s, prev, 0, s->local_rows());
  for (int64_t t = 1; t < 3; ++t) {
    const LmBatch cur = s->Next();
    ExpectCorpusTokens(*s, cur, t, s->local_rows());
    for (int64_t r = 0; r < kBatch; ++r) {
      // Step t-1's last target is step t's first input ...
      EXPECT_EQ(prev.target[r][kSeqLen - 1].item<int64_t>(),
                cur.input_ids[r][0].item<int64_t>());
      // ... because row r reads stream r's next window: [t*L, t*L + L + 1).
      EXPECT_EQ(s->CorpusPosition(t, r, 0),
                s->CorpusPosition(t - 1, r, kSeqLen));
      EXPECT_EQ(s->CorpusPosition(t, r, 0), r * S + t * kSeqLen);
    }
    prev = cur;
  }
}

TEST(LmStreamSourceTest, TwoRanksTogetherAreOneRanksBatch) {
  auto one = Make(Options());
  auto r0 = Make(Options(0, 2, /*threads=*/2));
  auto r1 = Make(Options(1, 2, /*threads=*/1, /*prefetch=*/0));
  ASSERT_TRUE(one && r0 && r1);
  EXPECT_EQ(r0->local_rows(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(r1->local_rows(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(one->State().fingerprint, r0->State().fingerprint);
  for (int t = 0; t < 4; ++t) {
    const LmBatch a = one->Next(), b0 = r0->Next(), b1 = r1->Next();
    EXPECT_TRUE(
        torch::equal(a.input_ids, torch::cat({b0.input_ids, b1.input_ids})));
    EXPECT_TRUE(torch::equal(a.target, torch::cat({b0.target, b1.target})));
  }
}

TEST(LmStreamSourceTest, RestoreContinuesExactlyAndRefusesOtherSettings) {
  auto a = Make(Options());
  ASSERT_NE(a, nullptr);
  for (int t = 0; t < 3; ++t) a->Next();
  const SamplerState state = a->State();
  EXPECT_EQ(state.step, 3);
  auto b = Make(Options(0, 1, /*threads=*/2, /*prefetch=*/2));
  ASSERT_NE(b, nullptr);
  b->Next();  // built ahead and dropped by Restore
  auto parsed = SamplerState::FromString(state.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(b->Restore(*parsed).ok());
  for (int t = 0; t < 3; ++t) {
    const LmBatch x = a->Next(), y = b->Next();
    EXPECT_TRUE(torch::equal(x.input_ids, y.input_ids)) << "step " << 3 + t;
    EXPECT_TRUE(torch::equal(x.target, y.target));
  }
  SamplerOptions other = Options();
  other.seed = 78;
  auto c = Make(other);
  ASSERT_NE(c, nullptr);
  const absl::Status refused = c->Restore(state);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("fingerprint"), std::string::npos)
      << refused;
  other = Options();
  other.data.seq_len = kSeqLen / 2;
  auto d = Make(other);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->State().fingerprint, state.fingerprint);
}

TEST(LmStreamSourceTest, AnEpochWrapRotatesTheStreamsBySeededOffset) {
  auto s = Make(Options());
  ASSERT_NE(s, nullptr);
  const int64_t E = s->steps_per_epoch(), S = s->stream_length();
  const int64_t N = s->corpus().size();
  // The first epoch's last window stays inside its stream.
  for (int64_t r = 0; r < kBatch; ++r) {
    EXPECT_LE(s->CorpusPosition(E - 1, r, kSeqLen), r * S + S - 1);
  }
  // The next epoch starts every stream at the rotated offset and reads on
  // around the corpus end.
  const int64_t offset = EpochOffset(77, 1, N);
  EXPECT_NE(offset, 0);
  for (int64_t r = 0; r < kBatch; ++r) {
    EXPECT_EQ(s->CorpusPosition(E, r, 0), (offset + r * S) % N);
    EXPECT_EQ(s->CorpusPosition(E + 1, r, 0), (offset + r * S + kSeqLen) % N);
  }
  const std::vector<int64_t> rows = s->local_rows();
  const LmBatch wrapped = s->BuildBatch(E, rows);
  ExpectCorpusTokens(*s, wrapped, E, rows);
  ExpectCorpusTokens(*s, s->BuildBatch(2 * E + 1, rows), 2 * E + 1, rows);
  // A pure function of the step: the same batch however it is reached.
  ASSERT_TRUE(s->Restore(SamplerState{E, s->State().fingerprint}).ok());
  EXPECT_TRUE(torch::equal(s->Next().input_ids, wrapped.input_ids));
}

TEST(LmStreamSourceTest, TooLittleTextIsAnErrorNamingTheSplit) {
  SamplerOptions o = Options();
  o.batch_size = 4096;
  auto s = LmStreamSource::Create(DataDir(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("training split"), std::string::npos)
      << s.status();
  o = Options(0, 3);
  s = LmStreamSource::Create(DataDir(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("multiple of world_size"),
            std::string::npos)
      << s.status();
}

// xlnet-data inspect and dump show permutation-LM batches: a causal-LM
// config is refused, saying why, rather than shown as something it is not.
TEST(LmStreamSourceTest, InspectAndDumpRefuseACausalLmConfig) {
  Config config;
  config.train.objective = Objective::kClm;
  config.model.attn_type = "uni";
  InspectOptions inspect;
  inspect.data_dir = DataDir();
  inspect.config = config;
  std::ostringstream out;
  absl::Status status = InspectSample(inspect, out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("train.objective: clm"), std::string::npos)
      << status;
  DumpOptions dump;
  dump.data_dir = DataDir();
  dump.config = config;
  dump.out = TempDir() + "/clm_dump.safetensors";
  status = DumpBatches(dump, out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("train.objective: clm"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace xlnet::data::testing
