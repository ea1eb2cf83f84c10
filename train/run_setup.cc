#include "train/run_setup.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "model/precision.h"
#include "train/launcher.h"
#include "train/trainer.h"

namespace xlnet {

void AddLaunchFlags(FlagParser& flags, LaunchOptions* options) {
  flags.AddInt("nproc_per_node", &options->nproc_per_node,
               "start N local ranks (data parallel over Gloo/NCCL) unless "
               "torchrun or srun already started several ranks");
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

int64_t MaxLocalRanks() {
  return std::max<int64_t>(8, std::thread::hardware_concurrency());
}

absl::StatusOr<bool> LaunchLocalRanksIfAsked(const LaunchOptions& options,
                                             const WorldSizeCheck& check) {
  if (options.nproc_per_node < 1) {
    return absl::InvalidArgumentError("--nproc_per_node must be >= 1");
  }
  if (options.nproc_per_node == 1) return false;
  if (options.nproc_per_node > MaxLocalRanks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nproc_per_node ", options.nproc_per_node, " is more than the ",
        MaxLocalRanks(), " local ranks this machine runs (one per core)"));
  }
  XLNET_ASSIGN_OR_RETURN(const DistEnv env, DistEnvFromEnvironment());
  if (env.world_size > 1) {
    if (env.rank == 0) {
      XLOG(WARNING) << "--nproc_per_node " << options.nproc_per_node
                    << " ignored: the " << env.source << " environment "
                    << "already describes " << env.world_size << " ranks";
    }
    return false;
  }
  if (check) XLNET_RETURN_IF_ERROR(check(options.nproc_per_node));
  // Stopped while starting up: no ranks to start, nothing to save.
  if (StopRequested()) return true;
  XLNET_RETURN_IF_ERROR(LaunchLocalRanks(
      static_cast<int>(options.nproc_per_node), options.rank_args,
      static_cast<int>(options.master_port)));
  return true;
}

absl::StatusOr<RankDevice> ResolveRankDevice(const TrainConfig& train,
                                             const torch::Device& configured,
                                             int local_rank, int cuda_devices) {
  RankDevice out;
  out.device = configured;
  if (configured.is_cuda() && !configured.has_index()) {
    const int index = local_rank / static_cast<int>(train.ranks_per_device);
    if (index >= cuda_devices) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LOCAL_RANK ", local_rank, " maps to cuda:", index,
          " (train.ranks_per_device=", train.ranks_per_device, ") but ",
          cuda_devices,
          " CUDA device(s) are visible: start one rank per visible GPU, set "
          "train.ranks_per_device to share "
          "one, or, where each rank sees only its own GPU (srun "
          "--gpus-per-task=1), set train.device=cuda:0"));
    }
    out.device = torch::Device(torch::kCUDA, static_cast<int16_t>(index));
  }
  // NCCL refuses two ranks on one GPU; Gloo stages CUDA tensors through the
  // host.
  out.backend =
      out.device.is_cuda() && train.ranks_per_device == 1 ? "nccl" : "gloo";
  return out;
}

absl::Status BindCudaDevice(const torch::Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  TORCH_CHECK(device.has_index(), "BindCudaDevice needs cuda:N, not ",
              device.str());
  return CatchExceptions(
      absl::StrCat("making ", device.str(), " the current CUDA device"),
      [&]() -> absl::Status {
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
        return absl::OkStatus();
      });
}

absl::StatusOr<RankSetup> SetUpRank(Config* config) {
  RankSetup setup;
  XLNET_ASSIGN_OR_RETURN(setup.env, DistEnvFromEnvironment());
  const DistEnv& env = setup.env;
  SetLogRank(env.rank);
  int64_t threads = CapThreads(config->train.threads, "train.threads");
  if (threads == 0) {
    // Share the cores between the local ranks.
    threads = std::max<int64_t>(
        1, std::thread::hardware_concurrency() / env.local_world_size);
  }
  setup.threads = ConfigureThreads(threads);
  InstallStopSignalHandlers();
  setup.configured_device = config->train.device;
  setup.configured_batch_size = config->train.batch_size;
  config->train.batch_size = GlobalBatchSize(config->train, env.world_size);
  XLNET_ASSIGN_OR_RETURN(const torch::Device configured,
                         ParseDevice(config->train.device));
  XLNET_ASSIGN_OR_RETURN(
      const RankDevice rank_device,
      ResolveRankDevice(config->train, configured, env.local_rank,
                        configured.is_cuda()
                            ? static_cast<int>(torch::cuda::device_count())
                            : 0));
  setup.device = rank_device.device;
  config->train.device = setup.device.str();
  XLNET_RETURN_IF_ERROR(BindCudaDevice(setup.device));
  if (env.rank == 0) XLOG(INFO) << RuntimeSummary();
  if (env.world_size > 1) {
    // The rendezvous waits up to train.startup_timeout_s; the backend up to
    // the longest of the three timeouts, so that each phase's own
    // (SetTimeout, ScopedTimeout) is the one that fires.
    const TrainConfig& t = config->train;
    XLNET_ASSIGN_OR_RETURN(
        setup.group,
        ProcessGroup::Init(
            env, setup.device, rank_device.backend,
            std::chrono::seconds(std::max(
                {t.dist_timeout_s, t.io_timeout_s, t.startup_timeout_s})),
            std::chrono::seconds(t.startup_timeout_s)));
    setup.group->SetTimeout(std::chrono::seconds(t.dist_timeout_s),
                            "train.dist_timeout_s");
    XLOG(INFO) << "rank " << env.rank << " of " << env.world_size << " joined ("
               << setup.group->backend() << " on " << setup.device.str()
               << ", launched by " << env.source << ")";
  }
  return setup;
}

std::string BatchSummary(const TrainConfig& train, int world_size,
                         int64_t seq_len) {
  const int64_t global = GlobalBatchSize(train, world_size);
  const int64_t per_rank = global / (world_size * train.grad_accum_steps);
  return absl::StrCat(per_rank, " rows per rank x ", world_size, " rank",
                      world_size == 1 ? "" : "s", " x ", train.grad_accum_steps,
                      " micro-step", train.grad_accum_steps == 1 ? "" : "s",
                      " = ", global, " rows (", global * seq_len,
                      " tokens) per optimizer step");
}

std::string RunConfigYaml(Config config, const RankSetup& setup) {
  config.train.device = setup.configured_device;
  config.train.batch_size = setup.configured_batch_size;
  return ConfigFileText(config);
}

}  // namespace xlnet
