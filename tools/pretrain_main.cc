// xlnet-pretrain: permutation-LM pretraining (pretrain/pretrain.h).
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "model_io/run_layout.h"
#include "pretrain/pretrain.h"
#include "train/run_dir.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::PretrainOptions o;
  xlnet::FlagParser flags(
      "xlnet-pretrain",
      "--config CFG.yaml (--data DATA_DIR | data.sources in CFG) --out "
      "RUN_DIR [--set k=v ...] "
      "[--resume latest|CHECKPOINT_DIR [--allow_changed_settings] | "
      "--overwrite] [--init MODEL_DIR] "
      "[--nproc_per_node N]");
  flags.AddConfigFlags(&o.config_path, &o.overrides);
  flags.AddString("data", &o.data_dir,
                  "prepared shards (xlnet-data prepare); required unless the "
                  "config blends corpora with data.sources");
  flags.AddString(
      "out", &o.out_dir,
      absl::StrCat("run directory: ", xlnet::kRunConfigFile, ", ",
                   xlnet::kMetricsFile, ", ", xlnet::kCheckpointsDir, "/"));
  xlnet::AddRunDirFlags(flags, "pretraining", &o.resume, &o.overwrite,
                        &o.allow_changed_settings);
  flags.AddString("init", &o.init_dir,
                  "start from this model directory (HF layout)");
  xlnet::AddLaunchFlags(flags, &o.launch);
  for (const char* name : {"config", "out"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  o.launch.rank_args = xlnet::RankArgs(argc, argv);
  return xlnet::RunPretraining(o);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-pretrain", argc, argv, &Run);
}
