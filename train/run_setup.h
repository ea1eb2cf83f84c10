// What every training command (xlnet-pretrain, xlnet-finetune, xlnet-bench)
// does before building its unit: start local ranks for --nproc_per_node
// (the parent then only waits), read the torchrun-style environment, size
// the CPU thread pool, pick the device (cuda -> cuda:LOCAL_RANK) and join
// the process group.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "config/config.h"
#include "train/distributed.h"

namespace xlnet {

// How a training command starts its ranks (--nproc_per_node).
struct LaunchOptions {
  // Local ranks to start when WORLD_SIZE is not set (1 = run in this
  // process).
  int64_t nproc_per_node = 1;
  // Rendezvous port of those ranks (0 = a free port).
  int64_t master_port = 0;
  // The arguments each local rank runs this program with: the command line
  // without the launch flags (RankArgs).
  std::vector<std::string> rank_args;
};

// Registers --nproc_per_node and --master_port on a tool's flags.
void AddLaunchFlags(FlagParser& flags, LaunchOptions* options);

// argv[1..] without --nproc_per_node, --master_port and the flags named in
// `drop` (each with its value, as `--flag value` or `--flag=value`).
std::vector<std::string> RankArgs(int argc, const char* const* argv,
                                  const std::vector<std::string>& drop = {});

// The most ranks --nproc_per_node starts on one machine: one per core, and
// at least 8 (so that a small machine can still run a few test ranks).
int64_t MaxLocalRanks();

// Checks a run's configuration for a world of `world_size` ranks (the batch
// split) before any rank is started.
using WorldSizeCheck = std::function<absl::Status(int64_t world_size)>;

// With nproc_per_node > 1 and an environment that describes one process (no
// torchrun or srun world of several ranks), starts the local ranks of this
// program and waits for them: returns true, and the caller is done.
// Otherwise returns false and the caller runs as one rank. nproc_per_node
// above MaxLocalRanks(), or one that `check` refuses, is an error before
// anything is forked (each rank would otherwise fail only after starting).
absl::StatusOr<bool> LaunchLocalRanksIfAsked(const LaunchOptions& options,
                                             const WorldSizeCheck& check);

// Where one rank runs and how it talks to the others.
struct RankDevice {
  torch::Device device = torch::kCPU;
  // c10d backend when there are several ranks: "gloo" or "nccl".
  std::string backend = "gloo";
};

// The device and backend of the rank with `local_rank`: `configured` (the
// parsed train.device) "cuda" becomes cuda:(local_rank /
// train.ranks_per_device); cpu and an explicit cuda:N are kept. The backend
// is nccl on cuda with one rank per device, else gloo. An index beyond
// the `cuda_devices` visible GPUs is an error that names the variables.
absl::StatusOr<RankDevice> ResolveRankDevice(const TrainConfig& train,
                                             const torch::Device& configured,
                                             int local_rank, int cuda_devices);

// Makes `device` (a CUDA device with an index) the calling thread's current
// CUDA device, so that what uses the current device rather than a tensor's
// (NCCL's communicator, the caching allocator's first context, kernels
// launched without a guard) opens its context on this rank's GPU instead
// of GPU 0. A CPU device is left alone. Errors (no CUDA in this LibTorch)
// come back as a Status naming the device.
absl::Status BindCudaDevice(const torch::Device& device);

// What one process (a rank) sets up before building its unit.
struct RankSetup {
  DistEnv env;
  torch::Device device = torch::kCPU;
  int threads = 1;                      // intra-op threads in use
  std::unique_ptr<ProcessGroup> group;  // null with one process
  // train.device as configured, before "cuda" became cuda:LOCAL_RANK.
  std::string configured_device = "cpu";
  // train.batch_size as configured: 0 when train.batch_size_per_device is
  // set and SetUpRank wrote the derived global batch into the config.
  int64_t configured_batch_size = 0;
};

// Reads the launch environment (torchrun, SLURM; train/launch_env.h), sets
// the intra-op threads (train.threads; 0 = the cores shared between the local
// ranks), resolves train.device (ResolveRankDevice; written back into
// `config`), derives the global batch from train.batch_size_per_device
// (GlobalBatchSize; written back into `config`) and binds the device
// (BindCudaDevice) before the runtime summary or the process group touch CUDA,
// joins the process group when the world has several ranks, installs the
// SIGTERM/SIGINT handlers and logs the runtime (rank 0).
absl::StatusOr<RankSetup> SetUpRank(Config* config);

// How a step's rows split, for the start-up log: "R rows per rank x W
// ranks x A micro-steps = G rows (G x seq_len tokens) per optimizer step".
std::string BatchSummary(const TrainConfig& train, int world_size,
                         int64_t seq_len);

// The run's config as YAML, the same on every rank: `config` (as SetUpRank
// left it) with train.device as configured ("cuda", not this rank's
// cuda:N), as ConfigFileText (a first comment line naming the build). What
// the trainer saves and checks across ranks.
std::string RunConfigYaml(Config config, const RankSetup& setup);

}  // namespace xlnet
