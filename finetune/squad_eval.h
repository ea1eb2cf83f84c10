// The official SQuAD evaluation (evaluate-v2.0.py, which also scores v1.1
// data): answer normalisation, exact match, token F1, the HasAns/NoAns
// breakdown, the no-answer threshold and the best-threshold search.
//
//   XLNET_ASSIGN_OR_RETURN(SquadEvalResult r,
//       EvaluateSquad(dev, preds.predictions, &preds.null_odds, {}));
//   // r.metrics: exact, f1, total, HasAns_*, NoAns_*, best_exact, ...
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "finetune/squad.h"

namespace xlnet::finetune {

// normalize_answer: lowercase (Unicode, as str.lower()), drop ASCII
// punctuation (string.punctuation), replace the whole words a/an/the by a
// space (\b with Python's Unicode word characters: letters, numbers, "_"),
// then join the whitespace-separated tokens with single spaces.
std::string NormalizeAnswer(std::string_view text);

// 1 if the normalised texts are equal, else 0.
int ExactMatchScore(std::string_view gold, std::string_view prediction);

// Token F1 of the normalised texts (multiset overlap); when either has no
// tokens, 1 if both have none, else 0.
double F1Score(std::string_view gold, std::string_view prediction);

struct SquadEvalOptions {
  // With null odds: a question whose odds exceed this is answered "" (the
  // script's --na-prob-thresh, default 1.0).
  double na_prob_threshold = 1.0;
};

struct SquadEvalResult {
  // exact, f1, total; HasAns_exact/f1/total and NoAns_exact/f1/total when
  // such questions were predicted; with null odds also best_exact,
  // best_exact_thresh, best_f1, best_f1_thresh. Scores are percentages.
  std::map<std::string, double> metrics;
  // Questions of the dataset without a prediction (left out of every score,
  // as the script does).
  std::vector<std::string> missing;
};

// Scores `predictions` ({qid: text}) against the dataset's gold answers
// (a question is answerable iff it has answers; gold texts that normalise
// to "" are dropped, and no gold leaves [""]); the best over gold answers
// counts. `null_odds` may be null; when given it must hold every predicted
// question. No predicted question at all is an InvalidArgument error.
absl::StatusOr<SquadEvalResult> EvaluateSquad(
    const SquadDataset& dataset,
    const std::map<std::string, std::string>& predictions,
    const std::map<std::string, double>* null_odds,
    const SquadEvalOptions& options);

// xlnet-squad-eval: the official SQuAD v1.1/v2.0 evaluation of a
// predictions file, written to `out` as JSON (the official script's keys).
struct SquadEvalRunOptions {
  // The SQuAD data file and the {qid: answer} predictions.
  std::string data;
  std::string predictions;
  // {qid: score} (null_odds.json): adds best_exact/best_f1 and their
  // thresholds; "" for none.
  std::string null_odds;
  // With null_odds: a question whose score is above it counts as "".
  double na_prob_thresh = 1.0;
  // Also write the scores to this file ("" = only `out`).
  std::string out;
};

absl::Status RunSquadEvaluation(const SquadEvalRunOptions& options,
                                std::ostream& out);

}  // namespace xlnet::finetune
