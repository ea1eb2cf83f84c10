// What every training command (xlnet-pretrain, xlnet-finetune, xlnet-bench)
// does before building its unit: start local ranks for --nproc_per_node
// (the parent then only waits), read the torchrun-style environment, size
// the CPU thread pool, pick the device (cuda -> cuda:LOCAL_RANK) and join
// the process group.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "pretrain/distributed.h"

namespace xlnet {

// With `nproc` > 1 and no WORLD_SIZE in the environment, starts `nproc`
// local ranks of this program (argv without --nproc_per_node/--master_port)
// and waits for them: returns true, and the caller is done. Otherwise
// returns false and the caller runs as one rank.
absl::StatusOr<bool> LaunchLocalRanksIfAsked(int argc, char** argv,
                                             int64_t nproc,
                                             int64_t master_port);

// What one process (a rank) sets up before building its unit.
struct RankSetup {
  DistEnv env;
  torch::Device device = torch::kCPU;
  int threads = 1;                      // intra-op threads in use
  std::unique_ptr<ProcessGroup> group;  // null with one process
  // train.device as configured, before "cuda" became cuda:LOCAL_RANK.
  std::string configured_device = "cpu";
};

// Reads the torchrun environment, sets the intra-op threads (train.threads;
// 0 = the cores shared between the local ranks), resolves train.device
// ("cuda" becomes cuda:LOCAL_RANK, written back into `config`), joins the
// process group when WORLD_SIZE > 1, installs the SIGTERM/SIGINT handlers
// and logs the runtime (rank 0).
absl::StatusOr<RankSetup> SetUpRank(Config* config);

// The run's config as YAML, the same on every rank: `config` (as SetUpRank
// left it) with train.device as configured ("cuda", not this rank's
// cuda:N). What the trainer saves and checks across ranks.
std::string RunConfigYaml(Config config, const RankSetup& setup);

}  // namespace xlnet
