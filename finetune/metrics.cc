#include "finetune/metrics.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace xlnet::finetune {
namespace {

template <typename T>
void CheckPair(const std::vector<T>& a, const std::vector<T>& b) {
  TORCH_CHECK(a.size() == b.size(),
              "metric inputs differ in length: ", a.size(), " vs ", b.size());
  TORCH_CHECK(!a.empty(), "metric inputs are empty");
}

// F1 of `cls` treated as the positive class.
double ClassF1(const std::vector<int64_t>& labels,
               const std::vector<int64_t>& predictions, int64_t cls) {
  int64_t tp = 0;
  int64_t fp = 0;
  int64_t fn = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool t = labels[i] == cls;
    const bool p = predictions[i] == cls;
    tp += t && p;
    fp += !t && p;
    fn += t && !p;
  }
  const int64_t denominator = 2 * tp + fp + fn;
  return denominator == 0 ? 0.0 : 2.0 * tp / denominator;
}

}  // namespace

double Accuracy(const std::vector<int64_t>& labels,
                const std::vector<int64_t>& predictions) {
  CheckPair(labels, predictions);
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    correct += labels[i] == predictions[i];
  }
  return static_cast<double>(correct) / labels.size();
}

double BinaryF1(const std::vector<int64_t>& labels,
                const std::vector<int64_t>& predictions) {
  CheckPair(labels, predictions);
  return ClassF1(labels, predictions, 1);
}

double MacroF1(const std::vector<int64_t>& labels,
               const std::vector<int64_t>& predictions) {
  CheckPair(labels, predictions);
  std::set<int64_t> classes(labels.begin(), labels.end());
  classes.insert(predictions.begin(), predictions.end());
  double sum = 0.0;
  for (int64_t c : classes) sum += ClassF1(labels, predictions, c);
  return sum / classes.size();
}

double MatthewsCorrelation(const std::vector<int64_t>& labels,
                           const std::vector<int64_t>& predictions) {
  CheckPair(labels, predictions);
  // With t_k / p_k the true / predicted counts of class k, c the number of
  // correct predictions and s the number of samples:
  //   MCC = (c·s − Σ t_k·p_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²)).
  std::set<int64_t> classes(labels.begin(), labels.end());
  classes.insert(predictions.begin(), predictions.end());
  const double s = static_cast<double>(labels.size());
  double c = 0;
  for (size_t i = 0; i < labels.size(); ++i) c += labels[i] == predictions[i];
  double tp_sum = 0;
  double pp_sum = 0;
  double tt_sum = 0;
  for (int64_t k : classes) {
    const double t = std::count(labels.begin(), labels.end(), k);
    const double p = std::count(predictions.begin(), predictions.end(), k);
    tp_sum += t * p;
    pp_sum += p * p;
    tt_sum += t * t;
  }
  const double cov_ytyp = c * s - tp_sum;
  const double cov_ypyp = s * s - pp_sum;
  const double cov_ytyt = s * s - tt_sum;
  if (cov_ypyp * cov_ytyt == 0.0) return 0.0;
  return cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp);
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  CheckPair(x, y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0;
  double sxx = 0;
  double syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0.0 || syy == 0.0) return std::numeric_limits<double>::quiet_NaN();
  // Rounding can push |r| a hair over 1.
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

std::vector<double> AverageRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) {
      ++j;
    }
    // Positions i..j (0-based) share the mean of ranks i+1..j+1.
    const double rank = (static_cast<double>(i + 1) + (j + 1)) / 2.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double Spearman(const std::vector<double>& x, const std::vector<double>& y) {
  CheckPair(x, y);
  return Pearson(AverageRanks(x), AverageRanks(y));
}

double MeanSquaredError(const std::vector<double>& targets,
                        const std::vector<double>& predictions) {
  CheckPair(targets, predictions);
  double sum = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const double d = predictions[i] - targets[i];
    sum += d * d;
  }
  return sum / targets.size();
}

std::map<std::string, double> ClassificationMetrics(
    const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
    int64_t num_classes) {
  TORCH_CHECK(num_classes >= 2, "num_classes must be >= 2, got ", num_classes);
  std::map<std::string, double> m;
  m["accuracy"] = Accuracy(labels, predictions);
  m["mcc"] = MatthewsCorrelation(labels, predictions);
  if (num_classes == 2) {
    m["f1"] = BinaryF1(labels, predictions);
  } else {
    m["macro_f1"] = MacroF1(labels, predictions);
  }
  return m;
}

std::map<std::string, double> RegressionMetrics(
    const std::vector<double>& targets,
    const std::vector<double>& predictions) {
  return {{"pearson", Pearson(targets, predictions)},
          {"spearman", Spearman(targets, predictions)},
          {"mse", MeanSquaredError(targets, predictions)}};
}

}  // namespace xlnet::finetune
