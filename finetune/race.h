// Multiple-choice reading comprehension (RACE): readers of the official
// RACE layout and of a JSON Lines form, the official input encoding
// (XLNet's run_race.py) and the accuracy metrics with RACE's middle/high
// split. The model is XLNetForMultipleChoice (model/multiple_choice.h).
//
//   MultipleChoiceReadOptions read;             // bad_rows, require_label
//   XLNET_ASSIGN_OR_RETURN(MultipleChoiceSet dev,
//                          ReadMultipleChoice("RACE/dev", read));
//   XLNET_ASSIGN_OR_RETURN(EncodedMultipleChoice x,
//       EncodeMultipleChoice(dev.examples, tokenizer, {512, 128}));
//   // x.input_ids [N, C, L] ... x.labels [N]
//
// Input (finetune/README.md, "Multiple choice"):
//   - the official RACE layout: a directory searched recursively for *.txt
//     files (RACE/dev/{middle,high}/*.txt), or one such file; each holds one
//     JSON object {"article", "questions": [...], "options": [[...], ...],
//     "answers": ["A", ...], "id": "high1234.txt"}; question i of a file has
//     the id "<id>-<i>" (id: the file's "id", else its file name);
//   - JSON Lines (.jsonl, .ndjson): one question per line, {"id", "article",
//     "question", "options": [...], "label": "A" or a 0-based index}.
// Every question of a set has the same number of options (>= 2; official
// RACE: 4). The RACE level ("middle"/"high") comes from a directory of that
// name on the file's path, else from an id that starts with it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"
#include "config/config.h"
#include "finetune/examples.h"
#include "finetune/task_data.h"

namespace xlnet::finetune {

// One question with its options.
struct MultipleChoiceExample {
  // RACE: "<file id>-<question index>"; JSON Lines: the "id" field, else the
  // 0-based line number among the data lines.
  std::string id;
  std::string article;
  std::string question;
  std::vector<std::string> options;
  // The correct option (0-based), -1 when unlabeled.
  int64_t label = -1;
  // "middle", "high" or "" (not a RACE level).
  std::string level;
  // "FILE" (RACE) or "FILE:LINE" (JSON Lines), for messages.
  std::string location;
};

struct MultipleChoiceReadOptions {
  BadRowPolicy bad_rows = BadRowPolicy::kError;
  // false for unlabeled prediction input: answers/label may be absent (and
  // are read when present).
  bool require_label = true;
  // Ends the error for a missing answer when labels are required.
  std::string unlabeled_hint;
  // Bounds on what a user's files may make us read.
  uint64_t max_race_file_bytes = uint64_t{16} << 20;   // one RACE .txt
  uint64_t max_jsonl_file_bytes = uint64_t{4} << 30;   // a JSON Lines file
  int64_t max_files = int64_t{1} << 20;                // .txt files of a tree
  int64_t max_options = 26;                            // letters A..Z
};

struct MultipleChoiceSet {
  std::vector<MultipleChoiceExample> examples;
  // "FILE: question 'ID': what" (or "FILE:LINE: ...") per skipped question
  // (policy kSkip); a RACE file that cannot be read as a whole counts once.
  std::vector<std::string> problems;
  int64_t skipped = 0;
  // Options per question (0 when the set is empty).
  int64_t num_choices = 0;
};

// Reads a directory (RACE layout), a .jsonl/.ndjson file (JSON Lines) or
// any other file (one RACE JSON object). Questions keep file order; the
// files of a directory are read in sorted path order. Errors and skipped
// questions name the file and the question id (see the top comment).
absl::StatusOr<MultipleChoiceSet> ReadMultipleChoice(
    const std::string& path, const MultipleChoiceReadOptions& options);

// Parses one RACE JSON object (`contents` of file `source`, whose RACE level
// is `level`), appending its questions to `set`.
absl::Status ParseRaceFile(const std::string& contents,
                           const std::string& source, const std::string& level,
                           const MultipleChoiceReadOptions& options,
                           MultipleChoiceSet* set);
// Parses JSON Lines text, appending its questions to `set`.
absl::Status ParseMultipleChoiceJsonl(const std::string& contents,
                                      const std::string& source,
                                      const MultipleChoiceReadOptions& options,
                                      MultipleChoiceSet* set);

// The official question + option text: the question with every "_"
// replaced by the option when it has one (cloze questions), else the
// question, a space and the option.
std::string QuestionWithOption(const std::string& question,
                               const std::string& option);

// One option's sequence (official run_race.py):
//   [pad ...] article <sep> question+option <sep> <cls>
// qa keeps its LAST max_qa_length tokens; the article keeps its first
// max_seq_length - 3 - len(qa) tokens. Segments: article and the first
// <sep> 0, qa and the second <sep> 1, <cls> 2, padding 4 (left, id <pad>).
// Requires max_qa_length >= 1 and max_seq_length >= max_qa_length + 4
// (TORCH_CHECK); `qa` must not be empty.
PackedSequence PackMultipleChoice(std::vector<int32_t> article,
                                  std::vector<int32_t> qa,
                                  int64_t max_seq_length,
                                  int64_t max_qa_length, bool* article_cut,
                                  bool* qa_cut);

struct MultipleChoiceFeatureOptions {
  int64_t max_seq_length = 512;  // L
  int64_t max_qa_length = 128;   // question + option, in tokens
};

struct EncodedMultipleChoice {
  torch::Tensor input_ids;       // [N, C, L] int64
  torch::Tensor token_type_ids;  // [N, C, L] int64
  torch::Tensor attention_mask;  // [N, C, L] float32, 1 real / 0 padding
  // [N] int64 option index; undefined when any example is unlabeled.
  torch::Tensor labels;
  std::vector<std::string> example_ids;  // [N]
  std::vector<std::string> levels;       // [N] "middle", "high" or ""
  // Option sequences whose article / question+option was shortened.
  int64_t truncated_articles = 0;
  int64_t truncated_qa = 0;
};

// Tokenizes and packs every option of every example. All examples must
// have the same number of options; a question + option that tokenizes to
// nothing is an InvalidArgument error naming the example.
absl::StatusOr<EncodedMultipleChoice> EncodeMultipleChoice(
    const std::vector<MultipleChoiceExample>& examples,
    const data::Tokenizer& tokenizer,
    const MultipleChoiceFeatureOptions& options);

// "accuracy" over all questions, and "accuracy_middle" / "accuracy_high"
// over the questions of each RACE level present. predictions and labels
// [N] option indices, levels [N].
std::map<std::string, double> MultipleChoiceMetrics(
    const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
    const std::vector<std::string>& levels);

// The option letter of index `i` ("A".."Z"), else the index as text.
std::string OptionName(int64_t i);

// The data of an xlnet-finetune multiple-choice run: each given path read
// (ReadMultipleChoice, finetune.bad_rows; skipped questions logged) and
// encoded with finetune.max_seq_length and finetune.max_qa_length. Empty
// paths are left out; --train must be labelled and non-empty; --test may
// be unlabeled with `do_predict`. Articles longer than the sequence are
// truncated (as the official code).
// TaskData without labels (a question's options are its classes).
using MultipleChoiceData = TaskData;
absl::StatusOr<MultipleChoiceData> ReadMultipleChoiceTask(
    const FinetuneConfig& config, const data::Tokenizer& tokenizer,
    const std::string& train_path, const std::string& dev_path,
    const std::string& test_path, bool do_predict);

}  // namespace xlnet::finetune
