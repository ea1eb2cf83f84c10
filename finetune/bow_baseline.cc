#include "finetune/bow_baseline.h"

#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "finetune/metrics.h"
#include "model_io/run_layout.h"

namespace xlnet::finetune {
namespace {

bool IsWordByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c >= 0x80;
}

// Sparse rows for embedding_bag: feature ids, row offsets, weights.
struct SparseRows {
  torch::Tensor ids;      // [nnz] int64
  torch::Tensor offsets;  // [N] int64
  torch::Tensor weights;  // [nnz] float
  torch::Tensor labels;   // [N] int64
};

std::vector<std::string> Features(const std::string& text, bool bigrams) {
  std::vector<std::string> words = BagOfWordsTokens(text);
  std::vector<std::string> out = words;
  if (bigrams) {
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      out.push_back(absl::StrCat(words[i], " ", words[i + 1]));
    }
  }
  return out;
}

SparseRows Vectorize(const std::vector<TextExample>& examples,
                     const std::unordered_map<std::string, int64_t>& vocab,
                     const std::vector<float>& idf, const LabelSet& labels,
                     bool bigrams) {
  std::vector<int64_t> ids, offsets, gold;
  std::vector<float> weights;
  for (const TextExample& e : examples) {
    offsets.push_back(static_cast<int64_t>(ids.size()));
    std::unordered_map<int64_t, int> counts;
    for (const auto& f : Features(e.text_a + " \n " + e.text_b, bigrams)) {
      auto it = vocab.find(f);
      if (it != vocab.end()) ++counts[it->second];
    }
    double norm = 0;
    const size_t begin = ids.size();
    for (const auto& [id, n] : counts) {
      const float w = (1.0f + std::log(static_cast<float>(n))) * idf[id];
      ids.push_back(id);
      weights.push_back(w);
      norm += static_cast<double>(w) * w;
    }
    norm = std::sqrt(std::max(norm, 1e-12));
    for (size_t i = begin; i < weights.size(); ++i) weights[i] /= norm;
    gold.push_back(labels.Id(e.label));
  }
  SparseRows rows;
  rows.ids = torch::tensor(ids, torch::kLong);
  rows.offsets = torch::tensor(offsets, torch::kLong);
  rows.weights = torch::tensor(weights, torch::kFloat);
  rows.labels = torch::tensor(gold, torch::kLong);
  return rows;
}

torch::Tensor Logits(const SparseRows& rows, const torch::Tensor& w,
                     const torch::Tensor& b) {
  // [N, C] = sum over a row's features of weight * W[feature].
  auto out = torch::embedding_bag(w, rows.ids, rows.offsets,
                                  /*scale_grad_by_freq=*/false,
                                  /*mode=*/0, /*sparse=*/false, rows.weights);
  return std::get<0>(out) + b;
}

std::map<std::string, double> Score(const SparseRows& rows,
                                    const torch::Tensor& w,
                                    const torch::Tensor& b, int64_t classes) {
  torch::NoGradGuard no_grad;
  const torch::Tensor pred = Logits(rows, w, b).argmax(-1).contiguous();
  const torch::Tensor gold = rows.labels.contiguous();
  std::vector<int64_t> p(pred.data_ptr<int64_t>(),
                         pred.data_ptr<int64_t>() + pred.numel());
  std::vector<int64_t> g(gold.data_ptr<int64_t>(),
                         gold.data_ptr<int64_t>() + gold.numel());
  return ClassificationMetrics(g, p, classes);
}

}  // namespace

std::vector<std::string> BagOfWordsTokens(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (IsWordByte(c)) {
      cur.push_back(c < 0x80 ? static_cast<char>(std::tolower(c))
                             : static_cast<char>(c));
    } else if (c == '\'' && !cur.empty() && i + 1 < text.size() &&
               IsWordByte(static_cast<unsigned char>(text[i + 1]))) {
      cur.push_back('\'');
    } else if (!cur.empty()) {
      words.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

absl::StatusOr<BagOfWordsResult> RunBagOfWordsBaseline(
    const std::vector<TextExample>& train, const std::vector<TextExample>& dev,
    const std::vector<TextExample>& test, const LabelSet& labels,
    const BagOfWordsOptions& options) {
  if (train.empty() || dev.empty()) {
    return absl::InvalidArgumentError(
        "the bag-of-words baseline needs training and dev rows");
  }
  for (const auto* set : {&train, &dev, &test}) {
    for (const TextExample& e : *set) {
      if (!e.has_label || labels.Id(e.label) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            e.location, ": missing or unknown label '", e.label, "'"));
      }
    }
  }
  // Document frequencies over the training rows.
  std::unordered_map<std::string, int64_t> df;
  for (const TextExample& e : train) {
    std::vector<std::string> f =
        Features(e.text_a + " \n " + e.text_b, options.bigrams);
    std::unordered_set<std::string> seen(f.begin(), f.end());
    for (const auto& s : seen) ++df[s];
  }
  std::vector<std::pair<std::string, int64_t>> kept;
  for (const auto& [f, n] : df) {
    if (n >= options.min_df) kept.emplace_back(f, n);
  }
  std::sort(kept.begin(), kept.end());  // deterministic ids
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<float> idf;
  const double n_docs = static_cast<double>(train.size());
  for (const auto& [f, n] : kept) {
    vocab.emplace(f, static_cast<int64_t>(idf.size()));
    idf.push_back(static_cast<float>(std::log((1 + n_docs) / (1 + n)) + 1));
  }
  const SparseRows tr = Vectorize(train, vocab, idf, labels, options.bigrams);
  const SparseRows dv = Vectorize(dev, vocab, idf, labels, options.bigrams);
  const int64_t classes = labels.size();
  const int64_t features = static_cast<int64_t>(idf.size());

  BagOfWordsResult result;
  result.features = features;
  double best_dev = -1;
  torch::Tensor best_w, best_b;
  for (const double l2 : options.l2_grid) {
    torch::manual_seed(options.seed);
    torch::Tensor w = torch::zeros({features, classes}).requires_grad_();
    torch::Tensor b = torch::zeros({classes}).requires_grad_();
    torch::optim::Adam adam({w, b}, torch::optim::AdamOptions(options.lr));
    for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
      adam.zero_grad();
      torch::Tensor loss =
          torch::cross_entropy_loss(Logits(tr, w, b), tr.labels);
      if (l2 > 0) loss = loss + l2 * w.pow(2).sum();
      loss.backward();
      adam.step();
    }
    const double acc = Score(dv, w, b, classes).at("accuracy");
    XLOG(INFO) << "bag of words: l2 " << l2 << ": dev accuracy " << acc;
    if (acc > best_dev) {
      best_dev = acc;
      best_w = w.detach();
      best_b = b.detach();
      result.l2 = l2;
    }
  }
  result.metrics["dev"] = Score(dv, best_w, best_b, classes);
  if (!test.empty()) {
    const SparseRows te = Vectorize(test, vocab, idf, labels, options.bigrams);
    result.metrics["test"] = Score(te, best_w, best_b, classes);
  }
  return result;
}

absl::Status RunBaseline(const BaselineRunOptions& run) {
  ReadOptions read;
  read.bad_rows = run.bad_rows;
  XLNET_ASSIGN_OR_RETURN(ExampleSet train, ReadExamples(run.train, read));
  LogSkippedRows(run.train, train.skipped, train.problems);
  const LabelSet labels = LabelSet::FromExamples(train.examples);
  read.labels = &labels;
  XLNET_ASSIGN_OR_RETURN(ExampleSet dev, ReadExamples(run.dev, read));
  LogSkippedRows(run.dev, dev.skipped, dev.problems);
  ExampleSet test;
  if (!run.test.empty()) {
    XLNET_ASSIGN_OR_RETURN(test, ReadExamples(run.test, read));
    LogSkippedRows(run.test, test.skipped, test.problems);
  }
  XLNET_ASSIGN_OR_RETURN(
      BagOfWordsResult result,
      RunBagOfWordsBaseline(train.examples, dev.examples, test.examples, labels,
                            run.model));
  nlohmann::json json = {{"model", "bag_of_words"},
                         {"features", result.features},
                         {"l2", result.l2}};
  for (const auto& [split, metrics] : result.metrics) {
    std::string line;
    for (const auto& [k, v] : metrics) {
      json[split][k] = v;
      absl::StrAppend(&line, " ", k, " ", v);
    }
    XLOG(INFO) << split << ":" << line;
  }
  XLNET_RETURN_IF_ERROR(MakeDirs(run.out_dir));
  return WriteFileAtomic(RunPath(run.out_dir, kEvalResultsFile),
                         json.dump(2) + "\n");
}

}  // namespace xlnet::finetune
