// The one place where configs are parsed, validated and written.
//
// Each struct lists its fields once, in a Visit* function; parsing YAML,
// writing YAML, reading and writing config.json and listing the known keys
// are all visitors over that list.
#include "config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/version.h"

namespace xlnet {
namespace {

// ---------------------------------------------------------------------------
// Field lists.

template <typename S, typename V>
void VisitModel(S& c, V& v) {
  v("vocab_size", c.vocab_size);
  v("d_model", c.d_model);
  v("n_layer", c.n_layer);
  v("n_head", c.n_head);
  v("d_head", c.d_head);
  v("d_inner", c.d_inner);
  v("ff_activation", c.ff_activation);
  v("untie_r", c.untie_r);
  v("attn_type", c.attn_type);
  v("bi_data", c.bi_data);
  v("clamp_len", c.clamp_len);
  v("same_length", c.same_length);
  v("mem_len", c.mem_len);
  v("reuse_len", c.reuse_len);
  v("use_mems_eval", c.use_mems_eval);
  v("use_mems_train", c.use_mems_train);
  v("dropout", c.dropout);
  v("layer_norm_eps", c.layer_norm_eps);
  v("initializer_range", c.initializer_range);
  v("summary_type", c.summary_type);
  v("summary_use_proj", c.summary_use_proj);
  v("summary_activation", c.summary_activation);
  v("summary_last_dropout", c.summary_last_dropout);
  v("start_n_top", c.start_n_top);
  v("end_n_top", c.end_n_top);
  v("pad_token_id", c.pad_token_id);
  v("bos_token_id", c.bos_token_id);
  v("eos_token_id", c.eos_token_id);
  v("tie_word_embeddings", c.tie_word_embeddings);
  v("id2label", c.id2label);
  v("architectures", c.architectures);
}

template <typename S, typename V>
void VisitData(S& c, V& v) {
  v("tokenizer", c.tokenizer);
  v("uncased", c.uncased);
  v("keep_accents", c.keep_accents);
  v("use_eod", c.use_eod);
  v("seq_len", c.seq_len);
  v("reuse_len", c.reuse_len);
  v("perm_size", c.perm_size);
  v("num_predict", c.num_predict);
  v("mask_alpha", c.mask_alpha);
  v("mask_beta", c.mask_beta);
  v("max_gram", c.max_gram);
  v("bi_data", c.bi_data);
  v("official_span_quirks", c.official_span_quirks);
  v("prefetch_batches", c.prefetch_batches);
  v("loader_threads", c.loader_threads);
  v("eval_fraction", c.eval_fraction);
  v("sources", c.sources);
  v("source_block_steps", c.source_block_steps);
}

template <typename S, typename V>
void VisitTrain(S& c, V& v) {
  v("batch_size", c.batch_size);
  v("seed", c.seed);
  v("max_steps", c.max_steps);
  v("lr", c.lr);
  v("warmup_steps", c.warmup_steps);
  v("decay", c.decay);
  v("min_lr_ratio", c.min_lr_ratio);
  v("weight_decay", c.weight_decay);
  v("adam_beta1", c.adam_beta1);
  v("adam_beta2", c.adam_beta2);
  v("adam_epsilon", c.adam_epsilon);
  v("clip", c.clip);
  v("layer_decay", c.layer_decay);
  v("grad_accum_steps", c.grad_accum_steps);
  v("save_steps", c.save_steps);
  v("log_steps", c.log_steps);
  v("tensorboard", c.tensorboard);
  v("eval_steps", c.eval_steps);
  v("eval_batches", c.eval_batches);
  v("patience", c.patience);
  v("patience_min_delta", c.patience_min_delta);
  v("keep_checkpoints", c.keep_checkpoints);
  v("device", c.device);
  v("dtype", c.dtype);
  v("threads", c.threads);
  v("activation_checkpointing", c.activation_checkpointing);
  v("attention", c.attention);
  v("max_bad_steps", c.max_bad_steps);
  v("dist_timeout_s", c.dist_timeout_s);
  v("ranks_per_device", c.ranks_per_device);
}

template <typename S, typename V>
void VisitFinetune(S& c, V& v) {
  v("eval_batch_size", c.eval_batch_size);
  v("max_seq_length", c.max_seq_length);
  v("long_inputs", c.long_inputs);
  v("max_chunks", c.max_chunks);
  v("mem_len", c.mem_len);
  v("metric", c.metric);
  v("bad_rows", c.bad_rows);
  v("text_column", c.text_column);
  v("text_b_column", c.text_b_column);
  v("label_column", c.label_column);
  v("id_column", c.id_column);
  v("doc_stride", c.doc_stride);
  v("max_query_length", c.max_query_length);
  v("max_qa_length", c.max_qa_length);
  v("max_answer_length", c.max_answer_length);
  v("n_best_size", c.n_best_size);
  v("null_score_threshold", c.null_score_threshold);
  v("answer_class_start", c.answer_class_start);
}

// Keys of config.json that a YAML config does not set: their one home is
// another section, and they are derived from it (DeriveModelKeys).
bool IsDerivedModelKey(const char* key) {
  const std::string k = key;
  return k == "reuse_len" || k == "bi_data";
}

// Forwards every field to `inner` except the derived model keys.
template <typename V>
struct YamlModelFields {
  V& inner;
  template <typename T>
  void operator()(const char* key, T& field) {
    if (!IsDerivedModelKey(key)) inner(key, field);
  }
};

// Calls `fn(section_name, visit)` for each section of a YAML config, where
// visit(v) walks that section's fields.
template <typename C, typename Fn>
void ForEachSection(C& config, Fn&& fn) {
  fn("model", [&](auto& v) {
    YamlModelFields<std::remove_reference_t<decltype(v)>> fields{v};
    VisitModel(config.model, fields);
  });
  fn("data", [&](auto& v) { VisitData(config.data, v); });
  fn("train", [&](auto& v) { VisitTrain(config.train, v); });
  fn("finetune", [&](auto& v) { VisitFinetune(config.finetune, v); });
}

// Keys that have moved to another home: a config that sets the old key gets
// an error naming the new one.
struct MovedKey {
  const char* old_key;
  const char* new_key;
  const char* why;
};
constexpr MovedKey kMovedKeys[] = {
    {"model.reuse_len", "data.reuse_len",
     "the batches and the memory use one value; config.json's reuse_len is "
     "written from it"},
    {"model.bi_data", "data.bi_data",
     "the batches and the positional encoding use one value; config.json's "
     "bi_data is written from it"},
    {"finetune.max_steps", "train.max_steps",
     "fine-tuning runs on the same trainer keys"},
    {"finetune.lr", "train.lr", "fine-tuning runs on the same trainer keys"},
    {"finetune.warmup_steps", "train.warmup_steps",
     "fine-tuning runs on the same trainer keys"},
    {"finetune.batch_size", "train.batch_size",
     "fine-tuning runs on the same trainer keys"},
    {"finetune.eval_steps", "train.eval_steps",
     "fine-tuning runs on the same trainer keys"},
};

// An error for `section.key` if it has moved; OK otherwise.
absl::Status CheckNotMoved(const std::string& where, const std::string& path) {
  for (const MovedKey& moved : kMovedKeys) {
    if (path == moved.old_key) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", path, " has moved to ", moved.new_key, " (",
                       moved.why, ")"));
    }
  }
  return absl::OkStatus();
}

// The model keys whose home is the data section; the default names of
// data.sources.
void DeriveModelKeys(Config& config) {
  config.model.reuse_len = config.data.reuse_len;
  config.model.bi_data = config.data.bi_data;
  for (DataSource& s : config.data.sources) s.name = DataSourceName(s);
}

// Collects key names.
struct KeyCollector {
  std::vector<std::string> keys;
  template <typename T>
  void operator()(const char* key, const T&) {
    keys.emplace_back(key);
  }
};

// ---------------------------------------------------------------------------
// YAML reading.

std::string TypeName(const int64_t*) { return "an integer"; }
std::string TypeName(const double*) { return "a number"; }
std::string TypeName(const bool*) { return "true or false"; }
std::string TypeName(const std::string*) { return "a string"; }
std::string TypeName(const std::optional<int64_t>*) {
  return "an integer or null";
}
std::string TypeName(const std::optional<double>*) {
  return "a number or null";
}
std::string TypeName(const std::vector<std::string>*) {
  return "a list of strings";
}

bool IsYamlNull(const YAML::Node& node) {
  return node.IsNull() ||
         (node.IsScalar() && (node.Scalar() == "~" || node.Scalar() == "null"));
}

bool ReadYaml(const YAML::Node& node, int64_t* out) {
  if (!node.IsScalar()) return false;
  try {
    *out = node.as<int64_t>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}
bool ReadYaml(const YAML::Node& node, double* out) {
  if (!node.IsScalar()) return false;
  try {
    *out = node.as<double>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}
bool ReadYaml(const YAML::Node& node, bool* out) {
  if (!node.IsScalar()) return false;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}
bool ReadYaml(const YAML::Node& node, std::string* out) {
  if (IsYamlNull(node)) {
    out->clear();
    return true;
  }
  if (!node.IsScalar()) return false;
  *out = node.Scalar();
  return true;
}
bool ReadYaml(const YAML::Node& node, std::optional<int64_t>* out) {
  if (IsYamlNull(node)) {
    out->reset();
    return true;
  }
  int64_t value;
  if (!ReadYaml(node, &value)) return false;
  *out = value;
  return true;
}
bool ReadYaml(const YAML::Node& node, std::optional<double>* out) {
  if (IsYamlNull(node)) {
    out->reset();
    return true;
  }
  double value;
  if (!ReadYaml(node, &value)) return false;
  *out = value;
  return true;
}
bool ReadYaml(const YAML::Node& node, std::vector<std::string>* out) {
  if (!node.IsSequence()) return false;
  std::vector<std::string> values;
  for (const auto& item : node) {
    if (!item.IsScalar()) return false;
    values.push_back(item.Scalar());
  }
  *out = std::move(values);
  return true;
}

std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "null";
}

// Where each "section.key" came from ("file:line" or "--set ...").
using Locations = std::map<std::string, std::string>;

// Where the content of each YAML document starts: the mark of its first
// event that is not a null (an empty document, or "~", has none).
class DocumentContent : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> first;
  void OnDocumentStart(const YAML::Mark&) override { first.reset(); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { See(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    See(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t, YAML::EmitterStyle::value) override {
    See(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    See(mark);
  }
  void OnMapEnd() override {}

 private:
  void See(const YAML::Mark& mark) {
    if (!first) first = mark;
  }
};

// Refuses a second YAML document with content. Not YAML::LoadAll: in
// yaml-cpp 0.7 it loops forever, allocating a document per turn, when the
// parser stops advancing on some malformed inputs (upstream
// jbeder/yaml-cpp#1319; fuzz/config_yaml_fuzzer.cc ran out of memory on
// them). Documents are walked one by one instead, at most one more than
// the text has "---"/"..." markers (every document after the first follows
// one), so a parser that does not advance ends in an error.
absl::Status CheckOneDocument(const std::string& yaml_text,
                              const std::string& source) {
  size_t markers = 0;
  for (const char* marker : {"---", "..."}) {
    for (size_t at = yaml_text.find(marker); at != std::string::npos;
         at = yaml_text.find(marker, at + 1)) {
      ++markers;
    }
  }
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  DocumentContent content;
  size_t documents = 0;
  while (parser.HandleNextDocument(content)) {
    if (++documents > markers + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": invalid YAML: it reads as ", documents,
                       " or more documents but has ", markers,
                       " document markers ('---', '...')"));
    }
    if (documents > 1 && content.first) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", content.first->line + 1,
                       ": a second YAML document; a config file holds one"));
    }
  }
  return absl::OkStatus();
}

std::string LocationOf(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return source;
  return absl::StrCat(source, ":", mark.line + 1);
}

// "line N" of a "file:N" location (the location itself otherwise).
std::string LineOf(const std::string& location) {
  const auto colon = location.rfind(':');
  if (colon == std::string::npos) return location;
  return "line " + location.substr(colon + 1);
}

// The keys of a data.sources entry.
const std::vector<std::string>& SourceKeys() {
  static const auto* keys =
      new std::vector<std::string>{"path", "weight", "name"};
  return *keys;
}

// Reads data.sources (`node`, set at `where`: "file:line" or "--set ...")
// from a YAML list of {path, weight, name} maps. Records in `locations`
// where each entry's keys were set ("data.sources[i].key"; a key left out
// points at its entry), so the checks' errors name the line.
absl::Status ReadSources(const YAML::Node& node, const std::string& source,
                         const std::string& where, Locations* locations,
                         std::vector<DataSource>* out) {
  const bool from_file = where.rfind("--set ", 0) != 0;
  auto at = [&](const YAML::Node& n) {
    return from_file ? LocationOf(source, n) : where;
  };
  if (IsYamlNull(node)) {
    out->clear();
    return absl::OkStatus();
  }
  if (!node.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": data.sources: expected a list of {path, weight, name} maps ",
        "(--set: data.sources=[{path: DIR_A, weight: 3}, {path: DIR_B}]), "
        "got ",
        Describe(node)));
  }
  std::vector<DataSource> sources;
  for (const YAML::Node& entry : node) {
    const std::string prefix =
        absl::StrCat("data.sources[", sources.size(), "]");
    if (!entry.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(
          at(entry), ": ", prefix,
          ": expected a map {path, weight, name}, got ", Describe(entry)));
    }
    DataSource s;
    std::set<std::string> seen;
    for (const auto& kv : entry) {
      if (!kv.first.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(
            at(kv.first), ": a key of ", prefix, " must be a string"));
      }
      const std::string key = kv.first.Scalar();
      const std::string path = absl::StrCat(prefix, ".", key);
      const auto& keys = SourceKeys();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            at(kv.first), ": unknown key '", path, "'", DidYouMean(key, keys),
            "; an entry has path, weight and name"));
      }
      if (!seen.insert(key).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(at(kv.first), ": duplicate key '", path, "'"));
      }
      (*locations)[path] = at(kv.first);
      const bool ok =
          key == "weight"
              ? ReadYaml(kv.second, &s.weight)
              : ReadYaml(kv.second, key == "path" ? &s.path : &s.name);
      if (!ok) {
        return absl::InvalidArgumentError(
            absl::StrCat(at(kv.second), ": ", path, ": expected ",
                         key == "weight" ? "a number" : "a string", ", got ",
                         Describe(kv.second)));
      }
    }
    for (const std::string& key : SourceKeys()) {
      locations->emplace(absl::StrCat(prefix, ".", key), at(entry));
    }
    sources.push_back(std::move(s));
  }
  *out = std::move(sources);
  return absl::OkStatus();
}

// Reads the fields of one section from a YAML mapping.
struct YamlSectionReader {
  const YAML::Node& section;
  const std::string& name;
  const std::string& source;
  Locations& locations;
  absl::Status status;

  template <typename T>
  void operator()(const char* key, T& field) {
    if (!status.ok()) return;
    const YAML::Node node = section[key];
    if (!node.IsDefined()) return;
    if (!ReadYaml(node, &field)) {
      const std::string path = absl::StrCat(name, ".", key);
      status = absl::InvalidArgumentError(
          absl::StrCat(locations.at(path), ": ", path, ": expected ",
                       TypeName(&field), ", got ", Describe(node)));
    }
  }
  void operator()(const char* key, std::vector<DataSource>& field) {
    if (!status.ok()) return;
    const YAML::Node node = section[key];
    if (!node.IsDefined()) return;
    status =
        ReadSources(node, source, locations.at(absl::StrCat(name, ".", key)),
                    &locations, &field);
  }
};

// ---------------------------------------------------------------------------
// YAML writing.

struct YamlWriter {
  YAML::Emitter& out;
  void operator()(const char* key, const int64_t& v) {
    out << YAML::Key << key << YAML::Value << v;
  }
  void operator()(const char* key, const double& v) {
    // The shortest text that reads back as the same double.
    std::string text;
    for (int precision = 6; precision <= 17; ++precision) {
      std::ostringstream s;
      s.precision(precision);
      s << v;
      text = s.str();
      if (std::stod(text) == v) break;
    }
    // Keep a float a float when read back.
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
    out << YAML::Key << key << YAML::Value << text;
  }
  void operator()(const char* key, const bool& v) {
    out << YAML::Key << key << YAML::Value << (v ? "true" : "false");
  }
  void operator()(const char* key, const std::string& v) {
    out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
  }
  void operator()(const char* key, const std::optional<int64_t>& v) {
    out << YAML::Key << key << YAML::Value;
    if (v) {
      out << *v;
    } else {
      out << YAML::Null;
    }
  }
  void operator()(const char* key, const std::optional<double>& v) {
    if (v) {
      (*this)(key, *v);
    } else {
      out << YAML::Key << key << YAML::Value << YAML::Null;
    }
  }
  void operator()(const char* key, const std::vector<std::string>& v) {
    out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& s : v) out << YAML::DoubleQuoted << s;
    out << YAML::EndSeq;
  }
  void operator()(const char* key, const std::vector<DataSource>& v) {
    out << YAML::Key << key << YAML::Value;
    if (v.empty()) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const DataSource& s : v) {
      out << YAML::BeginMap;
      (*this)("path", s.path);
      (*this)("weight", s.weight);
      (*this)("name", s.name);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
};

// ---------------------------------------------------------------------------
// JSON (config.json).

using Json = nlohmann::json;

bool ReadJson(const Json& j, int64_t* out) {
  if (!j.is_number_integer()) return false;
  *out = j.get<int64_t>();
  return true;
}
bool ReadJson(const Json& j, double* out) {
  if (!j.is_number()) return false;
  *out = j.get<double>();
  return true;
}
bool ReadJson(const Json& j, bool* out) {
  if (!j.is_boolean()) return false;
  *out = j.get<bool>();
  return true;
}
bool ReadJson(const Json& j, std::string* out) {
  if (j.is_null()) {
    out->clear();
    return true;
  }
  if (!j.is_string()) return false;
  *out = j.get<std::string>();
  return true;
}
bool ReadJson(const Json& j, std::optional<int64_t>* out) {
  if (j.is_null()) {
    out->reset();
    return true;
  }
  int64_t v;
  if (!ReadJson(j, &v)) return false;
  *out = v;
  return true;
}
bool ReadJson(const Json& j, std::vector<std::string>* out) {
  if (!j.is_array()) return false;
  std::vector<std::string> values;
  for (const auto& item : j) {
    if (!item.is_string()) return false;
    values.push_back(item.get<std::string>());
  }
  *out = std::move(values);
  return true;
}

struct JsonReader {
  const Json& root;
  const std::string& source;
  absl::Status status;
  template <typename T>
  void operator()(const char* key, T& field) {
    if (!status.ok() || !root.contains(key)) return;
    if (std::string(key) == "id2label") return;  // a mapping; read below
    if (!ReadJson(root.at(key), &field)) {
      status = absl::InvalidArgumentError(
          absl::StrCat(source, ": key '", key, "': expected ", TypeName(&field),
                       ", got ", root.at(key).dump()));
    }
  }
};

struct JsonWriter {
  Json& out;
  template <typename T>
  void operator()(const char* key, const T& v) {
    out[key] = v;
  }
  void operator()(const char* key, const std::optional<int64_t>& v) {
    out[key] = v ? Json(*v) : Json(nullptr);
  }
  void operator()(const char* key, const std::optional<double>& v) {
    out[key] = v ? Json(*v) : Json(nullptr);
  }
  void operator()(const char* key, const std::vector<std::string>& v) {
    if (std::string(key) != "id2label") {
      out[key] = v;
      return;
    }
    Json id2label = Json::object(), label2id = Json::object();
    for (size_t i = 0; i < v.size(); ++i) {
      id2label[std::to_string(i)] = v[i];
      label2id[v[i]] = static_cast<int64_t>(i);
    }
    out["id2label"] = id2label;
    out["label2id"] = label2id;
  }
};

// ---------------------------------------------------------------------------
// Validation. Each check names the key it is about; callers add locations.

struct Problem {
  std::string key;  // "section.key"
  std::string message;
};

class Checker {
 public:
  explicit Checker(std::string section) : section_(std::move(section)) {}
  void Check(bool ok, const char* key, const std::string& message) {
    if (!ok && !problem_) {
      problem_ = Problem{absl::StrCat(section_, ".", key), message};
    }
  }
  template <typename T>
  void OneOf(const char* key, const std::string& value,
             const std::vector<std::string>& allowed) {
    for (const auto& a : allowed) {
      if (a == value) return;
    }
    Check(false, key,
          absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "),
                       " (got '", value, "')", DidYouMean(value, allowed)));
  }
  std::optional<Problem> problem() const { return problem_; }

 private:
  std::string section_;
  std::optional<Problem> problem_;
};

std::string Got(double v) {
  std::ostringstream s;
  s << " (got " << v << ")";
  return s.str();
}

// Model sizes are 32-bit (token ids are int32 in shards and batches); the
// bound also keeps products of two sizes within int64.
constexpr int64_t kMaxModelSize = std::numeric_limits<int32_t>::max();

std::optional<Problem> CheckModel(const XLNetConfig& m) {
  Checker c("model");
  for (auto [key, value] :
       {std::pair<const char*, int64_t>{"vocab_size", m.vocab_size},
        {"d_model", m.d_model},
        {"n_layer", m.n_layer},
        {"n_head", m.n_head},
        {"d_head", m.d_head},
        {"d_inner", m.d_inner}}) {
    c.Check(value > 0 && value <= kMaxModelSize, key,
            absl::StrCat("must be in [1, ", kMaxModelSize, "]") + Got(value));
  }
  c.Check(m.d_model == m.n_head * m.d_head, "d_head",
          absl::StrCat("n_head * d_head must equal d_model (", m.n_head, " * ",
                       m.d_head, " != ", m.d_model, ")"));
  c.OneOf<void>("ff_activation", m.ff_activation, {"gelu", "relu", "gelu_new"});
  c.OneOf<void>("attn_type", m.attn_type, {"bi", "uni"});
  c.Check(m.clamp_len >= -1, "clamp_len",
          "must be -1 (off) or >= 0" + Got(m.clamp_len));
  c.Check(!m.mem_len || *m.mem_len >= 0, "mem_len",
          "must be >= 0 or null" + Got(m.mem_len.value_or(0)));
  c.Check(!m.reuse_len || *m.reuse_len >= 0, "reuse_len",
          "must be >= 0 or null" + Got(m.reuse_len.value_or(0)));
  c.Check(m.dropout >= 0 && m.dropout < 1, "dropout",
          "must be in [0, 1)" + Got(m.dropout));
  c.Check(m.layer_norm_eps > 0, "layer_norm_eps",
          "must be positive" + Got(m.layer_norm_eps));
  c.Check(m.initializer_range > 0, "initializer_range",
          "must be positive" + Got(m.initializer_range));
  c.OneOf<void>("summary_type", m.summary_type,
                {"last", "first", "mean", "cls_index"});
  c.OneOf<void>("summary_activation", m.summary_activation, {"tanh", ""});
  c.Check(m.summary_last_dropout >= 0 && m.summary_last_dropout < 1,
          "summary_last_dropout",
          "must be in [0, 1)" + Got(m.summary_last_dropout));
  c.Check(m.start_n_top > 0, "start_n_top", "must be positive");
  c.Check(m.end_n_top > 0, "end_n_top", "must be positive");
  for (auto [key, id] :
       {std::pair<const char*, int64_t>{"pad_token_id", m.pad_token_id},
        {"bos_token_id", m.bos_token_id},
        {"eos_token_id", m.eos_token_id}}) {
    c.Check(id >= 0 && id < m.vocab_size, key,
            absl::StrCat("must be a token id in [0, vocab_size=", m.vocab_size,
                         ")", Got(id)));
  }
  c.Check(!m.id2label.empty(), "id2label", "must name at least one label");
  return c.problem();
}

std::optional<Problem> CheckData(const DataConfig& d) {
  Checker c("data");
  c.Check(d.seq_len > 0, "seq_len", "must be positive" + Got(d.seq_len));
  c.Check(d.reuse_len >= 0 && d.reuse_len < d.seq_len, "reuse_len",
          absl::StrCat("must be in [0, seq_len=", d.seq_len, ")",
                       Got(d.reuse_len)));
  c.Check(d.seq_len - d.reuse_len >= 5, "seq_len",
          absl::StrCat("seq_len - reuse_len must leave room for A <sep> B "
                       "<sep> <cls> (at least 5 tokens; got ",
                       d.seq_len - d.reuse_len, ")"));
  c.Check(d.perm_size > 0, "perm_size", "must be positive" + Got(d.perm_size));
  if (d.perm_size > 0) {
    c.Check(
        d.reuse_len % d.perm_size == 0, "perm_size",
        absl::StrCat("must divide reuse_len=", d.reuse_len, Got(d.perm_size)));
    c.Check((d.seq_len - d.reuse_len) % d.perm_size == 0, "perm_size",
            absl::StrCat("must divide seq_len - reuse_len = ",
                         d.seq_len - d.reuse_len, Got(d.perm_size)));
  }
  c.Check(d.num_predict > 0 && d.num_predict <= d.seq_len, "num_predict",
          absl::StrCat("must be in [1, seq_len=", d.seq_len, "]",
                       Got(d.num_predict)));
  c.Check(d.mask_alpha > 0, "mask_alpha",
          "must be positive" + Got(d.mask_alpha));
  c.Check(d.mask_beta > 0, "mask_beta", "must be positive" + Got(d.mask_beta));
  c.Check(d.max_gram >= 1, "max_gram", "must be >= 1" + Got(d.max_gram));
  c.Check(d.prefetch_batches >= 0 && d.prefetch_batches <= 256,
          "prefetch_batches", "must be in [0, 256]" + Got(d.prefetch_batches));
  c.Check(d.loader_threads >= 1, "loader_threads", "must be >= 1");
  c.Check(d.eval_fraction >= 0 && d.eval_fraction < 1, "eval_fraction",
          "must be in [0, 1)" + Got(d.eval_fraction));
  c.Check(d.source_block_steps >= 1, "source_block_steps",
          "must be >= 1" + Got(d.source_block_steps));
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < d.sources.size(); ++i) {
    const DataSource& s = d.sources[i];
    const std::string entry = absl::StrCat("sources[", i, "]");
    const std::string name = DataSourceName(s);
    c.Check(!s.path.empty(), (entry + ".path").c_str(),
            "must name a prepared directory (xlnet-data prepare)");
    c.Check(s.weight > 0 && std::isfinite(s.weight),
            (entry + ".weight").c_str(),
            "must be a finite number > 0" + Got(s.weight));
    const bool name_ok =
        !name.empty() && name.find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                             "UVWXYZ0123456789_-.") == std::string::npos;
    c.Check(name_ok, (entry + ".name").c_str(),
            absl::StrCat("'", name,
                         "' must be letters, digits, '_', '-' or '.' (it "
                         "names the metric tokens_<name>); set name"));
    const auto [it, inserted] = names.emplace(name, i);
    c.Check(inserted, (entry + ".name").c_str(),
            absl::StrCat("'", name, "' is also the name of data.sources[",
                         it->second,
                         "]; names must be unique (set name to tell them "
                         "apart)"));
  }
  return c.problem();
}

bool IsDevice(const std::string& d) {
  if (d == "cpu" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
  for (size_t i = 5; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9') return false;
  }
  return true;
}

std::optional<Problem> CheckTrain(const TrainConfig& t) {
  Checker c("train");
  c.Check(t.batch_size > 0, "batch_size",
          "must be positive" + Got(t.batch_size));
  c.Check(t.max_steps >= 0, "max_steps", "must be >= 0" + Got(t.max_steps));
  c.Check(t.lr >= 0, "lr", "must be >= 0" + Got(t.lr));
  c.Check(t.warmup_steps >= 0, "warmup_steps", "must be >= 0");
  c.OneOf<void>("decay", t.decay, {"linear", "cos"});
  c.Check(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "min_lr_ratio",
          "must be in [0, 1]" + Got(t.min_lr_ratio));
  c.Check(t.weight_decay >= 0, "weight_decay", "must be >= 0");
  c.Check(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "adam_beta1",
          "must be in [0, 1)" + Got(t.adam_beta1));
  c.Check(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "adam_beta2",
          "must be in [0, 1)" + Got(t.adam_beta2));
  c.Check(t.adam_epsilon > 0, "adam_epsilon", "must be positive");
  c.Check(t.clip >= 0, "clip", "must be >= 0 (0 disables)" + Got(t.clip));
  c.Check(t.layer_decay > 0 && t.layer_decay <= 1, "layer_decay",
          "must be in (0, 1]" + Got(t.layer_decay));
  c.Check(t.grad_accum_steps >= 1, "grad_accum_steps", "must be >= 1");
  c.Check(t.grad_accum_steps < 1 || t.batch_size % t.grad_accum_steps == 0,
          "grad_accum_steps",
          absl::StrCat("must divide batch_size=", t.batch_size,
                       Got(t.grad_accum_steps)));
  c.Check(t.save_steps >= 0, "save_steps", "must be >= 0");
  c.Check(t.log_steps >= 1, "log_steps", "must be >= 1" + Got(t.log_steps));
  c.Check(t.eval_steps >= 0, "eval_steps", "must be >= 0");
  c.Check(t.eval_batches >= 1, "eval_batches", "must be >= 1");
  c.Check(t.patience >= 0, "patience", "must be >= 0 (0 = no early stopping)");
  c.Check(t.patience == 0 || t.eval_steps > 0, "patience",
          "needs train.eval_steps > 0 (early stopping counts evaluations)");
  c.Check(t.patience_min_delta >= 0 && std::isfinite(t.patience_min_delta),
          "patience_min_delta", "must be a finite number >= 0");
  c.Check(t.keep_checkpoints >= 0, "keep_checkpoints", "must be >= 0");
  c.Check(IsDevice(t.device), "device",
          "must be cpu, cuda or cuda:N (got '" + t.device + "')");
  c.OneOf<void>("dtype", t.dtype, {"fp32", "bf16", "fp16"});
  c.Check(t.dtype != "fp16" || t.device.rfind("cuda", 0) == 0, "dtype",
          "fp16 needs device cuda (use bf16 on cpu)");
  c.Check(t.threads >= 0, "threads", "must be >= 0 (0 = all cores)");
  c.OneOf<void>("attention", t.attention, {"unfused", "tiled", "cuda", "sdpa"});
  c.Check(t.attention != "tiled" || t.device == "cpu", "attention",
          "'tiled' is the CPU implementation (device cuda: 'cuda' or "
          "'unfused')");
  c.Check(t.attention != "cuda" || t.device.rfind("cuda", 0) == 0, "attention",
          "'cuda' needs device cuda ('tiled' on cpu)");
  c.Check(t.max_bad_steps >= 1, "max_bad_steps", "must be >= 1");
  c.Check(t.dist_timeout_s >= 1, "dist_timeout_s", "must be >= 1");
  c.Check(t.ranks_per_device >= 1 && t.ranks_per_device <= 64,
          "ranks_per_device", "must be in [1, 64]" + Got(t.ranks_per_device));
  c.Check(t.ranks_per_device == 1 || t.device == "cuda", "ranks_per_device",
          "above 1 applies to device cuda (got '" + t.device + "')");
  return c.problem();
}

std::optional<Problem> CheckFinetune(const FinetuneConfig& f) {
  Checker c("finetune");
  c.Check(f.eval_batch_size > 0, "eval_batch_size", "must be positive");
  c.Check(f.max_seq_length >= 4, "max_seq_length",
          "must be >= 4" + Got(f.max_seq_length));
  c.OneOf<void>("bad_rows", f.bad_rows, {"skip", "error"});
  c.OneOf<void>("long_inputs", f.long_inputs, {"truncate", "chunks"});
  c.Check(f.max_chunks >= 1, "max_chunks", "must be >= 1" + Got(f.max_chunks));
  c.Check(f.mem_len >= -1, "mem_len",
          "must be -1 (the model's mem_len), 0 (every earlier chunk) or a "
          "number of tokens" +
              Got(f.mem_len));
  c.Check(f.text_b_column.empty() || !f.text_column.empty(), "text_b_column",
          "needs finetune.text_column (the first text) set too");
  c.Check(f.doc_stride > 0, "doc_stride", "must be positive");
  c.Check(f.max_query_length > 0, "max_query_length", "must be positive");
  c.Check(f.max_qa_length > 0, "max_qa_length", "must be positive");
  c.Check(f.max_answer_length > 0, "max_answer_length", "must be positive");
  c.Check(f.n_best_size > 0, "n_best_size", "must be positive");
  c.OneOf<void>("answer_class_start", f.answer_class_start, {"official", "hf"});
  return c.problem();
}

std::optional<Problem> CheckAll(const Config& config) {
  if (auto p = CheckModel(config.model)) return p;
  if (auto p = CheckData(config.data)) return p;
  if (auto p = CheckTrain(config.train)) return p;
  return CheckFinetune(config.finetune);
}

absl::Status ProblemToStatus(const Problem& p, const Locations& locations,
                             const std::string& source) {
  auto it = locations.find(p.key);
  const std::string where = it != locations.end() ? it->second : source;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", p.key, ": ", p.message));
}

// yaml-cpp 0.7 (Debian 12) loops forever, allocating, on a ',' that starts
// a token outside [] and {} (",", "- a\n,", "\"x\" ,", "&a,", "[a],",
// "\"$x\"!,", and "&a\rb," with a lone carriage return; found by
// fuzz/config_yaml_fuzzer.cc), so such a comma (and a lone CR) is
// refused before yaml-cpp sees the text. A small scan of YAML's tokens:
// quoted scalars, anchors/aliases/tags, comments, flow brackets, indicators
// and plain scalars (which may hold commas: "a, b", "a: b ,"). It is
// stricter than YAML only for a line starting with ',' inside a block
// scalar or a multi-line plain scalar.
absl::Status CheckNoTokenStartingWithComma(const std::string& text,
                                           const std::string& source) {
  enum class State { kTokenStart, kPlain, kWord, kQuoted, kComment };
  State state = State::kTokenStart;
  char quote = 0;
  int depth = 0;  // [] and {} nesting
  int line = 1;
  auto blank = [&](size_t i) {
    return i >= text.size() || text[i] == ' ' || text[i] == '\t' ||
           text[i] == '\r' || text[i] == '\n';
  };
  // yaml-cpp decodes UTF-16 (a BOM, or NULs) and skips a UTF-8 BOM: the
  // scan below must read what it reads, so control characters (which YAML
  // forbids anyway) and UTF-16 are refused.
  if (text.compare(0, 2, "\xff\xfe") == 0 ||
      text.compare(0, 2, "\xfe\xff") == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid YAML: UTF-16 (write UTF-8)"));
  }
  const size_t start = text.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    // A carriage return not followed by a line feed is a line break to
    // yaml-cpp, but not to this scan (and "&a\rb," sends yaml-cpp 0.7 into
    // the same endless allocation): refused, CRLF stays accepted.
    if (c == '\r' && (i + 1 >= text.size() || text[i + 1] != '\n')) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line,
          ": invalid YAML: a carriage return without a line feed (use \\n "
          "or \\r\\n line endings)"));
    }
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' &&
         c != '\r') ||
        c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line, ": invalid YAML: control character ",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2)));
    }
    if (c == '\n') {
      ++line;
      if (state != State::kQuoted) state = State::kTokenStart;
      continue;
    }
    switch (state) {
      case State::kComment:
        break;
      case State::kQuoted:
        if (c == '\\' && quote == '"') {
          ++i;
        } else if (c == quote) {
          state = State::kTokenStart;
        }
        break;
      case State::kWord:  // &anchor, *alias, !tag
        if (blank(i) || c == ',' || c == '[' || c == ']' || c == '{' ||
            c == '}') {
          state = State::kTokenStart;
          --i;  // the character starts the next token
        }
        break;
      case State::kPlain:
        if (c == ':' && blank(i + 1)) {
          state = State::kTokenStart;
        } else if (c == '#' && blank(i - 1)) {
          state = State::kComment;
        } else if (depth > 0 &&
                   (c == ',' || c == ']' || c == '}' || c == '[' || c == '{')) {
          state = State::kTokenStart;
          --i;
        }
        break;
      case State::kTokenStart:
        if (c == ' ' || c == '\t' || c == '\r') break;
        if (c == ',') {
          if (depth == 0) {
            return absl::InvalidArgumentError(
                absl::StrCat(source, ":", line,
                             ": invalid YAML: ',' outside a [] or {} "
                             "collection"));
          }
        } else if (c == '[' || c == '{') {
          ++depth;
        } else if (c == ']' || c == '}') {
          if (depth > 0) --depth;
        } else if (c == '"' || c == '\'') {
          quote = c;
          state = State::kQuoted;
        } else if (c == '&' || c == '*' || c == '!') {
          state = State::kWord;
        } else if (c == '#') {
          state = State::kComment;
        } else if ((c == '-' || c == '?' || c == ':') && blank(i + 1)) {
          // An indicator; the token after it starts fresh.
        } else if ((i == start || text[i - 1] == '\n') &&
                   (text.compare(i, 3, "---") == 0 ||
                    text.compare(i, 3, "...") == 0) &&
                   blank(i + 3)) {
          i += 2;
        } else {
          state = State::kPlain;
        }
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DataSourceName(const DataSource& source) {
  if (!source.name.empty()) return source.name;
  std::string path = source.path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return std::filesystem::path(path).filename().string();
}

std::vector<std::string> ConfigKeys(const std::string& section) {
  Config config;
  KeyCollector keys;
  ForEachSection(config, [&](const char* name, auto visit) {
    if (section == name) visit(keys);
  });
  return keys.keys;
}

const std::vector<std::string>& AllConfigSections() {
  static const auto* sections =
      new std::vector<std::string>{"model", "data", "train", "finetune"};
  return *sections;
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text,
                                   const std::string& source,
                                   const std::vector<std::string>& overrides,
                                   const std::vector<std::string>& sections) {
  // A known section this command does not read.
  auto not_read_here = [&](const std::string& where,
                           const std::string& section) -> absl::Status {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": section '", section, "' is not read by this command",
        section == "model" ? " (the model comes from --init's config.json)"
                           : "",
        "; it reads ", absl::StrJoin(sections, ", ")));
  };
  auto is_known = [](const std::string& section) {
    const auto& all = AllConfigSections();
    return std::find(all.begin(), all.end(), section) != all.end();
  };
  XLNET_RETURN_IF_ERROR(CheckNoTokenStartingWithComma(yaml_text, source));
  YAML::Node root;
  try {
    // One config per file: a second document would otherwise be ignored.
    XLNET_RETURN_IF_ERROR(CheckOneDocument(yaml_text, source));
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ": invalid YAML: ", e.msg));
  }
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a mapping with sections ",
                     absl::StrJoin(sections, ", ")));
  }

  // Check sections and keys, remembering where each key was set. YAML
  // readers keep the first of two equal keys; a repeated one is an error.
  Locations locations;
  std::map<std::string, std::string> section_lines;
  for (const auto& section_kv : root) {
    // A complex key ("? [a]") or a null one would throw in as<string>()
    // (found by fuzz/config_yaml_fuzzer.cc).
    if (!section_kv.first.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(LocationOf(source, section_kv.first),
                       ": a section name must be a string"));
    }
    const std::string section = section_kv.first.as<std::string>();
    const std::string section_at = LocationOf(source, section_kv.first);
    if (auto [it, inserted] = section_lines.emplace(section, section_at);
        !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(section_at, ": duplicate section '", section,
                       "' (first at ", LineOf(it->second), ")"));
    }
    if (std::find(sections.begin(), sections.end(), section) ==
        sections.end()) {
      if (is_known(section)) {
        return not_read_here(LocationOf(source, section_kv.first), section);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          LocationOf(source, section_kv.first), ": unknown section '", section,
          "'", DidYouMean(section, sections), "; sections are ",
          absl::StrJoin(sections, ", ")));
    }
    if (section_kv.second.IsNull()) continue;
    if (!section_kv.second.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(LocationOf(source, section_kv.second), ": section '",
                       section, "' must be a mapping of key: value"));
    }
    const std::vector<std::string> keys = ConfigKeys(section);
    for (const auto& kv : section_kv.second) {
      if (!kv.first.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(LocationOf(source, kv.first), ": a key of section '",
                         section, "' must be a string"));
      }
      const std::string key = kv.first.as<std::string>();
      XLNET_RETURN_IF_ERROR(CheckNotMoved(LocationOf(source, kv.first),
                                          absl::StrCat(section, ".", key)));
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(LocationOf(source, kv.first), ": unknown key '",
                         section, ".", key, "'", DidYouMean(key, keys)));
      }
      const std::string path = absl::StrCat(section, ".", key);
      if (auto it = locations.find(path); it != locations.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(LocationOf(source, kv.first), ": duplicate key '",
                         path, "' (first set at ", LineOf(it->second), ")"));
      }
      locations[path] = LocationOf(source, kv.first);
    }
  }

  // Apply --set overrides on the tree.
  for (const std::string& item : overrides) {
    const std::string where = "--set " + item;
    const auto eq = item.find('=');
    const auto dot = item.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected section.key=value"));
    }
    const std::string section = item.substr(0, dot);
    const std::string key = item.substr(dot + 1, eq - dot - 1);
    const std::string value = item.substr(eq + 1);
    if (std::find(sections.begin(), sections.end(), section) ==
        sections.end()) {
      if (is_known(section)) return not_read_here(where, section);
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown section '", section, "'",
                       DidYouMean(section, sections)));
    }
    XLNET_RETURN_IF_ERROR(
        CheckNotMoved(where, absl::StrCat(section, ".", key)));
    const std::vector<std::string> keys = ConfigKeys(section);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key '",
                                                     section, ".", key, "'",
                                                     DidYouMean(key, keys)));
    }
    XLNET_RETURN_IF_ERROR(CheckNoTokenStartingWithComma(value, where));
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": invalid value: ", e.msg));
    }
    if (!root[section] || root[section].IsNull()) {
      root[section] = YAML::Node(YAML::NodeType::Map);
    }
    root[section][key] = parsed;
    locations[absl::StrCat(section, ".", key)] = where;
  }

  Config config;
  absl::Status status;
  ForEachSection(config, [&](const char* name, auto visit) {
    if (!status.ok()) return;
    const YAML::Node section = root[name];
    if (!section || section.IsNull()) return;
    YamlSectionReader reader{section, name, source, locations,
                             absl::OkStatus()};
    visit(reader);
    status = reader.status;
  });
  XLNET_RETURN_IF_ERROR(status);
  DeriveModelKeys(config);
  if (auto problem = CheckAll(config)) {
    return ProblemToStatus(*problem, locations, source);
  }
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::string& path,
                                  const std::vector<std::string>& overrides,
                                  const std::vector<std::string>& sections) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigFileBytes));
  return ParseConfig(text, path, overrides, sections);
}

std::string ConfigToYaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  ForEachSection(config, [&](const char* name, auto visit) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap;
    YamlWriter writer{out};
    visit(writer);
    out << YAML::EndMap;
  });
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string ConfigFileText(const Config& config) {
  return absl::StrCat("# written by xlnet.cpp ", ProjectVersion(), " (commit ",
                      GitCommit(), ")\n", ConfigToYaml(config));
}

absl::Status WriteConfigYaml(const Config& config, const std::string& path) {
  return WriteFileAtomic(path, ConfigFileText(config));
}

absl::Status ValidateConfig(const Config& config) {
  if (auto problem = CheckAll(config)) {
    return ProblemToStatus(*problem, {}, "config");
  }
  return absl::OkStatus();
}

absl::Status CheckSameArchitecture(const XLNetConfig& stored,
                                   const XLNetConfig& configured,
                                   const std::string& source) {
  std::vector<std::string> diffs;
  auto compare = [&](const char* key, const auto& a, const auto& b) {
    if (a != b) diffs.push_back(absl::StrCat(key, " ", a, " vs ", b));
  };
  compare("vocab_size", stored.vocab_size, configured.vocab_size);
  compare("d_model", stored.d_model, configured.d_model);
  compare("n_layer", stored.n_layer, configured.n_layer);
  compare("n_head", stored.n_head, configured.n_head);
  compare("d_head", stored.d_head, configured.d_head);
  compare("d_inner", stored.d_inner, configured.d_inner);
  compare("untie_r", std::string(stored.untie_r ? "true" : "false"),
          std::string(configured.untie_r ? "true" : "false"));
  compare("ff_activation", stored.ff_activation, configured.ff_activation);
  if (diffs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": its architecture differs from the config's model section (",
      absl::StrJoin(diffs, ", "), "; stored vs configured)"));
}

absl::Status ValidateModelConfig(const XLNetConfig& config) {
  if (auto problem = CheckModel(config)) {
    return ProblemToStatus(*problem, {}, "config");
  }
  return absl::OkStatus();
}

absl::StatusOr<XLNetConfig> ParseModelConfigJson(const std::string& json_text,
                                                 const std::string& source) {
  XLNET_ASSIGN_OR_RETURN(Json root, ParseJson(json_text, source));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object"));
  }
  if (root.contains("model_type") && root["model_type"] != "xlnet") {
    return absl::InvalidArgumentError(absl::StrCat(source, ": model_type is ",
                                                   root["model_type"].dump(),
                                                   ", expected \"xlnet\""));
  }
  // Old checkpoints call the vocabulary size n_token.
  if (!root.contains("vocab_size") && root.contains("n_token")) {
    root["vocab_size"] = root["n_token"];
  }
  XLNetConfig config;
  // HuggingFace derives d_head from d_model / n_head when absent.
  const bool has_d_head = root.contains("d_head");
  JsonReader reader{root, source, absl::OkStatus()};
  VisitModel(config, reader);
  XLNET_RETURN_IF_ERROR(reader.status);
  if (!has_d_head && config.n_head > 0) {
    config.d_head = config.d_model / config.n_head;
  }
  // The most labels a config.json may name (id2label or num_labels).
  constexpr int64_t kMaxLabels = 1 << 16;
  if (root.contains("id2label")) {
    const Json& labels = root["id2label"];
    if (!labels.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": id2label must be an object"));
    }
    if (static_cast<int64_t>(labels.size()) > kMaxLabels) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": id2label has ", labels.size(),
                       " labels, more than ", kMaxLabels));
    }
    std::vector<std::string> names(labels.size());
    for (const auto& [id, name] : labels.items()) {
      size_t index = 0;
      try {
        index = std::stoul(id);
      } catch (const std::exception&) {
        index = labels.size();
      }
      if (index >= labels.size() || !name.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": id2label must map \"0\"..\"", labels.size() - 1,
            "\" to names (bad entry \"", id, "\")"));
      }
      names[index] = name.get<std::string>();
    }
    config.id2label = names;
  } else if (root.contains("num_labels") && root["num_labels"].is_number()) {
    // get<int64_t>() of a float is a plain cast, undefined for 1e300.
    if (!root["num_labels"].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": num_labels ",
                                                     root["num_labels"].dump(),
                                                     " is not an integer"));
    }
    const int64_t n = root["num_labels"].get<int64_t>();
    // A label list this long would be a config error, not a task; and a
    // 20-byte file must not make us build a million names (found by
    // fuzz/model_config_json_fuzzer.cc: {"num_labels":885656} took over 20 s
    // under ASan to parse and write back).
    if (n < 1 || n > kMaxLabels) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": num_labels ", n, ": must be in [1, ", kMaxLabels, "]"));
    }
    config.id2label.clear();
    for (int64_t i = 0; i < n; ++i) {
      config.id2label.push_back(absl::StrCat("LABEL_", i));
    }
  }
  if (auto problem = CheckModel(config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", problem->key.substr(6), ": ", problem->message));
  }
  return config;
}

absl::StatusOr<XLNetConfig> ReadModelConfigJson(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigFileBytes));
  return ParseModelConfigJson(text, path);
}

std::string ModelConfigToJson(const XLNetConfig& config) {
  Json out = Json::object();
  JsonWriter writer{out};
  VisitModel(config, writer);
  out["model_type"] = "xlnet";
  return out.dump(2) + "\n";
}

}  // namespace xlnet
