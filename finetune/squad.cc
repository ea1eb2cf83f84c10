#include "finetune/squad.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "data_pipeline/text.h"

namespace xlnet::finetune {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Reads the questions of one paragraph into `out`.
class SquadReader {
 public:
  SquadReader(const std::string& source, const SquadReadOptions& options,
              SquadDataset* out)
      : source_(source), options_(options), out_(out) {}

  absl::Status Article(const Json& article, size_t index) {
    if (!article.is_object()) {
      return Structure(absl::StrCat("data[", index, "] is not an object"));
    }
    std::string title;
    auto t = article.find("title");
    if (t != article.end() && t->is_string()) title = t->get<std::string>();
    auto paragraphs = article.find("paragraphs");
    if (paragraphs == article.end() || !paragraphs->is_array()) {
      return Structure(
          absl::StrCat("article '", title, "' has no \"paragraphs\" array"));
    }
    for (size_t p = 0; p < paragraphs->size(); ++p) {
      XLNET_RETURN_IF_ERROR(Paragraph((*paragraphs)[p], title, p));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Structure(const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", what));
  }

  absl::Status Bad(const std::string& qid, const std::string& title,
                   const std::string& what) {
    std::string message = absl::StrCat(source_, ": question '", qid,
                                       "' (article '", title, "'): ", what);
    if (options_.bad_rows == BadRowPolicy::kError) {
      return absl::InvalidArgumentError(
          absl::StrCat(message, " (bad_rows: skip would skip it)"));
    }
    out_->problems.push_back(std::move(message));
    ++out_->skipped;
    return absl::OkStatus();
  }

  absl::Status Paragraph(const Json& paragraph, const std::string& title,
                         size_t index) {
    if (!paragraph.is_object()) {
      return Structure(absl::StrCat("article '", title, "' paragraph ", index,
                                    " is not an object"));
    }
    auto qas = paragraph.find("qas");
    if (qas == paragraph.end() || !qas->is_array()) {
      return Structure(absl::StrCat("article '", title, "' paragraph ", index,
                                    " has no \"qas\" array"));
    }
    std::string context;
    std::string context_problem;
    auto c = paragraph.find("context");
    if (c == paragraph.end() || !c->is_string()) {
      context_problem = "paragraph has no \"context\" string";
    } else {
      context = c->get<std::string>();
      if (!data::IsValidUtf8(context)) {
        context_problem = "context is not valid UTF-8";
      } else if (absl::StripAsciiWhitespace(context).empty()) {
        context_problem = "empty context";
      }
    }
    const std::vector<size_t> offsets = data::CodePointOffsets(context);
    const int64_t context_chars = static_cast<int64_t>(offsets.size()) - 1;
    const int64_t paragraph_index =
        static_cast<int64_t>(out_->paragraphs.size());
    bool used = false;
    for (const Json& qa : *qas) {
      std::string qid;
      if (qa.is_object()) {
        auto id = qa.find("id");
        if (id != qa.end() && id->is_string()) qid = id->get<std::string>();
      }
      if (!context_problem.empty()) {
        XLNET_RETURN_IF_ERROR(Bad(qid, title, context_problem));
        continue;
      }
      if (qid.empty()) {
        XLNET_RETURN_IF_ERROR(Bad(qid, title, "missing or empty \"id\""));
        continue;
      }
      SquadExample ex;
      ex.qas_id = qid;
      ex.paragraph = paragraph_index;
      const std::string what =
          Question(qa, context, offsets, context_chars, &ex);
      if (!what.empty()) {
        XLNET_RETURN_IF_ERROR(Bad(qid, title, what));
        continue;
      }
      if (!ids_.insert(qid).second) {
        XLNET_RETURN_IF_ERROR(Bad(qid, title, "duplicate question id"));
        continue;
      }
      out_->examples.push_back(std::move(ex));
      used = true;
    }
    if (used) out_->paragraphs.push_back({title, std::move(context)});
    return absl::OkStatus();
  }

  // Fills `ex` from `qa`; returns the problem, or "" when it is fine.
  std::string Question(const Json& qa, const std::string& context,
                       const std::vector<size_t>& offsets,
                       int64_t context_chars, SquadExample* ex) {
    auto q = qa.find("question");
    if (q == qa.end() || !q->is_string()) return "no \"question\" string";
    ex->question = q->get<std::string>();
    if (!data::IsValidUtf8(ex->question)) return "question is not valid UTF-8";
    if (absl::StripAsciiWhitespace(ex->question).empty()) {
      return "empty question";
    }
    auto imp = qa.find("is_impossible");
    if (imp != qa.end()) {
      if (!imp->is_boolean()) return "\"is_impossible\" is not a boolean";
      ex->is_impossible = imp->get<bool>();
    }
    auto answers = qa.find("answers");
    if (answers != qa.end() && !answers->is_null()) {
      if (!answers->is_array()) return "\"answers\" is not an array";
      for (size_t k = 0; k < answers->size(); ++k) {
        const Json& a = (*answers)[k];
        const std::string which = absl::StrCat("answer ", k);
        if (!a.is_object()) return absl::StrCat(which, " is not an object");
        auto text = a.find("text");
        auto start = a.find("answer_start");
        if (text == a.end() || !text->is_string()) {
          return absl::StrCat(which, " has no \"text\" string");
        }
        if (start == a.end() || !start->is_number_integer()) {
          return absl::StrCat(which, " has no integer \"answer_start\"");
        }
        SquadAnswer answer{text->get<std::string>(), start->get<int64_t>()};
        if (!data::IsValidUtf8(answer.text)) {
          return absl::StrCat(which, " text is not valid UTF-8");
        }
        if (data::IsPythonBlank(answer.text)) {
          return absl::StrCat(which, " text is empty");
        }
        if (options_.check_answer_spans) {
          const int64_t len = data::CodePointLength(answer.text);
          if (answer.answer_start < 0 ||
              answer.answer_start + len > context_chars) {
            return absl::StrCat(which, " at ", answer.answer_start, "+", len,
                                " lies outside the context (", context_chars,
                                " characters)");
          }
          const size_t b = offsets[answer.answer_start];
          const size_t e = offsets[answer.answer_start + len];
          if (context.compare(b, e - b, answer.text) != 0) {
            return absl::StrCat(which, " text '", answer.text,
                                "' is not the context at answer_start ",
                                answer.answer_start, " ('",
                                context.substr(b, e - b), "')");
          }
        }
        ex->answers.push_back(std::move(answer));
      }
    }
    if (options_.require_answers && !ex->is_impossible && ex->answers.empty()) {
      return absl::StrCat(
          "answerable question (is_impossible false or absent) without "
          "answers",
          options_.unlabeled_hint.empty() ? "" : "; ", options_.unlabeled_hint);
    }
    return "";
  }

  const std::string& source_;
  const SquadReadOptions& options_;
  SquadDataset* out_;
  std::set<std::string> ids_;
};

// Official _check_is_max_context: among the windows holding `position`, the
// one with the largest min(left, right) context + 0.01 * length (first wins).
int64_t MaxContextWindow(const std::vector<std::pair<int64_t, int64_t>>& spans,
                         int64_t position) {
  double best_score = -1.0;
  int64_t best = -1;
  for (size_t s = 0; s < spans.size(); ++s) {
    const auto [start, length] = spans[s];
    const int64_t end = start + length - 1;
    if (position < start || position > end) continue;
    const double score =
        std::min(position - start, end - position) + 0.01 * length;
    if (best < 0 || score > best_score) {
      best_score = score;
      best = static_cast<int64_t>(s);
    }
  }
  return best;
}

// First and last paragraph tokens covering the answer's characters
// [begin, end); {-1, -1} when no token does.
std::pair<int64_t, int64_t> AnswerTokens(const data::Encoding& enc,
                                         int64_t begin, int64_t end) {
  int64_t first = -1;
  int64_t last = -1;
  for (size_t k = 0; k < enc.ids.size(); ++k) {
    if (enc.char_begin[k] == enc.char_end[k]) continue;  // lone "▁"
    if (enc.char_end[k] > begin && enc.char_begin[k] < end) {
      if (first < 0) first = static_cast<int64_t>(k);
      last = static_cast<int64_t>(k);
    }
  }
  return {first, last};
}

torch::Tensor ToTensor(const std::vector<int64_t>& v,
                       std::vector<int64_t> shape) {
  return torch::tensor(v, torch::kInt64).reshape(shape);
}
torch::Tensor ToTensor(const std::vector<float>& v,
                       std::vector<int64_t> shape) {
  return torch::tensor(v, torch::kFloat32).reshape(shape);
}

}  // namespace

absl::StatusOr<SquadDataset> ParseSquad(const std::string& contents,
                                        const std::string& source,
                                        const SquadReadOptions& options) {
  // A repeated key (two "answers", two "context"s) is refused, not resolved.
  XLNET_ASSIGN_OR_RETURN(const Json root, ParseJson(contents, source));
  if (!root.is_object() || !root.contains("data") || !root["data"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": not a SQuAD file (expected an object with a \"data\" "
                     "array of articles)"));
  }
  SquadDataset out;
  auto version = root.find("version");
  if (version != root.end() && version->is_string()) {
    out.version = version->get<std::string>();
  }
  SquadReader reader(source, options, &out);
  const Json& data = root["data"];
  for (size_t a = 0; a < data.size(); ++a) {
    XLNET_RETURN_IF_ERROR(reader.Article(data[a], a));
  }
  return out;
}

absl::StatusOr<SquadDataset> ReadSquad(const std::string& path,
                                       const SquadReadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
  return ParseSquad(contents, path, options);
}

namespace {

// The official window loop over a paragraph of `n_doc` tokens: (start,
// length) pairs of at most `max_doc` tokens, each starting at most `stride`
// after the previous one, the last ending at the paragraph's end.
std::vector<std::pair<int64_t, int64_t>> DocSpans(int64_t n_doc,
                                                  int64_t max_doc,
                                                  int64_t stride) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t start = 0; start < n_doc;) {
    const int64_t length = std::min(n_doc - start, max_doc);
    spans.emplace_back(start, length);
    if (start + length == n_doc) break;
    start += std::min(length, stride);
  }
  return spans;
}

// The rows of the windows' model inputs, [n, len] each when flattened.
struct WindowRows {
  std::vector<int64_t> ids;
  std::vector<int64_t> segs;
  std::vector<float> mask;
  std::vector<float> p_mask;

  // Appends window `s` of `spans` as one row of `len`: paragraph <sep>
  // question <sep> <cls>, then padding (the official layout); fills `w`'s
  // character offsets, max-context flags and cls_index.
  void Append(const data::Encoding& context, const std::vector<int32_t>& query,
              const std::vector<std::pair<int64_t, int64_t>>& spans, size_t s,
              int64_t len, SquadWindow* w) {
    const auto [doc_start, doc_len] = spans[s];
    const size_t row = ids.size();
    auto push = [&](int64_t id, int64_t seg, float p) {
      ids.push_back(id);
      segs.push_back(seg);
      p_mask.push_back(p);
    };
    for (int64_t k = 0; k < doc_len; ++k) {
      const int64_t t = doc_start + k;
      w->char_begin.push_back(context.char_begin[t]);
      w->char_end.push_back(context.char_end[t]);
      w->is_max_context.push_back(MaxContextWindow(spans, t) ==
                                  static_cast<int64_t>(s));
      push(context.ids[t], kSquadSegP, 0.0f);
    }
    push(data::kSepId, kSquadSegP, 1.0f);
    for (int32_t q : query) push(q, kSquadSegQ, 1.0f);
    push(data::kSepId, kSquadSegQ, 1.0f);
    w->cls_index = static_cast<int64_t>(ids.size() - row);
    push(data::kClsId, kSquadSegCls, 0.0f);
    mask.insert(mask.end(), ids.size() - row, 1.0f);
    ids.resize(row + len, data::kPadId);
    segs.resize(row + len, kSquadSegPad);
    p_mask.resize(row + len, 1.0f);
    mask.resize(row + len, 0.0f);
  }
};

}  // namespace

absl::StatusOr<SquadFeatures> BuildSquadFeatures(
    const SquadDataset& dataset, const data::Tokenizer& tokenizer,
    const SquadFeatureOptions& options) {
  const int64_t len = options.max_seq_length;
  if (options.max_query_length < 1 || options.doc_stride < 1 ||
      len - options.max_query_length - 3 < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SQuAD features: need max_query_length >= 1, doc_stride >= 1 and "
        "max_seq_length > max_query_length + 3; got max_seq_length ",
        len, ", max_query_length ", options.max_query_length, ", doc_stride ",
        options.doc_stride));
  }
  SquadFeatures out;
  WindowRows rows;
  std::vector<int64_t> cls;
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;
  std::vector<float> impossible;
  // Questions of one paragraph are contiguous; tokenize each paragraph once.
  int64_t encoded_paragraph = -1;
  data::Encoding context;
  std::vector<int32_t> query;
  for (size_t e = 0; e < dataset.examples.size(); ++e) {
    const SquadExample& ex = dataset.examples[e];
    const SquadParagraph& paragraph = dataset.paragraphs.at(ex.paragraph);
    if (ex.paragraph != encoded_paragraph) {
      auto encoded = tokenizer.Encode(paragraph.context);
      if (!encoded.ok()) {
        return Annotate(encoded.status(), "question '", ex.qas_id, "' context");
      }
      context = *std::move(encoded);
      encoded_paragraph = ex.paragraph;
    }
    query.clear();
    XLNET_RETURN_IF_ERROR(Annotate(tokenizer.EncodeIds(ex.question, &query),
                                   "question '", ex.qas_id, "'"));
    if (static_cast<int64_t>(query.size()) > options.max_query_length) {
      query.resize(options.max_query_length);
      ++out.truncated_questions;
    }
    const int64_t n_doc = static_cast<int64_t>(context.ids.size());
    const int64_t max_doc = len - static_cast<int64_t>(query.size()) - 3;
    const std::vector<std::pair<int64_t, int64_t>> spans =
        DocSpans(n_doc, max_doc, options.doc_stride);
    // The answer's tokens in the paragraph (training).
    int64_t tok_start = -1;
    int64_t tok_end = -1;
    if (options.is_training && !ex.is_impossible && !ex.answers.empty()) {
      const SquadAnswer& a = ex.answers[0];
      std::tie(tok_start, tok_end) =
          AnswerTokens(context, a.answer_start,
                       a.answer_start + data::CodePointLength(a.text));
    }
    for (size_t s = 0; s < spans.size(); ++s) {
      const auto [doc_start, doc_len] = spans[s];
      SquadWindow w;
      w.example = static_cast<int64_t>(e);
      w.window = static_cast<int64_t>(s);
      w.doc_start = doc_start;
      w.paragraph_len = doc_len;
      rows.Append(context, query, spans, s, len, &w);
      cls.push_back(w.cls_index);
      if (options.is_training) {
        const bool inside = tok_start >= doc_start && tok_end >= 0 &&
                            tok_end < doc_start + doc_len;
        if (ex.is_impossible || !inside) {
          w.start_position = w.end_position = w.cls_index;
          w.is_impossible = true;
        } else {
          w.start_position = tok_start - doc_start;
          w.end_position = tok_end - doc_start;
        }
        starts.push_back(w.start_position);
        ends.push_back(w.end_position);
        impossible.push_back(w.is_impossible ? 1.0f : 0.0f);
      }
      out.windows.push_back(std::move(w));
    }
  }
  const int64_t n = static_cast<int64_t>(out.windows.size());
  out.input_ids = ToTensor(rows.ids, {n, len});
  out.token_type_ids = ToTensor(rows.segs, {n, len});
  out.attention_mask = ToTensor(rows.mask, {n, len});
  out.p_mask = ToTensor(rows.p_mask, {n, len});
  out.cls_index = ToTensor(cls, {n});
  if (options.is_training) {
    out.start_positions = ToTensor(starts, {n});
    out.end_positions = ToTensor(ends, {n});
    out.is_impossible = ToTensor(impossible, {n});
  }
  return out;
}

std::vector<SquadWindowResult> SquadResultsFromTensors(
    const torch::Tensor& start_top_log_probs,
    const torch::Tensor& start_top_index,
    const torch::Tensor& end_top_log_probs, const torch::Tensor& end_top_index,
    const torch::Tensor& cls_logits, EndTopLayout layout) {
  const int64_t w = start_top_log_probs.size(0);
  TORCH_CHECK(start_top_log_probs.dim() == 2 &&
                  start_top_index.sizes() == start_top_log_probs.sizes() &&
                  end_top_log_probs.dim() == 2 &&
                  end_top_index.sizes() == end_top_log_probs.sizes() &&
                  end_top_log_probs.size(0) == w && cls_logits.numel() == w,
              "SQuAD head outputs: start ", start_top_log_probs.sizes(), "/",
              start_top_index.sizes(), ", end ", end_top_log_probs.sizes(), "/",
              end_top_index.sizes(), ", cls ", cls_logits.sizes());
  auto as_double = [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kDouble).contiguous();
  };
  auto as_long = [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kInt64).contiguous();
  };
  const torch::Tensor slp = as_double(start_top_log_probs);
  const torch::Tensor si = as_long(start_top_index);
  const torch::Tensor elp = as_double(end_top_log_probs);
  const torch::Tensor ei = as_long(end_top_index);
  const torch::Tensor cl = as_double(cls_logits).reshape({w});
  const int64_t s = slp.size(1);
  const int64_t e = elp.size(1);
  std::vector<SquadWindowResult> results(w);
  for (int64_t r = 0; r < w; ++r) {
    SquadWindowResult& out = results[r];
    const double* sl = slp.data_ptr<double>() + r * s;
    const int64_t* sx = si.data_ptr<int64_t>() + r * s;
    const double* el = elp.data_ptr<double>() + r * e;
    const int64_t* ex = ei.data_ptr<int64_t>() + r * e;
    out.start_top_log_probs.assign(sl, sl + s);
    out.start_top_index.assign(sx, sx + s);
    out.end_top_log_probs.assign(el, el + e);
    out.end_top_index.assign(ex, ex + e);
    out.layout = layout;
    out.cls_logits = cl[r].item<double>();
  }
  return results;
}

absl::StatusOr<SquadPredictions> PredictSquad(
    const SquadDataset& dataset, const SquadFeatures& features,
    const std::vector<SquadWindowResult>& results,
    const SquadPredictOptions& options) {
  if (results.size() != features.windows.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SQuAD predictions: ", results.size(), " model results for ",
        features.windows.size(), " windows"));
  }
  std::vector<std::vector<int64_t>> windows_of(dataset.examples.size());
  for (size_t i = 0; i < features.windows.size(); ++i) {
    const int64_t e = features.windows[i].example;
    if (e < 0 || e >= static_cast<int64_t>(windows_of.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("SQuAD predictions: window ", i, " refers to example ",
                       e, " of a dataset with ", windows_of.size()));
    }
    windows_of[e].push_back(static_cast<int64_t>(i));
  }
  struct Candidate {
    int64_t window;
    int64_t start;
    int64_t end;
    double start_log_prob;
    double end_log_prob;
  };
  SquadPredictions out;
  for (size_t e = 0; e < dataset.examples.size(); ++e) {
    const SquadExample& ex = dataset.examples[e];
    const std::string& context = dataset.paragraphs.at(ex.paragraph).context;
    double score_null = 1e6;  // official: "large and positive"
    std::vector<Candidate> candidates;
    for (int64_t wi : windows_of[e]) {
      const SquadWindow& w = features.windows[wi];
      const SquadWindowResult& r = results[wi];
      score_null = std::min(score_null, r.cls_logits);
      const size_t n_start = r.start_top_index.size();
      if (n_start == 0 || r.start_top_log_probs.size() != n_start ||
          r.end_top_index.size() != r.end_top_log_probs.size() ||
          r.end_top_index.size() % n_start != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("SQuAD predictions: window ", wi, " (question '",
                         ex.qas_id, "') has ", r.start_top_index.size(),
                         " start indices, ", r.start_top_log_probs.size(),
                         " start log-probs, ", r.end_top_index.size(),
                         " end indices and ", r.end_top_log_probs.size(),
                         " end log-probs; expected S, S, S*E, S*E"));
      }
      const size_t n_end = r.end_top_index.size() / n_start;
      for (size_t i = 0; i < n_start; ++i) {
        for (size_t j = 0; j < n_end; ++j) {
          const size_t k = r.layout == EndTopLayout::kStartMajor
                               ? i * n_end + j
                               : j * n_start + i;
          const int64_t start = r.start_top_index[i];
          const int64_t end = r.end_top_index[k];
          if (start < 0 || start >= w.paragraph_len) continue;
          if (end < 0 || end >= w.paragraph_len) continue;
          if (!w.is_max_context[start]) continue;
          if (end < start) continue;
          if (end - start + 1 > options.max_answer_length) continue;
          candidates.push_back({wi, start, end, r.start_top_log_probs[i],
                                r.end_top_log_probs[k]});
        }
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.start_log_prob + a.end_log_prob >
                              b.start_log_prob + b.end_log_prob;
                     });
    std::vector<SquadNbestEntry> nbest;
    std::set<std::string> seen;
    for (const Candidate& c : candidates) {
      if (static_cast<int64_t>(nbest.size()) >= options.n_best_size) break;
      const SquadWindow& w = features.windows[c.window];
      std::string text = data::StripPythonWhitespace(data::SubstrByChars(
          context, w.char_begin[c.start], w.char_end[c.end]));
      if (!seen.insert(text).second) continue;
      nbest.push_back({std::move(text), 0.0, c.start_log_prob, c.end_log_prob});
    }
    if (nbest.empty()) nbest.push_back({"", 0.0, -1e6, -1e6});
    // Softmax over the total scores.
    double max_score = -INFINITY;
    for (const auto& n : nbest) {
      max_score = std::max(max_score, n.start_log_prob + n.end_log_prob);
    }
    double sum = 0.0;
    for (auto& n : nbest) {
      n.probability = std::exp(n.start_log_prob + n.end_log_prob - max_score);
      sum += n.probability;
    }
    for (auto& n : nbest) n.probability /= sum;
    std::string prediction = nbest.front().text;
    if (options.null_odds_threshold.has_value() &&
        score_null > *options.null_odds_threshold) {
      prediction.clear();
    }
    out.qas_ids.push_back(ex.qas_id);
    out.predictions[ex.qas_id] = std::move(prediction);
    out.null_odds[ex.qas_id] = score_null;
    out.nbest[ex.qas_id] = std::move(nbest);
  }
  return out;
}

absl::Status WriteSquadPredictions(const SquadPredictions& predictions,
                                   const std::string& dir) {
  OrderedJson preds = OrderedJson::object();
  OrderedJson odds = OrderedJson::object();
  OrderedJson nbest = OrderedJson::object();
  for (const std::string& qid : predictions.qas_ids) {
    preds[qid] = predictions.predictions.at(qid);
    odds[qid] = predictions.null_odds.at(qid);
    OrderedJson list = OrderedJson::array();
    for (const SquadNbestEntry& n : predictions.nbest.at(qid)) {
      OrderedJson entry = OrderedJson::object();
      entry["text"] = n.text;
      entry["probability"] = n.probability;
      entry["start_log_prob"] = n.start_log_prob;
      entry["end_log_prob"] = n.end_log_prob;
      list.push_back(std::move(entry));
    }
    nbest[qid] = std::move(list);
  }
  XLNET_RETURN_IF_ERROR(MakeDirs(dir));
  XLNET_RETURN_IF_ERROR(
      WriteFileAtomic(dir + "/predictions.json", preds.dump(4) + "\n"));
  XLNET_RETURN_IF_ERROR(
      WriteFileAtomic(dir + "/null_odds.json", odds.dump(4) + "\n"));
  return WriteFileAtomic(dir + "/nbest_predictions.json", nbest.dump(4) + "\n");
}

}  // namespace xlnet::finetune
