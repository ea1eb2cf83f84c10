#include "train/resume_settings.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "config/config.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

// A checkpoint directory holding only the config.yaml of `config`.
std::string CheckpointWith(const testing::TempDir& tmp, const Config& config) {
  const std::string dir = tmp.Join("step_4");
  EXPECT_TRUE(MakeDirs(dir).ok());
  EXPECT_TRUE(WriteConfigYaml(config, dir + "/config.yaml").ok());
  return dir;
}

// The defaults with train.lr = `lr`.
Config WithLr(double lr) {
  Config config;
  config.train.lr = lr;
  return config;
}

TEST(ResumeSettingsTest, SameSettingsHaveNoChanges) {
  testing::TempDir tmp;
  const Config config = WithLr(3e-4);
  const std::string dir = CheckpointWith(tmp, config);
  auto resumed = CompareResumedSettings(dir, ConfigFileText(config),
                                        /*allow_changed_settings=*/false,
                                        /*report=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(resumed->changes.empty());
  EXPECT_FALSE(resumed->forced);
}

TEST(ResumeSettingsTest, ScheduleChangeIsAllowedAndListed) {
  testing::TempDir tmp;
  const Config before = WithLr(3e-4);
  Config after = WithLr(1e-3);
  after.train.log_steps = 1;
  auto resumed = CompareResumedSettings(CheckpointWith(tmp, before),
                                        ConfigFileText(after), false, true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->changes.size(), 2u);
  EXPECT_EQ(DescribeChange(resumed->changes[0]), "train.lr 0.0003 -> 0.001");
  EXPECT_EQ(DescribeChange(resumed->changes[1]), "train.log_steps 10 -> 1");
  EXPECT_FALSE(resumed->forced);
}

TEST(ResumeSettingsTest, ExactnessBreakingKeysAreRefusedUnlessForced) {
  testing::TempDir tmp;
  Config before;
  Config after = before;
  after.train.seed = 7;
  after.model.d_model = 512;
  after.model.n_head = 8;
  after.train.lr = 1e-3;
  const std::string dir = CheckpointWith(tmp, before);
  auto refused = CompareResumedSettings(dir, ConfigFileText(after), false,
                                        /*report=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  for (const char* part :
       {"model.d_model 1024 -> 512", "model.n_head 16 -> 8",
        "train.seed 1234 -> 7", "--allow_changed_settings", dir.c_str()}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << ": " << message;
  }
  // An allowed change is not among the refused ones.
  EXPECT_EQ(message.find("train.lr"), std::string::npos) << message;

  auto forced = CompareResumedSettings(dir, ConfigFileText(after), true, false);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_TRUE(forced->forced);
  EXPECT_EQ(forced->changes.size(), 4u);
}

TEST(ResumeSettingsTest, UnreadableCheckpointConfigIsAnErrorUnlessForced) {
  testing::TempDir tmp;
  const std::string dir = tmp.Join("step_4");
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/config.yaml", "train:\n  lrr: 1\n").ok());
  auto refused =
      CompareResumedSettings(dir, ConfigFileText(Config()), false, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("train.lrr"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--allow_changed_settings"),
            std::string::npos);
  auto forced =
      CompareResumedSettings(dir, ConfigFileText(Config()), true, false);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_TRUE(forced->changes.empty());
}

TEST(ResumeSettingsTest, WithoutChangesRunConfigIsTheConfigAndNoHistory) {
  testing::TempDir run;
  const std::string yaml = ConfigFileText(Config());
  ASSERT_TRUE(WriteRunSettings(run.path(), 8, run.Join("checkpoints/step_8"),
                               yaml, ResumedSettings())
                  .ok());
  EXPECT_EQ(*ReadFile(run.Join("config.yaml")), yaml);
  EXPECT_FALSE(PathExists(run.Join("config_changes.jsonl")));
}

// Each resume's changes are recorded at its step; a resume from an earlier
// checkpoint drops the records of the steps it replaces, and RUN/config.yaml
// says from which step its settings hold.
TEST(ResumeSettingsTest, HistoryRecordsChangesAndDropsReplacedSteps) {
  testing::TempDir run;
  const Config a = WithLr(3e-4);
  const Config b = WithLr(1e-3);
  Config c = b;
  c.train.seed = 9;
  ResumedSettings at4;
  at4.changes = ChangedSettings(a, b);
  ASSERT_TRUE(WriteRunSettings(run.path(), 4, "RUN/checkpoints/step_4",
                               ConfigFileText(b), at4)
                  .ok());
  ResumedSettings at8;
  at8.changes = ChangedSettings(b, c);
  at8.forced = true;
  ASSERT_TRUE(WriteRunSettings(run.path(), 8, "RUN/checkpoints/step_8",
                               ConfigFileText(c), at8)
                  .ok());
  std::vector<nlohmann::json> lines =
      testing::ReadJsonLines(run.Join("config_changes.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            (nlohmann::json{{"step", 4},
                            {"key", "train.lr"},
                            {"old", "0.0003"},
                            {"new", "0.001"},
                            {"kind", "training"},
                            {"resumed_from", "RUN/checkpoints/step_4"},
                            {"forced", false}}));
  EXPECT_EQ(lines[1]["step"], 8);
  EXPECT_EQ(lines[1]["key"], "train.seed");
  EXPECT_EQ(lines[1]["kind"], "breaks_exactness");
  EXPECT_EQ(lines[1]["forced"], true);
  std::string text = *ReadFile(run.Join("config.yaml"));
  EXPECT_NE(text.find("# the settings of the steps from 8 on"),
            std::string::npos)
      << text;
  // Still parses as the latest settings, the build line first.
  EXPECT_EQ(text.rfind("# written by xlnet.cpp", 0), 0u) << text;
  auto parsed = ParseConfig(text, "config.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->train.seed, 9);

  // Resumed from step 4 again with b's settings: step 8's record goes, and
  // step 4's is replaced by this resume's.
  ASSERT_TRUE(WriteRunSettings(run.path(), 4, "RUN/checkpoints/step_4",
                               ConfigFileText(b), at4)
                  .ok());
  lines = testing::ReadJsonLines(run.Join("config_changes.jsonl"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["step"], 4);
  text = *ReadFile(run.Join("config.yaml"));
  EXPECT_NE(text.find("# the settings of the steps from 4 on"),
            std::string::npos)
      << text;

  // A fresh start keeps no record.
  ASSERT_TRUE(
      WriteRunSettings(run.path(), 0, "", ConfigFileText(a), ResumedSettings())
          .ok());
  EXPECT_TRUE(testing::ReadJsonLines(run.Join("config_changes.jsonl")).empty());
  EXPECT_EQ(*ReadFile(run.Join("config.yaml")), ConfigFileText(a));
}

}  // namespace
}  // namespace xlnet
