// xlnet-squad-eval: the official SQuAD v1.1/v2.0 evaluation of a predictions
// file, printed as JSON (finetune/squad_eval.h).
#include <iostream>

#include "common/flags.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "finetune/squad_eval.h"

namespace {

absl::Status Run(int argc, char** argv) {
  xlnet::finetune::SquadEvalRunOptions o;
  xlnet::FlagParser flags("xlnet-squad-eval",
                          "DATA.json PREDICTIONS.json [--null_odds F] "
                          "[--na_prob_thresh T] [--out eval.json]");
  flags.AllowPositional();
  flags.AddString("null_odds", &o.null_odds,
                  "{qid: score} (null_odds.json): adds best_exact/best_f1 and "
                  "their thresholds");
  flags.AddString("out", &o.out, "also write the scores to this file");
  flags.AddDouble("na_prob_thresh", &o.na_prob_thresh,
                  "with --null_odds: a question above it counts as \"\"");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  if (flags.positional().size() != 2) {
    return absl::InvalidArgumentError(
        "expected DATA.json PREDICTIONS.json (see --help)");
  }
  o.data = flags.positional()[0];
  o.predictions = flags.positional()[1];
  return xlnet::finetune::RunSquadEvaluation(o, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-squad-eval", argc, argv, &Run);
}
