// SQuAD v1.1 / v2.0 for XLNet (official run_squad.py): reading, windows
// over long contexts, training targets, and turning the beam head's outputs
// into predictions.json / null_odds.json / nbest_predictions.json.
//
//   XLNET_ASSIGN_OR_RETURN(SquadDataset dev, ReadSquad("dev-v2.0.json", {}));
//   XLNET_ASSIGN_OR_RETURN(SquadFeatures f,
//                          BuildSquadFeatures(dev, *tokenizer, {}));
//   // run the model on f.input_ids, f.token_type_ids, f.attention_mask,
//   // f.p_mask, f.cls_index; fill one SquadWindowResult per window
//   XLNET_ASSIGN_OR_RETURN(SquadPredictions p,
//                          PredictSquad(dev, f, results, {}));
//   XLNET_RETURN_IF_ERROR(WriteSquadPredictions(p, "out/"));
//
// Window layout: `P <sep> Q <sep> <cls>` (paragraph FIRST), padded on the
// RIGHT; see finetune/README.md. Character positions are Unicode code points
// (Python string indices), as in the SQuAD files.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"
#include "finetune/examples.h"

namespace xlnet::finetune {

// Segment ids of the SQuAD input (official SEG_ID_P/Q/CLS/PAD).
inline constexpr int64_t kSquadSegP = 0;
inline constexpr int64_t kSquadSegQ = 1;
inline constexpr int64_t kSquadSegCls = 2;
inline constexpr int64_t kSquadSegPad = 3;

struct SquadAnswer {
  std::string text;
  // Code-point offset of the answer in the context.
  int64_t answer_start = 0;
};

// One paragraph; its questions refer to it by index.
struct SquadParagraph {
  std::string title;  // the article's title
  std::string context;
};

struct SquadExample {
  std::string qas_id;
  std::string question;
  int64_t paragraph = 0;  // index into SquadDataset::paragraphs
  // Gold answers (v1.1 dev and v2.0 dev have several; training uses the
  // first). Empty for unanswerable and for unlabeled files.
  std::vector<SquadAnswer> answers;
  bool is_impossible = false;
};

struct SquadDataset {
  std::string version;  // the file's "version" field ("" when absent)
  std::vector<SquadParagraph> paragraphs;
  std::vector<SquadExample> examples;
  // "FILE: question 'ID' (article 'TITLE'): what" for every skipped question.
  std::vector<std::string> problems;
  int64_t skipped = 0;
};

struct SquadReadOptions {
  // true for training and evaluation files: every question must have
  // answers unless is_impossible; false for unlabeled prediction input
  // (answers may be absent; present ones are still read).
  bool require_answers = true;
  // Appended to the error for a question without answers under
  // require_answers (a tool names its own way to read unlabeled input).
  std::string unlabeled_hint;
  // Check that each answer's text is the context at answer_start.
  bool check_answer_spans = true;
  BadRowPolicy bad_rows = BadRowPolicy::kError;
};

// Reads a SQuAD JSON file ({"version", "data": [{"title", "paragraphs":
// [{"context", "qas": [{"id", "question", "answers": [{"text",
// "answer_start"}], "is_impossible"}]}]}]}). Structural errors (not JSON,
// no "data") fail; a bad question (missing/empty id, question or context,
// an answer whose text is not the context at answer_start, an answerable
// question without answers when required, duplicate id) is skipped or
// fatal by `bad_rows`.
absl::StatusOr<SquadDataset> ReadSquad(const std::string& path,
                                       const SquadReadOptions& options);
// The same from the file's contents; `source` names it in messages.
absl::StatusOr<SquadDataset> ParseSquad(const std::string& contents,
                                        const std::string& source,
                                        const SquadReadOptions& options);

struct SquadFeatureOptions {
  int64_t max_seq_length = 512;
  // Questions are cut to this many tokens.
  int64_t max_query_length = 64;
  // Windows start every doc_stride context tokens (or fewer when a window is
  // shorter).
  int64_t doc_stride = 128;
  // Fill start/end positions and is_impossible from the first answer.
  bool is_training = false;
};

// One window ("feature") over an example's context.
struct SquadWindow {
  int64_t example = 0;  // index into SquadDataset::examples
  int64_t window = 0;   // index of this window among the example's windows
  // Context tokens [doc_start, doc_start + paragraph_len) of the paragraph
  // occupy positions [0, paragraph_len) of the input.
  int64_t doc_start = 0;
  int64_t paragraph_len = 0;
  int64_t cls_index = 0;
  // Per context position k < paragraph_len: its characters [begin, end) in
  // the context (code points; a lone "▁" piece has begin == end), and
  // whether this window gives it the most context (official
  // _check_is_max_context).
  std::vector<int64_t> char_begin;
  std::vector<int64_t> char_end;
  std::vector<uint8_t> is_max_context;
  // Training targets: the answer's first and last token positions, or
  // cls_index for both with is_impossible when the answer is not wholly
  // inside this window or the question is unanswerable.
  int64_t start_position = -1;
  int64_t end_position = -1;
  bool is_impossible = false;
};

// Model inputs for W windows of length L.
struct SquadFeatures {
  std::vector<SquadWindow> windows;
  torch::Tensor input_ids;       // [W, L] int64, right padded with kPadId
  torch::Tensor token_type_ids;  // [W, L] int64: P 0, Q 1, <cls> 2, pad 3
  torch::Tensor attention_mask;  // [W, L] float32: 1 real, 0 padding
  // [W, L] float32: 1 where no answer may be (question, both <sep>,
  // padding), 0 on context tokens and <cls>.
  torch::Tensor p_mask;
  torch::Tensor cls_index;  // [W] int64
  // Training only (undefined otherwise):
  torch::Tensor start_positions;  // [W] int64
  torch::Tensor end_positions;    // [W] int64
  torch::Tensor is_impossible;    // [W] float32
  // Questions cut to max_query_length.
  int64_t truncated_questions = 0;
};

// Tokenizes every paragraph once, builds the windows (official loop) and
// the tensors. Options out of range are InvalidArgument errors.
absl::StatusOr<SquadFeatures> BuildSquadFeatures(
    const SquadDataset& dataset, const data::Tokenizer& tokenizer,
    const SquadFeatureOptions& options);

// How end_top_* is flattened.
enum class EndTopLayout {
  // Official XLNet: end candidate j of start candidate i at i * end_n_top + j.
  kStartMajor,
  // HuggingFace XLNetForQuestionAnswering: shape (end_n_top, start_n_top)
  // flattened, so at j * start_n_top + i.
  kEndMajor,
};

// The beam head's outputs for one window. Positions index the window's
// input (0..L-1). Log-probabilities: HuggingFace returns probabilities in
// its *_log_probs fields; take their log first.
struct SquadWindowResult {
  std::vector<double> start_top_log_probs;  // [start_n_top]
  std::vector<int64_t> start_top_index;     // [start_n_top]
  // [start_n_top * end_n_top], in `layout`.
  std::vector<double> end_top_log_probs;
  std::vector<int64_t> end_top_index;
  EndTopLayout layout = EndTopLayout::kStartMajor;
  // Answer-class logit ("no answer" score; higher = more likely none).
  double cls_logits = 0.0;
};

// Splits batched head outputs into per-window results: start_* [W, S],
// end_* [W, S*E], cls_logits [W] (any float/int dtypes).
std::vector<SquadWindowResult> SquadResultsFromTensors(
    const torch::Tensor& start_top_log_probs,
    const torch::Tensor& start_top_index,
    const torch::Tensor& end_top_log_probs, const torch::Tensor& end_top_index,
    const torch::Tensor& cls_logits, EndTopLayout layout);

struct SquadPredictOptions {
  int64_t n_best_size = 5;
  int64_t max_answer_length = 64;
  // When set, predict "" for questions whose null odds exceed it; when
  // unset, always the best span (official: the threshold is searched on
  // null_odds.json by the evaluation).
  std::optional<double> null_odds_threshold;
};

struct SquadNbestEntry {
  std::string text;
  double probability = 0.0;  // softmax over the n-best total scores
  double start_log_prob = 0.0;
  double end_log_prob = 0.0;
};

struct SquadPredictions {
  // In example order.
  std::vector<std::string> qas_ids;
  std::map<std::string, std::string> predictions;
  // The minimum cls_logits over the example's windows.
  std::map<std::string, double> null_odds;
  std::map<std::string, std::vector<SquadNbestEntry>> nbest;
};

// Official write_predictions: over all windows of an example, every
// (start i, end j) candidate is kept unless start or end is not a context
// position of the window, the start is not in its max-context window,
// end < start, or the span is longer than max_answer_length tokens; ranked by
// start_log_prob + end_log_prob; texts (context from the start token's first
// character to the end token's last, whitespace-stripped) deduplicated;
// the best n_best_size kept. `results` has one entry per window.
absl::StatusOr<SquadPredictions> PredictSquad(
    const SquadDataset& dataset, const SquadFeatures& features,
    const std::vector<SquadWindowResult>& results,
    const SquadPredictOptions& options);

// Writes predictions.json ({qid: text}), null_odds.json ({qid: score}) and
// nbest_predictions.json ({qid: [{text, probability, start_log_prob,
// end_log_prob}]}) into `dir` (created if needed), atomically, keys in
// example order.
absl::Status WriteSquadPredictions(const SquadPredictions& predictions,
                                   const std::string& dir);

}  // namespace xlnet::finetune
