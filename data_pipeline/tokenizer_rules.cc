#include "data_pipeline/tokenizer_rules.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "config/config_keys.h"
#include "data_pipeline/protobuf_wire.h"

namespace xlnet::data {
namespace {

const char* Bool(bool b) { return b ? "true" : "false"; }

bool RuleValue(const TextRules& rules, const std::string& rule) {
  return rule == "uncased" ? rules.uncased : rules.keep_accents;
}

}  // namespace

absl::StatusOr<std::string> WithoutTextRules(const std::string& model_bytes) {
  XLNET_ASSIGN_OR_RETURN(const std::vector<WireField> fields,
                         MessageFields(model_bytes, "the tokenizer"));
  std::string out;
  out.reserve(model_bytes.size() + 64);
  for (const WireField& f : fields) {
    if (f.number == kTextRulesField) continue;
    out.append(model_bytes, f.begin, f.end - f.begin);
  }
  return out;
}

absl::StatusOr<std::string> RecordTextRules(const std::string& model_bytes,
                                            const TextRules& rules) {
  XLNET_ASSIGN_OR_RETURN(std::string out, WithoutTextRules(model_bytes));
  const std::string record = nlohmann::json{
      {"uncased", rules.uncased},
      {"keep_accents",
       rules.keep_accents}}.dump();
  WriteVarint((uint64_t{kTextRulesField} << 3) | 2, &out);
  WriteVarint(record.size(), &out);
  out += record;
  return out;
}

absl::StatusOr<std::optional<TextRules>> RecordedTextRules(
    const std::string& model_bytes, const std::string& source) {
  XLNET_ASSIGN_OR_RETURN(const std::vector<WireField> fields,
                         MessageFields(model_bytes, source));
  std::optional<TextRules> recorded;
  for (const WireField& f : fields) {
    if (f.number != kTextRulesField) continue;
    const std::string where = absl::StrCat(
        source, ": the recorded text rules (field ", kTextRulesField, ")");
    if (f.payload == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " are not length-delimited"));
    }
    XLNET_ASSIGN_OR_RETURN(
        const nlohmann::json j,
        ParseJson(model_bytes.substr(f.payload, f.end - f.payload), where));
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " are not a JSON object"));
    }
    for (const auto& [key, value] : j.items()) {
      if (key != "uncased" && key != "keep_accents") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unknown key '", key,
                         "' (known: uncased, keep_accents); retrain the "
                         "tokenizer with this build"));
      }
    }
    TextRules rules;
    for (const char* key : {"uncased", "keep_accents"}) {
      if (!j.contains(key) || !j[key].is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", key, "' must be true or false"));
      }
    }
    rules.uncased = j["uncased"].get<bool>();
    rules.keep_accents = j["keep_accents"].get<bool>();
    recorded = rules;  // protobuf semantics: the last occurrence wins
  }
  return recorded;
}

absl::StatusOr<std::optional<TextRules>> ReadRecordedTextRules(
    const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(const std::string bytes,
                         ReadFile(path, kMaxTokenizerBytes));
  return RecordedTextRules(bytes, path);
}

std::string TextRulesString(const TextRules& rules) {
  return absl::StrCat("uncased=", Bool(rules.uncased),
                      " keep_accents=", Bool(rules.keep_accents));
}

absl::StatusOr<std::vector<TextRuleSetting>> ConfigTextRuleSettings(
    const DataConfig& data, const std::string& config_path,
    const std::vector<std::string>& overrides) {
  std::vector<TextRuleSetting> settings;
  for (const auto& [rule, value] :
       {std::pair<std::string, bool>{"uncased", data.uncased},
        {"keep_accents", data.keep_accents}}) {
    XLNET_ASSIGN_OR_RETURN(
        const std::optional<std::string> at,
        ConfigKeyLocation(config_path, overrides, "data." + rule));
    if (at) {
      settings.push_back(
          {absl::StrCat("data.", rule, " (", *at, ")"), rule, value});
    }
  }
  return settings;
}

absl::StatusOr<TextRules> ResolveTextRules(
    const std::string& tokenizer_path, const std::optional<TextRules>& recorded,
    const std::vector<TextRuleSetting>& settings) {
  TextRules rules = recorded.value_or(TextRules{});
  // Without a record: the setting that decided each rule so far.
  std::vector<const TextRuleSetting*> decided;
  for (const TextRuleSetting& s : settings) {
    if (s.rule != "uncased" && s.rule != "keep_accents") {
      return absl::InternalError(absl::StrCat("unknown text rule ", s.rule));
    }
    if (recorded) {
      if (s.value == RuleValue(*recorded, s.rule)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          s.source, " says ", s.rule, "=", Bool(s.value), " but the tokenizer ",
          tokenizer_path, " was trained with ", s.rule, "=",
          Bool(RuleValue(*recorded, s.rule)),
          " (recorded in the file). Casing is chosen when the tokenizer is "
          "trained; everything after takes it from there: drop ",
          s.source, " (or set it to ", Bool(!s.value),
          "), or train a tokenizer with `xlnet-data tokenizer --", s.rule, "=",
          Bool(s.value), "` and prepare the shards again"));
    }
    const TextRuleSetting* first = nullptr;
    for (const TextRuleSetting* d : decided) {
      if (d->rule == s.rule) first = d;
    }
    if (first == nullptr) {
      decided.push_back(&s);
      (s.rule == "uncased" ? rules.uncased : rules.keep_accents) = s.value;
    } else if (first->value != s.value) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.source, " says ", s.rule, "=", Bool(s.value), " but ",
                       first->source, " says ", s.rule, "=", Bool(first->value),
                       " (the tokenizer ", tokenizer_path,
                       " records no casing); make them agree"));
    }
  }
  return rules;
}

}  // namespace xlnet::data
