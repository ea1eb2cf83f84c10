// Configs as YAML: reading (with the key checks and --set overrides),
// writing, and the public entry points of config.h. The field lists, the
// validation and config.json live beside it (config_internal.h,
// validate.cc, model_json.cc); yaml_guard.h guards yaml-cpp.
#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/version.h"
#include "config/config_internal.h"
#include "config/config_keys.h"
#include "config/yaml_guard.h"

namespace xlnet {
namespace {

using config_internal::CheckAll;
using config_internal::CheckNoTokenStartingWithComma;
using config_internal::CheckOneDocument;
using config_internal::Locations;
using config_internal::ProblemToStatus;
using config_internal::TypeName;
using config_internal::VisitData;
using config_internal::VisitFinetune;
using config_internal::VisitModel;
using config_internal::VisitTrain;

// ---------------------------------------------------------------------------
// Field lists.

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

// HuggingFace TrainingArguments (and run_glue/run_squad) names a user may
// bring, with the key that holds the setting here. They are errors naming
// our key rather than aliases, so each setting keeps one key.
struct HfName {
  const char* hf_key;
  const char* our_key;
  const char* note;  // "" or how the meaning differs
};
constexpr HfName kHfNames[] = {
    {"learning_rate", "train.lr", ""},
    {"max_grad_norm", "train.clip", ""},
    {"gradient_accumulation_steps", "train.grad_accum_steps", ""},
    {"save_total_limit", "train.keep_checkpoints", ""},
    {"logging_steps", "train.log_steps", ""},
    {"lr_scheduler_type", "train.decay", "linear or cos"},
    {"warmup_ratio", "train.warmup_steps", "a number of steps"},
    {"gradient_checkpointing", "train.activation_checkpointing", ""},
    {"early_stopping_patience", "train.patience", ""},
    {"early_stopping_threshold", "train.patience_min_delta", ""},
    {"eval_strategy", "train.eval_steps", "evaluate every N steps"},
    {"evaluation_strategy", "train.eval_steps", "evaluate every N steps"},
    {"num_train_epochs", "train.num_epochs", ""},
    {"per_device_train_batch_size", "train.batch_size_per_device",
     "rows per rank per forward; or train.batch_size, the global batch"},
    {"per_device_eval_batch_size", "finetune.eval_batch_size", ""},
    {"bf16", "train.dtype", "train.dtype: bf16"},
    {"fp16", "train.dtype", "train.dtype: fp16 (CUDA only)"},
    {"report_to", "train.tensorboard",
     "true writes TensorBoard events under RUN/tb/"},
    {"output_dir", "--out", "the run directory is a command-line flag"},
    {"adam_beta1", "train.adam_beta1", ""},
    {"adam_beta2", "train.adam_beta2", ""},
    {"adam_epsilon", "train.adam_epsilon", ""},
    {"weight_decay", "train.weight_decay", ""},
    {"warmup_steps", "train.warmup_steps", ""},
    {"max_steps", "train.max_steps", ""},
    {"save_steps", "train.save_steps", ""},
    {"eval_steps", "train.eval_steps", ""},
    {"seed", "train.seed", ""},
    {"max_seq_length", "finetune.max_seq_length",
     "in fine-tuning; pretraining samples are data.seq_len tokens"},
    {"doc_stride", "finetune.doc_stride", ""},
};

// An error naming our key when `key` (set at `where`, as `path`) is a
// HuggingFace name of a setting that lives elsewhere here; OK otherwise.
absl::Status CheckHfName(const std::string& where, const std::string& path,
                         const std::string& key) {
  for (const HfName& name : kHfNames) {
    if (key != name.hf_key || path == name.our_key) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", path, ": HuggingFace's ", key, " is ", name.our_key,
        " here", *name.note ? absl::StrCat(" (", name.note, ")") : ""));
  }
  return absl::OkStatus();
}

// The model keys whose home is the data section; the default names of
// data.sources.
void DeriveModelKeys(Config& config) {
  if (config.train.objective == Objective::kClm) {
    // Causal LM reads every stream forwards and caches whole segments as
    // memory (the last model.mem_len positions).
    config.data.bi_data = false;
    config.model.reuse_len = std::nullopt;
  } else {
    config.model.reuse_len = config.data.reuse_len;
  }
  config.model.bi_data = config.data.bi_data;
  for (DataSource& s : config.data.sources) s.name = DataSourceName(s);
}

// train.batch_size and train.batch_size_per_device: one of the two. Setting
// the per-device one makes the global batch derived (0 in the config); an
// explicit non-zero global batch beside it is an error naming both places.
absl::Status ReadOneBatchKey(const Locations& locations, TrainConfig* train) {
  if (train->batch_size_per_device <= 0) return absl::OkStatus();
  const auto global = locations.find("train.batch_size");
  if (global != locations.end() && train->batch_size > 0) {
    const auto per_device = locations.find("train.batch_size_per_device");
    return absl::InvalidArgumentError(absl::StrCat(
        per_device->second,
        ": train.batch_size_per_device=", train->batch_size_per_device,
        " and train.batch_size=", train->batch_size, " (", global->second,
        ") are both set: keep one (the rows per rank per forward, or the "
        "global batch over all ranks and micro-steps), or set "
        "train.batch_size=0"));
  }
  train->batch_size = 0;
  return absl::OkStatus();
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
    if constexpr (kIsEnumSetting<T>) {
      const std::string path = absl::StrCat(name, ".", key);
      std::string text;
      if (!ReadYaml(node, &text)) {
        status = absl::InvalidArgumentError(
            absl::StrCat(locations.at(path), ": ", path, ": expected one of ",
                         EnumNameList<T>(), ", got ", Describe(node)));
        return;
      }
      absl::StatusOr<T> value = ParseEnumSetting<T>(path, text);
      if (!value.ok()) {
        status = absl::InvalidArgumentError(
            absl::StrCat(locations.at(path), ": ", value.status().message()));
        return;
      }
      field = *value;
    } else if (!ReadYaml(node, &field)) {
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

// The shortest text that reads back as the same double, with a ".0" on a
// whole number so that it reads back as a float.
std::string DoubleText(double v) {
  std::string text;
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream s;
    s.precision(precision);
    s << v;
    text = s.str();
    if (std::stod(text) == v) break;
  }
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

struct YamlWriter {
  YAML::Emitter& out;
  void operator()(const char* key, const int64_t& v) {
    out << YAML::Key << key << YAML::Value << v;
  }
  void operator()(const char* key, const double& v) {
    out << YAML::Key << key << YAML::Value << DoubleText(v);
  }
  void operator()(const char* key, const bool& v) {
    out << YAML::Key << key << YAML::Value << (v ? "true" : "false");
  }
  void operator()(const char* key, const std::string& v) {
    out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
  }
  template <typename E, typename = std::enable_if_t<kIsEnumSetting<E>>>
  void operator()(const char* key, const E& v) {
    (*this)(key, std::string(EnumName(v)));
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

// Each field's value as one line of text, as YamlWriter writes it (strings
// quoted, lists in flow syntax), under "section.key".
struct ValueTextWriter {
  std::string section;
  std::vector<std::pair<std::string, std::string>>* out;

  void Add(const char* key, std::string text) {
    out->emplace_back(absl::StrCat(section, ".", key), std::move(text));
  }
  static std::string Quoted(const std::string& s) {
    return absl::StrCat("\"", s, "\"");
  }
  void operator()(const char* key, const int64_t& v) {
    Add(key, absl::StrCat(v));
  }
  void operator()(const char* key, const double& v) { Add(key, DoubleText(v)); }
  void operator()(const char* key, const bool& v) {
    Add(key, v ? "true" : "false");
  }
  void operator()(const char* key, const std::string& v) {
    Add(key, Quoted(v));
  }
  template <typename E, typename = std::enable_if_t<kIsEnumSetting<E>>>
  void operator()(const char* key, const E& v) {
    Add(key, EnumName(v));
  }
  void operator()(const char* key, const std::optional<int64_t>& v) {
    Add(key, v ? absl::StrCat(*v) : "null");
  }
  void operator()(const char* key, const std::optional<double>& v) {
    Add(key, v ? DoubleText(*v) : "null");
  }
  void operator()(const char* key, const std::vector<std::string>& v) {
    std::vector<std::string> items;
    for (const std::string& s : v) items.push_back(Quoted(s));
    Add(key, absl::StrCat("[", absl::StrJoin(items, ", "), "]"));
  }
  void operator()(const char* key, const std::vector<DataSource>& v) {
    std::vector<std::string> items;
    for (const DataSource& s : v) {
      items.push_back(absl::StrCat("{path: ", Quoted(s.path),
                                   ", weight: ", DoubleText(s.weight),
                                   ", name: ", Quoted(s.name), "}"));
    }
    Add(key, absl::StrCat("[", absl::StrJoin(items, ", "), "]"));
  }
};

// ---------------------------------------------------------------------------
// The steps of ParseConfigFor.

bool IsKnownSection(const std::string& section) {
  const auto& all = AllConfigSections();
  return std::find(all.begin(), all.end(), section) != all.end();
}

// An error for `section` (set at `where`) unless the scope reads it.
absl::Status CheckSectionRead(const ConfigScope& scope,
                              const std::string& where,
                              const std::string& section) {
  const std::vector<std::string>& sections = scope.sections;
  if (std::find(sections.begin(), sections.end(), section) != sections.end()) {
    return absl::OkStatus();
  }
  // HuggingFace's TrainingArguments are flat: `learning_rate: 3e-5` at the
  // top.
  XLNET_RETURN_IF_ERROR(CheckHfName(where, section, section));
  if (IsKnownSection(section)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": section '", section, "' is not read by this command",
        section == "model" ? " (the model comes from --init's config.json)"
                           : "",
        "; it reads ", absl::StrJoin(sections, ", ")));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": unknown section '", section, "'", DidYouMean(section, sections),
      "; sections are ", absl::StrJoin(sections, ", ")));
}

// An error for `section.key` (set at `where`) unless it is a key of the
// section, where it has always been, that the scope reads.
absl::Status CheckKeyRead(const ConfigScope& scope, const std::string& where,
                          const std::string& section, const std::string& key) {
  const std::string path = absl::StrCat(section, ".", key);
  XLNET_RETURN_IF_ERROR(CheckNotMoved(where, path));
  const std::vector<std::string> keys = ConfigKeys(section);
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    XLNET_RETURN_IF_ERROR(CheckHfName(where, path, key));
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": unknown key '", path, "'", DidYouMean(key, keys)));
  }
  for (const UnreadKey& unread : scope.unread_keys) {
    if (unread.key == path && !unread.unread_when) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", path, " is not read by ", scope.command,
                       " (", unread.why, "); remove it"));
    }
  }
  return absl::OkStatus();
}

// The guarded YAML text as a mapping (empty text: an empty mapping).
absl::StatusOr<YAML::Node> LoadYamlRoot(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::string>& sections) {
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
  return root;
}

// Checks the file's sections and keys against the scope, remembering in
// `locations` where each key was set. YAML readers keep the first of two
// equal keys; a repeated one is an error.
absl::Status CheckFileKeys(const YAML::Node& root, const ConfigScope& scope,
                           const std::string& source, Locations* locations) {
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
    XLNET_RETURN_IF_ERROR(CheckSectionRead(scope, section_at, section));
    if (section_kv.second.IsNull()) continue;
    if (!section_kv.second.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(LocationOf(source, section_kv.second), ": section '",
                       section, "' must be a mapping of key: value"));
    }
    for (const auto& kv : section_kv.second) {
      const std::string key_at = LocationOf(source, kv.first);
      if (!kv.first.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(
            key_at, ": a key of section '", section, "' must be a string"));
      }
      const std::string key = kv.first.as<std::string>();
      XLNET_RETURN_IF_ERROR(CheckKeyRead(scope, key_at, section, key));
      const std::string path = absl::StrCat(section, ".", key);
      if (auto it = locations->find(path); it != locations->end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(key_at, ": duplicate key '", path, "' (first set at ",
                         LineOf(it->second), ")"));
      }
      (*locations)[path] = key_at;
    }
  }
  return absl::OkStatus();
}

// An error for the first key of the scope's conditionally unread keys that
// is set (in the file or with --set) in a `config` it is unread in.
absl::Status CheckConditionallyUnread(const ConfigScope& scope,
                                      const Config& config,
                                      const Locations& locations) {
  for (const UnreadKey& unread : scope.unread_keys) {
    if (!unread.unread_when) continue;
    const auto it = locations.find(unread.key);
    if (it == locations.end() || !unread.unread_when(config)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(it->second, ": ", unread.key, " is not read by ",
                     scope.command, " (", unread.why, "); remove it"));
  }
  return absl::OkStatus();
}

// Applies the `section.key=value` overrides on the tree, in order.
absl::Status ApplyOverrides(const std::vector<std::string>& overrides,
                            const ConfigScope& scope, YAML::Node* root,
                            Locations* locations) {
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
    XLNET_RETURN_IF_ERROR(CheckSectionRead(scope, where, section));
    XLNET_RETURN_IF_ERROR(CheckKeyRead(scope, where, section, key));
    XLNET_RETURN_IF_ERROR(CheckNoTokenStartingWithComma(value, where));
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": invalid value: ", e.msg));
    }
    if (!(*root)[section] || (*root)[section].IsNull()) {
      (*root)[section] = YAML::Node(YAML::NodeType::Map);
    }
    (*root)[section][key] = parsed;
    (*locations)[absl::StrCat(section, ".", key)] = where;
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
  ConfigScope scope;
  scope.sections = sections;
  return ParseConfigFor(scope, yaml_text, source, overrides);
}

absl::StatusOr<Config> ParseConfigFor(
    const ConfigScope& scope, const std::string& yaml_text,
    const std::string& source, const std::vector<std::string>& overrides) {
  XLNET_ASSIGN_OR_RETURN(YAML::Node root,
                         LoadYamlRoot(yaml_text, source, scope.sections));
  Locations locations;
  XLNET_RETURN_IF_ERROR(CheckFileKeys(root, scope, source, &locations));
  XLNET_RETURN_IF_ERROR(ApplyOverrides(overrides, scope, &root, &locations));
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
  XLNET_RETURN_IF_ERROR(CheckConditionallyUnread(scope, config, locations));
  DeriveModelKeys(config);
  XLNET_RETURN_IF_ERROR(ReadOneBatchKey(locations, &config.train));
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

absl::StatusOr<Config> LoadConfigFor(
    const ConfigScope& scope, const std::string& path,
    const std::vector<std::string>& overrides) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigFileBytes));
  return ParseConfigFor(scope, text, path, overrides);
}

absl::StatusOr<std::optional<std::string>> ConfigKeyLocation(
    const std::string& config_path, const std::vector<std::string>& overrides,
    const std::string& key) {
  std::string text;
  if (!config_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(text, ReadFile(config_path, kMaxConfigFileBytes));
  }
  const std::string source = config_path.empty() ? "<defaults>" : config_path;
  const ConfigScope scope;
  XLNET_ASSIGN_OR_RETURN(YAML::Node root,
                         LoadYamlRoot(text, source, scope.sections));
  Locations locations;
  XLNET_RETURN_IF_ERROR(CheckFileKeys(root, scope, source, &locations));
  XLNET_RETURN_IF_ERROR(ApplyOverrides(overrides, scope, &root, &locations));
  const auto it = locations.find(key);
  if (it == locations.end()) return std::nullopt;
  return it->second;
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

std::vector<std::pair<std::string, std::string>> ConfigValueTexts(
    const Config& config) {
  std::vector<std::pair<std::string, std::string>> texts;
  ForEachSection(config, [&](const char* name, auto visit) {
    ValueTextWriter writer{name, &texts};
    visit(writer);
  });
  return texts;
}

std::string ConfigFileText(const Config& config) {
  return absl::StrCat("# written by xlnet.cpp ", ProjectVersion(), " (commit ",
                      GitCommit(), ")\n", ConfigToYaml(config));
}

absl::Status WriteConfigYaml(const Config& config, const std::string& path) {
  return WriteFileAtomic(path, ConfigFileText(config));
}

int64_t GlobalBatchSize(const TrainConfig& train, int64_t world_size) {
  if (train.batch_size_per_device <= 0) return train.batch_size;
  return train.batch_size_per_device * world_size * train.grad_accum_steps;
}

}  // namespace xlnet
