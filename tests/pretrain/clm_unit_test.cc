// The causal-LM objective (train.objective clm): its config rules, the loss
// against a hand computation, and xlnet-pretrain end to end (ranks,
// accumulation, SIGKILL + resume, evaluation) on the bundled Brown sample.
#include "pretrain/clm_unit.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/safetensors.h"
#include "config/config.h"
#include "pretrain/pretrain.h"
#include "tests/pretrain/pretrain_test_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::ReadMetrics;
using testing::RunCommand;
using testing::SourcePath;
using testing::ToolPath;

class ClmUnitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    testing::PrepareSampleData(tmp_->path());
  }
  static void TearDownTestSuite() { delete tmp_; }

  // The command line of a tiny causal-LM run into `run_dir`.
  static std::string Command(const std::string& run_dir,
                             const std::string& extra) {
    return ToolPath("pretrain") + " --config " +
           SourcePath("configs/tiny-clm.yaml") + " --data " +
           tmp_->Join("data") + " --out " + run_dir +
           " --set train.threads=1 --set train.eval_steps=0 " + extra;
  }

  static absl::StatusOr<Config> Parse(
      const std::string& yaml, const std::vector<std::string>& sets = {}) {
    return ParseConfigFor(PretrainConfigScope(), yaml, "run.yaml", sets);
  }

  static testing::TempDir* tmp_;
};

testing::TempDir* ClmUnitTest::tmp_ = nullptr;

constexpr char kClmUni[] =
    "model:\n  attn_type: uni\ntrain:\n  objective: clm\n";

TEST_F(ClmUnitTest, ObjectiveDefaultsToPlmAndTinyClmResolves) {
  auto plm =
      LoadConfigFor(PretrainConfigScope(), SourcePath("configs/tiny.yaml"));
  ASSERT_TRUE(plm.ok()) << plm.status();
  EXPECT_EQ(plm->train.objective, Objective::kPlm);
  EXPECT_EQ(plm->model.reuse_len, plm->data.reuse_len);
  auto clm =
      LoadConfigFor(PretrainConfigScope(), SourcePath("configs/tiny-clm.yaml"));
  ASSERT_TRUE(clm.ok()) << clm.status();
  EXPECT_EQ(clm->train.objective, Objective::kClm);
  EXPECT_EQ(clm->model.attn_type, "uni");
  EXPECT_FALSE(clm->data.bi_data);
  EXPECT_FALSE(clm->model.bi_data);
  EXPECT_FALSE(clm->model.reuse_len.has_value());
  // What a clm run writes as config.yaml reads back the same.
  auto again = ParseConfig(ConfigToYaml(*clm), "config.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ConfigToYaml(*again), ConfigToYaml(*clm));
}

TEST_F(ClmUnitTest, ClmNeedsUniAttentionAndTheErrorNamesBothKeys) {
  auto bi = Parse("train:\n  objective: clm\n");
  ASSERT_FALSE(bi.ok());
  const std::string message(bi.status().message());
  EXPECT_NE(message.find("run.yaml:2"), std::string::npos) << message;
  EXPECT_NE(message.find("train.objective"), std::string::npos) << message;
  EXPECT_NE(message.find("model.attn_type"), std::string::npos) << message;
  EXPECT_TRUE(Parse(kClmUni).ok());
}

TEST_F(ClmUnitTest, PlmOnlyKeysSetUnderClmAreRefusedNamingFileAndKey) {
  auto bi_data = Parse(std::string(kClmUni) + "data:\n  bi_data: true\n");
  ASSERT_FALSE(bi_data.ok());
  std::string message(bi_data.status().message());
  EXPECT_NE(message.find("run.yaml:6"), std::string::npos) << message;
  EXPECT_NE(message.find("data.bi_data"), std::string::npos) << message;
  EXPECT_NE(message.find("xlnet-pretrain"), std::string::npos) << message;
  // false is what clm does: accepted.
  EXPECT_TRUE(Parse(std::string(kClmUni) + "data:\n  bi_data: false\n").ok());
  auto num_predict = Parse(kClmUni, {"data.num_predict=10"});
  ASSERT_FALSE(num_predict.ok());
  message = std::string(num_predict.status().message());
  EXPECT_NE(message.find("--set data.num_predict=10"), std::string::npos)
      << message;
  for (const char* key : {"reuse_len: 16", "perm_size: 16", "mask_alpha: 3",
                          "max_gram: 2", "sources: [{path: a}]"}) {
    auto refused = Parse(std::string(kClmUni) + "data:\n  " + key + "\n");
    EXPECT_FALSE(refused.ok()) << key;
  }
  // The same keys are fine for plm.
  EXPECT_TRUE(Parse("data:\n  num_predict: 10\n  bi_data: true\n").ok());
}

TEST_F(ClmUnitTest, FirstStepLossIsTheHandComputedNextTokenLoss) {
  auto config =
      LoadConfig(SourcePath("configs/tiny-clm.yaml"), {"model.dropout=0"});
  ASSERT_TRUE(config.ok()) << config.status();
  PretrainUnitOptions options;
  options.config = *config;
  options.data_dir = tmp_->Join("data");
  auto unit = ClmUnit::Create(options);
  ASSERT_TRUE(unit.ok()) << unit.status();
  ClmUnit& u = **unit;
  const data::LmStreamSource& source = u.source();
  const int64_t B = config->train.batch_size, L = config->data.seq_len;
  // The step-0 tokens straight from the corpus: L + 1 per row.
  std::vector<int64_t> ids(B * (L + 1));
  for (int64_t r = 0; r < B; ++r) {
    for (int64_t i = 0; i <= L; ++i) {
      ids[r * (L + 1) + i] = source.corpus().Id(source.CorpusPosition(0, r, i));
    }
  }
  const torch::Tensor tokens = torch::tensor(ids).view({B, L + 1});
  double expected = 0;
  {
    torch::NoGradGuard no_grad;
    XLNetInputs inputs;
    inputs.input_ids = tokens.narrow(1, 0, L);
    const torch::Tensor log_probs = torch::log_softmax(
        u.model()->forward(inputs).logits.to(torch::kDouble), -1);
    for (int64_t r = 0; r < B; ++r) {
      for (int64_t i = 0; i < L; ++i) {
        expected -=
            log_probs[r][i][tokens[r][i + 1].item<int64_t>()].item<double>();
      }
    }
  }
  const StepOutput out = u.TrainStep();
  EXPECT_EQ(out.normalizer.Value(), static_cast<double>(B * L));
  EXPECT_EQ(out.tokens.Value(), static_cast<double>(B * L));
  EXPECT_NEAR(out.loss.item<double>(), expected, 1e-6 * expected);
  // A fresh model predicts about uniformly: ln(vocab) per token.
  EXPECT_NEAR(expected / (B * L), std::log(1000.0), 0.5);

  // The memory of model.mem_len positions is carried and checkpointed.
  std::map<std::string, NamedTensors> files;
  ASSERT_TRUE(u.SaveUnitState(0, &files).ok());
  ASSERT_TRUE(files.count("clm_state.rank0.safetensors"));
  int mems = 0;
  for (const auto& [name, t] : files["clm_state.rank0.safetensors"]) {
    if (name.rfind("mems.", 0) != 0) continue;
    ++mems;
    EXPECT_EQ(t.sizes(), torch::IntArrayRef({*config->model.mem_len, B,
                                             config->model.d_model}))
        << name;
    EXPECT_FALSE(t.requires_grad()) << name;
  }
  EXPECT_EQ(mems, config->model.n_layer);
}

// train.save_memory: the memory in a rank's state file as computed (fp32),
// rounded to bf16 (half the bytes) or left out; a unit restored from each
// continues with the same next loss (fp32), a loss within bf16's rounding
// (bf16), or the loss of empty memory (none: the data still continues).
TEST_F(ClmUnitTest, SaveMemoryFp32Bf16OrNone) {
  auto make = [&](SaveMemory save_memory) {
    auto config =
        LoadConfig(SourcePath("configs/tiny-clm.yaml"), {"model.dropout=0"});
    EXPECT_TRUE(config.ok()) << config.status();
    config->train.save_memory = save_memory;
    PretrainUnitOptions options;
    options.config = *config;
    options.data_dir = tmp_->Join("data");
    auto unit = ClmUnit::Create(options);
    EXPECT_TRUE(unit.ok()) << unit.status();
    return std::move(*unit);
  };
  std::map<SaveMemory, double> next_loss;
  std::map<SaveMemory, int64_t> mem_bytes;
  double continued = 0;
  for (SaveMemory mode :
       {SaveMemory::kFp32, SaveMemory::kBf16, SaveMemory::kNone}) {
    auto saved = make(mode);
    saved->TrainStep();
    std::map<std::string, NamedTensors> files;
    ASSERT_TRUE(saved->SaveUnitState(0, &files).ok());
    const NamedTensors& state = files["clm_state.rank0.safetensors"];
    for (const auto& [name, t] : state) {
      if (name.rfind("mems.", 0) != 0) continue;
      EXPECT_EQ(t.scalar_type(),
                mode == SaveMemory::kBf16 ? torch::kBFloat16 : torch::kFloat32);
      mem_bytes[mode] += t.numel() * t.element_size();
    }
    testing::TempDir dir;
    ASSERT_TRUE(
        WriteSafetensors(dir.Join("clm_state.rank0.safetensors"), state).ok());
    auto restored = make(mode);
    ASSERT_TRUE(restored->LoadUnitState(dir.path(), 0).ok());
    next_loss[mode] = restored->TrainStep().loss.item<double>();
    continued = saved->TrainStep().loss.item<double>();
  }
  EXPECT_GT(mem_bytes[SaveMemory::kFp32], 0);
  EXPECT_EQ(mem_bytes[SaveMemory::kBf16] * 2, mem_bytes[SaveMemory::kFp32]);
  EXPECT_EQ(mem_bytes[SaveMemory::kNone], 0);
  EXPECT_EQ(next_loss[SaveMemory::kFp32], continued);
  EXPECT_NEAR(next_loss[SaveMemory::kBf16], continued, 1e-3 * continued);
  // Without memory the next segment is predicted from itself alone.
  EXPECT_NE(next_loss[SaveMemory::kNone], continued);
  EXPECT_NEAR(next_loss[SaveMemory::kNone], continued, 0.1 * continued);
}

TEST_F(ClmUnitTest, SigkillThenResumeReproducesLossesExactly) {
  testing::ExpectSigkillThenResumeIsExact(Command,
                                          testing::kKillAndResumeSettings, 30);
}

TEST_F(ClmUnitTest, TwoGlooRanksMatchOneRank) {
  XLNET_SKIP_WITHOUT_GLOO();
  const double diff = testing::FinalWeightDiff(
      Command, testing::NoDropoutRun(4), "", "--nproc_per_node 2", 4,
      {"clm_state.rank1.safetensors"});
  EXPECT_LE(diff, 1e-6);
  RecordProperty("max_abs_param_diff", std::to_string(diff));
}

TEST_F(ClmUnitTest, TwoMicroBatchesEqualOne) {
  const double diff =
      testing::FinalWeightDiff(Command, testing::NoDropoutRun(4), "",
                               "--set train.grad_accum_steps=2", 4);
  EXPECT_LE(diff, 1e-6);
  RecordProperty("max_abs_param_diff", std::to_string(diff));
}

TEST_F(ClmUnitTest, RunLogsPerplexityAndEvaluatesBitsPerByte) {
  testing::TempDir run;
  // INFO lines on (CTest runs the tests with XLNET_LOG_LEVEL=warning).
  const CommandResult r = RunCommand(
      "XLNET_LOG_LEVEL=info " +
      Command(run.path(),
              "--set train.max_steps=20 --set train.log_steps=10 --set "
              "train.save_steps=0 --set train.eval_steps=10"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("objective clm"), std::string::npos) << r.output;
  int evals = 0, lines = 0;
  for (const auto& m : ReadMetrics(run.path())) {
    if (m.contains("loss")) {
      ++lines;
      EXPECT_TRUE(m.contains("ppl") && m.contains("epoch")) << m.dump();
    }
    if (!m.contains("eval_loss")) continue;
    ++evals;
    const double loss = m["eval_loss"].get<double>();
    EXPECT_NEAR(m["eval_ppl"].get<double>(), std::exp(loss),
                1e-9 * std::exp(loss));
    // Bytes per token of English SentencePiece text are a few: bits per
    // byte well below the nats per token.
    const double bpb = m["eval_bpb"].get<double>();
    EXPECT_GT(bpb, 0.2);
    EXPECT_LT(bpb, loss);
  }
  EXPECT_EQ(lines, 2);
  EXPECT_EQ(evals, 2);
  EXPECT_TRUE(
      PathExists(run.Join("checkpoints/step_20/clm_state.rank0.safetensors")));
}

}  // namespace
}  // namespace xlnet
