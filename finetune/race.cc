#include "finetune/race.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/text.h"
#include "finetune/chunks.h"
#include "finetune/metrics.h"

namespace xlnet::finetune {
namespace {

using Json = nlohmann::json;

bool IsBlank(const std::string& text) {
  return absl::StripAsciiWhitespace(text).empty();
}

// "middle" or "high" when a directory of `path` has that name (the last one
// wins), else "".
std::string LevelFromPath(const std::string& path) {
  std::string level;
  const std::filesystem::path p(path);
  for (auto it = p.begin(); it != p.end(); ++it) {
    if (std::next(it) == p.end()) break;  // the file name itself
    const std::string part = it->string();
    if (part == "middle" || part == "high") level = part;
  }
  return level;
}

// "SOURCE (id 'ID')", or SOURCE without an id.
std::string WithId(const std::string& source, const std::string& id) {
  return id.empty() ? source : absl::StrCat(source, " (id '", id, "')");
}

// The "id" of JSON that strict parsing refused (e.g. for a duplicate key),
// read leniently to name the question in the message; "" when there is none.
std::string LenientId(const std::string& text) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "";
  auto id = j.find("id");
  if (id == j.end()) return "";
  if (id->is_string()) return id->get<std::string>();
  if (id->is_number_integer()) return id->dump();
  return "";
}

// ParseJson's message without its leading "SOURCE: ".
std::string JsonProblem(const absl::Status& status, const std::string& source) {
  std::string message(status.message());
  const std::string prefix = source + ": ";
  if (absl::StartsWith(message, prefix)) message.erase(0, prefix.size());
  return message;
}

std::string LevelFromId(const std::string& id) {
  if (absl::StartsWith(id, "middle")) return "middle";
  if (absl::StartsWith(id, "high")) return "high";
  return "";
}

// Appends questions to a set, enforcing what holds across files: unique ids
// and one number of options.
class Reader {
 public:
  Reader(const MultipleChoiceReadOptions& options, MultipleChoiceSet* set)
      : options_(options), set_(set) {
    for (const auto& ex : set->examples) ids_.insert(ex.id);
  }

  // A problem of one question (or of a whole file when `qid` is empty).
  absl::Status Bad(const std::string& where, const std::string& qid,
                   const std::string& what) {
    std::string message =
        qid.empty() ? absl::StrCat(where, ": ", what)
                    : absl::StrCat(where, ": question '", qid, "': ", what);
    if (options_.bad_rows == BadRowPolicy::kError) {
      return absl::InvalidArgumentError(
          absl::StrCat(message, " (bad_rows: skip would skip it)"));
    }
    set_->problems.push_back(std::move(message));
    ++set_->skipped;
    return absl::OkStatus();
  }

  // Checks `options` (a JSON array of option texts) into `out`; returns the
  // problem or "".
  std::string Options(const Json& options, std::vector<std::string>* out) {
    if (!options.is_array()) return "\"options\" is not an array";
    const int64_t n = static_cast<int64_t>(options.size());
    if (n < 2 || n > options_.max_options) {
      return absl::StrCat("has ", n, " options (2 to ", options_.max_options,
                          " are supported)");
    }
    for (int64_t k = 0; k < n; ++k) {
      const Json& o = options[k];
      if (!o.is_string()) {
        return absl::StrCat("option ", OptionName(k), " is not a string");
      }
      std::string text = o.get<std::string>();
      if (!data::IsValidUtf8(text)) {
        return absl::StrCat("option ", OptionName(k), " is not valid UTF-8");
      }
      if (IsBlank(text)) {
        return absl::StrCat("option ", OptionName(k), " is empty");
      }
      out->push_back(std::move(text));
    }
    if (set_->num_choices != 0 && n != set_->num_choices) {
      return absl::StrCat("has ", n,
                          " options but the questions before it have ",
                          set_->num_choices,
                          " (every question of a set needs the same number)");
    }
    return "";
  }

  // The answer `answer` (a letter, or with `allow_index` a 0-based integer)
  // of a question with `n` options; returns the problem or "".
  std::string Answer(const Json& answer, int64_t n, bool allow_index,
                     int64_t* label) {
    if (answer.is_null()) {
      if (!options_.require_label) return "";
      return absl::StrCat("no answer",
                          options_.unlabeled_hint.empty() ? "" : "; ",
                          options_.unlabeled_hint);
    }
    if (answer.is_string()) {
      const std::string a = answer.get<std::string>();
      if (a.size() == 1 && a[0] >= 'A' && a[0] - 'A' < n) {
        *label = a[0] - 'A';
        return "";
      }
      return absl::StrCat("answer '", a, "' is not one of the option letters ",
                          "A..", OptionName(n - 1));
    }
    if (allow_index && answer.is_number_integer()) {
      auto index = JsonInteger(answer, "label", 0, n - 1);
      if (index.ok()) {
        *label = *index;
        return "";
      }
      return absl::StrCat("label ", answer.dump(),
                          " is not an option index 0..", n - 1);
    }
    return absl::StrCat(
        "answer ", answer.dump(), " is not ",
        allow_index ? "an option letter or index" : "an option letter");
  }

  // Adds a checked example (a repeated id is a bad question).
  absl::Status Add(MultipleChoiceExample ex, const std::string& where) {
    if (!ids_.insert(ex.id).second) {
      return Bad(where, ex.id, "duplicate question id");
    }
    set_->num_choices = static_cast<int64_t>(ex.options.size());
    set_->examples.push_back(std::move(ex));
    return absl::OkStatus();
  }

  absl::Status RaceFile(const std::string& contents, const std::string& source,
                        const std::string& level) {
    absl::StatusOr<Json> parsed = ParseJson(contents, source);
    if (!parsed.ok()) {
      return Bad(WithId(source, LenientId(contents)), "",
                 JsonProblem(parsed.status(), source));
    }
    const Json& root = *parsed;
    if (!root.is_object()) {
      return Bad(source, "", "not a RACE file (expected one JSON object)");
    }
    std::string file_id = std::filesystem::path(source).filename().string();
    if (auto id = root.find("id"); id != root.end()) {
      if (!id->is_string() || IsBlank(id->get<std::string>())) {
        return Bad(source, "", "\"id\" is not a non-empty string");
      }
      file_id = id->get<std::string>();
    }
    const std::string where = WithId(source, file_id);
    auto article = root.find("article");
    if (article == root.end() || !article->is_string()) {
      return Bad(where, "", "no \"article\" string");
    }
    const std::string text = article->get<std::string>();
    if (!data::IsValidUtf8(text)) {
      return Bad(where, "", "article is not valid UTF-8");
    }
    if (IsBlank(text)) return Bad(where, "", "empty article");
    auto questions = root.find("questions");
    auto options = root.find("options");
    auto answers = root.find("answers");
    if (questions == root.end() || !questions->is_array()) {
      return Bad(where, "", "no \"questions\" array");
    }
    if (options == root.end() || !options->is_array()) {
      return Bad(where, "", "no \"options\" array");
    }
    const bool has_answers = answers != root.end() && !answers->is_null();
    if (has_answers && !answers->is_array()) {
      return Bad(where, "", "\"answers\" is not an array");
    }
    if (!has_answers && options_.require_label) {
      return Bad(where, "",
                 absl::StrCat("no \"answers\" array",
                              options_.unlabeled_hint.empty() ? "" : "; ",
                              options_.unlabeled_hint));
    }
    const size_t n = questions->size();
    if (options->size() != n || (has_answers && answers->size() != n)) {
      return Bad(
          where, "",
          absl::StrCat(n, " questions, ", options->size(), " option lists and ",
                       has_answers ? answers->size() : 0,
                       " answers (they must agree)"));
    }
    for (size_t i = 0; i < n; ++i) {
      MultipleChoiceExample ex;
      ex.id = absl::StrCat(file_id, "-", i);
      ex.location = source;
      ex.article = text;
      ex.level = level.empty() ? LevelFromId(file_id) : level;
      const Json& q = (*questions)[i];
      std::string problem;
      if (!q.is_string()) {
        problem = "the question is not a string";
      } else {
        ex.question = q.get<std::string>();
        if (!data::IsValidUtf8(ex.question)) {
          problem = "the question is not valid UTF-8";
        }
      }
      if (problem.empty()) problem = Options((*options)[i], &ex.options);
      if (problem.empty()) {
        problem = Answer(has_answers ? (*answers)[i] : Json(),
                         static_cast<int64_t>(ex.options.size()),
                         /*allow_index=*/false, &ex.label);
      }
      if (!problem.empty()) {
        XLNET_RETURN_IF_ERROR(Bad(source, ex.id, problem));
        continue;
      }
      XLNET_RETURN_IF_ERROR(Add(std::move(ex), source));
    }
    return absl::OkStatus();
  }

  absl::Status Jsonl(const std::string& contents, const std::string& source) {
    int64_t row = -1;
    for (const TextLine& line : SplitLines(contents)) {
      ++row;
      const std::string location = absl::StrCat(source, ":", line.number);
      if (IsBlank(std::string(line.text))) {
        XLNET_RETURN_IF_ERROR(Bad(location, "", "empty line"));
        continue;
      }
      const std::string text(line.text);
      absl::StatusOr<Json> parsed = ParseJson(text, location);
      if (!parsed.ok()) {
        XLNET_RETURN_IF_ERROR(Bad(location, LenientId(text),
                                  JsonProblem(parsed.status(), location)));
        continue;
      }
      const Json& object = *parsed;
      if (!object.is_object()) {
        XLNET_RETURN_IF_ERROR(
            Bad(location, "", "expected a JSON object (one per line)"));
        continue;
      }
      MultipleChoiceExample ex;
      ex.location = location;
      std::string problem;
      if (auto id = object.find("id"); id != object.end() && !id->is_null()) {
        if (id->is_string() && !IsBlank(id->get<std::string>())) {
          ex.id = id->get<std::string>();
        } else if (id->is_number_integer()) {
          ex.id = id->dump();
        } else {
          problem = "\"id\" is not a non-empty string or an integer";
        }
      } else {
        ex.id = std::to_string(row);
      }
      auto field = [&](const char* key, bool may_be_blank,
                       std::string* out) -> std::string {
        auto it = object.find(key);
        if (it == object.end() || !it->is_string()) {
          return absl::StrCat("no \"", key, "\" string");
        }
        *out = it->get<std::string>();
        if (!data::IsValidUtf8(*out)) {
          return absl::StrCat("\"", key, "\" is not valid UTF-8");
        }
        if (!may_be_blank && IsBlank(*out)) {
          return absl::StrCat("empty \"", key, "\"");
        }
        return "";
      };
      if (problem.empty()) problem = field("article", false, &ex.article);
      if (problem.empty()) problem = field("question", true, &ex.question);
      if (problem.empty()) {
        auto options = object.find("options");
        problem = options == object.end() ? "no \"options\" array"
                                          : Options(*options, &ex.options);
      }
      if (problem.empty()) {
        auto label = object.find("label");
        problem = Answer(label == object.end() ? Json() : *label,
                         static_cast<int64_t>(ex.options.size()),
                         /*allow_index=*/true, &ex.label);
      }
      if (!problem.empty()) {
        XLNET_RETURN_IF_ERROR(Bad(location, ex.id, problem));
        continue;
      }
      ex.level = LevelFromId(ex.id);
      XLNET_RETURN_IF_ERROR(Add(std::move(ex), location));
    }
    return absl::OkStatus();
  }

 private:
  const MultipleChoiceReadOptions& options_;
  MultipleChoiceSet* set_;
  std::unordered_set<std::string> ids_;
};

bool IsJsonlPath(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path);
  return absl::EndsWith(lower, ".jsonl") || absl::EndsWith(lower, ".ndjson");
}

// The .txt files under `dir`, sorted.
absl::StatusOr<std::vector<std::string>> RaceFiles(
    const std::string& dir, const MultipleChoiceReadOptions& options) {
  std::vector<std::string> files;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::EndsWith(absl::AsciiStrToLower(name), ".txt")) continue;
    if (!it->is_regular_file(ec)) continue;
    files.push_back(it->path().string());
    if (static_cast<int64_t>(files.size()) > options.max_files) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": more than ", options.max_files,
                       " .txt files (RACE has about 28,000)"));
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot list the directory: ", ec.message()));
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": no .txt files (the RACE layout: DIR/{middle,high}/*.txt, one "
        "JSON object each)"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string OptionName(int64_t i) {
  if (i >= 0 && i < 26) return std::string(1, static_cast<char>('A' + i));
  return std::to_string(i);
}

absl::Status ParseRaceFile(const std::string& contents,
                           const std::string& source, const std::string& level,
                           const MultipleChoiceReadOptions& options,
                           MultipleChoiceSet* set) {
  Reader reader(options, set);
  return reader.RaceFile(contents, source, level);
}

absl::Status ParseMultipleChoiceJsonl(const std::string& contents,
                                      const std::string& source,
                                      const MultipleChoiceReadOptions& options,
                                      MultipleChoiceSet* set) {
  Reader reader(options, set);
  return reader.Jsonl(contents, source);
}

absl::StatusOr<MultipleChoiceSet> ReadMultipleChoice(
    const std::string& path, const MultipleChoiceReadOptions& options) {
  MultipleChoiceSet set;
  Reader reader(options, &set);
  if (IsDirectory(path)) {
    XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                           RaceFiles(path, options));
    for (const std::string& file : files) {
      XLNET_ASSIGN_OR_RETURN(const std::string contents,
                             ReadFile(file, options.max_race_file_bytes));
      const std::string relative =
          std::filesystem::path(file).lexically_relative(path).string();
      std::string level = LevelFromPath(relative);
      if (level.empty()) level = LevelFromPath(file);
      XLNET_RETURN_IF_ERROR(reader.RaceFile(contents, file, level));
    }
  } else if (IsJsonlPath(path)) {
    XLNET_ASSIGN_OR_RETURN(const std::string contents,
                           ReadFile(path, options.max_jsonl_file_bytes));
    XLNET_RETURN_IF_ERROR(reader.Jsonl(contents, path));
  } else {
    XLNET_ASSIGN_OR_RETURN(const std::string contents,
                           ReadFile(path, options.max_race_file_bytes));
    XLNET_RETURN_IF_ERROR(reader.RaceFile(contents, path, LevelFromPath(path)));
  }
  return set;
}

std::string QuestionWithOption(const std::string& question,
                               const std::string& option) {
  if (question.find('_') == std::string::npos) {
    return absl::StrCat(question, " ", option);
  }
  return absl::StrReplaceAll(question, {{"_", option}});
}

PackedSequence PackMultipleChoice(std::vector<int32_t> article,
                                  std::vector<int32_t> qa,
                                  int64_t max_seq_length, int64_t max_qa_length,
                                  bool* article_cut, bool* qa_cut) {
  TORCH_CHECK(max_qa_length >= 1 && max_seq_length >= max_qa_length + 4,
              "PackMultipleChoice: need max_qa_length >= 1 and max_seq_length "
              ">= max_qa_length + 4, got ",
              max_seq_length, " and ", max_qa_length);
  TORCH_CHECK(!qa.empty(), "PackMultipleChoice: empty question + option");
  *qa_cut = static_cast<int64_t>(qa.size()) > max_qa_length;
  if (*qa_cut) qa.erase(qa.begin(), qa.end() - max_qa_length);  // keep the end
  const size_t budget = static_cast<size_t>(max_seq_length - 3) - qa.size();
  *article_cut = article.size() > budget;
  if (*article_cut) article.resize(budget);  // keep the beginning
  // Fits: PackSequencePair only lays it out.
  PackedSequence out =
      PackSequencePair(std::move(article), std::move(qa), max_seq_length);
  out.truncated = *article_cut || *qa_cut;
  return out;
}

absl::StatusOr<EncodedMultipleChoice> EncodeMultipleChoice(
    const std::vector<MultipleChoiceExample>& examples,
    const data::Tokenizer& tokenizer,
    const MultipleChoiceFeatureOptions& options) {
  const int64_t len = options.max_seq_length;
  const int64_t qa_len = options.max_qa_length;
  if (qa_len < 1 || len < qa_len + 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_seq_length=", len,
        " must be at least "
        "finetune.max_qa_length + 4 (",
        qa_len + 4,
        ": question + option, 3 special tokens and one article token)"));
  }
  const int64_t n = static_cast<int64_t>(examples.size());
  const int64_t choices = n > 0 ? examples[0].options.size() : 0;
  bool labelled = n > 0;
  for (const auto& ex : examples) labelled = labelled && ex.label >= 0;
  EncodedMultipleChoice out;
  out.input_ids = torch::empty({n, choices, len}, torch::kInt64);
  out.token_type_ids = torch::empty({n, choices, len}, torch::kInt64);
  out.attention_mask = torch::empty({n, choices, len}, torch::kFloat32);
  if (labelled) out.labels = torch::empty({n}, torch::kInt64);
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* segs = out.token_type_ids.data_ptr<int64_t>();
  float* mask = out.attention_mask.data_ptr<float>();
  std::vector<int32_t> article;
  std::vector<int32_t> qa;
  for (int64_t i = 0; i < n; ++i) {
    const MultipleChoiceExample& ex = examples[i];
    const std::string where =
        absl::StrCat(ex.location, ": question '", ex.id, "'");
    if (static_cast<int64_t>(ex.options.size()) != choices) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", ex.options.size(),
                       " options, the first question has ", choices));
    }
    article.clear();
    XLNET_RETURN_IF_ERROR(
        Annotate(tokenizer.EncodeIds(ex.article, &article), where));
    for (int64_t c = 0; c < choices; ++c) {
      qa.clear();
      XLNET_RETURN_IF_ERROR(
          Annotate(tokenizer.EncodeIds(
                       QuestionWithOption(ex.question, ex.options[c]), &qa),
                   where));
      if (qa.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": question + option ", OptionName(c), " has no tokens"));
      }
      bool article_cut = false;
      bool qa_cut = false;
      const PackedSequence p =
          PackMultipleChoice(article, qa, len, qa_len, &article_cut, &qa_cut);
      const int64_t offset = (i * choices + c) * len;
      std::copy(p.input_ids.begin(), p.input_ids.end(), ids + offset);
      std::copy(p.token_type_ids.begin(), p.token_type_ids.end(),
                segs + offset);
      std::copy(p.attention_mask.begin(), p.attention_mask.end(),
                mask + offset);
      out.truncated_articles += article_cut ? 1 : 0;
      out.truncated_qa += qa_cut ? 1 : 0;
    }
    if (labelled) out.labels.data_ptr<int64_t>()[i] = ex.label;
    out.example_ids.push_back(ex.id);
    out.levels.push_back(ex.level);
  }
  return out;
}

std::map<std::string, double> MultipleChoiceMetrics(
    const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
    const std::vector<std::string>& levels) {
  TORCH_CHECK(
      labels.size() == predictions.size() && labels.size() == levels.size(),
      "MultipleChoiceMetrics: ", labels.size(), " labels, ", predictions.size(),
      " predictions, ", levels.size(), " levels");
  std::map<std::string, double> out;
  out["accuracy"] = Accuracy(labels, predictions);
  for (const char* level : {"middle", "high"}) {
    std::vector<int64_t> l;
    std::vector<int64_t> p;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (levels[i] != level) continue;
      l.push_back(labels[i]);
      p.push_back(predictions[i]);
    }
    if (!l.empty()) out[absl::StrCat("accuracy_", level)] = Accuracy(l, p);
  }
  return out;
}

absl::StatusOr<MultipleChoiceData> ReadMultipleChoiceTask(
    const FinetuneConfig& config, const data::Tokenizer& tokenizer,
    const std::string& train_path, const std::string& dev_path,
    const std::string& test_path, bool do_predict) {
  MultipleChoiceReadOptions read;
  read.bad_rows = config.bad_rows;
  MultipleChoiceFeatureOptions features;
  // With long_inputs "chunks", max_chunks chunks side by side: the article
  // keeps up to K*C - max_qa_length - 3 tokens and is read in chunks.
  features.max_seq_length = EncodedLength(config);
  features.max_qa_length = config.max_qa_length;
  // Reads and encodes one path; `name` is train, dev or test.
  auto load = [&](const std::string& path, const std::string& name,
                  bool labelled) -> absl::StatusOr<EvalSet> {
    MultipleChoiceReadOptions r = read;
    r.require_label = labelled;
    r.unlabeled_hint =
        name == "test"
            ? "to write predictions for an unlabeled --test, add --do_predict"
            : absl::StrCat("--", name,
                           " must be labelled (unlabeled data: --test with "
                           "--do_predict)");
    XLNET_ASSIGN_OR_RETURN(MultipleChoiceSet set, ReadMultipleChoice(path, r));
    LogSkippedRows(path, set.skipped, set.problems);
    if (set.examples.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no usable questions"));
    }
    XLNET_ASSIGN_OR_RETURN(
        EncodedMultipleChoice enc,
        EncodeMultipleChoice(set.examples, tokenizer, features));
    int64_t middle = 0;
    int64_t high = 0;
    for (const std::string& level : enc.levels) {
      middle += level == "middle";
      high += level == "high";
    }
    XLOG(INFO) << path << ": " << set.examples.size() << " questions ("
               << middle << " middle, " << high << " high) x "
               << set.num_choices << " options; " << enc.truncated_articles
               << " option sequences with the article cut to "
               << features.max_seq_length << " tokens, " << enc.truncated_qa
               << " with question + option cut to " << features.max_qa_length;
    if (UsesChunks(config)) {
      // Leading chunks that are padding in every option sequence are never
      // run: drop them.
      const int64_t c = config.max_seq_length;
      const int64_t width = DropLeadingPaddingChunks(
          &enc.input_ids, &enc.token_type_ids, &enc.attention_mask, c);
      XLOG(INFO) << path << ": option sequences of up to " << width / c
                 << " chunks of " << c << " tokens; "
                 << (enc.attention_mask.sum(2) > c).sum().item<int64_t>()
                 << " longer than one chunk";
    }
    EvalSet out;
    out.name = name;
    out.rows = TensorRows::Labelled(enc.input_ids, enc.token_type_ids,
                                    enc.attention_mask, enc.labels);
    out.example_ids = std::move(enc.example_ids);
    out.levels = std::move(enc.levels);
    out.labelled = enc.labels.defined();
    return out;
  };
  MultipleChoiceData data;
  if (!train_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(EvalSet train, load(train_path, "train", true));
    data.train = std::move(train.rows);
  }
  XLNET_RETURN_IF_ERROR(
      ReadEvalSets(load, dev_path, test_path, do_predict, &data));
  return data;
}

}  // namespace xlnet::finetune
