// HuggingFace config.json <-> XLNetConfig: visitors over the model
// section's field list (config_internal.h), plus id2label/label2id and the
// keys HF derives.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "config/config.h"
#include "config/config_internal.h"

namespace xlnet {
namespace {

using config_internal::CheckModel;
using config_internal::TypeName;
using config_internal::VisitModel;

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

}  // namespace

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
