#include "train/run_setup.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "train/launcher.h"
#include "train/trainer.h"

namespace xlnet {

void AddLaunchFlags(FlagParser& flags, LaunchOptions* options) {
  flags.AddInt("nproc_per_node", &options->nproc_per_node,
               "start N local ranks (data parallel over Gloo/NCCL) unless "
               "WORLD_SIZE is already set, as under torchrun");
  flags.AddInt("master_port", &options->master_port,
               "rendezvous port for --nproc_per_node (0 = a free port)");
}

std::vector<std::string> RankArgs(int argc, const char* const* argv,
                                  const std::vector<std::string>& drop) {
  std::vector<std::string> dropped = {"--nproc_per_node", "--master_port"};
  for (const auto& name : drop) dropped.push_back("--" + name);
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    bool skip = false;
    for (const auto& flag : dropped) {
      if (arg == flag) {
        ++i;  // its value
        skip = true;
      } else if (arg.rfind(flag + "=", 0) == 0) {
        skip = true;
      }
    }
    if (!skip) args.push_back(arg);
  }
  return args;
}

absl::StatusOr<bool> LaunchLocalRanksIfAsked(const LaunchOptions& options) {
  if (options.nproc_per_node < 1) {
    return absl::InvalidArgumentError("--nproc_per_node must be >= 1");
  }
  if (options.nproc_per_node == 1 || std::getenv("WORLD_SIZE") != nullptr) {
    return false;
  }
  // Stopped while starting up: no ranks to start, nothing to save.
  if (StopRequested()) return true;
  XLNET_RETURN_IF_ERROR(LaunchLocalRanks(
      static_cast<int>(options.nproc_per_node), options.rank_args,
      static_cast<int>(options.master_port)));
  return true;
}

absl::StatusOr<RankSetup> SetUpRank(Config* config) {
  RankSetup setup;
  XLNET_ASSIGN_OR_RETURN(setup.env, DistEnvFromEnvironment());
  const DistEnv& env = setup.env;
  SetLogRank(env.rank);
  int64_t threads = CapThreads(config->train.threads, "train.threads");
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
