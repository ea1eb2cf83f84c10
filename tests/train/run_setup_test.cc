// What every training command sets up per rank (train/run_setup.h).
#include "train/run_setup.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace xlnet {
namespace {

// On N GPUs, SetUpRank turns train.device "cuda" into cuda:LOCAL_RANK in
// each rank's config. The YAML the trainer saves and compares across ranks
// must not carry that, or every multi-GPU run would fail the config check.
TEST(RunSetupTest, RunConfigYamlIsTheSameOnEveryRank) {
  RankSetup setup;
  setup.configured_device = "cuda";
  Config rank0, rank1;
  rank0.train.device = "cuda:0";
  rank1.train.device = "cuda:1";
  const std::string yaml0 = RunConfigYaml(rank0, setup);
  EXPECT_EQ(yaml0, RunConfigYaml(rank1, setup));
  EXPECT_NE(yaml0.find("device: \"cuda\""), std::string::npos) << yaml0;
  EXPECT_EQ(yaml0.find("cuda:"), std::string::npos) << yaml0;
  // Anything else that differs still shows.
  rank1.train.lr = rank0.train.lr * 2;
  EXPECT_NE(yaml0, RunConfigYaml(rank1, setup));
}

// The rank-to-device mapping (no GPU needed: devices are only named).
TEST(RunSetupTest, RanksMapToDevices) {
  const torch::Device cuda(torch::kCUDA), cpu(torch::kCPU);
  TrainConfig train;
  auto d = ResolveRankDevice(train, cuda, 3, 4);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->device.str(), "cuda:3");
  EXPECT_EQ(d->backend, "nccl");
  d = ResolveRankDevice(train, cpu, 3, 0);
  EXPECT_EQ(d->device.str(), "cpu");
  EXPECT_EQ(d->backend, "gloo");
  // An explicit index is kept (each rank sees only its own GPU).
  d = ResolveRankDevice(train, torch::Device("cuda:0"), 5, 1);
  EXPECT_EQ(d->device.str(), "cuda:0");

  // Ranks sharing GPUs: two per device over Gloo.
  train.ranks_per_device = 2;
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    d = ResolveRankDevice(train, cuda, local_rank, 2);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->device.index(), local_rank / 2);
    EXPECT_EQ(d->backend, "gloo");
  }
  d = ResolveRankDevice(train, cuda, 4, 2);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(
                "LOCAL_RANK 4 maps to cuda:2 (train.ranks_per_device=2) but 2 "
                "CUDA device(s) are visible"),
            std::string::npos)
      << d.status();

  train = TrainConfig();
  d = ResolveRankDevice(train, cuda, 1, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("train.device=cuda:0"),
            std::string::npos);
}

TEST(RunSetupTest, OneCpuProcessKeepsItsConfig) {
  ASSERT_EQ(std::getenv("WORLD_SIZE"), nullptr) << "run outside torchrun";
  Config config;
  config.train.device = "cpu";
  config.train.threads = torch::get_num_threads();  // leave the pool as is
  const std::string before = ConfigFileText(config);
  auto setup = SetUpRank(&config);
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->configured_device, "cpu");
  EXPECT_TRUE(setup->device.is_cpu());
  EXPECT_EQ(setup->group, nullptr);
  EXPECT_EQ(setup->env.world_size, 1);
  EXPECT_EQ(RunConfigYaml(config, *setup), before);
}

// --nproc_per_node is bounded, and the batch split checked, before anything
// is forked: 100000 ranks once forked until killed, and a batch that does
// not split over the ranks failed only inside each started rank.
TEST(RunSetupTest, LaunchRefusesBeforeForking) {
  ASSERT_EQ(std::getenv("WORLD_SIZE"), nullptr) << "run outside torchrun";
  LaunchOptions options;
  options.nproc_per_node = 100000;
  int64_t checked = 0;
  const WorldSizeCheck check = [&](int64_t world_size) {
    checked = world_size;
    return absl::InvalidArgumentError("batch does not split");
  };
  auto too_many = LaunchLocalRanksIfAsked(options, check);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("--nproc_per_node 100000 is "
                                             "more than the"),
            std::string::npos)
      << too_many.status();
  EXPECT_EQ(checked, 0);
  options.nproc_per_node = 2;
  auto refused = LaunchLocalRanksIfAsked(options, check);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "batch does not split");
  EXPECT_EQ(checked, 2);
  options.nproc_per_node = 1;
  auto single = LaunchLocalRanksIfAsked(options, check);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_FALSE(*single);
}

}  // namespace

// Binding: a CPU device is left alone; a CUDA device becomes the current one
// (checked where a GPU is visible) or, in a LibTorch without CUDA, gives an
// error naming the device instead of aborting.
TEST(RunSetupTest, BindsTheRanksCudaDevice) {
  EXPECT_TRUE(BindCudaDevice(torch::Device(torch::kCPU)).ok());
  if (torch::cuda::device_count() == 0) {
    const absl::Status status = BindCudaDevice(torch::Device("cuda:1"));
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("making cuda:1 the current CUDA device"),
              std::string::npos)
        << status;
    return;
  }
  const int last = static_cast<int>(torch::cuda::device_count()) - 1;
  const torch::Device device(torch::kCUDA, static_cast<int16_t>(last));
  ASSERT_TRUE(BindCudaDevice(device).ok());
  EXPECT_EQ(
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index(),
      last);
}

}  // namespace xlnet
