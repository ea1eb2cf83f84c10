// A bag-of-words baseline for classification files: lowercased word
// unigrams and bigrams weighted by sublinear tf-idf (rows L2-normalised),
// into a multinomial logistic regression trained full-batch with Adam; the
// L2 penalty is picked on the dev set from a small grid. It is the yardstick
// next to which fine-tuned XLNet numbers are reported (docs/finetuning.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "finetune/examples.h"

namespace xlnet::finetune {

// Lowercased words: maximal runs of letters/digits (ASCII) or of non-ASCII
// bytes; an apostrophe inside a word is kept ("don't").
std::vector<std::string> BagOfWordsTokens(const std::string& text);

struct BagOfWordsOptions {
  // Features seen in fewer training rows are dropped.
  int64_t min_df = 2;
  // Also use word bigrams.
  bool bigrams = true;
  // Full-batch Adam epochs and learning rate.
  int64_t epochs = 300;
  double lr = 0.05;
  // L2 penalties tried; the best dev accuracy wins (first on ties).
  std::vector<double> l2_grid = {0.0, 1e-5, 1e-4, 1e-3};
  uint64_t seed = 1234;
};

struct BagOfWordsResult {
  int64_t features = 0;
  double l2 = 0;
  // Split name ("dev", "test") -> metrics (finetune/metrics.h keys).
  std::map<std::string, std::map<std::string, double>> metrics;
};

// Trains on `train` and scores `dev` (used to pick the penalty) and `test`
// (may be empty). Every example must carry a label in `labels`.
absl::StatusOr<BagOfWordsResult> RunBagOfWordsBaseline(
    const std::vector<TextExample>& train, const std::vector<TextExample>& dev,
    const std::vector<TextExample>& test, const LabelSet& labels,
    const BagOfWordsOptions& options);

// xlnet-baseline: the bag-of-words classifier on classification files,
// scored like xlnet-finetune (OUT/eval_results.json).
struct BaselineRunOptions {
  // Training, dev (picks the L2 penalty) and test (optional) files.
  std::string train;
  std::string dev;
  std::string test;
  // Writes out_dir/eval_results.json.
  std::string out_dir;
  // Bad rows: skip (report and go on) or error (fail).
  BadRowPolicy bad_rows = BadRowPolicy::kError;
  BagOfWordsOptions model;
};

absl::Status RunBaseline(const BaselineRunOptions& options);

}  // namespace xlnet::finetune
