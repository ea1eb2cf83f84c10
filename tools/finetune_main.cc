// xlnet-finetune: fine-tuning on classification, regression, SQuAD or
// multiple choice (finetune/finetune.h).
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "finetune/finetune.h"
#include "model_io/run_layout.h"
#include "train/run_dir.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::FinetuneOptions o;
  xlnet::FlagParser flags(
      "xlnet-finetune",
      "--task classification|regression|squad|multiple_choice --init MODEL_DIR "
      "--out RUN_DIR "
      "[--train F] [--dev F] [--test F] [--config CFG.yaml] [--set k=v ...] "
      "[--resume latest|DIR [--allow_changed_settings] | --overwrite] "
      "[--tokenizer spiece.model] "
      "[--labels A,B,...] [--from_scratch] [--do_predict] "
      "[--nproc_per_node N [--master_port P]]\n\n"
      "Flags in [brackets] are optional. Data: .tsv (header row), .csv (RFC "
      "4180, header row) or .jsonl; SQuAD .json; multiple choice: a RACE "
      "directory or .txt file, or .jsonl. Columns are detected "
      "(finetune/README.md) or named, e.g.\n"
      "  --set finetune.text_column=review --set finetune.label_column=stars\n"
      "The text rules (data.uncased, data.keep_accents) come from --init's "
      "config.yaml when it has one (the model's pretraining), else from the "
      "config.");
  flags.AddConfigFlags(
      &o.config_path, &o.overrides,
      "YAML config with data, train and finetune sections (optional: the "
      "defaults apply; the model section is --init's config.json)");
  flags.AddString("task", &o.task,
                  "classification, regression, squad or multiple_choice");
  flags.AddString("init", &o.init_dir,
                  "model to start from: a pretraining checkpoint of ours, a "
                  "fine-tuned RUN/best, or a HuggingFace XLNet directory (its "
                  "config.json is the model section)");
  flags.AddString("train", &o.train,
                  "training data (.tsv/.csv/.jsonl; SQuAD .json; RACE dir or "
                  ".txt, or .jsonl); without it "
                  "the model is only evaluated");
  flags.AddString("dev", &o.dev,
                  "dev data: evaluated every train.eval_steps; picks the best "
                  "checkpoint");
  flags.AddString("test", &o.test, "test data: evaluated at the end");
  flags.AddString(
      "out", &o.out_dir,
      absl::StrCat("run directory: ", xlnet::kBestDir, "/, ",
                   xlnet::kCheckpointsDir, "/, ", xlnet::kMetricsFile, ", ",
                   xlnet::kEvalResultsFile, ", predictions"));
  xlnet::AddRunDirFlags(flags, "fine-tuning", &o.resume, &o.overwrite,
                        &o.allow_changed_settings);
  flags.AddString("tokenizer", &o.tokenizer,
                  "spiece.model (default: data.tokenizer, else the one in "
                  "--init)");
  flags.AddString("labels", &o.labels,
                  "classification: comma-separated class names in id order "
                  "(default: sorted training labels)");
  flags.AddBool("from_scratch", &o.from_scratch,
                "random weights with --init's architecture (the baseline "
                "without pretraining)");
  flags.AddBool("do_predict", &o.do_predict,
                "--test may be unlabeled: write its predictions (scored too "
                "when labels are present); classification predictions carry "
                "prob_<label> columns");
  xlnet::AddLaunchFlags(flags, &o.launch);
  for (const char* name : {"task", "init", "out"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  o.launch.rank_args = xlnet::RankArgs(argc, argv);
  return xlnet::RunFinetuning(o);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-finetune", argc, argv, &Run);
}
