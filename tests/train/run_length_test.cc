// train.num_epochs turned into train.max_steps (train/run_length.h): the
// rounding, data without an epoch, and a max_steps set beside it.
#include "train/run_length.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>

#include "tests/test_util.h"

namespace xlnet {
namespace {

// A unit that only reports its steps per epoch.
class EpochUnit : public TrainUnit {
 public:
  explicit EpochUnit(std::optional<double> per_epoch) : per_epoch_(per_epoch) {}
  NamedTensors Parameters() override { return {}; }
  NamedTensors StateDict() override { return {}; }
  std::string ModelConfigJson() override { return "{}"; }
  void SetTraining(bool) override {}
  StepOutput TrainStep() override { return {}; }
  std::optional<double> StepsPerEpoch() override { return per_epoch_; }

 private:
  std::optional<double> per_epoch_;
};

// max_steps after ApplyNumEpochs with `num_epochs`, no config file and
// `overrides`; -1 on error (its message in *error).
int64_t Steps(double num_epochs, std::optional<double> per_epoch,
              const std::vector<std::string>& overrides = {},
              std::string* error = nullptr, int64_t max_steps = 100000) {
  EpochUnit unit(per_epoch);
  TrainConfig train;
  train.num_epochs = num_epochs;
  train.max_steps = max_steps;
  const absl::Status status =
      ApplyNumEpochs(unit, "", overrides, /*rank=*/1, &train);
  if (!status.ok()) {
    if (error != nullptr) *error = std::string(status.message());
    return -1;
  }
  return train.max_steps;
}

TEST(RunLengthTest, EpochsBecomeWholeSteps) {
  EXPECT_EQ(Steps(0, 10.0), 100000);  // off: max_steps stays
  EXPECT_EQ(Steps(2, 10.0), 20);
  EXPECT_EQ(Steps(2.5, 10.0), 25);
  EXPECT_EQ(Steps(1.01, 10.0), 11);  // a started step counts
  EXPECT_EQ(Steps(1e-6, 10.0), 1);
  // 600 rows at 16 a step: 37.5 steps per epoch.
  EXPECT_EQ(Steps(3, 600.0 / 16), 113);
  // 3 x 33.33...: 100 steps, not 101 from the product's rounding.
  EXPECT_EQ(Steps(3, 100.0 / 3), 100);
}

TEST(RunLengthTest, DataWithoutAnEpochIsAnError) {
  std::string error;
  EXPECT_EQ(Steps(2, std::nullopt, {}, &error), -1);
  EXPECT_NE(error.find("train.num_epochs 2: this run's training data has no "
                       "single epoch"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("set train.max_steps instead"), std::string::npos);
}

TEST(RunLengthTest, MaxStepsSetBesideNumEpochsMustAgree) {
  std::string error;
  // Both with --set: the same number is fine, another is an error.
  EXPECT_EQ(
      Steps(2, 10.0, {"train.num_epochs=2", "train.max_steps=20"}, &error, 20),
      20);
  EXPECT_EQ(
      Steps(2, 10.0, {"train.num_epochs=2", "train.max_steps=30"}, &error, 30),
      -1);
  EXPECT_EQ(error,
            "train.max_steps 30 (--set train.max_steps=30) and "
            "train.num_epochs 2 (--set train.num_epochs=2: 20 steps of this "
            "data, 10 per epoch) disagree: set one of them");
}

TEST(RunLengthTest, NumEpochsWithSetReplacesTheFilesMaxSteps) {
  testing::TempDir tmp;
  const std::string file = tmp.Join("cfg.yaml");
  std::ofstream(file) << "train:\n  max_steps: 200\n";
  EpochUnit unit(37.5);
  TrainConfig train;
  train.max_steps = 200;
  train.num_epochs = 2;
  ASSERT_TRUE(
      ApplyNumEpochs(unit, file, {"train.num_epochs=2"}, 1, &train).ok());
  EXPECT_EQ(train.max_steps, 75);
  // Both in the file, disagreeing: an error naming both places.
  std::ofstream(file) << "train:\n  max_steps: 200\n  num_epochs: 2\n";
  train.max_steps = 200;
  const absl::Status status = ApplyNumEpochs(unit, file, {}, 1, &train);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("train.max_steps 200 (" + file + ":2)"),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("(" + file + ":3: 75 steps"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace xlnet
