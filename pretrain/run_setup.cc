#include "pretrain/run_setup.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "pretrain/launcher.h"
#include "pretrain/trainer.h"

namespace xlnet {

absl::StatusOr<std::optional<RunSetup>> SetUpRun(int argc, char** argv,
                                                 int64_t nproc,
                                                 int64_t master_port,
                                                 Config* config) {
  if (nproc < 1) {
    return absl::InvalidArgumentError("--nproc_per_node must be >= 1");
  }
  if (nproc > 1 && std::getenv("WORLD_SIZE") == nullptr) {
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
    XLNET_RETURN_IF_ERROR(LaunchLocalRanks(
        static_cast<int>(nproc), child_args, static_cast<int>(master_port)));
    return std::optional<RunSetup>();
  }

  RunSetup setup;
  XLNET_ASSIGN_OR_RETURN(setup.env, DistEnvFromEnvironment());
  SetLogRank(setup.env.rank);
  int64_t threads = config->train.threads;
  if (threads == 0) {
    // Share the cores between the local ranks.
    int local_world = 1;
    if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) {
      if (!absl::SimpleAtoi(v, &local_world) || local_world < 1) {
        local_world = 1;
      }
    }
    threads = std::max<int64_t>(
        1, std::thread::hardware_concurrency() / local_world);
  }
  ConfigureThreads(threads);
  if (setup.env.rank == 0) XLOG(INFO) << RuntimeSummary();
  InstallStopSignalHandlers();

  XLNET_ASSIGN_OR_RETURN(torch::Device device,
                         ParseDevice(config->train.device));
  if (device.is_cuda() && !device.has_index()) {
    device = torch::Device(torch::kCUDA,
                           static_cast<int16_t>(setup.env.local_rank));
    config->train.device = device.str();
  }
  if (setup.env.world_size > 1) {
    XLNET_ASSIGN_OR_RETURN(
        setup.group,
        ProcessGroup::Init(setup.env, device,
                           std::chrono::seconds(config->train.dist_timeout_s)));
    XLOG(INFO) << "rank " << setup.env.rank << " of " << setup.env.world_size
               << " joined (" << setup.group->backend() << ")";
  }
  return std::optional<RunSetup>(std::move(setup));
}

}  // namespace xlnet
