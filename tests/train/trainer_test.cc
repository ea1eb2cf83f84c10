// The trainer on a small regression unit: its loop, accumulation, resume,
// stop requests, non-finite steps and metrics, without the XLNet model.
#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "model_io/checksums.h"
#include "model_io/rank_files.h"
#include "tests/test_util.h"
#include "train/run_dir.h"

namespace xlnet {
namespace {

// y = x W^T + b + noise, learned by a linear layer with dropout (so the RNG
// state matters for exact resume). Its data position is part of its state.
class RegressionUnit : public TrainUnit {
 public:
  explicit RegressionUnit(int64_t micro_batch) : micro_batch_(micro_batch) {
    torch::manual_seed(42);
    linear_ = torch::nn::Linear(6, 2);
    dropout_ = torch::nn::Dropout(0.1);
    torch::manual_seed(1);
    w_true_ = torch::randn({2, 6});
  }
  NamedTensors Parameters() override {
    return {{"transformer.layer.0.ff.layer_1.weight", linear_->weight},
            {"transformer.layer.0.ff.layer_1.bias", linear_->bias}};
  }
  NamedTensors StateDict() override { return Parameters(); }
  std::string ModelConfigJson() override {
    // What the stored shapes say: one layer whose feed-forward input is 6
    // wide with 2 outputs.
    XLNetConfig c;
    c.vocab_size = 16;
    c.d_model = 6;
    c.n_head = 2;
    c.d_head = 3;
    c.d_inner = 2;
    c.n_layer = 1;
    return ModelConfigToJson(c);
  }
  void SetTraining(bool training) {
    linear_->train(training);
    dropout_->train(training);
  }
  StepOutput TrainStep() override {
    // Example i of the stream is a pure function of i.
    // With several ranks, this rank takes its slice of each global batch.
    std::vector<torch::Tensor> xs;
    for (int64_t i = 0; i < micro_batch_; ++i) {
      at::Generator gen = at::detail::createCPUGenerator(
          1000 + position_ * world_ + rank_ * micro_batch_ + i);
      xs.push_back(at::randn({6}, gen));
    }
    position_ += micro_batch_;
    if (stop_at_position_ > 0 && position_ == stop_at_position_) RequestStop();
    torch::Tensor x = torch::stack(xs);
    torch::Tensor y = torch::matmul(x, w_true_.t());
    torch::Tensor pred = dropout_(linear_(x));
    if (overflow_at_positions_.count(position_)) {
      // A finite loss whose gradient overflows, as an fp16 backward can.
      pred.register_hook([](torch::Tensor g) {
        return g * std::numeric_limits<float>::infinity();
      });
    }
    StepOutput out;
    out.loss = (pred - y).pow(2).mean() * loss_scale_;
    if (nan_loss_from_position_ > 0 && position_ >= nan_loss_from_position_) {
      out.loss = out.loss * std::numeric_limits<double>::quiet_NaN();
    }
    out.tokens = micro_batch_;
    // An extra metric; as device tensors (what PlmUnit reports) or as
    // host numbers, which the trainer must treat alike.
    const torch::Tensor error = (pred - y).abs().mean().detach();
    if (tensor_values_) {
      out.normalizer = torch::ones({}, torch::kFloat);
      out.tokens = torch::full({}, micro_batch_, torch::kInt64);
      out.metrics["error"] = error;
    } else {
      out.metrics["error"] = error.item<double>();
    }
    return out;
  }
  std::map<std::string, double> Evaluate() override {
    std::map<std::string, double> out = {
        {"loss", linear_->weight.sub(w_true_).pow(2).sum().item<double>()}};
    // A scripted metric by step (early-stopping tests).
    auto it = accuracy_at_step_.find(position_ / micro_batch_);
    if (it != accuracy_at_step_.end()) out["accuracy"] = it->second;
    return out;
  }
  absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) override {
    if (fail_save_at_position_ > 0 && position_ == fail_save_at_position_) {
      return absl::ResourceExhaustedError("no space left on the device");
    }
    (*files)["data.rank" + std::to_string(rank) + ".safetensors"] = {
        {"position", torch::tensor(position_)}};
    return absl::OkStatus();
  }
  absl::Status LoadUnitState(const std::string& dir, int rank) override {
    auto file = SafetensorsFile::Open(dir + "/data.rank" +
                                      std::to_string(rank) + ".safetensors");
    if (!file.ok()) return file.status();
    position_ = file->Load("position")->item<int64_t>();
    return absl::OkStatus();
  }

  torch::nn::Linear linear_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::Tensor w_true_;
  int64_t micro_batch_;
  int64_t position_ = 0;
  double loss_scale_ = 1.0;
  // Data positions (after the micro-batch) whose gradients become inf.
  std::set<int64_t> overflow_at_positions_;
  // From this data position (after the micro-batch) on, the loss is NaN.
  int64_t nan_loss_from_position_ = 0;
  int64_t stop_at_position_ = 0;
  // At this data position, saving this unit's state fails (a rank that
  // fails mid-save).
  int64_t fail_save_at_position_ = 0;
  // Report normalizer, tokens and the metric as tensors.
  bool tensor_values_ = false;
  std::map<int64_t, double> accuracy_at_step_;
  int rank_ = 0;
  int world_ = 1;
  // What Data() reports (empty: nothing to compare).
  TrainingData data_;
  TrainingData Data() override { return data_; }
};

TrainerOptions Options(const std::string& run_dir, int64_t steps) {
  TrainerOptions o;
  o.run_dir = run_dir;
  o.config_yaml = "train:\n  lr: 0.05\n";
  o.progress = false;
  o.train.max_steps = steps;
  o.train.lr = 0.05;
  o.train.warmup_steps = 2;
  o.train.save_steps = 4;
  o.train.log_steps = 1;
  o.train.eval_steps = 5;
  o.train.keep_checkpoints = 0;
  o.train.weight_decay = 0.01;
  return o;
}

using testing::ReadMetrics;

std::vector<double> Losses(const std::vector<nlohmann::json>& metrics) {
  std::vector<double> out;
  for (const auto& m : metrics) {
    if (m.contains("loss")) out.push_back(m["loss"].get<double>());
  }
  return out;
}

TEST(TrainerTest, LossFallsAndFilesAppear) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  Trainer trainer(Options(tmp.path(), 20), &unit, nullptr);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 20);
  const auto metrics = ReadMetrics(tmp.path());
  const std::vector<double> losses = Losses(metrics);
  ASSERT_EQ(losses.size(), 20u);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
  EXPECT_TRUE(metrics[0].contains("lr") && metrics[0].contains("grad_norm") &&
              metrics[0].contains("tokens_per_sec"));
  int evals = 0;
  for (const auto& m : metrics) evals += m.contains("eval_loss");
  EXPECT_EQ(evals, 4);
  EXPECT_TRUE(PathExists(tmp.Join("config.yaml")));
  EXPECT_TRUE(VerifyChecksums(tmp.Join("checkpoints/step_20")).ok());
  EXPECT_TRUE(
      PathExists(tmp.Join("checkpoints/step_20/optimizer.safetensors")));
  EXPECT_TRUE(
      PathExists(tmp.Join("checkpoints/step_20/data.rank0.safetensors")));
}

// RUN/tb/ holds the numbers of metrics.jsonl (as floats) and the config;
// a resumed run adds a second events file and the two together have every
// step once up to the crash point.
TEST(TrainerTest, TensorBoardEventsMatchMetrics) {
  XLNET_PYTHON_PROTOBUF_OR_SKIP(python);
  testing::TempDir tmp;
  {
    RegressionUnit unit(8);
    TrainerOptions options = Options(tmp.path(), 8);
    ASSERT_TRUE(Trainer(options, &unit, nullptr).Run().ok());
  }
  {
    RegressionUnit unit(8);
    TrainerOptions options = Options(tmp.path(), 12);
    options.resume = "latest";
    ASSERT_TRUE(Trainer(options, &unit, nullptr).Run().ok());
  }
  const auto metrics = ReadMetrics(tmp.path());
  const nlohmann::json events = testing::ReadTfEvents(python, tmp.Join("tb"));
  ASSERT_TRUE(events.is_array());
  int versions = 0;
  int configs = 0;
  for (const auto& e : events) {
    versions += e.contains("file_version");
    if (e.contains("values") && e["values"][0]["tag"] == "config") {
      ++configs;
      EXPECT_EQ(e["values"][0]["text"][0], "train:\n  lr: 0.05\n");
      EXPECT_EQ(e["values"][0]["plugin"], "text");
    }
  }
  EXPECT_EQ(versions, 2);
  EXPECT_EQ(configs, 2);
  for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_sec"}) {
    std::vector<std::pair<int64_t, double>> expected;
    for (const auto& m : metrics) {
      if (m.contains(key)) {
        expected.emplace_back(
            m["step"].get<int64_t>(),
            static_cast<double>(static_cast<float>(m[key].get<double>())));
      }
    }
    ASSERT_EQ(expected.size(), 12u) << key;
    EXPECT_EQ(testing::TfScalars(events, std::string("train/") + key), expected)
        << key;
  }
  std::vector<std::pair<int64_t, double>> eval_expected;
  for (const auto& m : metrics) {
    if (m.contains("eval_loss")) {
      eval_expected.emplace_back(m["step"].get<int64_t>(),
                                 static_cast<double>(static_cast<float>(
                                     m["eval_loss"].get<double>())));
    }
  }
  EXPECT_EQ(eval_expected.size(), 2u);
  EXPECT_EQ(testing::TfScalars(events, "eval/loss"), eval_expected);
}

TEST(TrainerTest, TensorBoardOff) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 2);
  options.train.tensorboard = false;
  ASSERT_TRUE(Trainer(options, &unit, nullptr).Run().ok());
  EXPECT_FALSE(PathExists(tmp.Join("tb")));
  EXPECT_TRUE(PathExists(tmp.Join("metrics.jsonl")));
}

TEST(TrainerTest, KeepsTheBestEvaluationAndExtraFiles) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 13);
  options.best_metric = "loss";
  options.best_lower_is_better = true;
  options.extra_files["spiece.model"] = std::string("\0bytes\xff", 7);
  Trainer trainer(options, &unit, nullptr);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  // Evaluations at steps 5, 10 and (the end) 13; the weight error falls, so
  // the last one is the best and RUN/best holds the final weights.
  std::vector<double> evals;
  for (const auto& m : ReadMetrics(tmp.path())) {
    if (m.contains("eval_loss")) evals.push_back(m["eval_loss"]);
  }
  ASSERT_EQ(evals.size(), 3u);
  const double best = *std::min_element(evals.begin(), evals.end());
  EXPECT_EQ(result->best_dir, tmp.Join("best"));
  EXPECT_DOUBLE_EQ(result->best_value, best);
  auto state = nlohmann::json::parse(*ReadFile(tmp.Join("best/best.json")));
  EXPECT_EQ(state["metric"], "loss");
  EXPECT_DOUBLE_EQ(state["value"].get<double>(), best);
  auto dir = ReadModelDir(tmp.Join("best"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto w = dir->Tensor("transformer.layer.0.ff.layer_1.weight");
  ASSERT_TRUE(w.ok());
  if (state["step"] == 13) {
    EXPECT_TRUE(torch::equal(*w, unit.linear_->weight));
  }
  EXPECT_EQ(*ReadFile(tmp.Join("best/spiece.model")),
            std::string("\0bytes\xff", 7));
  EXPECT_EQ(*ReadFile(tmp.Join("checkpoints/step_13/spiece.model")),
            std::string("\0bytes\xff", 7));
  EXPECT_TRUE(VerifyChecksums(tmp.Join("checkpoints/step_13")).ok());

  // An unknown metric is an error that names the metrics there are.
  testing::TempDir tmp2;
  RegressionUnit unit2(8);
  options = Options(tmp2.path(), 5);
  options.best_metric = "accuracy";
  auto bad = Trainer(options, &unit2, nullptr).Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'accuracy'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("loss"), std::string::npos);
}

// Evaluations every 5 steps; accuracy 0.5, 0.6, 0.6, 0.605, 0.9, ...: with
// patience 2 and min delta 0.01 the evaluations at steps 15 and 20 do not
// count as improvements, so the run stops at step 20 (0.605 still becomes
// RUN/best: any gain keeps the best model).
TrainerOptions EarlyStoppingOptions(const std::string& dir) {
  TrainerOptions options = Options(dir, 50);
  options.best_metric = "accuracy";
  options.train.patience = 2;
  options.train.patience_min_delta = 0.01;
  return options;
}
void ScriptAccuracy(RegressionUnit* unit) {
  unit->accuracy_at_step_ = {{5, 0.5},    {10, 0.6}, {15, 0.6},
                             {20, 0.605}, {25, 0.9}, {30, 0.95}};
}
std::vector<int64_t> MetricSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const auto& m : ReadMetrics(dir)) steps.push_back(m["step"]);
  return steps;
}

TEST(TrainerTest, PatienceStopsAfterEvaluationsWithoutImprovement) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  ScriptAccuracy(&unit);
  auto result = Trainer(EarlyStoppingOptions(tmp.path()), &unit, nullptr).Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->early_stopped);
  EXPECT_FALSE(result->interrupted);
  EXPECT_EQ(result->steps, 20);
  EXPECT_DOUBLE_EQ(result->best_value, 0.605);
  EXPECT_EQ(MetricSteps(tmp.path()).back(), 20);
  EXPECT_EQ(result->last_checkpoint, tmp.Join("checkpoints/step_20"));
  auto state = nlohmann::json::parse(
      *ReadFile(tmp.Join("checkpoints/step_20/trainer_state.json")));
  EXPECT_EQ(state["evals_without_improvement"], 2);

  // Without the min delta 0.605 and 0.9 are improvements: only step 15
  // fails to improve, so the run reaches max_steps (30, the script's end).
  testing::TempDir tmp2;
  RegressionUnit unit2(8);
  ScriptAccuracy(&unit2);
  TrainerOptions options = EarlyStoppingOptions(tmp2.path());
  options.train.patience_min_delta = 0;
  options.train.max_steps = 30;
  auto full = Trainer(options, &unit2, nullptr).Run();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->early_stopped);
  EXPECT_EQ(full->steps, 30);
  EXPECT_DOUBLE_EQ(full->best_value, 0.95);

  // Early stopping needs the metric that picks RUN/best.
  testing::TempDir tmp3;
  RegressionUnit unit3(8);
  options = EarlyStoppingOptions(tmp3.path());
  options.best_metric = "";
  auto bad = Trainer(options, &unit3, nullptr).Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.patience"), std::string::npos);
}

TEST(TrainerTest, PatienceCountSurvivesResume) {
  // Stopped at step 17 (one evaluation without improvement so far), resumed:
  // the count comes back from trainer_state.json and the run stops at step
  // 20 as the uninterrupted run does, with the same losses.
  testing::TempDir full_dir, part_dir;
  {
    RegressionUnit full(8);
    ScriptAccuracy(&full);
    ASSERT_TRUE(Trainer(EarlyStoppingOptions(full_dir.path()), &full, nullptr)
                    .Run()
                    .ok());
  }
  {
    RegressionUnit first(8);
    ScriptAccuracy(&first);
    first.stop_at_position_ = 17 * 8;
    auto stopped =
        Trainer(EarlyStoppingOptions(part_dir.path()), &first, nullptr).Run();
    ClearStopRequest();
    ASSERT_TRUE(stopped.ok()) << stopped.status();
    ASSERT_TRUE(stopped->interrupted);
    ASSERT_EQ(stopped->steps, 17);
  }
  RegressionUnit resumed(8);
  ScriptAccuracy(&resumed);
  TrainerOptions options = EarlyStoppingOptions(part_dir.path());
  options.resume = "latest";
  auto result = Trainer(options, &resumed, nullptr).Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->early_stopped);
  EXPECT_EQ(result->steps, 20);
  EXPECT_EQ(Losses(ReadMetrics(part_dir.path())),
            Losses(ReadMetrics(full_dir.path())));

  // Resuming the stopped run again (a requeued job) trains nothing more.
  const std::vector<int64_t> before = MetricSteps(part_dir.path());
  RegressionUnit again(8);
  ScriptAccuracy(&again);
  auto rerun = Trainer(options, &again, nullptr).Run();
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_TRUE(rerun->early_stopped);
  EXPECT_EQ(rerun->steps, 20);
  EXPECT_EQ(MetricSteps(part_dir.path()), before);
  EXPECT_TRUE(torch::equal(again.linear_->weight, resumed.linear_->weight));
}

TEST(TrainerTest, ResumeReproducesUninterruptedRun) {
  testing::TempDir full_dir, part_dir;
  RegressionUnit full(8);
  ASSERT_TRUE(Trainer(Options(full_dir.path(), 12), &full, nullptr).Run().ok());
  const std::vector<double> expected = Losses(ReadMetrics(full_dir.path()));

  // Interrupted at step 6 (a stop request, as SIGTERM sends): the run saved
  // step_4 (save_steps) and step_6 (on stop).
  {
    RegressionUnit first(8);
    first.stop_at_position_ = 6 * 8;
    auto stopped = Trainer(Options(part_dir.path(), 12), &first, nullptr).Run();
    ClearStopRequest();
    ASSERT_TRUE(stopped.ok()) << stopped.status();
    ASSERT_TRUE(stopped->interrupted);
    ASSERT_EQ(stopped->steps, 6);
  }
  RegressionUnit resumed(8);
  resumed.linear_->weight.data().fill_(123.0);  // must be overwritten
  TrainerOptions options = Options(part_dir.path(), 12);
  options.resume = "latest";
  // Verifying reads every byte of step_6: once to choose it, not again to
  // restore it.
  const nlohmann::json manifest = testing::ReadJsonFile(
      part_dir.Join(absl::StrCat("checkpoints/step_6/", kChecksumsFile)));
  int64_t step_6_bytes = 0;
  for (const auto& [name, entry] : manifest["files"].items()) {
    step_6_bytes += entry["bytes"].get<int64_t>();
  }
  ASSERT_GT(step_6_bytes, 0);
  const int64_t verified_before = VerifiedBytes();
  ASSERT_TRUE(Trainer(options, &resumed, nullptr).Run().ok());
  EXPECT_EQ(VerifiedBytes() - verified_before, step_6_bytes);
  const std::vector<double> got = Losses(ReadMetrics(part_dir.path()));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "step " << i + 1;
  EXPECT_TRUE(torch::equal(resumed.linear_->weight, full.linear_->weight));
}

TEST(TrainerTest, ResumeAfterCrashDropsRepeatedMetrics) {
  testing::TempDir full_dir, crash_dir;
  RegressionUnit full(8);
  ASSERT_TRUE(Trainer(Options(full_dir.path(), 12), &full, nullptr).Run().ok());
  const std::vector<double> expected = Losses(ReadMetrics(full_dir.path()));
  // A run that "died" after step 10: its newest checkpoints are gone but its
  // metrics reach step 10 (and end in a torn line).
  {
    RegressionUnit first(8);
    first.stop_at_position_ = 10 * 8;
    ASSERT_TRUE(
        Trainer(Options(crash_dir.path(), 12), &first, nullptr).Run().ok());
    ClearStopRequest();
    ASSERT_TRUE(RemoveAll(crash_dir.Join("checkpoints/step_10")).ok());
    ASSERT_TRUE(RemoveAll(crash_dir.Join("checkpoints/step_8")).ok());
    std::ofstream(crash_dir.Join("metrics.jsonl"), std::ios::app)
        << "{\"step\": 11, \"lo";
  }
  RegressionUnit resumed(8);
  TrainerOptions options = Options(crash_dir.path(), 12);
  options.resume = "latest";
  ASSERT_TRUE(Trainer(options, &resumed, nullptr).Run().ok());
  const std::vector<double> got = Losses(ReadMetrics(crash_dir.path()));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "step " << i + 1;
}

// --resume latest when checkpoints exist but none verifies: an error naming
// each checkpoint and its problem; nothing is deleted or restarted.
TEST(TrainerTest, ResumeLatestWithNoValidCheckpointIsAnError) {
  testing::TempDir tmp;
  {
    RegressionUnit unit(8);
    ASSERT_TRUE(Trainer(Options(tmp.path(), 8), &unit, nullptr).Run().ok());
  }
  // step_4 truncated, step_8 without its manifest.
  ASSERT_EQ(
      ::truncate(tmp.Join("checkpoints/step_4/optimizer.safetensors").c_str(),
                 3),
      0);
  ASSERT_TRUE(RemoveAll(tmp.Join("checkpoints/step_8/checksums.json")).ok());
  const std::string metrics_before = *ReadFile(tmp.Join("metrics.jsonl"));
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 12);
  options.resume = "latest";
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  const std::string message(result.status().message());
  EXPECT_NE(
      message.find("no checkpoint in " + tmp.Join("checkpoints") + " verifies"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("step_8: " + tmp.Join("checkpoints/step_8") +
                         "/checksums.json: cannot open"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("step_4: " + tmp.Join("checkpoints/step_4") +
                         "/optimizer.safetensors: size 3"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--overwrite"), std::string::npos) << message;
  EXPECT_TRUE(PathExists(tmp.Join("checkpoints/step_4/model.safetensors")));
  EXPECT_TRUE(PathExists(tmp.Join("checkpoints/step_8/model.safetensors")));
  EXPECT_EQ(*ReadFile(tmp.Join("metrics.jsonl")), metrics_before);
}

// --resume latest with no checkpoint at all starts fresh (the first start
// under an agent that re-runs the same command line); what a killed first
// attempt logged before its first checkpoint is dropped, not repeated.
TEST(TrainerTest, ResumeLatestWithoutCheckpointsStartsFreshOnce) {
  testing::TempDir full_dir, tmp;
  RegressionUnit full(8);
  ASSERT_TRUE(Trainer(Options(full_dir.path(), 6), &full, nullptr).Run().ok());
  {
    // A first attempt that died after logging 3 steps, before saving.
    RegressionUnit first(8);
    TrainerOptions options = Options(tmp.path(), 3);
    options.save_checkpoints = false;
    ASSERT_TRUE(Trainer(options, &first, nullptr).Run().ok());
  }
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 6);
  options.resume = "latest";
  ASSERT_TRUE(Trainer(options, &unit, nullptr).Run().ok());
  EXPECT_EQ(Losses(ReadMetrics(tmp.path())),
            Losses(ReadMetrics(full_dir.path())));
}

// Hand-edited trainer state (the checksums recomputed so that only the
// values are wrong) is refused with the file and field named.
TEST(TrainerTest, ImplausibleTrainerStateIsRefused) {
  testing::TempDir tmp;
  {
    RegressionUnit unit(8);
    ASSERT_TRUE(Trainer(Options(tmp.path(), 4), &unit, nullptr).Run().ok());
  }
  const std::string dir = tmp.Join("checkpoints/step_4");
  const std::string path = dir + "/trainer_state.json";
  const nlohmann::json good = testing::ReadJsonFile(path);
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* expected;
  };
  for (const Case& c : std::vector<Case>{
           {"step", -3, "trainer_state.json: step -3"},
           {"step", 9, "trainer_state.json: step 9 is not the step of"},
           {"step", "four", "trainer_state.json: step must be an integer"},
           {"step", 4.0, "trainer_state.json: step must be an integer"},
           // Read by a cast, 2^63 was a negative step.
           {"step", uint64_t{1} << 63,
            "trainer_state.json: step 9223372036854775808 is too large"},
           {"world_size", 0, "trainer_state.json: world_size 0"},
           {"skipped_steps", 7, "trainer_state.json: skipped_steps 7"},
           {"bad_in_a_row", -1, "trainer_state.json: bad_in_a_row -1"},
           {"bad_steps", 1, "trainer_state.json: bad_in_a_row 0, bad_steps 1"},
           {"first_bad_step", 2, "first_bad_step 2: need bad_in_a_row"}}) {
    nlohmann::json edited = good;
    edited[c.field] = c.value;
    ASSERT_TRUE(WriteFileAtomic(path, edited.dump(2)).ok());
    ASSERT_TRUE(WriteChecksums(dir).ok());
    RegressionUnit unit(8);
    TrainerOptions options = Options(tmp.path(), 6);
    options.resume = dir;
    auto result = Trainer(options, &unit, nullptr).Run();
    ASSERT_FALSE(result.ok()) << c.field << " " << c.value;
    EXPECT_NE(result.status().message().find(c.expected), std::string::npos)
        << result.status();
  }
}

TEST(TrainerTest, AccumulationEqualsLargerBatch) {
  // Dropout off: one [8] batch and two [4] halves then see the same function.
  testing::TempDir a, b;
  RegressionUnit big(8), small(4);
  big.dropout_ = torch::nn::Dropout(0.0);
  small.dropout_ = torch::nn::Dropout(0.0);
  ASSERT_TRUE(Trainer(Options(a.path(), 5), &big, nullptr).Run().ok());
  TrainerOptions accumulated = Options(b.path(), 5);
  accumulated.train.grad_accum_steps = 2;
  accumulated.train.batch_size = 16;
  ASSERT_TRUE(Trainer(accumulated, &small, nullptr).Run().ok());
  EXPECT_TRUE(
      torch::allclose(big.linear_->weight, small.linear_->weight, 1e-5, 1e-6));
  EXPECT_TRUE(
      torch::allclose(big.linear_->bias, small.linear_->bias, 1e-5, 1e-6));
}

// Two runs' metrics.jsonl lines are equal but for their tokens/s.
void ExpectSameMetricsButSpeed(const std::vector<nlohmann::json>& a,
                               const std::vector<nlohmann::json>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    nlohmann::json x = a[i], y = b[i];
    x.erase("tokens_per_sec");
    y.erase("tokens_per_sec");
    EXPECT_EQ(x, y) << i;
  }
}

// A unit's numbers as tensors or as host numbers log the same, and the
// trainer reads device values once per optimizer step, however many
// micro-batches it has.
TEST(TrainerTest, TensorStepValuesAndOneHostReadPerStep) {
  testing::TempDir a, b;
  std::vector<std::vector<nlohmann::json>> metrics;
  for (const bool tensors : {false, true}) {
    const std::string dir = tensors ? b.path() : a.path();
    RegressionUnit unit(4);
    unit.tensor_values_ = tensors;
    TrainerOptions options = Options(dir, 6);
    options.train.grad_accum_steps = 3;
    options.train.batch_size = 12;
    options.train.clip = 0.5;
    Trainer trainer(options, &unit, nullptr);
    auto result = trainer.Run();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(trainer.step_host_reads(), 6);
    metrics.push_back(ReadMetrics(dir));
  }
  ExpectSameMetricsButSpeed(metrics[0], metrics[1]);
  EXPECT_TRUE(metrics[0][0].contains("error"));
}

// A stop requested while starting up (before the first step) ends the run
// at once: no step, nothing saved, and --resume latest starts it fresh.
TEST(TrainerTest, StopRequestBeforeTheFirstStepEndsAtOnce) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 100);
  options.train.save_steps = 0;
  const torch::Tensor before = unit.linear_->weight.clone();
  RequestStop();
  auto result = Trainer(options, &unit, nullptr).Run();
  ClearStopRequest();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_EQ(result->steps, 0);
  EXPECT_TRUE(torch::equal(unit.linear_->weight, before));
  EXPECT_FALSE(PathExists(tmp.Join("checkpoints")));
  EXPECT_TRUE(ReadMetrics(tmp.path()).empty());
}

TEST(TrainerTest, NonFiniteStepsAreSkippedThenStop) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  unit.loss_scale_ = std::numeric_limits<double>::quiet_NaN();
  TrainerOptions options = Options(tmp.path(), 100);
  options.train.max_bad_steps = 3;
  const torch::Tensor before = unit.linear_->weight.clone();
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("3 non-finite steps in a row"),
            std::string::npos)
      << result.status();
  EXPECT_TRUE(torch::equal(unit.linear_->weight, before));  // never updated
  EXPECT_TRUE(VerifyChecksums(tmp.Join("checkpoints/step_3")).ok());
}

// A unit whose loss is NaN from step `from` on (a divergence: every later
// step is non-finite).
std::unique_ptr<RegressionUnit> DivergingUnit(int64_t from) {
  auto unit = std::make_unique<RegressionUnit>(8);
  unit->nan_loss_from_position_ = from * 8;
  return unit;
}

// The step numbers of RUN/checkpoints.
std::vector<int64_t> CheckpointSteps(const std::string& run_dir) {
  return CheckpointManager(run_dir, 0).ListSteps();
}

// Whether every tensor of checkpoint `dir`'s model is finite.
bool CheckpointWeightsFinite(const std::string& dir) {
  auto model = ReadModelDir(dir);
  if (!model.ok()) return false;
  for (const char* name : {"transformer.layer.0.ff.layer_1.weight",
                           "transformer.layer.0.ff.layer_1.bias"}) {
    auto t = model->Tensor(name);
    if (!t.ok() || !torch::isfinite(*t).all().item<bool>()) return false;
  }
  return true;
}

// A resume by hand from a checkpoint older than the run's newest (as the
// divergence advice suggests: an older step and a lower lr) starts a new
// timeline. The newer checkpoints move, unchanged, with the old metrics,
// to checkpoints/abandoned/after_step_4/; without that, pruning (2 kept)
// removed the new timeline's step_4 and step_8 for the old step_12, and
// --resume latest went back to the old timeline.
TEST(TrainerTest, ResumeFromAnOlderCheckpointSetsTheNewerOnesAside) {
  testing::TempDir tmp;
  {
    RegressionUnit unit(8);
    ASSERT_TRUE(Trainer(Options(tmp.path(), 12), &unit, nullptr).Run().ok());
  }
  const std::string old_metrics = *ReadFile(tmp.Join("metrics.jsonl"));
  TrainerOptions options = Options(tmp.path(), 8);
  options.train.keep_checkpoints = 2;
  options.train.lr = 0.02;
  options.config_yaml = "train:\n  lr: 0.02\n";
  options.resume = tmp.Join("checkpoints/step_4");
  RegressionUnit unit(8);
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{4, 8}));
  const std::string aside = tmp.Join("checkpoints/abandoned/after_step_4");
  for (const char* step : {"step_8", "step_12"}) {
    EXPECT_TRUE(VerifyChecksums(aside + "/" + step).ok()) << step;
  }
  auto aside_metrics = ReadFile(aside + "/metrics.jsonl");
  ASSERT_TRUE(aside_metrics.ok()) << aside_metrics.status();
  EXPECT_EQ(*aside_metrics, old_metrics);
  EXPECT_EQ(Losses(ReadMetrics(tmp.path())).size(), 8u);
  // The new step_8 is this run's (lr 0.02), not the old one.
  auto kept = ReadModelDir(tmp.Join("checkpoints/step_8"));
  auto old = ReadModelDir(aside + "/step_8");
  ASSERT_TRUE(kept.ok() && old.ok());
  const char* weight = "transformer.layer.0.ff.layer_1.weight";
  EXPECT_TRUE(torch::equal(*kept->Tensor(weight), unit.linear_->weight));
  EXPECT_FALSE(torch::equal(*kept->Tensor(weight), *old->Tensor(weight)));
  // --resume latest continues the new timeline.
  TrainerOptions latest = options;
  latest.resume = "latest";
  latest.train.max_steps = 10;
  RegressionUnit next(8);
  auto resumed = Trainer(latest, &next, nullptr).Run();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->steps, 10);
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{8, 10}));
  EXPECT_FALSE(PathExists(aside + ".2"));
}

// A run diverging at step 10 (max_bad_steps 3, a checkpoint every 4 steps,
// 2 kept), then restarted 5 times from `latest` as torchrun --max_restarts
// or a requeue would: every attempt fails, each restart stops after one
// more bad step (the count survives), and step_8, the newest checkpoint
// from before the divergence, survives every prune.
TEST(TrainerTest, DivergedRunRestartedFiveTimesKeepsTheLastGoodCheckpoint) {
  testing::TempDir tmp;
  TrainerOptions options = Options(tmp.path(), 100);
  options.train.keep_checkpoints = 2;
  options.train.max_bad_steps = 3;
  options.train.eval_steps = 0;
  const std::string good = tmp.Join("checkpoints/step_8");
  for (int attempt = 0; attempt <= 5; ++attempt) {
    auto unit = DivergingUnit(10);
    if (attempt > 0) options.resume = "latest";
    auto result = Trainer(options, unit.get(), nullptr).Run();
    ASSERT_FALSE(result.ok()) << "attempt " << attempt;
    const std::string message(result.status().message());
    EXPECT_NE(message.find("non-finite steps in a row"), std::string::npos)
        << message;
    EXPECT_NE(message.find("first non-finite step was 10"), std::string::npos)
        << message;
    EXPECT_NE(message.find("The last good checkpoint is " + good),
              std::string::npos)
        << message;
    // Resumed at 12 + attempt - 1, one more bad step stops it.
    EXPECT_EQ(CheckpointSteps(tmp.path()).back(), 12 + attempt);
    EXPECT_TRUE(PathExists(good)) << "attempt " << attempt;
  }
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{8, 16, 17}));
  EXPECT_TRUE(VerifyChecksums(good).ok());
  EXPECT_TRUE(CheckpointWeightsFinite(good));
  const nlohmann::json good_state =
      testing::ReadJsonFile(good + "/trainer_state.json");
  EXPECT_EQ(good_state["bad_steps"], 0);
  EXPECT_FALSE(good_state.contains("first_bad_step"));
  const nlohmann::json last =
      testing::ReadJsonFile(tmp.Join("checkpoints/step_17/trainer_state.json"));
  EXPECT_EQ(last["first_bad_step"], 10);
  EXPECT_EQ(last["bad_in_a_row"], 8);
  EXPECT_EQ(last["bad_steps"], 8);
  EXPECT_EQ(last["skipped_steps"], 8);
}

// A run that goes bad within its last max_bad_steps steps reaches max_steps
// on skipped steps: it fails (naming the last good checkpoint, which
// keep_checkpoints 1 did not prune), and so does a resume of it. A run
// whose skipped steps are followed by finite ones succeeds.
TEST(TrainerTest, RunEndingOnNonFiniteStepsFails) {
  testing::TempDir tmp;
  TrainerOptions options = Options(tmp.path(), 12);
  options.train.keep_checkpoints = 1;
  auto unit = DivergingUnit(11);
  auto result = Trainer(options, unit.get(), nullptr).Run();
  ASSERT_FALSE(result.ok());
  std::string message(result.status().message());
  EXPECT_NE(message.find("ended at step 12 with its last 2 step(s) non-finite"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("The last good checkpoint is " +
                         tmp.Join("checkpoints/step_8")),
            std::string::npos)
      << message;
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{8, 12}));
  EXPECT_TRUE(CheckpointWeightsFinite(tmp.Join("checkpoints/step_12")));
  auto again_unit = DivergingUnit(11);
  options.resume = "latest";
  auto again = Trainer(options, again_unit.get(), nullptr).Run();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("ended at step 12"),
            std::string::npos)
      << again.status();

  // Steps 5 and 6 non-finite, then finite ones to the end: a success that
  // counts them; the checkpoint from before step 5 is still kept.
  testing::TempDir recovered;
  RegressionUnit blip(8);
  blip.overflow_at_positions_ = {5 * 8, 6 * 8};
  TrainerOptions blip_options = Options(recovered.path(), 16);
  blip_options.train.keep_checkpoints = 1;
  auto ok = Trainer(blip_options, &blip, nullptr).Run();
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->skipped_steps, 2);
  EXPECT_EQ(CheckpointSteps(recovered.path()), (std::vector<int64_t>{4, 16}));
  const nlohmann::json state = testing::ReadJsonFile(
      recovered.Join("checkpoints/step_16/trainer_state.json"));
  EXPECT_EQ(state["first_bad_step"], 5);
  EXPECT_EQ(state["bad_steps"], 2);
  EXPECT_EQ(state["bad_in_a_row"], 0);
}

// A learning rate that is finite as a double but does not fit fp32
// weights (1e300; warmup gives step 1 rate 0, step 2 the first nonzero
// one) makes LibTorch throw in the update: an error naming the step, not an
// exception out of Run, and nothing saved after it.
TEST(TrainerTest, LearningRateBeyondTheWeightsDtypeIsAnError) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 20);
  options.train.lr = 1e300;
  options.train.save_steps = 1;
  absl::StatusOr<TrainResult> result;
  ASSERT_NO_THROW(result = Trainer(options, &unit, nullptr).Run());
  ASSERT_FALSE(result.ok());
  EXPECT_NE(
      result.status().message().find("step 2: the optimizer update at rate"),
      std::string::npos)
      << result.status();
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{1}));
}

// Weights made non-finite by the update of step 5 (injected after it, as an
// fp16/bf16 overflow or an absurd rate would): step 6's loss is not finite,
// and that skipped step finds the weights (they are checked every 100 steps
// here, so not the cadence): the run stops with an error and never saves
// them, though the max_bad_steps stop or the end would otherwise save.
TEST(TrainerTest, NonFiniteWeightsStopTheRunAndAreNeverSaved) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 20);
  options.train.log_steps = 100;
  options.train.save_steps = 0;
  options.train.eval_steps = 0;
  options.on_step = [&unit](const StepTiming& timing) {
    if (timing.step == 5) {
      torch::NoGradGuard no_grad;
      unit.linear_->weight[0][0] = std::numeric_limits<float>::infinity();
    }
  };
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  const std::string message(result.status().message());
  EXPECT_NE(message.find("step 6: the weights are not finite (they were "
                         "after step 0"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("No checkpoint precedes step 1"), std::string::npos)
      << message;
  EXPECT_TRUE(CheckpointSteps(tmp.path()).empty());
}

// Weights that become non-finite at a save step (injected after the update,
// between the weight checks) are refused by Save: nothing is written, and
// the error names the previous checkpoint as the last good one.
TEST(TrainerTest, SaveRefusesNonFiniteWeights) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 12);
  options.train.log_steps = 100;
  options.on_step = [&unit](const StepTiming& timing) {
    if (timing.step == 8) {
      torch::NoGradGuard no_grad;
      unit.linear_->bias[0] = std::numeric_limits<float>::quiet_NaN();
    }
  };
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  const std::string message(result.status().message());
  EXPECT_NE(message.find("step 8: the weights are not finite"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("The last good checkpoint is " +
                         tmp.Join("checkpoints/step_4")),
            std::string::npos)
      << message;
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{4}));

  // At the last step of a run that saves nothing: still an error.
  testing::TempDir tmp2;
  RegressionUnit unit2(8);
  options = Options(tmp2.path(), 6);
  options.save_checkpoints = false;
  options.train.log_steps = 100;
  options.on_step = [&unit2](const StepTiming& timing) {
    if (timing.step == 6) {
      torch::NoGradGuard no_grad;
      unit2.linear_->weight[1][2] = std::numeric_limits<float>::infinity();
    }
  };
  auto end = Trainer(options, &unit2, nullptr).Run();
  ASSERT_FALSE(end.ok());
  EXPECT_NE(end.status().message().find("step 6: the weights are not finite"),
            std::string::npos)
      << end.status();
}

// A checkpoint holding non-finite weights (as older versions saved from a
// diverged run) is not resumed: the error names it.
TEST(TrainerTest, ResumingNonFiniteWeightsIsRefused) {
  testing::TempDir tmp;
  {
    RegressionUnit unit(8);
    ASSERT_TRUE(Trainer(Options(tmp.path(), 4), &unit, nullptr).Run().ok());
  }
  const std::string dir = tmp.Join("checkpoints/step_4");
  RegressionUnit nan_unit(8);
  nan_unit.linear_->weight.data().fill_(
      std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model.safetensors", nan_unit.StateDict()).ok());
  ASSERT_TRUE(WriteChecksums(dir).ok());
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 8);
  options.resume = "latest";
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(
      result.status().message().find(dir + ": its weights are not finite"),
      std::string::npos)
      << result.status();
  EXPECT_EQ(CheckpointSteps(tmp.path()), (std::vector<int64_t>{4}));
}

// A non-finite learning rate (options built in code; validation refuses it
// in a config) stops the run before its first update.
TEST(TrainerTest, NonFiniteLearningRateStopsBeforeTheUpdate) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 4);
  options.train.lr = std::numeric_limits<double>::infinity();
  const torch::Tensor before = unit.linear_->weight.clone();
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("step 1: the learning rate is"),
            std::string::npos)
      << result.status();
  EXPECT_TRUE(torch::equal(unit.linear_->weight, before));
  EXPECT_TRUE(CheckpointSteps(tmp.path()).empty());
}

// Dynamic loss scaling in fp32 on the CPU: gradient overflows at steps 3 and
// 4 are skipped without counting as bad steps (max_bad_steps 1 would stop
// the run otherwise), the scale backs off and grows on the GradScaler rule,
// the unscaled updates equal an unscaled run's, and resuming restores the
// scale.
TEST(TrainerTest, LossScalingSkipsOverflowsBacksOffGrowsAndResumes) {
  LossScalerOptions scaling;
  scaling.init_scale = 1024;
  scaling.growth_interval = 3;
  auto make_unit = []() {
    auto unit = std::make_unique<RegressionUnit>(8);
    unit->overflow_at_positions_ = {24, 32};  // steps 3 and 4
    return unit;
  };
  testing::TempDir scaled_dir, plain_dir, resumed_dir;
  auto scaled = make_unit();
  TrainerOptions options = Options(scaled_dir.path(), 10);
  options.train.max_bad_steps = 1;
  options.loss_scaling = scaling;
  auto result = Trainer(options, scaled.get(), nullptr).Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->skipped_steps, 2);
  std::vector<double> scales;
  for (const auto& m : ReadMetrics(scaled_dir.path())) {
    if (m.contains("loss_scale")) scales.push_back(m["loss_scale"]);
  }
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 512, 256, 256, 256, 512,
                                         512, 512, 1024}));

  // Without scaling the same two steps are non-finite and skipped (as bad
  // steps, so allow them): the applied updates must be the same.
  auto plain = make_unit();
  TrainerOptions plain_options = Options(plain_dir.path(), 10);
  plain_options.train.max_bad_steps = 3;
  ASSERT_TRUE(Trainer(plain_options, plain.get(), nullptr).Run().ok());
  EXPECT_LT((scaled->linear_->weight - plain->linear_->weight)
                .abs()
                .max()
                .item<double>(),
            1e-6);

  // The step-4 checkpoint holds scale 256 with 0 finite steps counted.
  auto state =
      ReadStateJson(scaled_dir.Join("checkpoints/step_4/trainer_state.json"),
                    "trainer_state", 1);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ((*state)["loss_scale"].get<double>(), 256);
  EXPECT_EQ((*state)["loss_scale_growth_tracker"].get<int64_t>(), 0);
  auto resumed = make_unit();
  TrainerOptions resume_options = Options(resumed_dir.path(), 10);
  resume_options.train.max_bad_steps = 1;
  resume_options.loss_scaling = scaling;
  resume_options.resume = scaled_dir.Join("checkpoints/step_4");
  ASSERT_TRUE(Trainer(resume_options, resumed.get(), nullptr).Run().ok());
  std::vector<double> resumed_scales;
  for (const auto& m : ReadMetrics(resumed_dir.path())) {
    if (m.contains("loss_scale")) resumed_scales.push_back(m["loss_scale"]);
  }
  EXPECT_EQ(resumed_scales,
            std::vector<double>(scales.begin() + 4, scales.end()));
  EXPECT_TRUE(torch::equal(resumed->linear_->weight, scaled->linear_->weight));
}

// What one rank of RunTwoRanks ended with.
struct RankOutcome {
  std::string error;  // "" when it succeeded
  // Trainer::resume_verified_bytes.
  int64_t verified_bytes = 0;
  // The first step it ran (0: none).
  int64_t first_step = 0;
  // Its weights at the end.
  torch::Tensor weight;
};

// Runs `options` on 2 Gloo ranks (threads) with units of micro-batch 4
// (`setup`, when given, adjusts each); returns what each rank ended with.
std::vector<RankOutcome> RunTwoRankOutcomes(
    const TrainerOptions& options,
    const std::function<void(RegressionUnit*)>& setup = nullptr) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<RankOutcome> outcomes(2);
  // Units seed the global generator: made here, not on the rank threads.
  std::vector<std::unique_ptr<RegressionUnit>> units;
  for (int rank = 0; rank < 2; ++rank) {
    units.push_back(std::make_unique<RegressionUnit>(4));
    units.back()->rank_ = rank;
    units.back()->world_ = 2;
    if (setup) setup(units.back().get());
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank]() {
      RegressionUnit& unit = *units[rank];
      RankOutcome& outcome = outcomes[rank];
      auto group = ProcessGroup::FromStore(store, rank, 2, torch::kCPU, "gloo",
                                           std::chrono::milliseconds(30000));
      if (!group.ok()) {
        outcome.error = std::string(group.status().message());
        return;
      }
      TrainerOptions rank_options = options;
      rank_options.on_step = [&outcome](const StepTiming& timing) {
        if (outcome.first_step == 0) outcome.first_step = timing.step;
      };
      Trainer trainer(rank_options, &unit, group->get());
      auto result = trainer.Run();
      if (!result.ok()) outcome.error = std::string(result.status().message());
      outcome.verified_bytes = trainer.resume_verified_bytes();
      outcome.weight = unit.linear_->weight.detach().clone();
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

// RunTwoRankOutcomes' errors ("" for a rank that succeeded).
std::vector<std::string> RunTwoRanks(
    const TrainerOptions& options,
    const std::function<void(RegressionUnit*)>& setup = nullptr) {
  std::vector<std::string> errors;
  for (const RankOutcome& outcome : RunTwoRankOutcomes(options, setup)) {
    errors.push_back(outcome.error);
  }
  return errors;
}

// Two ranks resuming past a corrupt newest checkpoint: it is reported once
// (by rank 0), not once per rank, and named once.
TEST(TrainerTest, CorruptCheckpointIsReportedOnceForAllRanks) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir dir;
  EXPECT_EQ(RunTwoRanks(Options(dir.path(), 8)),
            (std::vector<std::string>{"", ""}));
  ASSERT_EQ(
      ::truncate(dir.Join("checkpoints/step_8/model.safetensors").c_str(), 5),
      0);
  TrainerOptions options = Options(dir.path(), 10);
  options.resume = "latest";
  ::testing::internal::CaptureStderr();
  const std::vector<std::string> errors = RunTwoRanks(options);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  size_t reports = 0;
  for (size_t at = log.find("skipping checkpoint"); at != std::string::npos;
       at = log.find("skipping checkpoint", at + 1)) {
    ++reports;
  }
  EXPECT_EQ(reports, 1u) << log;
  EXPECT_NE(
      log.find("skipping checkpoint step_8: " + dir.Join("checkpoints/step_8") +
               "/model.safetensors: size 5"),
      std::string::npos)
      << log;
}

// A divergence seen on one rank only (its loss NaN from step 6) is seen by
// both (the loss is all-reduced): both stop at the same step with the same
// error, and a restart of both stops after one more step, keeping step_4.
TEST(TrainerTest, TwoRanksStopTogetherOnADivergence) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir dir;
  TrainerOptions options = Options(dir.path(), 20);
  options.train.max_bad_steps = 3;
  options.train.keep_checkpoints = 1;
  options.train.eval_steps = 0;
  const auto rank1_diverges = [](RegressionUnit* unit) {
    if (unit->rank_ == 1) unit->nan_loss_from_position_ = 6 * 4;
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) options.resume = "latest";
    const std::vector<std::string> errors =
        RunTwoRanks(options, rank1_diverges);
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_EQ(errors[0], errors[1]);
    EXPECT_NE(
        errors[0].find(absl::StrCat(3 + attempt, " non-finite steps in a row")),
        std::string::npos)
        << errors[0];
    EXPECT_EQ(CheckpointSteps(dir.path()),
              (std::vector<int64_t>{4, 8 + attempt}));
  }
}

// Runs `fn(rank, group)` on two Gloo ranks (threads over one store) and
// returns each rank's error ("" when OK).
std::vector<std::string> OnTwoRanks(
    const std::function<absl::Status(int, ProcessGroup*)>& fn) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank]() {
      auto group = ProcessGroup::FromStore(store, rank, 2, torch::kCPU, "gloo",
                                           std::chrono::milliseconds(30000));
      const absl::Status status =
          group.ok() ? fn(rank, group->get()) : group.status();
      errors[rank] = std::string(status.message());
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// The same global batch of 8 split over 2 Gloo ranks (as threads) ends with
// the parameters of one rank seeing all 8.
TEST(TrainerTest, TwoGlooRanksMatchOneRank) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir single_dir;
  RegressionUnit single(8);
  single.dropout_ = torch::nn::Dropout(0.0);
  ASSERT_TRUE(
      Trainer(Options(single_dir.path(), 6), &single, nullptr).Run().ok());

  testing::TempDir multi_dir;
  std::vector<std::unique_ptr<RegressionUnit>> units;
  for (int rank = 0; rank < 2; ++rank) {
    units.push_back(std::make_unique<RegressionUnit>(4));
    units.back()->dropout_ = torch::nn::Dropout(0.0);
    units.back()->rank_ = rank;
    units.back()->world_ = 2;
  }
  // Rank 1 starts from different weights: the broadcast from rank 0 fixes it.
  units[1]->linear_->weight.data().fill_(0.5);
  const std::vector<std::string> errors =
      OnTwoRanks([&](int rank, ProcessGroup* group) {
        return Trainer(Options(multi_dir.path(), 6), units[rank].get(), group)
            .Run()
            .status();
      });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(torch::allclose(units[rank]->linear_->weight,
                                single.linear_->weight, 0, 1e-6))
        << "rank " << rank << " max diff "
        << (units[rank]->linear_->weight - single.linear_->weight).abs().max();
  }
  // Both ranks' data positions are in the checkpoint.
  EXPECT_TRUE(
      PathExists(multi_dir.Join("checkpoints/step_6/data.rank0.safetensors")));
  EXPECT_TRUE(
      PathExists(multi_dir.Join("checkpoints/step_6/data.rank1.safetensors")));
  EXPECT_TRUE(
      PathExists(multi_dir.Join("checkpoints/step_6/rng.rank1.safetensors")));
  EXPECT_TRUE(VerifyChecksums(multi_dir.Join("checkpoints/step_6")).ok());
}

// Without dropout: two rank threads share the global generator, whose
// draws would interleave in any order.
void NoDropout(RegressionUnit* unit) {
  unit->dropout_ = torch::nn::Dropout(0.0);
}

// The bytes of the files `dir`'s checksums.json lists that `keep` selects.
int64_t ListedBytes(const std::string& dir,
                    const std::function<bool(const std::string&)>& keep) {
  int64_t bytes = 0;
  const absl::StatusOr<std::vector<std::string>> listed = ListedFiles(dir);
  EXPECT_TRUE(listed.ok()) << listed.status();
  if (!listed.ok()) return -1;
  for (const std::string& name : *listed) {
    if (keep(name)) bytes += std::filesystem::file_size(dir + "/" + name);
  }
  return bytes;
}

// A rank that fails while saving step 8 (its state cannot be written):
// both ranks stop with an error naming the step and the rank, nothing of
// step 8 is committed, step_4 stays the newest valid checkpoint, and
// --resume latest continues from it to the weights of a run that never
// failed, bit for bit. A staging directory a killed save left is removed
// at start-up, not taken for the new attempt's.
void RankFailingMidSave(bool background,
                        StepReads reads = StepReads::kEachStep) {
  testing::TempDir reference_dir;
  const std::vector<RankOutcome> reference =
      RunTwoRankOutcomes(Options(reference_dir.path(), 12), NoDropout);
  ASSERT_EQ(reference[0].error, "");

  testing::TempDir dir;
  TrainerOptions failing = Options(dir.path(), 12);
  failing.train.background_save = background;
  failing.train.step_reads = reads;
  // Logging every step would read every step at once.
  if (reads == StepReads::kDeferred) failing.train.log_steps = 12;
  const std::vector<RankOutcome> failed =
      RunTwoRankOutcomes(failing, [](RegressionUnit* unit) {
        NoDropout(unit);
        if (unit->rank_ == 1) unit->fail_save_at_position_ = 8 * 4;
      });
  EXPECT_EQ(failed[1].error,
            "checkpoint step_8: rank 1: no space left on the device; nothing "
            "was committed (the previous checkpoint stays the newest)");
  EXPECT_EQ(failed[0].error,
            "checkpoint step_8: rank(s) 1 could not write their files (their "
            "errors say why); nothing was committed (the previous checkpoint "
            "stays the newest)");
  EXPECT_EQ(CheckpointSteps(dir.path()), (std::vector<int64_t>{4}));
  CheckpointManager manager(dir.path(), 0);
  EXPECT_EQ(**manager.LatestValid(), manager.StepDir(4));

  // What a save killed mid-way leaves: a rank's files and manifest.
  const std::string stale = StagingDir(manager.checkpoints_dir(), 8);
  ASSERT_TRUE(WriteRankFiles(stale, 8, 2, 1,
                             {{RankFileName("data", 1),
                               {{"position", torch::tensor(int64_t{999})}}}})
                  .ok());
  TrainerOptions options = Options(dir.path(), 12);
  options.train.background_save = background;
  options.train.step_reads = reads;
  options.resume = "latest";
  const std::vector<RankOutcome> resumed =
      RunTwoRankOutcomes(options, NoDropout);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(resumed[rank].error, "");
    EXPECT_EQ(resumed[rank].first_step, 5);
    EXPECT_TRUE(torch::equal(resumed[rank].weight, reference[rank].weight))
        << "rank " << rank;
  }
  EXPECT_EQ(CheckpointSteps(dir.path()), (std::vector<int64_t>{4, 8, 12}));
  EXPECT_FALSE(PathExists(stale));
}

TEST(TrainerTest, RankFailingMidSaveLeavesThePreviousCheckpointNewest) {
  XLNET_SKIP_WITHOUT_GLOO();
  RankFailingMidSave(/*background=*/false);
}

// The same with the saves in the background: the failure is found at the
// next step's all-reduce, with the same errors and the same outcome.
TEST(TrainerTest,
     RankFailingMidBackgroundSaveLeavesThePreviousCheckpointNewest) {
  XLNET_SKIP_WITHOUT_GLOO();
  RankFailingMidSave(/*background=*/true);
}

// With deferred step reads the failure comes in a late read; every rank
// still sees it in the same step's numbers.
TEST(TrainerTest, RankFailingMidBackgroundSaveWithDeferredReads) {
  XLNET_SKIP_WITHOUT_GLOO();
  RankFailingMidSave(/*background=*/true, StepReads::kDeferred);
}

// Every file of `a`'s checkpoints equals the same file of `b`'s, byte for
// byte, and both hold the same checkpoints.
void ExpectSameCheckpoints(const std::string& a, const std::string& b) {
  const std::vector<int64_t> steps = CheckpointSteps(a);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps, CheckpointSteps(b));
  CheckpointManager manager(a, 0), other(b, 0);
  for (int64_t step : steps) {
    const std::string dir = manager.StepDir(step);
    EXPECT_TRUE(VerifyChecksums(other.StepDir(step)).ok()) << step;
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
    }
    ASSERT_GE(names.size(), 5u);
    for (const std::string& name : names) {
      const absl::StatusOr<std::string> x = ReadFile(dir + "/" + name);
      const absl::StatusOr<std::string> y =
          ReadFile(other.StepDir(step) + "/" + name);
      ASSERT_TRUE(x.ok() && y.ok()) << x.status() << " " << y.status();
      EXPECT_TRUE(*x == *y) << "step_" << step << "/" << name;
    }
  }
}

// Saving in the background writes what a save on the training thread
// writes, byte for byte: the state of the step it was taken at, though
// training went on while it was written (the data position, weights and
// optimizer moments change every step). One rank, then two Gloo ranks (the
// commit waits for both ranks' files through the step all-reduce).
TEST(TrainerTest, BackgroundSaveWritesWhatAForegroundSaveWrites) {
  testing::TempDir foreground, background;
  // Each unit seeds the global generator (dropout) when it is made.
  RegressionUnit a(8);
  ASSERT_TRUE(Trainer(Options(foreground.path(), 14), &a, nullptr).Run().ok());
  RegressionUnit b(8);
  TrainerOptions options = Options(background.path(), 14);
  options.train.background_save = true;
  ASSERT_TRUE(Trainer(options, &b, nullptr).Run().ok());
  // Steps 4, 8, 12 in the background; 14, the last, before the run ends.
  EXPECT_EQ(CheckpointSteps(background.path()),
            (std::vector<int64_t>{4, 8, 12, 14}));
  ExpectSameCheckpoints(foreground.path(), background.path());
  EXPECT_TRUE(torch::equal(a.linear_->weight, b.linear_->weight));
}

// The same on two Gloo ranks, the background run with step reads `reads`.
void ExpectTwoRankBackgroundSavesLikeForegroundOnes(StepReads reads) {
  testing::TempDir foreground, background;
  TrainerOptions options = Options(foreground.path(), 14);
  // Logging every step would read every step at once.
  options.train.log_steps = 7;
  const std::vector<RankOutcome> a = RunTwoRankOutcomes(options, NoDropout);
  options.run_dir = background.path();
  options.train.background_save = true;
  options.train.step_reads = reads;
  const std::vector<RankOutcome> b = RunTwoRankOutcomes(options, NoDropout);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(a[rank].error, "");
    ASSERT_EQ(b[rank].error, "");
    EXPECT_TRUE(torch::equal(a[rank].weight, b[rank].weight));
  }
  ExpectSameCheckpoints(foreground.path(), background.path());
  EXPECT_TRUE(
      PathExists(background.Join("checkpoints/step_8/data.rank1.safetensors")));
}

TEST(TrainerTest, BackgroundSaveOnTwoRanksWritesWhatAForegroundSaveWrites) {
  XLNET_SKIP_WITHOUT_GLOO();
  ExpectTwoRankBackgroundSavesLikeForegroundOnes(StepReads::kEachStep);
}

// train.step_reads deferred reads a step's numbers one step late except on
// the first, log, evaluation, save and last steps, and at once after a
// skipped step; the skips are decided where the numbers are (the optimizer)
// so the run is the same as reading every step at once: weights, metrics
// and every checkpoint byte, skipped steps and the optimizer's count
// included.
TEST(TrainerTest, DeferredStepReadsTrainTheSameRun) {
  testing::TempDir each, deferred;
  std::vector<std::vector<nlohmann::json>> metrics;
  std::vector<torch::Tensor> weights;
  for (const bool defer : {false, true}) {
    RegressionUnit unit(8);
    unit.overflow_at_positions_ = {6 * 8, 11 * 8};  // steps 6 and 11 skipped
    TrainerOptions options = Options(defer ? deferred.path() : each.path(), 14);
    options.train.log_steps = 5;
    options.train.eval_steps = 0;
    if (defer) options.train.step_reads = StepReads::kDeferred;
    Trainer trainer(options, &unit, nullptr);
    const absl::StatusOr<TrainResult> result = trainer.Run();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->skipped_steps, 2);
    if (defer) {
      // At once: 1 (first), 4, 8, 12 (saves), 5, 10 (logs), 14 (last), and
      // 7, queued when the late read found 6 skipped (11's late read came
      // with 12, a save step).
      EXPECT_EQ(trainer.step_host_reads(), 8);
      EXPECT_EQ(trainer.deferred_step_reads(), 6);
    } else {
      EXPECT_EQ(trainer.step_host_reads(), 14);
      EXPECT_EQ(trainer.deferred_step_reads(), 0);
    }
    metrics.push_back(ReadMetrics(options.run_dir));
    weights.push_back(unit.linear_->weight.clone());
  }
  EXPECT_TRUE(torch::equal(weights[0], weights[1]));
  ExpectSameMetricsButSpeed(metrics[0], metrics[1]);
  ExpectSameCheckpoints(each.path(), deferred.path());
}

// Deferred reads with the saves in the background: a step's save progress
// counts only in the phase of the save it was taken in, so the commit waits
// for every rank's files as before and writes the same bytes.
TEST(TrainerTest, DeferredStepReadsWithBackgroundSaves) {
  testing::TempDir foreground, background;
  RegressionUnit a(8);
  TrainerOptions options = Options(foreground.path(), 14);
  options.train.log_steps = 7;
  ASSERT_TRUE(Trainer(options, &a, nullptr).Run().ok());
  RegressionUnit b(8);
  options.run_dir = background.path();
  options.train.background_save = true;
  options.train.step_reads = StepReads::kDeferred;
  Trainer trainer(options, &b, nullptr);
  ASSERT_TRUE(trainer.Run().ok());
  EXPECT_GT(trainer.deferred_step_reads(), 0);
  EXPECT_EQ(CheckpointSteps(background.path()),
            (std::vector<int64_t>{4, 8, 12, 14}));
  ExpectSameCheckpoints(foreground.path(), background.path());
  EXPECT_TRUE(torch::equal(a.linear_->weight, b.linear_->weight));
}

// A stop seen in a late read stops the run at the step already queued,
// which is saved; resuming it ends where an uninterrupted run ends.
TEST(TrainerTest, DeferredStepReadsStopOneStepLaterAndResumeExactly) {
  testing::TempDir full_dir, part_dir;
  RegressionUnit full(8);
  ASSERT_TRUE(Trainer(Options(full_dir.path(), 12), &full, nullptr).Run().ok());
  TrainerOptions options = Options(part_dir.path(), 12);
  options.train.step_reads = StepReads::kDeferred;
  options.train.log_steps = 12;
  options.train.eval_steps = 0;
  {
    RegressionUnit first(8);
    first.stop_at_position_ = 6 * 8;  // asked during step 6
    auto stopped = Trainer(options, &first, nullptr).Run();
    ClearStopRequest();
    ASSERT_TRUE(stopped.ok()) << stopped.status();
    ASSERT_TRUE(stopped->interrupted);
    // Step 6's numbers were read once step 7 was queued.
    ASSERT_EQ(stopped->steps, 7);
  }
  EXPECT_EQ(CheckpointSteps(part_dir.path()), (std::vector<int64_t>{4, 7}));
  RegressionUnit resumed(8);
  options.resume = "latest";
  ASSERT_TRUE(Trainer(options, &resumed, nullptr).Run().ok());
  EXPECT_TRUE(torch::equal(resumed.linear_->weight, full.linear_->weight));
}

TEST(TrainerTest, DeferredStepReadsWithBackgroundSavesOnTwoRanks) {
  XLNET_SKIP_WITHOUT_GLOO();
  ExpectTwoRankBackgroundSavesLikeForegroundOnes(StepReads::kDeferred);
}

// Resuming at 2 ranks, each rank reads to verify only its share: rank 0 the
// shared files and its own, rank 1 its own; neither reads the other's
// per-rank bytes. The same for --resume latest and --resume DIR.
TEST(TrainerTest, ResumeVerifiesOnlyEachRanksShare) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir dir;
  ASSERT_EQ(RunTwoRanks(Options(dir.path(), 8), NoDropout),
            (std::vector<std::string>{"", ""}));
  const std::string step8 = dir.Join("checkpoints/step_8");
  const auto of_rank = [](int rank) {
    return [rank](const std::string& name) { return RankOfFile(name) == rank; };
  };
  const int64_t shared = ListedBytes(
      step8, [](const std::string& name) { return !RankOfFile(name); });
  const int64_t own0 = ListedBytes(step8, of_rank(0));
  const int64_t own1 = ListedBytes(step8, of_rank(1));
  ASSERT_GT(own0, 0);
  ASSERT_GT(own1, 0);
  for (const std::string& resume : {std::string("latest"), step8}) {
    TrainerOptions options = Options(dir.path(), 9);
    options.train.save_steps = 0;
    options.save_checkpoints = false;
    options.resume = resume;
    const std::vector<RankOutcome> outcomes =
        RunTwoRankOutcomes(options, NoDropout);
    EXPECT_EQ(outcomes[0].error, "");
    EXPECT_EQ(outcomes[1].error, "");
    EXPECT_EQ(outcomes[0].verified_bytes, shared + own0) << resume;
    EXPECT_EQ(outcomes[1].verified_bytes, own1) << resume;
    EXPECT_EQ(outcomes[1].first_step, 9);
  }
}

// Rank 1's own file in the newest checkpoint corrupted (same size, other
// bytes: only its CRC, which only rank 1 reads, tells): both ranks skip it
// together, rank 0 reporting it once naming rank 1, and both resume from
// the previous checkpoint.
TEST(TrainerTest, CorruptPerRankFileMakesBothRanksFallBack) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir dir;
  ASSERT_EQ(RunTwoRanks(Options(dir.path(), 8), NoDropout),
            (std::vector<std::string>{"", ""}));
  const std::string corrupt =
      dir.Join("checkpoints/step_8/data.rank1.safetensors");
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x55');
  }
  TrainerOptions options = Options(dir.path(), 10);
  options.resume = "latest";
  ::testing::internal::CaptureStderr();
  const std::vector<RankOutcome> outcomes =
      RunTwoRankOutcomes(options, NoDropout);
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(outcomes[rank].error, "");
    EXPECT_EQ(outcomes[rank].first_step, 5) << "rank " << rank;
  }
  size_t reports = 0;
  for (size_t at = log.find("skipping checkpoint"); at != std::string::npos;
       at = log.find("skipping checkpoint", at + 1)) {
    ++reports;
  }
  EXPECT_EQ(reports, 1u) << log;
  EXPECT_NE(log.find("skipping checkpoint step_8: rank 1: " + corrupt +
                     ": checksum mismatch"),
            std::string::npos)
      << log;
}

// Rank 1 given another --out than rank 0 would write its state where rank
// 0's checkpoints do not know it: both stop at Open, rank 1 naming both
// directories. With the same --out, rank 0's launch file is there for all.
TEST(TrainerTest, RanksMustShareTheRunDirectory) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir tmp;
  const std::string a = tmp.Join("a"), b = tmp.Join("b");
  ASSERT_TRUE(MakeDirs(b).ok());
  std::vector<std::string> errors =
      OnTwoRanks([&](int rank, ProcessGroup* group) {
        return RunDirectory::Open({rank == 0 ? a : b, "pretraining", "", false},
                                  group)
            .status();
      });
  const std::string host = HostName();
  EXPECT_NE(errors[1].find("the run directory (--out) differs between ranks: "
                           "rank 1 has " +
                           b + " on host " + host + " (no .launch-"),
            std::string::npos)
      << errors[1];
  EXPECT_NE(errors[1].find("but rank 0 has " + a + " on host " + host +
                           "; every rank needs the same --out"),
            std::string::npos)
      << errors[1];
  EXPECT_EQ(errors[0],
            "the run directory (--out) differs between ranks: rank(s) 1 "
            "differ from rank 0's " +
                a + " on host " + host + " (their errors say how)");

  const std::string shared = tmp.Join("shared");
  errors = OnTwoRanks([&](int rank, ProcessGroup* group) {
    return RunDirectory::Open({shared, "pretraining", "", false}, group)
        .status();
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  int launch_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(shared)) {
    launch_files +=
        absl::StartsWith(entry.path().filename().string(), ".launch-");
  }
  EXPECT_EQ(launch_files, 1);
}

// A rank reading another corpus (its data fingerprint differs) stops every
// rank before the first step, naming both.
TEST(TrainerTest, RanksMustTrainOnTheSameData) {
  XLNET_SKIP_WITHOUT_GLOO();
  testing::TempDir tmp;
  std::vector<std::unique_ptr<RegressionUnit>> units;
  for (int rank = 0; rank < 2; ++rank) {
    units.push_back(std::make_unique<RegressionUnit>(4));
    units.back()->rank_ = rank;
    units.back()->world_ = 2;
    units.back()->data_ = {rank == 0 ? "f00d" : "beef",
                           absl::StrCat("--data /corpus", rank)};
  }
  const std::vector<std::string> errors =
      OnTwoRanks([&](int rank, ProcessGroup* group) {
        return Trainer(Options(tmp.path(), 4), units[rank].get(), group)
            .Run()
            .status();
      });
  EXPECT_EQ(errors[1],
            "the training data differs between ranks: rank 1 has --data "
            "/corpus1, but rank 0 has --data /corpus0; every rank must read "
            "the same corpus (a path all ranks share, with the same contents)");
  EXPECT_NE(errors[0].find("rank(s) 1 differ from rank 0's --data /corpus0"),
            std::string::npos)
      << errors[0];
  EXPECT_FALSE(PathExists(tmp.Join("checkpoints")));
}

// RUN/run.lock deleted under a running trainer: another process could have
// taken RUN since, so the next checkpoint is not written and the run stops
// with an error naming the lock file.
TEST(TrainerTest, SaveStopsWhenTheRunLockFileIsGone) {
  testing::TempDir tmp;
  auto run_dir = RunDirectory::Open({tmp.path(), "pretraining", "", false},
                                    /*group=*/nullptr);
  ASSERT_TRUE(run_dir.ok()) << run_dir.status();
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 12);
  options.check_run_lock = [&run_dir]() { return (*run_dir)->CheckLock(); };
  const std::string lock_file = tmp.Join("run.lock");
  options.on_step = [&](const StepTiming& timing) {
    if (timing.step == 6) {
      ASSERT_EQ(::unlink(lock_file.c_str()), 0);
    }
  };
  auto result = Trainer(options, &unit, nullptr).Run();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(result.status().message()),
            "lock file " + lock_file +
                " was removed or replaced while this process holds it; "
                "another process may be writing into " +
                tmp.path() + "; not saving " + tmp.Join("checkpoints/step_8"));
  // The save before the deletion went through; none after it.
  EXPECT_EQ(CheckpointManager(tmp.path(), 0).ListSteps(),
            (std::vector<int64_t>{4}));
}

// The ETA comes from the recent steps: one stall weighs on it only while
// it is in the window.
TEST(TrainerTest, EtaWindowForgetsAStall) {
  StepTimeWindow window(5);
  EXPECT_EQ(window.Eta(10), 0);
  for (int i = 0; i < 10; ++i) window.Add(1.0);
  EXPECT_DOUBLE_EQ(window.Eta(10), 10.0);
  window.Add(100.0);
  EXPECT_DOUBLE_EQ(window.Eta(10), (4 * 1.0 + 100.0) / 5 * 10);
  for (int i = 0; i < 5; ++i) window.Add(1.0);
  EXPECT_DOUBLE_EQ(window.Eta(10), 10.0);
  EXPECT_EQ(window.Eta(0), 0);
}

// Training lines carry "learning_rate" (HF's and TensorBoard users' name)
// beside "lr"; the first step prints a progress line before log_steps
// (without a metrics line), and the run ends with one summary line.
TEST(TrainerTest, FirstStepProgressAndEndOfRunSummary) {
  testing::TempDir tmp;
  RegressionUnit unit(8);
  TrainerOptions options = Options(tmp.path(), 8);
  options.train.log_steps = 5;
  options.train.eval_steps = 0;
  options.progress = true;
  // ctest runs at XLNET_LOG_LEVEL=warning; progress lines are info.
  const LogLevel level = MinLogLevel();
  SetMinLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  auto result = Trainer(options, &unit, nullptr).Run();
  const std::string log = ::testing::internal::GetCapturedStderr();
  SetMinLogLevel(level);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> logged;
  for (const auto& m : ReadMetrics(tmp.path())) {
    logged.push_back(m["step"].get<int64_t>());
    ASSERT_TRUE(m.contains("learning_rate")) << m.dump();
    EXPECT_EQ(m["learning_rate"], m["lr"]);
  }
  EXPECT_EQ(logged, (std::vector<int64_t>{5, 8}));
  for (const char* line :
       {"step 1/8 | loss ", "step 5/8 | loss ", "step 8/8 | loss "}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
  EXPECT_EQ(log.find("step 2/8"), std::string::npos) << log;
  const size_t summary = log.find("run finished at step 8: 8 steps this run, ");
  ASSERT_NE(summary, std::string::npos) << log;
  EXPECT_EQ(log.find("run finished", summary + 1), std::string::npos) << log;
  const std::string rest = log.substr(summary);
  for (const std::string& part :
       {std::string("tokens in "), std::string(" tok/s), last loss "),
        std::string(", 0 skipped steps; checkpoint ") +
            tmp.Join("checkpoints/step_8")}) {
    EXPECT_NE(rest.find(part), std::string::npos) << part << "\n" << rest;
  }
}

}  // namespace
}  // namespace xlnet
