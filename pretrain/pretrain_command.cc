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
#include "pretrain/plm_unit.h"
#include "pretrain/run_setup.h"
#include "pretrain/trainer.h"

namespace xlnet {

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

  XLNET_ASSIGN_OR_RETURN(
      const bool launched,
      LaunchLocalRanksIfAsked(argc, argv, nproc, master_port));
  if (launched) return absl::OkStatus();

  XLNET_ASSIGN_OR_RETURN(RankSetup rank, SetUpRank(&config));
  const DistEnv& env = rank.env;
  std::unique_ptr<ProcessGroup> group = std::move(rank.group);
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
  options.config_yaml = RunConfigYaml(unit_options.config, rank);
  options.run_dir = out_dir;
  options.resume = resume;
  // Checkpoints carry the tokenizer so fine-tuning and export need only them.
  options.extra_files["spiece.model"] =
      unit->sampler().tokenizer().model_bytes();
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
