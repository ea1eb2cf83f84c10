#include "model_io/checkpoint_manager.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/test_util.h"

namespace xlnet {
namespace {

XLNetConfig TinyModel() {
  XLNetConfig c;
  c.vocab_size = 10;
  c.d_model = 4;
  c.n_head = 1;
  c.d_head = 4;
  c.n_layer = 1;
  return c;
}

CheckpointContents Contents(float value) {
  CheckpointContents c;
  c.model = {
      {"transformer.word_embedding.weight", torch::full({10, 4}, value)}};
  c.tensor_files["optimizer.safetensors"] = {
      {"step", torch::tensor(int64_t{3})}};
  c.text_files["config.yaml"] = "train:\n  lr: 0.1\n";
  return c;
}

TEST(CheckpointTest, SaveVerifyAndKeepNewest) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/2);
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{20, 30}));
  auto latest = manager.LatestValid();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(*latest, manager.StepDir(30));
  EXPECT_TRUE(VerifyChecksums(*latest).ok());
  auto dir = ReadModelDir(*latest);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(
      dir->Tensor("transformer.word_embedding.weight")->max().item<float>(),
      30.0f);
  EXPECT_TRUE(PathExists(*latest + "/optimizer.safetensors"));
  EXPECT_TRUE(PathExists(*latest + "/config.yaml"));
}

TEST(CheckpointTest, CorruptNewestFallsBackToPrevious) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(1, TinyModel(), Contents(1)).ok());
  ASSERT_TRUE(manager.Save(2, TinyModel(), Contents(2)).ok());
  // Flip one byte in the newest weights.
  const std::string weights = manager.StepDir(2) + "/model.safetensors";
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const absl::Status status = VerifyChecksums(manager.StepDir(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("model.safetensors: checksum mismatch"),
            std::string::npos);
  EXPECT_EQ(manager.LatestValid(), manager.StepDir(1));
}

TEST(CheckpointTest, TruncatedOrUnmanifestedCheckpointIsNeverLoaded) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(5, TinyModel(), Contents(5)).ok());
  ASSERT_TRUE(manager.Save(6, TinyModel(), Contents(6)).ok());
  ASSERT_TRUE(manager.Save(7, TinyModel(), Contents(7)).ok());
  // step_7 truncated, step_6 lost its manifest (e.g. copied by hand).
  ::truncate((manager.StepDir(7) + "/optimizer.safetensors").c_str(), 4);
  ASSERT_TRUE(RemoveAll(manager.StepDir(6) + "/checksums.json").ok());
  EXPECT_EQ(manager.LatestValid(), manager.StepDir(5));
  // A half-written checkpoint is a hidden temporary, not a step_ directory.
  ASSERT_TRUE(MakeDirs(manager.checkpoints_dir() + "/.step_8.tmp-1-0").ok());
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{5, 6, 7}));
}

TEST(CheckpointTest, NoCheckpoints) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 3);
  EXPECT_TRUE(manager.ListSteps().empty());
  EXPECT_FALSE(manager.LatestValid().has_value());
}

}  // namespace
}  // namespace xlnet
