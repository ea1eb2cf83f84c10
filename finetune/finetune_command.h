// xlnet-finetune: fine-tunes a pretrained XLNet on a classification,
// regression or SQuAD task with the shared Trainer, keeps the best model by
// the task's dev metric as RUN/best/ (a HuggingFace model directory with
// spiece.model), and writes RUN/eval_results.json and predictions:
//
//   xlnet-finetune --config CFG --task classification|regression|squad
//       --init MODEL_DIR --train F --dev F [--test F] --out RUN
//       [--set k=v ...] [--resume latest|DIR] [--from_scratch] [--do_predict]
#pragma once

#include "absl/status/status.h"

namespace xlnet {

absl::Status RunFinetuneCommand(int argc, char** argv);

// xlnet-baseline: the bag-of-words baseline (finetune/bow_baseline.h) on
// classification files; writes OUT/eval_results.json like xlnet-finetune.
//   xlnet-baseline --train F --dev F [--test F] --out DIR
absl::Status RunBaselineCommand(int argc, char** argv);

// xlnet-squad-eval: the official SQuAD v1.1/v2.0 evaluation of a predictions
// file, printed as JSON (the official script's output keys):
//   xlnet-squad-eval DATA.json PREDICTIONS.json [--null_odds F]
//       [--na_prob_thresh 1.0] [--out eval.json]
absl::Status RunSquadEvalCommand(int argc, char** argv);

}  // namespace xlnet
