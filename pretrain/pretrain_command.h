// `xlnet-pretrain`: the toolkit's main job, as a library function so the
// thin main and the tests share it.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "pretrain/distributed.h"

namespace xlnet {

// What one pretraining process (a rank) sets up before building its unit.
struct RankSetup {
  DistEnv env;
  torch::Device device = torch::kCPU;
  int threads = 1;                      // intra-op threads in use
  std::unique_ptr<ProcessGroup> group;  // null with one process
};

// Reads the torchrun environment, sets the intra-op threads (train.threads;
// 0 = the cores shared between the local ranks), resolves train.device
// ("cuda" becomes cuda:LOCAL_RANK, written back into `config`) and joins
// the process group when WORLD_SIZE > 1. xlnet-pretrain and xlnet-bench.
absl::StatusOr<RankSetup> SetUpRank(Config* config);

// Parses the command line and runs pretraining (or, with --nproc_per_node N
// and no WORLD_SIZE in the environment, launches N local ranks of itself).
absl::Status RunPretrainCommand(int argc, char** argv);

}  // namespace xlnet
