#include "finetune/squad_eval.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/text.h"

namespace xlnet::finetune {
namespace {

// Python's Unicode \w: alphanumeric (letters L*, numbers N*) or "_".
bool IsWordChar(char32_t c) {
  if (c == '_') return true;
  const int32_t mask = U_GET_GC_MASK(static_cast<UChar32>(c));
  return (mask & (U_GC_L_MASK | U_GC_N_MASK)) != 0;
}

std::string LowerUnicode(std::string_view text) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool IsAsciiPunctuation(char32_t c) {
  // string.punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
         (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

std::vector<std::string> Tokens(std::string_view text) {
  if (text.empty()) return {};
  return data::SplitPythonWhitespace(NormalizeAnswer(text));
}

// Percentages of the summed scores over `qids`.
void AddSummary(const std::vector<std::string>& qids,
                const std::map<std::string, double>& exact,
                const std::map<std::string, double>& f1,
                const std::string& prefix,
                std::map<std::string, double>* metrics) {
  double e = 0.0;
  double f = 0.0;
  for (const auto& q : qids) {
    e += exact.at(q);
    f += f1.at(q);
  }
  const double total = static_cast<double>(qids.size());
  (*metrics)[prefix + "exact"] = 100.0 * e / total;
  (*metrics)[prefix + "f1"] = 100.0 * f / total;
  (*metrics)[prefix + "total"] = total;
}

// The script's find_best_thresh: walks the questions by increasing null
// odds, answering one more each time, and keeps the best total score.
// Returns {best score in %, its threshold}.
std::pair<double, double> BestThreshold(
    const std::vector<std::string>& qids,
    const std::map<std::string, std::string>& predictions,
    const std::map<std::string, double>& raw,
    const std::map<std::string, double>& null_odds,
    const std::map<std::string, bool>& has_answer) {
  double score = 0.0;
  for (const auto& q : qids) score += has_answer.at(q) ? 0.0 : 1.0;
  double best = score;
  double threshold = 0.0;
  std::vector<std::string> order = qids;
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) {
                     return null_odds.at(a) < null_odds.at(b);
                   });
  for (const auto& q : order) {
    if (has_answer.at(q)) {
      score += raw.at(q);
    } else if (!predictions.at(q).empty()) {
      score -= 1.0;
    }
    if (score > best) {
      best = score;
      threshold = null_odds.at(q);
    }
  }
  return {100.0 * best / qids.size(), threshold};
}

}  // namespace

std::string NormalizeAnswer(std::string_view text) {
  // lower -> remove punctuation -> remove articles -> fix whitespace.
  std::u32string cps = data::DecodeUtf8(LowerUnicode(text));
  cps.erase(std::remove_if(cps.begin(), cps.end(), IsAsciiPunctuation),
            cps.end());
  // \b(a|an|the)\b matches exactly the maximal runs of word characters
  // spelling a, an or the; each becomes one space.
  std::string no_articles;
  size_t i = 0;
  while (i < cps.size()) {
    if (!IsWordChar(cps[i])) {
      data::AppendUtf8(cps[i++], &no_articles);
      continue;
    }
    size_t j = i;
    while (j < cps.size() && IsWordChar(cps[j])) ++j;
    const std::string word =
        data::EncodeUtf8(std::u32string_view(cps).substr(i, j - i));
    if (word == "a" || word == "an" || word == "the") {
      no_articles += ' ';
    } else {
      no_articles += word;
    }
    i = j;
  }
  std::string out;
  for (const std::string& token : data::SplitPythonWhitespace(no_articles)) {
    if (!out.empty()) out += ' ';
    out += token;
  }
  return out;
}

int ExactMatchScore(std::string_view gold, std::string_view prediction) {
  return NormalizeAnswer(gold) == NormalizeAnswer(prediction) ? 1 : 0;
}

double F1Score(std::string_view gold, std::string_view prediction) {
  const std::vector<std::string> g = Tokens(gold);
  const std::vector<std::string> p = Tokens(prediction);
  if (g.empty() || p.empty()) return g == p ? 1.0 : 0.0;
  std::map<std::string, int64_t> counts;
  for (const auto& t : g) ++counts[t];
  int64_t same = 0;
  for (const auto& t : p) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / p.size();
  const double recall = static_cast<double>(same) / g.size();
  return 2.0 * precision * recall / (precision + recall);
}

absl::StatusOr<SquadEvalResult> EvaluateSquad(
    const SquadDataset& dataset,
    const std::map<std::string, std::string>& predictions,
    const std::map<std::string, double>* null_odds,
    const SquadEvalOptions& options) {
  SquadEvalResult result;
  std::vector<std::string> qids;
  std::vector<std::string> has_ans_qids;
  std::vector<std::string> no_ans_qids;
  std::map<std::string, bool> has_answer;
  std::map<std::string, double> exact_raw;
  std::map<std::string, double> f1_raw;
  for (const SquadExample& ex : dataset.examples) {
    auto pred = predictions.find(ex.qas_id);
    if (pred == predictions.end()) {
      result.missing.push_back(ex.qas_id);
      continue;
    }
    if (null_odds != nullptr && null_odds->count(ex.qas_id) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SQuAD evaluation: no null odds for question '", ex.qas_id, "'"));
    }
    std::vector<std::string> gold;
    for (const SquadAnswer& a : ex.answers) {
      if (!NormalizeAnswer(a.text).empty()) gold.push_back(a.text);
    }
    if (gold.empty()) gold.push_back("");
    double e = 0.0;
    double f = 0.0;
    for (const std::string& g : gold) {
      e = std::max(e, static_cast<double>(ExactMatchScore(g, pred->second)));
      f = std::max(f, F1Score(g, pred->second));
    }
    qids.push_back(ex.qas_id);
    has_answer[ex.qas_id] = !ex.answers.empty();
    (ex.answers.empty() ? no_ans_qids : has_ans_qids).push_back(ex.qas_id);
    exact_raw[ex.qas_id] = e;
    f1_raw[ex.qas_id] = f;
  }
  if (qids.empty()) {
    return absl::InvalidArgumentError(
        "SQuAD evaluation: no question of the dataset has a prediction");
  }
  std::map<std::string, double> exact = exact_raw;
  std::map<std::string, double> f1 = f1_raw;
  if (null_odds != nullptr) {
    for (const auto& q : qids) {
      if (null_odds->at(q) > options.na_prob_threshold) {
        exact[q] = f1[q] = has_answer[q] ? 0.0 : 1.0;
      }
    }
  }
  AddSummary(qids, exact, f1, "", &result.metrics);
  if (!has_ans_qids.empty()) {
    AddSummary(has_ans_qids, exact, f1, "HasAns_", &result.metrics);
  }
  if (!no_ans_qids.empty()) {
    AddSummary(no_ans_qids, exact, f1, "NoAns_", &result.metrics);
  }
  if (null_odds != nullptr) {
    const auto [best_exact, exact_thresh] =
        BestThreshold(qids, predictions, exact_raw, *null_odds, has_answer);
    const auto [best_f1, f1_thresh] =
        BestThreshold(qids, predictions, f1_raw, *null_odds, has_answer);
    result.metrics["best_exact"] = best_exact;
    result.metrics["best_exact_thresh"] = exact_thresh;
    result.metrics["best_f1"] = best_f1;
    result.metrics["best_f1_thresh"] = f1_thresh;
  }
  return result;
}

namespace {

// A {"qid": value} JSON object file.
template <typename T>
absl::StatusOr<std::map<std::string, T>> ReadJsonMap(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  // A question id given twice would score whichever answer parsed last.
  XLNET_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text, path));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a JSON object {\"id\": ...}"));
  }
  std::map<std::string, T> out;
  for (const auto& item : j.items()) {
    const bool right_type = std::is_same_v<T, std::string>
                                ? item.value().is_string()
                                : item.value().is_number();
    if (!right_type) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", item.key(), "': expected a ",
                       std::is_same_v<T, std::string> ? "string" : "number",
                       ", got ", item.value().dump()));
    }
    out[item.key()] = item.value().template get<T>();
  }
  return out;
}

}  // namespace

absl::Status RunSquadEvaluation(const SquadEvalRunOptions& run,
                                std::ostream& out) {
  SquadReadOptions read;
  read.check_answer_spans = false;  // score any file the script scores
  XLNET_ASSIGN_OR_RETURN(SquadDataset data, ReadSquad(run.data, read));
  XLNET_ASSIGN_OR_RETURN(auto predictions,
                         ReadJsonMap<std::string>(run.predictions));
  std::optional<std::map<std::string, double>> null_odds;
  if (!run.null_odds.empty()) {
    XLNET_ASSIGN_OR_RETURN(null_odds, ReadJsonMap<double>(run.null_odds));
  }
  SquadEvalOptions options;
  options.na_prob_threshold = run.na_prob_thresh;
  XLNET_ASSIGN_OR_RETURN(
      SquadEvalResult result,
      EvaluateSquad(data, predictions, null_odds ? &*null_odds : nullptr,
                    options));
  for (const auto& id : result.missing) {
    XLOG(WARNING) << "missing prediction for " << id;
  }
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : result.metrics) j[k] = v;
  out << j.dump(2) << std::endl;
  if (!run.out.empty()) {
    XLNET_RETURN_IF_ERROR(WriteFileAtomic(run.out, j.dump(2) + "\n"));
  }
  return absl::OkStatus();
}

}  // namespace xlnet::finetune
