// Classification and regression data for fine-tuning: GLUE-style TSV, CSV
// (RFC 4180) and JSON Lines readers, label sets, and the XLNet input
// features. The CSV reader is our own (about 100 lines, bounded): no C++ CSV
// library is a dependency of this project (Debian 12 packages none that we
// use).
//
//   ReadOptions read;
//   read.bad_rows = BadRowPolicy::kSkip;
//   XLNET_ASSIGN_OR_RETURN(ExampleSet train, ReadExamples("train.tsv", read));
//   for (const auto& p : train.problems) XLOG(WARNING) << p;
//   LabelSet labels = LabelSet::FromExamples(train.examples);
//   XLNET_ASSIGN_OR_RETURN(auto tok, data::Tokenizer::Load("spiece.model"));
//   XLNET_ASSIGN_OR_RETURN(EncodedExamples enc,
//       EncodeExamples(train.examples, *tok, &labels, {.max_seq_length =
//       128}));
//   // enc.input_ids [N, L], enc.token_type_ids, enc.attention_mask, enc.labels
//
// Sequence layout (official classifier_utils.py): `A <sep> [B <sep>] <cls>`,
// padded on the LEFT so `<cls>` is the last position; see finetune/README.md.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::finetune {

// What to do with a malformed row: finetune.bad_rows (config/settings.h).
using ::xlnet::BadRowPolicy;

// Logs the rows a reader skipped (the first 20 `problems`, then the count
// of `path`); nothing when `skipped` is 0.
void LogSkippedRows(const std::string& path, int64_t skipped,
                    const std::vector<std::string>& problems);

// One line of a text file: its 1-based number and its text without the line
// end ("\n" or "\r\n").
struct TextLine {
  int64_t number = 0;
  absl::string_view text;
};
// Splits `contents` into lines, dropping a leading UTF-8 byte order mark; the
// empty piece after a final newline is not a line.
std::vector<TextLine> SplitLines(absl::string_view contents);

// Whether labels are class names or real numbers.
enum class TaskKind { kClassification, kRegression };

// One row of a classification/regression file.
struct TextExample {
  // The `id`/`idx`/`index`/`guid` field when the file has one, otherwise the
  // 0-based row number among the file's data rows (skipped rows count).
  std::string id;
  std::string text_a;
  // Empty for single-sentence tasks.
  std::string text_b;
  bool has_label = false;
  // Classification: the label as written (integers in JSON become "1").
  std::string label;
  // Regression: the label as a number.
  double value = 0.0;
  // "FILE:LINE" of the row (1-based line, header included).
  std::string location;
};

// Maps class names to ids 0..n-1.
class LabelSet {
 public:
  LabelSet() = default;
  // The distinct labels of `examples` in sorted order: numerically when every
  // label is an integer ("2" before "10"), otherwise by bytes. Examples
  // without a label are ignored.
  static LabelSet FromExamples(const std::vector<TextExample>& examples);
  // Names in the given order (id = position); duplicates or empty names are
  // an InvalidArgument error.
  static absl::StatusOr<LabelSet> FromNames(std::vector<std::string> names);
  // From a model's `id2label` (config.json): ids must be exactly 0..n-1.
  static absl::StatusOr<LabelSet> FromId2Label(
      const std::map<int64_t, std::string>& id2label);

  // Id of `name`, or -1 when it is not in the set.
  int64_t Id(std::string_view name) const;
  const std::string& Name(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Field names; empty means "detect" as documented per field.
struct FieldNames {
  // First text. Detected (TSV header / JSON keys), in this order of pairs:
  // sentence1+sentence2, question+sentence, question1+question2,
  // text_a+text_b, premise+hypothesis; single text: sentence, text, text_a.
  std::string text_a;
  // Second text; when text_a is given and this is empty, the task is
  // single-text.
  std::string text_b;
  // Label; detected: label, gold_label, is_duplicate, score.
  std::string label;
  // Example id; detected: id, idx, index, guid (optional).
  std::string id;
};

struct ReadOptions {
  TaskKind task = TaskKind::kClassification;
  // false for unlabeled prediction input: a label field is then optional, and
  // read when present.
  bool require_label = true;
  // Ends the error for labelled input without a label column (a tool names
  // its own way to read unlabeled input here).
  std::string unlabeled_hint = "unlabeled input needs require_label=false";
  // How the label column is named, in the error above.
  std::string label_option = "ReadOptions::fields.label";
  BadRowPolicy bad_rows = BadRowPolicy::kError;
  FieldNames fields;
  // When set, a label outside it is a bad row (classification only).
  const LabelSet* labels = nullptr;
  // CSV only: the longest field and record (bytes, quotes removed) read; a
  // longer one (often an unterminated quote) is an error naming the file and
  // the line where it starts.
  size_t max_csv_field_bytes = size_t{1} << 20;
  size_t max_csv_record_bytes = size_t{4} << 20;
  // TSV and JSON Lines: the longest line (bytes) read; a longer one (often a
  // file without line ends) is an error naming the file and line and quoting
  // the line's first bytes, not the whole line.
  size_t max_line_bytes = size_t{4} << 20;
};

// The reader options of a fine-tuning config: `task`, finetune.bad_rows and
// the columns finetune.text_column, text_b_column, label_column, id_column
// (empty: detected). An invalid bad_rows is an error.
absl::StatusOr<ReadOptions> ReadOptionsFromConfig(const FinetuneConfig& config,
                                                  TaskKind task);

// What a reader returns.
struct ExampleSet {
  std::vector<TextExample> examples;
  // "FILE:LINE: what" for every skipped row (policy kSkip).
  std::vector<std::string> problems;
  int64_t skipped = 0;
  // The fields that were used (after detection); `text_b` empty for
  // single-text data, `label` empty when unlabeled.
  FieldNames fields;
};

// Input formats, chosen by extension in ReadExamples.
//   kTsv: header row, fields split on tabs, no quoting (GLUE files).
//   kCsv: RFC 4180: header row, comma separator, fields optionally in double
//     quotes with "" for a quote; quoted fields may hold commas, CR and LF.
//     Records end with CRLF or LF. A row's location is the line it starts
//     on. An unterminated quote, or a field/record over the limits of
//     ReadOptions, is an error; a stray quote (inside an unquoted field, or
//     text after a closing quote) makes a bad row.
//   kJsonl: one JSON object per line.
enum class ExampleFormat { kTsv, kCsv, kJsonl };
// .tsv -> kTsv; .csv -> kCsv; .jsonl, .ndjson, .json (read as JSON Lines)
// -> kJsonl (case-insensitive); anything else is an InvalidArgument error
// naming the path.
absl::StatusOr<ExampleFormat> FormatFromPath(const std::string& path);

// Reads a whole file; the format is chosen by FormatFromPath.
absl::StatusOr<ExampleSet> ReadExamples(const std::string& path,
                                        const ReadOptions& options);
// The same from a file's contents; `source` names it in messages.
absl::StatusOr<ExampleSet> ParseExamples(std::string_view contents,
                                         const std::string& source,
                                         ExampleFormat format,
                                         const ReadOptions& options);

// One packed sequence before batching (exposed for tests and tools).
struct PackedSequence {
  std::vector<int64_t> input_ids;       // [L], left padded with kPadId
  std::vector<int64_t> token_type_ids;  // [L]: A 0, B 1, <cls> 2, pad 4
  std::vector<float> attention_mask;    // [L]: 1 real, 0 padding
  bool truncated = false;
};
// Segment ids of the classifier input (official classifier_utils.py).
inline constexpr int64_t kSegA = 0;
inline constexpr int64_t kSegB = 1;
inline constexpr int64_t kSegCls = 2;
inline constexpr int64_t kSegPad = 4;
// `A <sep> [B <sep>] <cls>` with the longer of A/B shortened one token at a
// time from its end (official `_truncate_seq_pair`; ties shorten B) until
// it fits `max_seq_length`; an empty `b` means a single text (A cut to
// max_seq_length - 2). Requires max_seq_length >= 3 (TORCH_CHECK).
PackedSequence PackSequencePair(std::vector<int32_t> a, std::vector<int32_t> b,
                                int64_t max_seq_length);

struct FeatureOptions {
  // L: every row is padded (left) or truncated to this many tokens.
  int64_t max_seq_length = 128;
};

// Model inputs for N examples.
struct EncodedExamples {
  torch::Tensor input_ids;       // [N, L] int64
  torch::Tensor token_type_ids;  // [N, L] int64
  torch::Tensor attention_mask;  // [N, L] float32, 1 real / 0 padding
  // [N] int64 class ids (classification) or float32 values (regression);
  // undefined when any example has no label.
  torch::Tensor labels;
  std::vector<std::string> example_ids;  // [N]
  // Rows whose texts were shortened to fit.
  int64_t truncated = 0;
};

// Tokenizes and packs `examples`. Classification uses `labels` (required when
// the examples carry labels); an example label outside it is an
// InvalidArgument error naming the row's location. `task` must match how
// the examples were read.
absl::StatusOr<EncodedExamples> EncodeExamples(
    const std::vector<TextExample>& examples, const data::Tokenizer& tokenizer,
    TaskKind task, const LabelSet* labels, const FeatureOptions& options);

}  // namespace xlnet::finetune
