// Metrics against hand-computed values; the arithmetic is in the comments.
#include "finetune/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace xlnet::finetune {
namespace {

TEST(MetricsTest, Binary) {
  // pos:    0 1 2 3 4 5 6 7
  // label:  1 1 1 0 0 0 1 0
  // pred:   1 0 1 0 1 0 1 1
  // tp = 3 (0,2,6), fn = 1 (1), fp = 2 (4,7), tn = 2 (3,5).
  const std::vector<int64_t> labels = {1, 1, 1, 0, 0, 0, 1, 0};
  const std::vector<int64_t> preds = {1, 0, 1, 0, 1, 0, 1, 1};
  auto m = ClassificationMetrics(labels, preds, 2);
  // accuracy = (3 + 2) / 8
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 0.625);
  // F1 = 2·3 / (2·3 + 2 + 1) = 6/9
  EXPECT_DOUBLE_EQ(m.at("f1"), 6.0 / 9.0);
  // MCC = (tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn))
  //     = (6 − 2) / sqrt(5·4·4·3) = 4 / sqrt(240)
  EXPECT_NEAR(m.at("mcc"), 4.0 / std::sqrt(240.0), 1e-12);
  EXPECT_EQ(m.count("macro_f1"), 0u);
}

TEST(MetricsTest, BinaryDegenerate) {
  // Everything predicted 0: no predicted positive, so F1 = 0 / (0 + 0 + 2)
  // and the prediction variance is 0, so MCC is undefined -> 0 (sklearn).
  auto m = ClassificationMetrics({0, 1, 0, 1}, {0, 0, 0, 0}, 2);
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("f1"), 0.0);
  EXPECT_DOUBLE_EQ(m.at("mcc"), 0.0);
  // No positives anywhere: 2·tp + fp + fn = 0 -> F1 0; accuracy 1.
  m = ClassificationMetrics({0, 0}, {0, 0}, 2);
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 1.0);
  EXPECT_DOUBLE_EQ(m.at("f1"), 0.0);
  EXPECT_DOUBLE_EQ(m.at("mcc"), 0.0);
  // Perfect and perfectly inverted predictions.
  EXPECT_DOUBLE_EQ(MatthewsCorrelation({0, 1, 1}, {0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(MatthewsCorrelation({0, 1, 1}, {1, 0, 0}), -1.0);
}

TEST(MetricsTest, Multiclass) {
  // pos:   0 1 2 3 4 5
  // label: 0 1 2 0 1 2
  // pred:  0 2 1 0 0 2
  // class 0: tp 2 (0,3), fp 1 (4), fn 0 -> F1 = 4 / 5 = 0.8
  // class 1: tp 0 -> F1 = 0
  // class 2: tp 1 (5), fp 1 (1), fn 1 (2) -> F1 = 2 / 4 = 0.5
  const std::vector<int64_t> labels = {0, 1, 2, 0, 1, 2};
  const std::vector<int64_t> preds = {0, 2, 1, 0, 0, 2};
  auto m = ClassificationMetrics(labels, preds, 3);
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 0.5);
  EXPECT_NEAR(m.at("macro_f1"), (0.8 + 0.0 + 0.5) / 3.0, 1e-12);
  EXPECT_EQ(m.count("f1"), 0u);
  // s = 6, c = 3, true counts t = (2,2,2), predicted p = (3,1,2):
  // Σt·p = 6 + 2 + 4 = 12, Σp² = 14, Σt² = 12
  // MCC = (3·6 − 12) / sqrt((36 − 14)(36 − 12)) = 6 / sqrt(528)
  EXPECT_NEAR(m.at("mcc"), 6.0 / std::sqrt(528.0), 1e-12);
}

TEST(MetricsTest, MacroF1CountsClassesOnlyPredicted) {
  // Classes {0, 1, 3}: class 0 tp 1 fn 1 -> 2/3; class 1 tp 2 -> 1;
  // class 3 (only predicted) fp 1 -> 0. Mean (2/3 + 1 + 0) / 3.
  EXPECT_NEAR(MacroF1({0, 0, 1, 1}, {0, 3, 1, 1}), (2.0 / 3.0 + 1.0) / 3.0,
              1e-12);
}

TEST(MetricsTest, Regression) {
  // x = 1..4, y = (2, 4, 5, 9): deviations (−1.5, −.5, .5, 1.5) and
  // (−3, −1, 0, 4): Sxy = 4.5 + .5 + 0 + 6 = 11, Sxx = 5, Syy = 26,
  // r = 11 / sqrt(130). Ranks are equal, so rho = 1.
  // MSE = ((2−1)² + (4−2)² + (5−3)² + (9−4)²) / 4 = (1 + 4 + 4 + 25) / 4.
  auto m = RegressionMetrics({1, 2, 3, 4}, {2, 4, 5, 9});
  EXPECT_NEAR(m.at("pearson"), 11.0 / std::sqrt(130.0), 1e-12);
  EXPECT_NEAR(m.at("spearman"), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(m.at("mse"), 34.0 / 4.0);
}

TEST(MetricsTest, SpearmanWithTies) {
  // Ranks of (10, 20, 10, 30, 20, 20): the two 10s share (1+2)/2, the three
  // 20s share (3+4+5)/3, 30 is 6.
  EXPECT_EQ(AverageRanks({10, 20, 10, 30, 20, 20}),
            (std::vector<double>{1.5, 4, 1.5, 6, 4, 4}));
  // x = (1, 2, 2, 3) -> ranks (1, 2.5, 2.5, 4); y = (1, 3, 2, 4) -> same.
  // Deviations from 2.5: (−1.5, 0, 0, 1.5) and (−1.5, .5, −.5, 1.5):
  // Sxy = 4.5, Sxx = 4.5, Syy = 5 -> rho = 4.5 / sqrt(22.5).
  EXPECT_NEAR(Spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 4.5 / std::sqrt(22.5),
              1e-12);
}

TEST(MetricsTest, ConstantInputIsUndefined) {
  EXPECT_TRUE(std::isnan(Pearson({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(Spearman({1, 2, 3}, {7, 7, 7})));
  EXPECT_DOUBLE_EQ(MeanSquaredError({1, 2, 3}, {1, 3, 5}), 5.0 / 3.0);
}

TEST(MetricsTest, MismatchedOrEmptyInputThrows) {
  EXPECT_THROW(Accuracy({0, 1}, {0}), c10::Error);
  EXPECT_THROW(Pearson({}, {}), c10::Error);
}

}  // namespace
}  // namespace xlnet::finetune
