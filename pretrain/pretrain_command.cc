#include "pretrain/pretrain_command.h"

#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "pretrain/distributed.h"
#include "pretrain/launcher.h"
#include "pretrain/plm_unit.h"
#include "pretrain/trainer.h"

namespace xlnet {

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
      if (!absl::SimpleAtoi(v, &local_world) || local_world < 1)
        local_world = 1;
    }
    threads =
        std::max<int64_t>(1, std::thread::hardware_concurrency() / local_world);
  }
  setup.threads = ConfigureThreads(threads);
  XLNET_ASSIGN_OR_RETURN(setup.device, ParseDevice(config->train.device));
  if (setup.device.is_cuda() && !setup.device.has_index()) {
    setup.device =
        torch::Device(torch::kCUDA, static_cast<int16_t>(env.local_rank));
    config->train.device = setup.device.str();
  }
  if (env.world_size > 1) {
    XLNET_ASSIGN_OR_RETURN(
        setup.group,
        ProcessGroup::Init(
            env, setup.device,
            std::chrono::seconds(config->train.dist_timeout_s)));
  }
  return setup;
}

absl::Status RunPretrainCommand(int argc, char** argv) {
  std::string config_path, data_dir, out_dir, resume, init_dir;
  std::vector<std::string> overrides;
  int64_t nproc = 1, master_port = 0;
  FlagParser flags(
      "xlnet-pretrain",
      "--config CFG.yaml --data DATA_DIR --out RUN_DIR [--set k=v ...] "
      "[--resume latest|CHECKPOINT_DIR] [--nproc_per_node N]");
  flags.AddConfigFlags(&config_path, &overrides);
  flags.AddString("data", &data_dir, "prepared shards (xlnet-data prepare)");
  flags.AddString("out", &out_dir,
                  "run directory: config.yaml, metrics.jsonl, checkpoints/");
  flags.AddString(
      "resume", &resume,
      "'latest' (newest valid checkpoint in --out, if any) or a checkpoint "
      "directory");
  flags.AddString("init", &init_dir,
                  "start from this model directory (HF layout)");
  flags.AddInt(
      "nproc_per_node", &nproc,
      "start N local ranks (data parallel over Gloo/NCCL) unless WORLD_SIZE "
      "is already set, as under torchrun");
  flags.AddInt("master_port", &master_port,
               "rendezvous port for --nproc_per_node (0 = a free port)");
  for (const char* name : {"config", "data", "out"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(Config config, LoadConfig(config_path, overrides));

  if (nproc < 1)
    return absl::InvalidArgumentError("--nproc_per_node must be >= 1");
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
    return LaunchLocalRanks(static_cast<int>(nproc), child_args,
                            static_cast<int>(master_port));
  }

  XLNET_ASSIGN_OR_RETURN(RankSetup rank, SetUpRank(&config));
  const DistEnv& env = rank.env;
  if (env.rank == 0) XLOG(INFO) << RuntimeSummary();
  InstallStopSignalHandlers();
  std::unique_ptr<ProcessGroup> group = std::move(rank.group);
  if (group) {
    XLOG(INFO) << "rank " << env.rank << " of " << env.world_size << " joined ("
               << group->backend() << ")";
  }
  PlmUnitOptions unit_options;
  unit_options.config = config;
  unit_options.data_dir = data_dir;
  unit_options.init_dir = init_dir;
  unit_options.rank = env.rank;
  unit_options.world_size = env.world_size;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<PlmUnit> unit,
                         PlmUnit::Create(unit_options));
  if (env.rank == 0) {
    int64_t params = 0;
    for (const auto& [name, p] : unit->Parameters()) params += p.numel();
    XLOG(INFO) << "model: " << config.model.n_layer << " layers, d_model "
               << config.model.d_model << ", " << params
               << " parameters; global batch " << config.train.batch_size
               << " x " << config.data.seq_len << " tokens";
  }
  TrainerOptions options;
  options.train = config.train;
  options.config_yaml = ConfigToYaml(unit_options.config);
  options.run_dir = out_dir;
  options.resume = resume;
  Trainer trainer(options, unit.get(), group.get());
  XLNET_ASSIGN_OR_RETURN(TrainResult result, trainer.Run());
  if (env.rank == 0) {
    XLOG(INFO) << (result.interrupted ? "stopped" : "finished") << " at step "
               << result.steps << " (loss " << result.last_loss << ", "
               << result.skipped_steps << " skipped); checkpoint "
               << result.last_checkpoint;
  }
  return absl::OkStatus();
}

}  // namespace xlnet
