#include "pretrain/run_setup.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "pretrain/launcher.h"
#include "pretrain/trainer.h"

namespace xlnet {

absl::StatusOr<bool> LaunchLocalRanksIfAsked(int argc, char** argv,
                                             int64_t nproc,
                                             int64_t master_port) {
  if (nproc < 1) {
    return absl::InvalidArgumentError("--nproc_per_node must be >= 1");
  }
  if (nproc == 1 || std::getenv("WORLD_SIZE") != nullptr) return false;
  std::vector<std::string> child_args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nproc_per_node" || arg == "--master_port") {
      ++i;
      continue;
    }
    if (arg.rfind("--nproc_per_node=", 0) == 0 ||
        arg.rfind("--master_port=", 0) == 0) {
      continue;
    }
    child_args.push_back(arg);
  }
  XLNET_RETURN_IF_ERROR(LaunchLocalRanks(static_cast<int>(nproc), child_args,
                                         static_cast<int>(master_port)));
  return true;
}

absl::StatusOr<RankSetup> SetUpRank(Config* config) {
  RankSetup setup;
  XLNET_ASSIGN_OR_RETURN(setup.env, DistEnvFromEnvironment());
  const DistEnv& env = setup.env;
  SetLogRank(env.rank);
  int64_t threads = config->train.threads;
  if (threads == 0) {
    // Share the cores between the local ranks.
    int local_world = 1;
    if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) {
      if (!absl::SimpleAtoi(v, &local_world) || local_world < 1) {
        local_world = 1;
      }
    }
    threads =
        std::max<int64_t>(1, std::thread::hardware_concurrency() / local_world);
  }
  setup.threads = ConfigureThreads(threads);
  if (env.rank == 0) XLOG(INFO) << RuntimeSummary();
  InstallStopSignalHandlers();
  setup.configured_device = config->train.device;
  XLNET_ASSIGN_OR_RETURN(setup.device, ParseDevice(config->train.device));
  if (setup.device.is_cuda() && !setup.device.has_index()) {
    setup.device =
        torch::Device(torch::kCUDA, static_cast<int16_t>(env.local_rank));
    config->train.device = setup.device.str();
  }
  if (env.world_size > 1) {
    XLNET_ASSIGN_OR_RETURN(
        setup.group,
        ProcessGroup::Init(env, setup.device,
                           std::chrono::seconds(config->train.dist_timeout_s)));
    XLOG(INFO) << "rank " << env.rank << " of " << env.world_size << " joined ("
               << setup.group->backend() << ")";
  }
  return setup;
}

std::string RunConfigYaml(Config config, const RankSetup& setup) {
  config.train.device = setup.configured_device;
  return ConfigToYaml(config);
}

}  // namespace xlnet
