#include "finetune/examples.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/text.h"

namespace xlnet::finetune {
namespace {

using Json = nlohmann::json;

// Text field pairs tried in order when none is configured.
const std::vector<std::pair<std::string, std::string>>& PairCandidates() {
  static const auto* pairs =
      new std::vector<std::pair<std::string, std::string>>{
          {"sentence1", "sentence2"},
          {"question", "sentence"},
          {"question1", "question2"},
          {"text_a", "text_b"},
          {"premise", "hypothesis"}};
  return *pairs;
}
const std::vector<std::string>& SingleCandidates() {
  static const auto* names =
      new std::vector<std::string>{"sentence", "text", "text_a"};
  return *names;
}
const std::vector<std::string>& LabelCandidates() {
  static const auto* names = new std::vector<std::string>{
      "label", "gold_label", "is_duplicate", "score"};
  return *names;
}
const std::vector<std::string>& IdCandidates() {
  static const auto* names =
      new std::vector<std::string>{"id", "idx", "index", "guid"};
  return *names;
}

// Fills the empty entries of `fields` from the names available in a header
// (TSV) or the first object (JSONL). `where` names that place in errors.
absl::StatusOr<FieldNames> ResolveFields(
    const FieldNames& given, const std::vector<std::string>& available,
    const ReadOptions& options, const std::string& where) {
  auto has = [&](const std::string& name) {
    return std::find(available.begin(), available.end(), name) !=
           available.end();
  };
  const std::string listed =
      absl::StrCat("[", absl::StrJoin(available, ", "), "]");
  FieldNames f = given;
  // The first of `candidates` that is available, or "".
  auto first_of = [&](const std::vector<std::string>& candidates) {
    for (const auto& c : candidates) {
      if (has(c)) return c;
    }
    return std::string();
  };
  if (f.text_a.empty()) {
    if (!f.text_b.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": text_b field '", f.text_b, "' is set but text_a is not"));
    }
    for (const auto& [a, b] : PairCandidates()) {
      if (has(a) && has(b)) {
        f.text_a = a;
        f.text_b = b;
        break;
      }
    }
    if (f.text_a.empty()) f.text_a = first_of(SingleCandidates());
    if (f.text_a.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": no text field among ", listed,
          "; expected sentence1+sentence2, question+sentence, "
          "question1+question2, text_a+text_b, premise+hypothesis, sentence, "
          "text or text_a (or set the field names)"));
    }
  }
  if (!has(f.text_a)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no field '", f.text_a, "' among ", listed));
  }
  if (!f.text_b.empty() && !has(f.text_b)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no field '", f.text_b, "' among ", listed));
  }
  if (f.label.empty()) {
    f.label = first_of(LabelCandidates());
  } else if (!has(f.label)) {
    if (options.require_label) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no label field '", f.label, "' among ", listed,
                       "; ", options.unlabeled_hint));
    }
    f.label.clear();
  }
  if (f.label.empty() && options.require_label) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": no label field among ", listed, "; expected one of ",
        absl::StrJoin(LabelCandidates(), ", "),
        " (or name it: ", options.label_option, "); ", options.unlabeled_hint));
  }
  if (f.id.empty()) {
    f.id = first_of(IdCandidates());
  } else if (!has(f.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no id field '", f.id, "' among ", listed));
  }
  return f;
}

// Collects bad rows, or turns the first into an error.
class Problems {
 public:
  Problems(BadRowPolicy policy, ExampleSet* out) : policy_(policy), out_(out) {}
  absl::Status Bad(const std::string& location, const std::string& what) {
    std::string message = absl::StrCat(location, ": ", what);
    if (policy_ == BadRowPolicy::kError) {
      return absl::InvalidArgumentError(
          absl::StrCat(message, " (bad_rows: skip would skip such rows)"));
    }
    out_->problems.push_back(std::move(message));
    ++out_->skipped;
    return absl::OkStatus();
  }

 private:
  BadRowPolicy policy_;
  ExampleSet* out_;
};

// The raw field values of one row; `present` false for a field the row
// lacks (JSONL) or that is not configured.
struct RawField {
  bool present = false;
  std::string value;
};
struct RawRow {
  RawField text_a, text_b, label, id;
};

// Checks one row and turns it into an example; returns the problem text on
// failure ("" on success).
std::string BuildExample(const RawRow& row, const FieldNames& fields,
                         const ReadOptions& options, int64_t row_index,
                         TextExample* ex) {
  auto text = [&](const RawField& f, const std::string& name,
                  std::string* out) -> std::string {
    if (!f.present) return absl::StrCat("missing field '", name, "'");
    if (!data::IsValidUtf8(f.value)) {
      return absl::StrCat("field '", name, "' is not valid UTF-8");
    }
    if (absl::StripAsciiWhitespace(f.value).empty()) {
      return absl::StrCat("empty text in field '", name, "'");
    }
    *out = f.value;
    return "";
  };
  std::string what = text(row.text_a, fields.text_a, &ex->text_a);
  if (!what.empty()) return what;
  if (!fields.text_b.empty()) {
    what = text(row.text_b, fields.text_b, &ex->text_b);
    if (!what.empty()) return what;
  }
  if (row.id.present && !row.id.value.empty()) {
    ex->id = row.id.value;
  } else if (!fields.id.empty()) {
    return absl::StrCat("missing id in field '", fields.id, "'");
  } else {
    ex->id = std::to_string(row_index);
  }
  const bool label_given = row.label.present && !row.label.value.empty();
  if (!label_given) {
    if (options.require_label) {
      return fields.label.empty() || !row.label.present
                 ? absl::StrCat("missing label field '", fields.label, "'")
                 : absl::StrCat("empty label in field '", fields.label, "'");
    }
    return "";
  }
  if (options.task == TaskKind::kRegression) {
    double v = 0;
    if (!absl::SimpleAtod(row.label.value, &v) || !std::isfinite(v)) {
      return absl::StrCat("regression label '", row.label.value,
                          "' is not a finite number");
    }
    ex->value = v;
  } else {
    // Checked here, at the file and line: an invalid label once failed only
    // when the label set was written as JSON, after training.
    if (!data::IsValidUtf8(row.label.value)) {
      return absl::StrCat("label in field '", fields.label,
                          "' is not valid UTF-8");
    }
    // "pos " would be a class of its own beside "pos".
    if (absl::StripAsciiWhitespace(row.label.value) != row.label.value) {
      return absl::StrCat("label '", row.label.value, "' in field '",
                          fields.label, "' has leading or trailing whitespace");
    }
    if (options.labels != nullptr && options.labels->Id(row.label.value) < 0) {
      return absl::StrCat("unknown label '", row.label.value, "' (known: ",
                          absl::StrJoin(options.labels->names(), ", "), ")");
    }
    ex->label = row.label.value;
  }
  ex->has_label = true;
  return "";
}

// An error for the first of `lines` longer than `max_bytes`, naming the file
// and line and quoting the line's first bytes (escaped); OK when none is.
absl::Status CheckLineLengths(const std::vector<TextLine>& lines,
                              const std::string& source, size_t max_bytes) {
  constexpr size_t kQuoted = 40;
  for (const TextLine& line : lines) {
    if (line.text.size() <= max_bytes) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line.number, ": a line of ", line.text.size(),
                     " bytes, over the limit of ", max_bytes, " (it starts \"",
                     absl::CHexEscape(line.text.substr(0, kQuoted)),
                     "\"...; a file without line ends?)"));
  }
  return absl::OkStatus();
}

// One data record of a table (TSV or CSV): the 1-based line it starts on,
// its fields, and what is wrong with it ("" when nothing).
struct TableRecord {
  int64_t line = 0;
  std::vector<std::string> cells;
  std::string problem;
};

// A table's header and data records -> examples. `kind` ("tab-separated",
// "comma-separated") names the separator in messages.
absl::StatusOr<ExampleSet> ParseTable(const std::vector<std::string>& header,
                                      const std::vector<TableRecord>& records,
                                      const std::string& source,
                                      const std::string& kind,
                                      const ReadOptions& options) {
  ExampleSet out;
  Problems problems(options.bad_rows, &out);
  XLNET_ASSIGN_OR_RETURN(out.fields,
                         ResolveFields(options.fields, header, options,
                                       absl::StrCat(source, ":1 (header)")));
  auto column = [&](const std::string& name) -> int {
    if (name.empty()) return -1;
    return static_cast<int>(std::find(header.begin(), header.end(), name) -
                            header.begin());
  };
  const int col_a = column(out.fields.text_a);
  const int col_b = column(out.fields.text_b);
  const int col_label = column(out.fields.label);
  const int col_id = column(out.fields.id);
  for (size_t i = 0; i < records.size(); ++i) {
    const TableRecord& record = records[i];
    const std::string location = absl::StrCat(source, ":", record.line);
    const int64_t row_index = static_cast<int64_t>(i);
    if (!record.problem.empty()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(location, record.problem));
      continue;
    }
    if (record.cells == header) {
      XLNET_RETURN_IF_ERROR(problems.Bad(
          location, "the header row again (files joined with their headers?)"));
      continue;
    }
    if (record.cells.size() != header.size()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(
          location, absl::StrCat("expected ", header.size(), " ", kind,
                                 " fields (as the header), found ",
                                 record.cells.size())));
      continue;
    }
    RawRow row;
    auto take = [&](int col, RawField* f) {
      if (col < 0) return;
      f->present = true;
      f->value = record.cells[col];
    };
    take(col_a, &row.text_a);
    take(col_b, &row.text_b);
    take(col_label, &row.label);
    take(col_id, &row.id);
    TextExample ex;
    ex.location = location;
    const std::string what =
        BuildExample(row, out.fields, options, row_index, &ex);
    if (!what.empty()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(location, what));
      continue;
    }
    out.examples.push_back(std::move(ex));
  }
  return out;
}

absl::StatusOr<ExampleSet> ParseTsv(absl::string_view contents,
                                    const std::string& source,
                                    const ReadOptions& options) {
  const std::vector<TextLine> lines = SplitLines(contents);
  if (lines.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": empty file (a TSV needs a header row)"));
  }
  XLNET_RETURN_IF_ERROR(
      CheckLineLengths(lines, source, options.max_line_bytes));
  const std::vector<std::string> header = absl::StrSplit(lines[0].text, '\t');
  std::vector<TableRecord> records(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    TableRecord& r = records[i - 1];
    r.line = lines[i].number;
    if (lines[i].text.empty()) {
      r.problem = "empty line";
    } else {
      r.cells = absl::StrSplit(lines[i].text, '\t');
    }
  }
  return ParseTable(header, records, source, "tab-separated", options);
}

// RFC 4180 records of `contents` (BOM dropped). Structural errors that leave
// the rest of the file unreadable (an unterminated quote, a field or record
// over the limits) are errors naming the file and line; a record that is
// malformed but delimited (a stray quote) gets a `problem`.
absl::StatusOr<std::vector<TableRecord>> SplitCsv(absl::string_view contents,
                                                  const std::string& source,
                                                  const ReadOptions& options) {
  if (contents.substr(0, 3) == "\xEF\xBB\xBF") contents.remove_prefix(3);
  std::vector<TableRecord> records;
  const size_t n = contents.size();
  size_t pos = 0;
  int64_t line = 1;
  while (pos < n) {
    TableRecord record;
    record.line = line;
    size_t record_bytes = 0;
    bool end_of_record = false;
    if (contents[pos] == '\n' ||
        (contents[pos] == '\r' && pos + 1 < n && contents[pos + 1] == '\n')) {
      pos += contents[pos] == '\r' ? 2 : 1;
      ++line;
      record.problem = "empty line";
      records.push_back(std::move(record));
      continue;
    }
    while (!end_of_record) {
      std::string field;
      const int64_t field_line = line;
      auto grow = [&](char c) -> absl::Status {
        field.push_back(c);
        if (field.size() > options.max_csv_field_bytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ":", field_line, ": a field longer than ",
              options.max_csv_field_bytes,
              " bytes (an unterminated quote?); finetune CSV fields are "
              "bounded"));
        }
        return absl::OkStatus();
      };
      if (pos < n && contents[pos] == '"') {
        ++pos;
        bool closed = false;
        while (pos < n) {
          const char c = contents[pos++];
          if (c == '"') {
            if (pos < n && contents[pos] == '"') {
              ++pos;
              XLNET_RETURN_IF_ERROR(grow('"'));
              continue;
            }
            closed = true;
            break;
          }
          if (c == '\n') ++line;
          XLNET_RETURN_IF_ERROR(grow(c));
        }
        if (!closed) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ":", field_line,
              ": unterminated quoted field (a field that starts with \" ends "
              "at the next \" not doubled as \"\")"));
        }
        // After the closing quote: a separator or the end of the record.
        while (pos < n && contents[pos] != ',' && contents[pos] != '\n' &&
               !(contents[pos] == '\r' && pos + 1 < n &&
                 contents[pos + 1] == '\n')) {
          if (record.problem.empty()) {
            record.problem = absl::StrCat(
                "text after the closing quote of field ",
                record.cells.size() + 1,
                " (a quote inside a quoted field is written \"\")");
          }
          XLNET_RETURN_IF_ERROR(grow(contents[pos++]));
        }
      } else {
        while (pos < n && contents[pos] != ',' && contents[pos] != '\n' &&
               !(contents[pos] == '\r' && pos + 1 < n &&
                 contents[pos + 1] == '\n')) {
          if (contents[pos] == '"' && record.problem.empty()) {
            record.problem = absl::StrCat(
                "a quote inside unquoted field ", record.cells.size() + 1,
                " (quote the whole field and write the quote as \"\")");
          }
          XLNET_RETURN_IF_ERROR(grow(contents[pos++]));
        }
      }
      record_bytes += field.size() + 1;
      record.cells.push_back(std::move(field));
      if (record_bytes > options.max_csv_record_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", record.line, ": a record longer than ",
                         options.max_csv_record_bytes,
                         " bytes; finetune CSV records are bounded"));
      }
      if (pos >= n) {
        end_of_record = true;
      } else if (contents[pos] == ',') {
        ++pos;
        // A separator at the very end of the file leaves one empty field.
        if (pos >= n) {
          record.cells.emplace_back();
          end_of_record = true;
        }
      } else {
        pos += contents[pos] == '\r' ? 2 : 1;
        ++line;
        end_of_record = true;
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

absl::StatusOr<ExampleSet> ParseCsv(absl::string_view contents,
                                    const std::string& source,
                                    const ReadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(std::vector<TableRecord> records,
                         SplitCsv(contents, source, options));
  if (records.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": empty file (a CSV needs a header row)"));
  }
  const TableRecord header = std::move(records.front());
  records.erase(records.begin());
  if (!header.problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":1 (header): ", header.problem));
  }
  return ParseTable(header.cells, records, source, "comma-separated", options);
}

// Which JSON types a field accepts besides strings.
enum class JsonKind { kString, kStringOrInteger, kStringOrNumber };

// A JSON value as a field string; sets `error` (if still empty) when its
// type is not accepted.
RawField JsonField(const Json& object, const std::string& name, JsonKind kind,
                   std::string* error) {
  RawField f;
  if (name.empty()) return f;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return f;
  f.present = true;
  const bool integer = it->is_number_integer() || it->is_number_unsigned();
  if (it->is_string()) {
    f.value = it->get<std::string>();
  } else if ((integer && kind != JsonKind::kString) ||
             (it->is_number_float() && kind == JsonKind::kStringOrNumber)) {
    f.value = it->dump();
  } else if (error->empty()) {
    const char* allowed = kind == JsonKind::kString ? ""
                          : kind == JsonKind::kStringOrInteger
                              ? " or an integer"
                              : " or a number";
    *error = absl::StrCat("field '", name, "' must be a string", allowed,
                          ", found ", it->type_name());
  }
  return f;
}

absl::StatusOr<ExampleSet> ParseJsonl(absl::string_view contents,
                                      const std::string& source,
                                      const ReadOptions& options) {
  ExampleSet out;
  Problems problems(options.bad_rows, &out);
  bool resolved = false;
  int64_t row_index = -1;
  const std::vector<TextLine> lines = SplitLines(contents);
  XLNET_RETURN_IF_ERROR(
      CheckLineLengths(lines, source, options.max_line_bytes));
  for (const TextLine& line : lines) {
    ++row_index;
    const std::string location = absl::StrCat(source, ":", line.number);
    if (absl::StripAsciiWhitespace(line.text).empty()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(location, "empty line"));
      continue;
    }
    // A key given twice ({"label": 0, "label": 1}) is a bad row, not a
    // silent choice of one of them.
    absl::StatusOr<Json> parsed = ParseJson(std::string(line.text), location);
    if (!parsed.ok()) {
      const bool duplicate =
          absl::StrContains(parsed.status().message(), "duplicate key");
      XLNET_RETURN_IF_ERROR(problems.Bad(
          location,
          duplicate ? std::string(
                          parsed.status().message().substr(location.size() + 2))
                    : "invalid JSON (JSON Lines: one object per line)"));
      continue;
    }
    const Json object = std::move(*parsed);
    if (!object.is_object()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(
          location,
          absl::StrCat("expected a JSON object, found ", object.type_name(),
                       " (JSON Lines: one object per line)")));
      continue;
    }
    if (!resolved) {
      std::vector<std::string> keys;
      for (const auto& item : object.items()) keys.push_back(item.key());
      XLNET_ASSIGN_OR_RETURN(
          out.fields, ResolveFields(options.fields, keys, options,
                                    absl::StrCat(location, " (first object)")));
      resolved = true;
    }
    std::string error;
    RawRow row;
    row.text_a =
        JsonField(object, out.fields.text_a, JsonKind::kString, &error);
    row.text_b =
        JsonField(object, out.fields.text_b, JsonKind::kString, &error);
    row.label = JsonField(object, out.fields.label,
                          options.task == TaskKind::kRegression
                              ? JsonKind::kStringOrNumber
                              : JsonKind::kStringOrInteger,
                          &error);
    row.id =
        JsonField(object, out.fields.id, JsonKind::kStringOrInteger, &error);
    TextExample ex;
    ex.location = location;
    if (error.empty()) {
      error = BuildExample(row, out.fields, options, row_index, &ex);
    }
    if (!error.empty()) {
      XLNET_RETURN_IF_ERROR(problems.Bad(location, error));
      continue;
    }
    out.examples.push_back(std::move(ex));
  }
  if (!resolved && out.skipped == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": empty file (no JSON objects)"));
  }
  return out;
}

}  // namespace

absl::StatusOr<ReadOptions> ReadOptionsFromConfig(const FinetuneConfig& config,
                                                  TaskKind task) {
  ReadOptions read;
  read.task = task;
  read.bad_rows = config.bad_rows;
  read.fields.text_a = config.text_column;
  read.fields.text_b = config.text_b_column;
  read.fields.label = config.label_column;
  read.fields.id = config.id_column;
  read.label_option = "finetune.label_column";
  return read;
}

std::vector<TextLine> SplitLines(absl::string_view contents) {
  if (contents.substr(0, 3) == "\xEF\xBB\xBF") contents.remove_prefix(3);
  std::vector<TextLine> lines;
  int64_t number = 0;
  while (!contents.empty()) {
    const size_t nl = contents.find('\n');
    absl::string_view line = contents.substr(0, nl);
    contents.remove_prefix(nl == absl::string_view::npos ? contents.size()
                                                         : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({++number, line});
  }
  return lines;
}

void LogSkippedRows(const std::string& path, int64_t skipped,
                    const std::vector<std::string>& problems) {
  if (skipped == 0) return;
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) {
    XLOG(WARNING) << "skipped " << problems[i];
  }
  XLOG(WARNING) << path << ": skipped " << skipped << " bad rows"
                << (problems.size() > kShown ? " (first 20 shown)" : "")
                << " (finetune.bad_rows=skip)";
}

LabelSet LabelSet::FromExamples(const std::vector<TextExample>& examples) {
  std::vector<std::string> names;
  for (const auto& ex : examples) {
    if (ex.has_label) names.push_back(ex.label);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  bool all_int = !names.empty();
  std::vector<std::pair<int64_t, std::string>> numeric;
  for (const auto& n : names) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(n, &v) || std::to_string(v) != n) {
      all_int = false;
      break;
    }
    numeric.emplace_back(v, n);
  }
  if (all_int) {
    std::sort(numeric.begin(), numeric.end());
    for (size_t i = 0; i < numeric.size(); ++i) names[i] = numeric[i].second;
  }
  LabelSet set;
  for (auto& n : names) {
    set.ids_.emplace(n, set.size());
    set.names_.push_back(std::move(n));
  }
  return set;
}

absl::StatusOr<LabelSet> LabelSet::FromNames(std::vector<std::string> names) {
  LabelSet set;
  for (auto& n : names) {
    if (n.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label set: empty label name at id ", set.size()));
    }
    if (!set.ids_.emplace(n, set.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("label set: duplicate label '", n, "'"));
    }
    set.names_.push_back(std::move(n));
  }
  return set;
}

absl::StatusOr<LabelSet> LabelSet::FromId2Label(
    const std::map<int64_t, std::string>& id2label) {
  std::vector<std::string> names;
  for (const auto& [id, name] : id2label) {
    if (id != static_cast<int64_t>(names.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("id2label: ids must be 0..", id2label.size() - 1,
                       " without gaps; found id ", id));
    }
    names.push_back(name);
  }
  return FromNames(std::move(names));
}

int64_t LabelSet::Id(std::string_view name) const {
  auto it = ids_.find(std::string(name));
  return it == ids_.end() ? -1 : it->second;
}

const std::string& LabelSet::Name(int64_t id) const {
  TORCH_CHECK(id >= 0 && id < size(), "label id ", id, " outside [0, ", size(),
              ")");
  return names_[id];
}

absl::StatusOr<ExampleFormat> FormatFromPath(const std::string& path) {
  auto ends_with = [&](std::string_view ext) {
    return path.size() >= ext.size() &&
           absl::AsciiStrToLower(path.substr(path.size() - ext.size())) == ext;
  };
  if (ends_with(".tsv")) return ExampleFormat::kTsv;
  if (ends_with(".csv")) return ExampleFormat::kCsv;
  if (ends_with(".jsonl") || ends_with(".ndjson") || ends_with(".json")) {
    return ExampleFormat::kJsonl;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": unknown data format; expected a .tsv file (GLUE-style, header row), "
      "a .csv file (RFC 4180, header row) or a .jsonl/.ndjson/.json file "
      "(JSON Lines: one object per line)"));
}

absl::StatusOr<ExampleSet> ParseExamples(std::string_view contents,
                                         const std::string& source,
                                         ExampleFormat format,
                                         const ReadOptions& options) {
  if (options.labels != nullptr && options.task != TaskKind::kClassification) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": a label set is for classification only"));
  }
  const absl::string_view text(contents.data(), contents.size());
  switch (format) {
    case ExampleFormat::kTsv:
      return ParseTsv(text, source, options);
    case ExampleFormat::kCsv:
      return ParseCsv(text, source, options);
    case ExampleFormat::kJsonl:
      break;
  }
  return ParseJsonl(text, source, options);
}

absl::StatusOr<ExampleSet> ReadExamples(const std::string& path,
                                        const ReadOptions& options) {
  XLNET_ASSIGN_OR_RETURN(const ExampleFormat format, FormatFromPath(path));
  XLNET_ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
  return ParseExamples(contents, path, format, options);
}

PackedSequence PackSequencePair(std::vector<int32_t> a, std::vector<int32_t> b,
                                int64_t max_seq_length) {
  TORCH_CHECK(max_seq_length >= 3, "max_seq_length must be >= 3, got ",
              max_seq_length);
  PackedSequence out;
  const size_t a0 = a.size();
  const size_t b0 = b.size();
  if (!b.empty()) {
    const size_t budget = static_cast<size_t>(max_seq_length - 3);
    while (a.size() + b.size() > budget) {
      if (a.size() > b.size()) {
        a.pop_back();
      } else {
        b.pop_back();
      }
    }
  } else if (a.size() > static_cast<size_t>(max_seq_length - 2)) {
    a.resize(max_seq_length - 2);
  }
  out.truncated = a.size() != a0 || b.size() != b0;
  const size_t real = a.size() + 1 + (b0 > 0 ? b.size() + 1 : 0) + 1;
  const size_t pad = static_cast<size_t>(max_seq_length) - real;
  out.input_ids.assign(pad, data::kPadId);
  out.token_type_ids.assign(pad, kSegPad);
  out.attention_mask.assign(pad, 0.0f);
  auto push = [&](int64_t id, int64_t seg) {
    out.input_ids.push_back(id);
    out.token_type_ids.push_back(seg);
    out.attention_mask.push_back(1.0f);
  };
  for (int32_t id : a) push(id, kSegA);
  push(data::kSepId, kSegA);
  if (b0 > 0) {
    for (int32_t id : b) push(id, kSegB);
    push(data::kSepId, kSegB);
  }
  push(data::kClsId, kSegCls);
  return out;
}

absl::StatusOr<EncodedExamples> EncodeExamples(
    const std::vector<TextExample>& examples, const data::Tokenizer& tokenizer,
    TaskKind task, const LabelSet* labels, const FeatureOptions& options) {
  const int64_t n = static_cast<int64_t>(examples.size());
  const int64_t len = options.max_seq_length;
  if (len < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seq_length must be >= 3, got ", len));
  }
  bool all_labeled = n > 0;
  for (const auto& ex : examples) all_labeled = all_labeled && ex.has_label;
  if (all_labeled && task == TaskKind::kClassification &&
      (labels == nullptr || labels->size() == 0)) {
    return absl::InvalidArgumentError(
        "classification examples with labels need a non-empty label set");
  }
  EncodedExamples out;
  out.input_ids = torch::empty({n, len}, torch::kInt64);
  out.token_type_ids = torch::empty({n, len}, torch::kInt64);
  out.attention_mask = torch::empty({n, len}, torch::kFloat32);
  torch::Tensor label_tensor;
  if (all_labeled) {
    label_tensor =
        torch::empty({n}, task == TaskKind::kClassification ? torch::kInt64
                                                            : torch::kFloat32);
  }
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* segs = out.token_type_ids.data_ptr<int64_t>();
  float* mask = out.attention_mask.data_ptr<float>();
  std::vector<int32_t> a;
  std::vector<int32_t> b;
  for (int64_t i = 0; i < n; ++i) {
    const TextExample& ex = examples[i];
    if (!data::IsValidUtf8(ex.text_a) || !data::IsValidUtf8(ex.text_b)) {
      return absl::InvalidArgumentError(
          absl::StrCat(ex.location, ": text is not valid UTF-8"));
    }
    a.clear();
    b.clear();
    XLNET_RETURN_IF_ERROR(
        Annotate(tokenizer.EncodeIds(ex.text_a, &a), ex.location));
    if (!ex.text_b.empty()) {
      XLNET_RETURN_IF_ERROR(
          Annotate(tokenizer.EncodeIds(ex.text_b, &b), ex.location));
    }
    const PackedSequence p = PackSequencePair(a, b, len);
    std::copy(p.input_ids.begin(), p.input_ids.end(), ids + i * len);
    std::copy(p.token_type_ids.begin(), p.token_type_ids.end(), segs + i * len);
    std::copy(p.attention_mask.begin(), p.attention_mask.end(), mask + i * len);
    out.truncated += p.truncated ? 1 : 0;
    out.example_ids.push_back(ex.id);
    if (!all_labeled) continue;
    if (task == TaskKind::kClassification) {
      const int64_t id = labels->Id(ex.label);
      if (id < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            ex.location, ": label '", ex.label, "' is not in the label set (",
            absl::StrJoin(labels->names(), ", "), ")"));
      }
      label_tensor.data_ptr<int64_t>()[i] = id;
    } else {
      label_tensor.data_ptr<float>()[i] = static_cast<float>(ex.value);
    }
  }
  out.labels = label_tensor;
  return out;
}

}  // namespace xlnet::finetune
