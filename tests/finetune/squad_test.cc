// SQuAD reading, windows and targets on the committed v2-style fixture, and
// post-processing of beam-head outputs.
#include "finetune/squad.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "data_pipeline/text.h"
#include "finetune/squad_eval.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/test_util.h"

namespace xlnet::finetune {
namespace {

using ::xlnet::data::SubstrByChars;
using ::xlnet::finetune::testing::FixturePath;
using ::xlnet::finetune::testing::SmallTokenizer;

SquadDataset Fixture() {
  auto d = ReadSquad(FixturePath("squad_v2_small.json"), {});
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : SquadDataset{};
}

int64_t Chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST(SquadReaderTest, ReadsTheFixture) {
  const SquadDataset d = Fixture();
  EXPECT_EQ(d.version, "v2.0");
  EXPECT_EQ(d.paragraphs.size(), 3u);
  ASSERT_EQ(d.examples.size(), 16u);
  EXPECT_TRUE(d.problems.empty());
  int impossible = 0;
  for (const SquadExample& ex : d.examples) {
    impossible += ex.is_impossible;
    EXPECT_EQ(ex.answers.empty(), ex.is_impossible) << ex.qas_id;
    // answer_start counts code points: the context there is the text.
    for (const SquadAnswer& a : ex.answers) {
      EXPECT_EQ(SubstrByChars(d.paragraphs[ex.paragraph].context,
                              a.answer_start, a.answer_start + Chars(a.text)),
                a.text)
          << ex.qas_id;
    }
  }
  EXPECT_EQ(impossible, 3);
  EXPECT_EQ(d.examples[1].qas_id, "f2");
  EXPECT_EQ(d.examples[1].answers.size(), 2u);
  EXPECT_EQ(d.paragraphs[2].title, "Zoë’s journey");
}

constexpr char kBadSquad[] = R"({"version": "1.1", "data": [
 {"title": "T", "paragraphs": [{"context": "foo bar baz", "qas": [
  {"id": "q1", "question": "Which?", "answers": [{"text": "bar", "answer_start": 4}]},
  {"id": "q2", "question": "What?", "answers": [{"text": "bar", "answer_start": 0}]},
  {"id": "q3", "question": " ", "answers": [{"text": "foo", "answer_start": 0}]},
  {"id": "q1", "question": "Again?", "answers": [{"text": "foo", "answer_start": 0}]},
  {"id": "q4", "question": "Where?"},
  {"id": "q5", "question": "Far?", "answers": [{"text": "baz", "answer_start": 9}]}
 ]}]}]})";

TEST(SquadReaderTest, BadQuestionsNameIdAndArticle) {
  SquadReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  auto d = ParseSquad(kBadSquad, "in.json", options);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->examples.size(), 1u);
  EXPECT_EQ(d->examples[0].qas_id, "q1");
  EXPECT_FALSE(d->examples[0].is_impossible);  // v1.1: no is_impossible
  EXPECT_EQ(d->version, "1.1");
  const std::vector<std::string> expected = {
      "in.json: question 'q2' (article 'T'): answer 0 text 'bar' is not the "
      "context at answer_start 0 ('foo')",
      "in.json: question 'q3' (article 'T'): empty question",
      "in.json: question 'q1' (article 'T'): duplicate question id",
      "in.json: question 'q4' (article 'T'): answerable question "
      "(is_impossible false or absent) without answers",
      "in.json: question 'q5' (article 'T'): answer 0 at 9+3 lies outside "
      "the context (11 characters)",
  };
  EXPECT_EQ(d->problems, expected);
  EXPECT_EQ(d->skipped, 5);

  options.bad_rows = BadRowPolicy::kError;
  auto fatal = ParseSquad(kBadSquad, "in.json", options);
  ASSERT_FALSE(fatal.ok());
  EXPECT_NE(fatal.status().message().find("question 'q2' (article 'T')"),
            std::string::npos)
      << fatal.status();

  // Unlabeled prediction input: answers may be absent.
  SquadReadOptions unlabeled;
  unlabeled.require_answers = false;
  auto pred = ParseSquad(
      R"({"data": [{"title": "T", "paragraphs": [{"context": "c d",
          "qas": [{"id": "x", "question": "q?"}]}]}]})",
      "p.json", unlabeled);
  ASSERT_TRUE(pred.ok()) << pred.status();
  EXPECT_TRUE(pred->examples[0].answers.empty());

  auto not_json = ParseSquad("{\"data\": [", "broken.json", {});
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("broken.json: not valid JSON"),
            std::string::npos);
  EXPECT_FALSE(ParseSquad("{\"rows\": []}", "x.json", {}).ok());
  // Two "context"s: which one the answer offsets refer to is ambiguous.
  auto dup = ParseSquad(
      R"({"data": [{"title": "T", "paragraphs": [{"context": "a b",
          "context": "c d", "qas": []}]}]})",
      "dup.json", unlabeled);
  EXPECT_EQ(dup.status().message(), "dup.json: duplicate key 'context'");
}

SquadFeatureOptions SmallWindows(bool training) {
  SquadFeatureOptions o;
  o.max_seq_length = 64;
  o.max_query_length = 16;
  o.doc_stride = 24;
  o.is_training = training;
  return o;
}

TEST(SquadFeaturesTest, WindowLayout) {
  const SquadDataset d = Fixture();
  const data::Tokenizer& tok = SmallTokenizer();
  auto f = BuildSquadFeatures(d, tok, SmallWindows(true));
  ASSERT_TRUE(f.ok()) << f.status();
  const int64_t n = static_cast<int64_t>(f->windows.size());
  ASSERT_EQ(f->input_ids.sizes(), (std::vector<int64_t>{n, 64}));
  EXPECT_EQ(f->p_mask.scalar_type(), torch::kFloat32);
  EXPECT_EQ(f->attention_mask.scalar_type(), torch::kFloat32);
  EXPECT_EQ(f->start_positions.sizes(), (std::vector<int64_t>{n}));
  int64_t max_windows = 0;
  size_t w = 0;
  for (size_t e = 0; e < d.examples.size(); ++e) {
    const SquadExample& ex = d.examples[e];
    auto context = tok.Encode(d.paragraphs[ex.paragraph].context);
    ASSERT_TRUE(context.ok());
    std::vector<int32_t> q;
    ASSERT_TRUE(tok.EncodeIds(ex.question, &q).ok());
    if (q.size() > 16) q.resize(16);
    const int64_t n_doc = static_cast<int64_t>(context->ids.size());
    const int64_t max_doc = 64 - static_cast<int64_t>(q.size()) - 3;
    std::vector<int> max_context_count(n_doc, 0);
    int64_t expected_start = 0;
    int64_t count = 0;
    for (; w < f->windows.size() && f->windows[w].example == (int64_t)e; ++w) {
      const SquadWindow& win = f->windows[w];
      EXPECT_EQ(win.window, count++);
      EXPECT_EQ(win.doc_start, expected_start);
      EXPECT_EQ(win.paragraph_len, std::min(n_doc - win.doc_start, max_doc));
      expected_start += std::min<int64_t>(win.paragraph_len, 24);
      const int64_t plen = win.paragraph_len;
      const int64_t cls = plen + 1 + static_cast<int64_t>(q.size()) + 1;
      EXPECT_EQ(win.cls_index, cls);
      EXPECT_EQ(f->cls_index[w].item<int64_t>(), cls);
      auto ids = f->input_ids[w];
      auto seg = f->token_type_ids[w];
      auto pm = f->p_mask[w];
      auto am = f->attention_mask[w];
      for (int64_t k = 0; k < 64; ++k) {
        int64_t id;
        int64_t s;
        float p;
        if (k < plen) {
          id = context->ids[win.doc_start + k], s = 0, p = 0;
          EXPECT_EQ(win.char_begin[k], context->char_begin[win.doc_start + k]);
          max_context_count[win.doc_start + k] += win.is_max_context[k];
        } else if (k == plen) {
          id = data::kSepId, s = 0, p = 1;
        } else if (k < cls - 1) {
          id = q[k - plen - 1], s = 1, p = 1;
        } else if (k == cls - 1) {
          id = data::kSepId, s = 1, p = 1;
        } else if (k == cls) {
          id = data::kClsId, s = 2, p = 0;
        } else {
          id = data::kPadId, s = 3, p = 1;
        }
        ASSERT_EQ(ids[k].item<int64_t>(), id) << ex.qas_id << " pos " << k;
        ASSERT_EQ(seg[k].item<int64_t>(), s) << ex.qas_id << " pos " << k;
        ASSERT_EQ(pm[k].item<float>(), p) << ex.qas_id << " pos " << k;
        ASSERT_EQ(am[k].item<float>(), k <= cls ? 1.0f : 0.0f);
      }
    }
    // The windows cover the whole context and each token has exactly one
    // max-context window.
    EXPECT_EQ(f->windows[w - 1].doc_start + f->windows[w - 1].paragraph_len,
              n_doc);
    for (int64_t t = 0; t < n_doc; ++t) {
      EXPECT_EQ(max_context_count[t], 1) << ex.qas_id << " token " << t;
    }
    max_windows = std::max(max_windows, count);
  }
  EXPECT_EQ(w, f->windows.size());
  // The long Brown paragraphs need several windows at this size.
  EXPECT_GE(max_windows, 3);
}

TEST(SquadFeaturesTest, TargetsMapBackToTheAnswer) {
  const SquadDataset d = Fixture();
  const data::Tokenizer& tok = SmallTokenizer();
  auto f = BuildSquadFeatures(d, tok, SmallWindows(true));
  ASSERT_TRUE(f.ok()) << f.status();
  int aligned = 0;
  int inside_piece = 0;
  for (const SquadExample& ex : d.examples) {
    const std::string& context = d.paragraphs[ex.paragraph].context;
    auto enc = tok.Encode(context);
    ASSERT_TRUE(enc.ok());
    int windows_with_answer = 0;
    for (const SquadWindow& win : f->windows) {
      if (d.examples[win.example].qas_id != ex.qas_id) continue;
      if (win.is_impossible) {
        EXPECT_EQ(win.start_position, win.cls_index);
        EXPECT_EQ(win.end_position, win.cls_index);
        continue;
      }
      ASSERT_FALSE(ex.is_impossible) << ex.qas_id;
      ++windows_with_answer;
      const SquadAnswer& a = ex.answers[0];
      const int64_t begin = a.answer_start;
      const int64_t end = a.answer_start + Chars(a.text);
      const int64_t s = win.start_position;
      const int64_t e = win.end_position;
      ASSERT_LE(s, e);
      ASSERT_LT(e, win.paragraph_len);
      const std::string mapped =
          SubstrByChars(context, win.char_begin[s], win.char_end[e]);
      bool begin_on_boundary = false;
      bool end_on_boundary = false;
      for (size_t k = 0; k < enc->ids.size(); ++k) {
        begin_on_boundary |= enc->char_begin[k] == begin;
        end_on_boundary |= enc->char_end[k] == end;
      }
      if (begin_on_boundary && end_on_boundary) {
        // Exactly the answer's characters.
        EXPECT_EQ(mapped, a.text) << ex.qas_id;
        ++aligned;
      } else {
        // A boundary inside a piece: the targets are the whole pieces that
        // overlap the answer, so the mapped text strictly contains it.
        EXPECT_LE(win.char_begin[s], begin) << ex.qas_id;
        EXPECT_GE(win.char_end[e], end) << ex.qas_id;
        EXPECT_NE(mapped, a.text) << ex.qas_id;
        EXPECT_NE(mapped.find(a.text), std::string::npos) << ex.qas_id;
        ++inside_piece;
      }
    }
    if (!ex.is_impossible) {
      EXPECT_GE(windows_with_answer, 1) << ex.qas_id;
    }
  }
  EXPECT_GE(aligned, 10);
  // f7's answer "... primary elect" ends inside the piece "▁election".
  EXPECT_GE(inside_piece, 1);
}

TEST(SquadFeaturesTest, RejectsImpossibleSizes) {
  SquadFeatureOptions o;
  o.max_seq_length = 20;
  o.max_query_length = 17;
  EXPECT_FALSE(BuildSquadFeatures(Fixture(), SmallTokenizer(), o).ok());
}

// A hand-made feature set: context "alpha beta gamma delta" with one token
// per word, two windows [alpha beta gamma] and [beta gamma delta].
struct HandMade {
  SquadDataset dataset;
  SquadFeatures features;
};

HandMade MakeHandMade() {
  HandMade h;
  h.dataset.paragraphs.push_back({"T", "alpha beta gamma delta"});
  SquadExample ex;
  ex.qas_id = "q";
  h.dataset.examples.push_back(ex);
  const std::vector<int64_t> begins = {0, 6, 11, 17};
  const std::vector<int64_t> ends = {5, 10, 16, 22};
  for (int64_t w = 0; w < 2; ++w) {
    SquadWindow win;
    win.window = w;
    win.doc_start = w;
    win.paragraph_len = 3;
    win.cls_index = 7;
    for (int64_t k = 0; k < 3; ++k) {
      win.char_begin.push_back(begins[w + k]);
      win.char_end.push_back(ends[w + k]);
    }
    // Max context: alpha, beta in window 0; gamma, delta in window 1.
    win.is_max_context =
        w == 0 ? std::vector<uint8_t>{1, 1, 0} : std::vector<uint8_t>{0, 1, 1};
    h.features.windows.push_back(win);
  }
  return h;
}

TEST(PredictSquadTest, FiltersRanksAndDeduplicates) {
  HandMade h = MakeHandMade();
  // Window 0: start candidates 0 (alpha), 5 (in the question), 2 (gamma, not
  // max context here), 1 (beta); 3 ends each, start-major.
  SquadWindowResult r0;
  r0.start_top_log_probs = {-0.5, -0.1, -0.2, -1.0};
  r0.start_top_index = {0, 5, 2, 1};
  r0.end_top_log_probs = {-0.3, -0.2, -0.9, -0.1, -0.1, -0.1,
                          -0.1, -0.1, -0.1, -0.5, -5.0, -0.1};
  r0.end_top_index = {1, 0, 2, 1, 1, 1, 2, 2, 2, 2, 2, 0};
  r0.cls_logits = 2.0;
  // Window 1: start 1 (gamma) with ends 1 (gamma), 0 (beta: end < start),
  // 2 (delta); start 0 (beta, not max context in this window).
  SquadWindowResult r1;
  r1.start_top_log_probs = {-0.4, -1.0};
  r1.start_top_index = {1, 0};
  r1.end_top_log_probs = {-0.2, -0.01, -0.3, -0.5, -5, -5};
  r1.end_top_index = {1, 0, 2, 1, 1, 1};
  r1.cls_logits = 1.0;
  SquadPredictOptions options;
  options.max_answer_length = 2;
  options.n_best_size = 10;
  auto p = PredictSquad(h.dataset, h.features, {r0, r1}, options);
  ASSERT_TRUE(p.ok()) << p.status();
  // Valid candidates and scores, in order of appearance:
  //   w0: (0,1) "alpha beta" -0.8, (0,0) "alpha" -0.7 ((0,2) is 3 tokens),
  //       (1,2) "beta gamma" -1.5 and again at -6 (deduplicated);
  //   w1: (1,1) "gamma" -0.6, (1,2) "gamma delta" -0.7.
  const auto& nbest = p->nbest.at("q");
  ASSERT_EQ(nbest.size(), 5u);
  EXPECT_EQ(nbest[0].text, "gamma");
  // Equal scores keep their order of appearance (window 0 first).
  EXPECT_EQ(nbest[1].text, "alpha");
  EXPECT_EQ(nbest[2].text, "gamma delta");
  EXPECT_EQ(nbest[3].text, "alpha beta");
  EXPECT_EQ(nbest[4].text, "beta gamma");
  EXPECT_DOUBLE_EQ(nbest[0].start_log_prob, -0.4);
  EXPECT_DOUBLE_EQ(nbest[0].end_log_prob, -0.2);
  double sum = 0;
  for (const auto& n : nbest) sum += n.probability;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // p_i ∝ exp(score_i): p(gamma) / p(alpha) = exp(-0.6 + 0.7).
  EXPECT_NEAR(nbest[0].probability / nbest[1].probability, std::exp(0.1),
              1e-12);
  EXPECT_EQ(p->predictions.at("q"), "gamma");
  EXPECT_DOUBLE_EQ(p->null_odds.at("q"), 1.0);  // min over windows

  // The same outputs in HuggingFace's end-major layout give the same result.
  auto transpose = [](SquadWindowResult r) {
    const size_t s = r.start_top_index.size();
    const size_t e = r.end_top_index.size() / s;
    SquadWindowResult t = r;
    for (size_t i = 0; i < s; ++i) {
      for (size_t j = 0; j < e; ++j) {
        t.end_top_log_probs[j * s + i] = r.end_top_log_probs[i * e + j];
        t.end_top_index[j * s + i] = r.end_top_index[i * e + j];
      }
    }
    t.layout = EndTopLayout::kEndMajor;
    return t;
  };
  auto hf = PredictSquad(h.dataset, h.features, {transpose(r0), transpose(r1)},
                         options);
  ASSERT_TRUE(hf.ok());
  ASSERT_EQ(hf->nbest.at("q").size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(hf->nbest.at("q")[i].text, nbest[i].text);
  }

  // n_best_size and the null-odds threshold.
  options.n_best_size = 2;
  options.null_odds_threshold = 0.5;
  auto cut = PredictSquad(h.dataset, h.features, {r0, r1}, options);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->nbest.at("q").size(), 2u);
  EXPECT_EQ(cut->predictions.at("q"), "");  // odds 1.0 > 0.5
  options.null_odds_threshold = 1.0;
  cut = PredictSquad(h.dataset, h.features, {r0, r1}, options);
  EXPECT_EQ(cut->predictions.at("q"), "gamma");  // not strictly above
}

TEST(PredictSquadTest, NothingValidGivesTheEmptyAnswer) {
  HandMade h = MakeHandMade();
  SquadWindowResult r;
  r.start_top_log_probs = {-0.1};
  r.start_top_index = {7};  // <cls>
  r.end_top_log_probs = {-0.1};
  r.end_top_index = {7};
  r.cls_logits = -3.0;
  auto p = PredictSquad(h.dataset, h.features, {r, r}, {});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->nbest.at("q").size(), 1u);
  EXPECT_EQ(p->nbest.at("q")[0].text, "");
  EXPECT_DOUBLE_EQ(p->nbest.at("q")[0].start_log_prob, -1e6);
  EXPECT_DOUBLE_EQ(p->nbest.at("q")[0].probability, 1.0);
  EXPECT_EQ(p->predictions.at("q"), "");

  EXPECT_FALSE(PredictSquad(h.dataset, h.features, {r}, {}).ok());
  r.end_top_index = {7, 7};  // S*E entries must pair with the log-probs
  EXPECT_FALSE(PredictSquad(h.dataset, h.features, {r, r}, {}).ok());
}

TEST(PredictSquadTest, ResultsFromTensors) {
  // Two windows, S = 2, E = 3.
  auto slp = torch::tensor({{-0.1, -0.2}, {-0.3, -0.4}});
  auto si = torch::tensor({{1, 2}, {3, 4}}, torch::kInt32);
  auto elp = torch::arange(12, torch::kFloat32).reshape({2, 6}).neg();
  auto ei = torch::arange(12).reshape({2, 6});
  auto cls = torch::tensor({0.5, -0.5});
  auto r =
      SquadResultsFromTensors(slp, si, elp, ei, cls, EndTopLayout::kEndMajor);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].start_top_index, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r[1].end_top_index, (std::vector<int64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_DOUBLE_EQ(r[1].end_top_log_probs[2], -8.0);
  EXPECT_DOUBLE_EQ(r[0].cls_logits, 0.5);
  EXPECT_EQ(r[0].layout, EndTopLayout::kEndMajor);
  EXPECT_THROW(SquadResultsFromTensors(slp, si, elp, ei, torch::zeros({3}),
                                       EndTopLayout::kStartMajor),
               c10::Error);
}

// Oracle head outputs from the training targets: in windows holding the
// answer the gold span scores best (for every third example the end is
// moved one token left, when that stays a span), elsewhere only invalid
// positions are proposed. Null odds: +2 for unanswerable, -1 - e/10 else.
std::vector<SquadWindowResult> OracleResults(const SquadFeatures& f) {
  std::vector<SquadWindowResult> results;
  for (const SquadWindow& w : f.windows) {
    SquadWindowResult r;
    r.cls_logits = w.is_impossible ? 2.0 : -1.0 - w.example / 10.0;
    int64_t end = w.end_position;
    if (w.example % 3 == 1 && end > w.start_position) --end;
    r.start_top_index = {w.is_impossible ? w.cls_index : w.start_position,
                         w.cls_index};
    r.start_top_log_probs = {-0.1, -3.0};
    r.end_top_index = {w.is_impossible ? w.cls_index : end, w.cls_index,
                       w.cls_index, w.cls_index};
    r.end_top_log_probs = {-0.1, -3.0, -3.0, -3.0};
    results.push_back(r);
  }
  return results;
}

TEST(PredictSquadTest, OracleEndToEnd) {
  const SquadDataset d = Fixture();
  const data::Tokenizer& tok = SmallTokenizer();
  auto f = BuildSquadFeatures(d, tok, SmallWindows(true));
  ASSERT_TRUE(f.ok()) << f.status();
  auto p = PredictSquad(d, *f, OracleResults(*f), {});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->qas_ids.size(), d.examples.size());
  for (size_t e = 0; e < d.examples.size(); ++e) {
    const SquadExample& ex = d.examples[e];
    const std::string& pred = p->predictions.at(ex.qas_id);
    if (ex.is_impossible) {
      EXPECT_EQ(pred, "") << ex.qas_id;
      EXPECT_DOUBLE_EQ(p->null_odds.at(ex.qas_id), 2.0);
    } else if (e % 3 != 1) {
      // The whole-piece span of the first answer (see the targets test).
      EXPECT_NE(pred.find(ex.answers[0].text), std::string::npos)
          << ex.qas_id << ": " << pred;
    }
  }
  auto eval = EvaluateSquad(d, p->predictions, &p->null_odds, {});
  ASSERT_TRUE(eval.ok()) << eval.status();
  const auto& m = eval->metrics;
  EXPECT_EQ(m.at("total"), 16);
  EXPECT_EQ(m.at("NoAns_total"), 3);
  EXPECT_DOUBLE_EQ(m.at("NoAns_exact"), 100.0);  // odds 2 > 1 and "" anyway
  EXPECT_GT(m.at("HasAns_f1"), m.at("HasAns_exact"));
  EXPECT_GE(m.at("best_f1"), m.at("f1"));

  // Cross-checking against the official script: set XLNET_SQUAD_DUMP_DIR to
  // keep the three prediction files and the metrics.
  xlnet::testing::TempDir dir;
  const char* dump = std::getenv("XLNET_SQUAD_DUMP_DIR");
  const std::string out = dump != nullptr ? dump : dir.path();
  ASSERT_TRUE(WriteSquadPredictions(*p, out).ok());
  auto preds_json = ReadFile(out + "/predictions.json");
  ASSERT_TRUE(preds_json.ok());
  const auto parsed = nlohmann::ordered_json::parse(*preds_json);
  ASSERT_EQ(parsed.size(), d.examples.size());
  EXPECT_EQ(parsed.begin().key(), "f1");  // example order
  for (const auto& [qid, text] : p->predictions) {
    EXPECT_EQ(parsed.at(qid).get<std::string>(), text);
  }
  auto nbest = ReadFile(out + "/nbest_predictions.json");
  ASSERT_TRUE(nbest.ok());
  EXPECT_TRUE(
      nlohmann::json::parse(*nbest).at("u1").at(0).contains("probability"));
  if (dump != nullptr) {
    nlohmann::json metrics(m);
    ASSERT_TRUE(
        WriteFileAtomic(out + "/metrics.json", metrics.dump(2) + "\n").ok());
  }
}

}  // namespace
}  // namespace xlnet::finetune
