// Evaluation metrics of classification and regression fine-tuning, with the
// conventions of scikit-learn / SciPy (the GLUE scorers):
//
//   auto m = ClassificationMetrics(labels, predictions, /*num_classes=*/2);
//   // {"accuracy": .., "f1": .., "mcc": ..}; "macro_f1" when num_classes > 2
//   auto r = RegressionMetrics(targets, outputs);
//   // {"pearson": .., "spearman": .., "mse": ..}
//
// Inputs must be non-empty and of equal length (TORCH_CHECK).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xlnet::finetune {

// Fraction of positions where prediction == label.
double Accuracy(const std::vector<int64_t>& labels,
                const std::vector<int64_t>& predictions);

// F1 of the positive class id 1: 2·tp / (2·tp + fp + fn); 0 when there is
// no true and no predicted positive (sklearn's zero_division=0).
double BinaryF1(const std::vector<int64_t>& labels,
                const std::vector<int64_t>& predictions);

// Unweighted mean of per-class F1 over the classes that occur in labels or
// predictions (sklearn f1_score(average="macro")).
double MacroF1(const std::vector<int64_t>& labels,
               const std::vector<int64_t>& predictions);

// Matthews correlation coefficient, multiclass generalisation (R_K, as
// sklearn matthews_corrcoef); 0 when undefined (a constant labelling).
double MatthewsCorrelation(const std::vector<int64_t>& labels,
                           const std::vector<int64_t>& predictions);

// Pearson's r; NaN when either input is constant (as SciPy).
double Pearson(const std::vector<double>& x, const std::vector<double>& y);

// Spearman's rho: Pearson of the ranks, ties given their average rank; NaN
// when either input is constant.
double Spearman(const std::vector<double>& x, const std::vector<double>& y);

// Mean of (prediction - target)^2.
double MeanSquaredError(const std::vector<double>& targets,
                        const std::vector<double>& predictions);

// Ranks 1..n, ties averaged (scipy.stats.rankdata "average").
std::vector<double> AverageRanks(const std::vector<double>& values);

// "accuracy", "mcc", and "f1" (F1 of class 1) when num_classes == 2 or
// "macro_f1" when num_classes > 2.
std::map<std::string, double> ClassificationMetrics(
    const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
    int64_t num_classes);

// "pearson", "spearman", "mse".
std::map<std::string, double> RegressionMetrics(
    const std::vector<double>& targets, const std::vector<double>& predictions);

}  // namespace xlnet::finetune
