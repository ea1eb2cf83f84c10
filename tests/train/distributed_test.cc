#include "train/distributed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using std::chrono::milliseconds;

// Runs fn(rank, group) on `world` threads, each with its own Gloo group over
// one in-process store, its tensors on `device`.
void RunRanks(int world, milliseconds timeout,
              const std::function<void(int, ProcessGroup&)>& fn,
              const torch::Device& device = torch::kCPU) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank]() {
      auto group =
          ProcessGroup::FromStore(store, rank, world, device, "gloo", timeout);
      if (!group.ok()) {
        errors[rank] = std::string(group.status().message());
        return;
      }
      fn(rank, **group);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(errors[rank], "") << rank;
}

TEST(ProcessGroupTest, CollectivesAndConfigCheck) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunRanks(2, milliseconds(20000), [](int rank, ProcessGroup& group) {
    EXPECT_EQ(group.backend(), "gloo");
    std::vector<torch::Tensor> t = {torch::full({3}, rank + 1.0f)};
    group.AllReduceSum(t);
    EXPECT_TRUE(torch::equal(t[0], torch::full({3}, 3.0f)));
    std::vector<torch::Tensor> b = {torch::full({2}, rank == 1 ? 7.0f : 0.0f)};
    group.Broadcast(b, /*root=*/1);
    EXPECT_TRUE(torch::equal(b[0], torch::full({2}, 7.0f)));
    EXPECT_TRUE(group.CheckSameOnAllRanks("config", "same").ok());
    const absl::Status differs =
        group.CheckSameOnAllRanks("config", rank == 0 ? "a: 1" : "a: 2");
    EXPECT_EQ(differs.message(),
              "rank 1 runs with a different config than rank 0");
  });
}

// GLOO_SOCKET_IFNAME's interfaces: two ranks whose Gloo devices are bound
// to loopback by name reduce over it; an interface this host lacks is an
// error naming the variable and the interface.
TEST(ProcessGroupTest, GlooOnNamedInterfaces) {
  XLNET_SKIP_WITHOUT_GLOO();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(2);
  std::vector<float> sums(2, 0);
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank]() {
      auto group = ProcessGroup::FromStore(store, rank, 2, torch::kCPU, "gloo",
                                           milliseconds(20000), {"lo"});
      if (!group.ok()) {
        errors[rank] = std::string(group.status().message());
        return;
      }
      std::vector<torch::Tensor> t = {torch::full({2}, rank + 1.0f)};
      (*group)->AllReduceSum(t);
      sums[rank] = t[0][1].item<float>();
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(errors[rank], "") << rank;
    EXPECT_EQ(sums[rank], 3.0f) << rank;
  }

  auto missing = ProcessGroup::FromStore(c10::make_intrusive<c10d::HashStore>(),
                                         0, 1, torch::kCPU, "gloo",
                                         milliseconds(2000), {"xlnet-none0"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(
                "GLOO_SOCKET_IFNAME: interface 'xlnet-none0'"),
            std::string::npos)
      << missing.status();
}

// Rank 0's value and description reach every rank (texts of any bytes,
// cut to kMaxAgreedBytes); a rank that differs names both descriptions and
// the fix, and the others name it.
TEST(ProcessGroupTest, RanksAgreeWithRankZeroOrStopTogether) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunRanks(3, milliseconds(20000), [](int rank, ProcessGroup& group) {
    const std::string head("caf\xc3\xa9\0\x01", 7);
    std::string text = rank == 0 ? head + std::string(5000, 'x') : "";
    group.BroadcastText(&text, 0);
    EXPECT_EQ(text.size(), ProcessGroup::kMaxAgreedBytes);
    EXPECT_EQ(text.substr(0, 7), head);

    EXPECT_TRUE(group
                    .AgreeWithRank0("the data", "f00d",
                                    absl::StrCat("dir", rank), "fix it")
                    .ok());
    const absl::Status differs =
        group.AgreeWithRank0("the data", rank == 2 ? "beef" : "f00d",
                             absl::StrCat("--data /d", rank), "use one corpus");
    if (rank == 2) {
      EXPECT_EQ(differs.message(),
                "the data differs between ranks: rank 2 has --data /d2, but "
                "rank 0 has --data /d0; use one corpus");
    } else {
      EXPECT_EQ(differs.message(),
                "the data differs between ranks: rank(s) 2 differ from rank "
                "0's --data /d0 (their errors say how)");
    }
  });
}

// A two-layer net; each rank sees half of the batch. Nets and batches are made
// on the test's thread before the rank threads start: both seed the global
// generator, and two threads seeding and drawing from it at once got different
// weights under load (the flake seen in CI).
struct Net {
  torch::nn::Linear l1{nullptr}, l2{nullptr};
  NamedTensors params;
  Net() {
    torch::manual_seed(11);
    l1 = torch::nn::Linear(5, 7);
    l2 = torch::nn::Linear(7, 3);
    params = {{"l1.weight", l1->weight},
              {"l1.bias", l1->bias},
              {"l2.weight", l2->weight},
              {"l2.bias", l2->bias}};
  }
  torch::Tensor Loss(const torch::Tensor& x) {
    return l2(torch::tanh(l1(x))).pow(2).mean();
  }
};

torch::Tensor Batch() {
  torch::manual_seed(5);
  return torch::randn({8, 5});
}

// Runs fn(rank, group, net, reference, batch) on 2 Gloo ranks, each with its
// own Net; `reference` holds the gradients of the full `batch` on one rank.
void RunTwoRanksWithReference(
    const std::function<void(int, ProcessGroup&, Net&, const Net&,
                             const torch::Tensor&)>& fn) {
  Net reference;
  const torch::Tensor batch = Batch();
  reference.Loss(batch).backward();
  std::vector<Net> nets(2);
  RunRanks(2, milliseconds(20000), [&](int rank, ProcessGroup& group) {
    fn(rank, group, nets[rank], reference, batch);
  });
}

TEST(GradientReducerTest, TwoRanksEqualFullBatch) {
  XLNET_SKIP_WITHOUT_GLOO();
  Net reference;
  const torch::Tensor batch = Batch();
  reference.Loss(batch).backward();
  for (int64_t bucket_bytes : {int64_t{1} << 20, int64_t{64}}) {
    std::vector<Net> nets(2);
    RunRanks(2, milliseconds(20000), [&](int rank, ProcessGroup& group) {
      Net& net = nets[rank];
      GradReduceOptions options;
      options.bucket_bytes = options.first_bucket_bytes = bucket_bytes;
      GradientReducer reducer(&group, net.params, options);
      if (bucket_bytes == 64) {
        EXPECT_GT(reducer.num_buckets(), 1);
      }
      reducer.Prepare(true);
      net.Loss(batch.narrow(0, 4 * rank, 4)).backward();
      reducer.Finish();
      for (size_t i = 0; i < net.params.size(); ++i) {
        EXPECT_TRUE(torch::allclose(net.params[i].second.grad(),
                                    reference.params[i].second.grad(), 1e-6,
                                    1e-7))
            << net.params[i].first;
      }
    });
  }
}

// The .grads are slices of the buckets (reduced in place, never copied),
// and stay so through the optimizer's ZeroGrad (detach_ + zero_); a .grad
// something replaced is copied back into its bucket at the next Prepare.
// Two steps, the second after a replaced .grad, both equal the full batch.
TEST(GradientReducerTest, GradsAreBucketSlicesThroughZeroGrad) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunTwoRanksWithReference([&](int rank, ProcessGroup& group, Net& net,
                               const Net& reference,
                               const torch::Tensor& batch) {
    GradientReducer reducer(&group, net.params);
    for (size_t k = 0; k < net.params.size(); ++k) {
      EXPECT_TRUE(reducer.GradIsBucketView(k)) << net.params[k].first;
    }
    for (int step = 0; step < 2; ++step) {
      for (auto& [name, p] : net.params) {
        p.mutable_grad().detach_();
        p.mutable_grad().zero_();
      }
      // A replaced .grad (zero, as ZeroGrad leaves them) before step 2.
      if (step == 1) net.params[0].second.mutable_grad() = torch::zeros({7, 5});
      EXPECT_EQ(reducer.GradIsBucketView(0), step == 0);
      reducer.Prepare(true);
      net.Loss(batch.narrow(0, 4 * rank, 4)).backward();
      reducer.Finish();
      for (size_t k = 0; k < net.params.size(); ++k) {
        EXPECT_TRUE(reducer.GradIsBucketView(k)) << net.params[k].first;
        EXPECT_TRUE(torch::allclose(net.params[k].second.grad(),
                                    reference.params[k].second.grad(), 1e-6,
                                    1e-7))
            << "step " << step << " " << net.params[k].first;
      }
    }
  });
}

// train.first_grad_bucket_mb: the first bucket (the gradients backward makes
// first: l2's, registered last) is cut at its own size, the others at
// grad_bucket_mb.
TEST(GradientReducerTest, FirstBucketIsSmall) {
  XLNET_SKIP_WITHOUT_GLOO();
  std::vector<Net> nets(2);
  RunRanks(2, milliseconds(20000), [&](int rank, ProcessGroup& group) {
    GradReduceOptions options;
    options.first_bucket_bytes = 16 * 4;  // 16 floats: l2.bias (3) only
    options.bucket_bytes = 1 << 20;
    GradientReducer reducer(&group, nets[rank].params, options);
    ASSERT_EQ(reducer.num_buckets(), 2);
    EXPECT_EQ(reducer.bucket_numel(0), 3);
    EXPECT_EQ(reducer.bucket_numel(1), 21 + 7 + 35);
  });
}

// A reduce dtype other than the parameters' (train.grad_reduce_dtype bf16,
// which NCCL reduces): each bucket travels cast and comes back as the
// parameters' dtype, so the mean is within the narrow type's rounding of
// the fp32 one and the .grads stay fp32 slices of the buckets. Run here in
// fp16, which Gloo reduces; Gloo in LibTorch 1.13 has no bf16, which
// CheckAllReduceDtype reports naming the setting.
TEST(GradientReducerTest, NarrowReduceDtypeIsWithinItsRounding) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunTwoRanksWithReference([&](int rank, ProcessGroup& group, Net& net,
                               const Net& reference,
                               const torch::Tensor& batch) {
    const absl::Status bf16 =
        group.CheckAllReduceDtype(torch::kBFloat16, "train.grad_reduce_dtype");
    if (!bf16.ok()) {
      EXPECT_NE(bf16.message().find("train.grad_reduce_dtype: the gloo "
                                    "backend of this LibTorch cannot "
                                    "all-reduce BFloat16"),
                std::string::npos)
          << bf16;
    }
    ASSERT_TRUE(group.CheckAllReduceDtype(torch::kHalf, "x").ok());
    GradReduceOptions options;
    options.reduce_dtype = torch::kHalf;
    GradientReducer reducer(&group, net.params, options);
    reducer.Prepare(true);
    net.Loss(batch.narrow(0, 4 * rank, 4)).backward();
    reducer.Finish();
    for (size_t k = 0; k < net.params.size(); ++k) {
      const torch::Tensor& got = net.params[k].second.grad();
      const torch::Tensor& want = reference.params[k].second.grad();
      EXPECT_EQ(got.scalar_type(), torch::kFloat32);
      EXPECT_TRUE(reducer.GradIsBucketView(k));
      // Each rank's summand and the sum rounded to fp16 (11 significant
      // bits): 3 roundings of at most 2^-11 relative each.
      const double tolerance =
          4 * std::pow(2.0, -11) * (want.abs().max().item<double>() + 1e-12);
      EXPECT_LE((got - want).abs().max().item<double>(), tolerance)
          << net.params[k].first;
      EXPECT_FALSE(torch::equal(got, want)) << net.params[k].first;
    }
  });
}

// Several ranks sharing one GPU (train.ranks_per_device above 1): Gloo reduces
// CUDA tensors through the host, the reducer's buckets live on the GPU, and the
// trainer's host tensors are staged through it. Needs a CUDA LibTorch with gloo
// headers and a GPU.
TEST(GradientReducerTest, TwoGlooRanksShareOneGpu) {
  XLNET_SKIP_WITHOUT_GLOO();
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  Net reference;
  const torch::Tensor batch = Batch();
  reference.Loss(batch).backward();
  std::vector<Net> nets(2);
  RunRanks(
      2, milliseconds(60000),
      [&](int rank, ProcessGroup& group) {
        EXPECT_EQ(group.backend(), "gloo");
        EXPECT_EQ(group.device(), cuda);
        Net& net = nets[rank];
        net.l1->to(cuda);
        net.l2->to(cuda);
        NamedTensors params = {{"l1.weight", net.l1->weight},
                               {"l1.bias", net.l1->bias},
                               {"l2.weight", net.l2->weight},
                               {"l2.bias", net.l2->bias}};
        GradientReducer reducer(&group, params);
        reducer.Prepare(true);
        net.Loss(batch.narrow(0, 4 * rank, 4).to(cuda)).backward();
        reducer.Finish();
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_TRUE(torch::allclose(params[i].second.grad().cpu(),
                                      reference.params[i].second.grad(), 1e-5,
                                      1e-6))
              << params[i].first;
        }
        std::vector<torch::Tensor> host = {torch::full({3}, rank + 1.0)};
        group.AllReduceSum(host);
        EXPECT_TRUE(torch::equal(host[0], torch::full({3}, 3.0)));
        EXPECT_TRUE(group.CheckSameOnAllRanks("config", "same").ok());
      },
      cuda);
}

TEST(GradientReducerTest, AccumulationSyncsOnlyOnLastMicroStep) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunTwoRanksWithReference([&](int rank, ProcessGroup& group, Net& net,
                               const Net& reference,
                               const torch::Tensor& batch) {
    GradientReducer reducer(&group, net.params);
    const torch::Tensor mine = batch.narrow(0, 4 * rank, 4);
    for (int micro = 0; micro < 2; ++micro) {
      reducer.Prepare(/*sync=*/micro == 1);
      (net.Loss(mine.narrow(0, 2 * micro, 2)) / 2).backward();
      reducer.Finish();
    }
    for (size_t i = 0; i < net.params.size(); ++i) {
      EXPECT_TRUE(torch::allclose(net.params[i].second.grad(),
                                  reference.params[i].second.grad(), 1e-6,
                                  1e-7))
          << net.params[i].first;
    }
  });
}

// torchrun's static rendezvous: its agent serves the TCPStore on
// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True). Ranks that tried to serve
// it too died with "Address already in use"; they now connect as clients
// under /worker/attempt_<restart>, and a restarted attempt joins the same
// store afresh.
TEST(ProcessGroupTest, RanksJoinTorchrunsAgentStore) {
  XLNET_SKIP_WITHOUT_GLOO();
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  auto agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  DistEnv env;
  env.world_size = 2;
  env.master_port = agent->getPort();
  env.use_agent_store = true;
  for (int attempt : {0, 1}) {
    env.restart_count = attempt;
    std::vector<std::thread> threads;
    std::vector<double> sums(2, 0);
    std::vector<std::string> errors(2);
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank, env]() mutable {
        env.rank = rank;
        env.local_rank = rank;
        auto group =
            ProcessGroup::Init(env, torch::kCPU, "gloo", milliseconds(20000));
        if (!group.ok()) {
          errors[rank] = std::string(group.status().message());
          return;
        }
        std::vector<torch::Tensor> t = {torch::full({1}, rank + 1.0)};
        (*group)->AllReduceSum(t);
        sums[rank] = t[0].item<double>();
      });
    }
    for (auto& t : threads) t.join();
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(errors[rank], "") << "attempt " << attempt << " rank " << rank;
      EXPECT_EQ(sums[rank], 3.0) << "attempt " << attempt << " rank " << rank;
    }
  }
  // Serving the agent's port ourselves is what failed before.
  env.use_agent_store = false;
  env.rank = 0;
  auto clash = ProcessGroup::Init(env, torch::kCPU, "gloo", milliseconds(2000));
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("rendezvous at 127.0.0.1:"),
            std::string::npos)
      << clash.status();
}

// The error of an all-reduce that rank 1 never joins ("" and a failure when
// it succeeds).
std::string AllReduceWithoutRankOne(ProcessGroup& group) {
  std::vector<torch::Tensor> t = {torch::ones({1})};
  try {
    group.AllReduceSum(t);
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "the all-reduce went on without rank 1";
  return "";
}

TEST(ProcessGroupTest, DeadRankEndsTheOthers) {
  XLNET_SKIP_WITHOUT_GLOO();
  RunRanks(2, milliseconds(20000), [](int rank, ProcessGroup& group) {
    if (rank == 1) return;  // exits: its connections close
    // The transport's error, then what it means and what to do.
    const std::string what = AllReduceWithoutRankOne(group);
    EXPECT_NE(what.find("another rank exited or lost its connection"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("--resume latest"), std::string::npos) << what;
  });
}

// Rank 1 alive but never joining; rank 0's all-reduce, under a group of
// `group_timeout` and, when `scoped` is set, a ScopedTimeout of that limit
// and setting, must throw with `expected` in its message. Returns how long
// rank 0 waited.
double WaitForStuckRank(
    milliseconds group_timeout,
    const std::optional<std::pair<milliseconds, std::string>>& scoped,
    const std::string& expected) {
  double waited = 0;
  RunRanks(2, group_timeout, [&](int rank, ProcessGroup& group) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    {
      std::optional<ScopedTimeout> limit;
      if (scoped) limit.emplace(&group, scoped->first, scoped->second);
      const std::string what = AllReduceWithoutRankOne(group);
      EXPECT_NE(what.find(expected), std::string::npos) << what;
    }
    waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    // A scope's limit ends with it.
    EXPECT_EQ(group.timeout(), group_timeout);
    EXPECT_EQ(group.timeout_setting(), "train.dist_timeout_s");
  });
  return waited;
}

TEST(ProcessGroupTest, StuckRankTimesOutInsteadOfHanging) {
  XLNET_SKIP_WITHOUT_GLOO();
  const double waited = WaitForStuckRank(milliseconds(1500), std::nullopt,
                                         "within train.dist_timeout_s (1.5 s)");
  // The 1.5 s timeout fired, long before the stuck rank woke up.
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 5.0);
}

// A phase's own timeout (train.io_timeout_s around a save,
// train.startup_timeout_s around start-up) under a backend created with a
// longer one: the scoped limit fires, the error names its setting, and the
// group's timeout is restored after the scope.
TEST(ProcessGroupTest, ScopedTimeoutFiresAndNamesItsSetting) {
  XLNET_SKIP_WITHOUT_GLOO();
  const double waited = WaitForStuckRank(
      milliseconds(20000),
      std::make_pair(milliseconds(1500), std::string("train.io_timeout_s")),
      "within train.io_timeout_s (1.5 s)");
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 5.0);
}

// The NCCL path on one GPU (a single-rank communicator): the group is built,
// all-reduce and broadcast run on CUDA tensors. Needs a CUDA LibTorch with
// NCCL and a GPU (scripts/gpu_check.sh); skipped elsewhere.
TEST(ProcessGroupTest, NcclSingleRankCollectives) {
#if !defined(USE_C10D_NCCL)
  GTEST_SKIP() << "built without NCCL (USE_C10D_NCCL)";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto group = ProcessGroup::FromStore(
      store, 0, 1, torch::Device(torch::kCUDA, 0), "nccl", milliseconds(60000));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->backend(), "nccl");
  std::vector<torch::Tensor> t = {
      torch::arange(6, torch::TensorOptions().device(torch::kCUDA))};
  (*group)->AllReduceSum(t);
  EXPECT_TRUE(torch::equal(t[0].cpu(), torch::arange(6)));
  (*group)->Broadcast(t, 0);
  EXPECT_TRUE(torch::equal(t[0].cpu(), torch::arange(6)));
  // The trainer's control messages are host tensors: they go through the GPU
  // and come back in place.
  EXPECT_EQ((*group)->device(), torch::Device(torch::kCUDA, 0));
  std::vector<torch::Tensor> host = {
      torch::tensor({1.5, 2.0, 3.0}, torch::kFloat64)};
  (*group)->AllReduceSum(host);
  EXPECT_TRUE(host[0].device().is_cpu());
  EXPECT_TRUE(
      torch::equal(host[0], torch::tensor({1.5, 2.0, 3.0}, torch::kFloat64)));
  (*group)->Broadcast(host, 0);
  EXPECT_TRUE(host[0].device().is_cpu());
  (*group)->Barrier();
  EXPECT_TRUE((*group)->CheckSameOnAllRanks("config", "a: 1").ok());
#endif
}

}  // namespace
}  // namespace xlnet
