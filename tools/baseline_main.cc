// xlnet-baseline: a bag-of-words classifier to compare fine-tuning against
// (finetune/bow_baseline.h).
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "finetune/bow_baseline.h"
#include "model_io/run_layout.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::finetune::BaselineRunOptions o;
  xlnet::FlagParser flags(
      "xlnet-baseline", "--train F --dev F [--test F] --out DIR [--epochs N]");
  flags.AddString("train", &o.train, "training data (.tsv/.jsonl)");
  flags.AddString("dev", &o.dev, "dev data (picks the L2 penalty)");
  flags.AddString("test", &o.test, "test data (scored at the end)");
  flags.AddString("out", &o.out_dir,
                  absl::StrCat("writes OUT/", xlnet::kEvalResultsFile));
  std::string bad_rows(xlnet::EnumName(o.bad_rows));
  flags.AddString("bad_rows", &bad_rows,
                  xlnet::EnumNameList<xlnet::BadRowPolicy>());
  flags.AddInt("epochs", &o.model.epochs, "full-batch Adam epochs");
  for (const char* name : {"train", "dev", "out"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(
      o.bad_rows,
      xlnet::ParseEnumSetting<xlnet::BadRowPolicy>("--bad_rows", bad_rows));
  return xlnet::finetune::RunBaseline(o);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-baseline", argc, argv, &Run);
}
