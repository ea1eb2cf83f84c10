// The tokenizer's casing: the text rules (uncased, keep_accents) are chosen
// once, when `xlnet-data tokenizer` trains the tokenizer, and recorded in
// the spiece.model file itself; everything after (prepare, pretraining,
// fine-tuning, export) takes them from there.
//
// Representation: one extra top-level field of SentencePiece's ModelProto,
// number kTextRulesField in the message's extension range (`extensions 200
// to max`), holding the JSON object {"uncased": B, "keep_accents": B}.
// SentencePiece (C++ and Python, hence HuggingFace's XLNetTokenizer) parses
// such a field as an unknown one and ignores it, so the file stays a plain
// spiece.model. In the file rather than beside it because the file is what
// travels: prepare copies it into the shards' directory, checkpoints and
// model directories carry it, export copies it, and Tokenizer::hash() (the
// identity every later step compares) covers the record too. The normalizer
// spec is not used: XLNet applies its rules before SentencePiece
// (`preprocess_text`), and the spec's fields describe SentencePiece's own
// normalisation, which must stay as trained.
//
// A tokenizer made elsewhere (official XLNet's spiece.model, HuggingFace's)
// has no record: "not recorded", and the caller's flag or config decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// The ModelProto field number of the record.
inline constexpr int kTextRulesField = 22604;

// `model_bytes` (a serialized ModelProto) with the record of `rules`
// appended, any earlier record removed. InvalidArgument when the bytes are
// not a protobuf message.
absl::StatusOr<std::string> RecordTextRules(const std::string& model_bytes,
                                            const TextRules& rules);

// `model_bytes` without a record: the tokenizer as one made elsewhere.
absl::StatusOr<std::string> WithoutTextRules(const std::string& model_bytes);

// The rules recorded in `model_bytes`; nullopt when there is no record.
// `source` (the file) names the bytes in errors: malformed protobuf, or a
// record that is not the JSON object above (unknown or missing keys).
absl::StatusOr<std::optional<TextRules>> RecordedTextRules(
    const std::string& model_bytes, const std::string& source);

// The same for the spiece.model at `path` (at most kMaxTokenizerBytes).
absl::StatusOr<std::optional<TextRules>> ReadRecordedTextRules(
    const std::string& path);

// "uncased=true keep_accents=false".
std::string TextRulesString(const TextRules& rules);

// One place that sets one rule: a flag, a config key, a manifest, a run's
// config.yaml.
struct TextRuleSetting {
  // Where, for errors: "--uncased", "data.uncased (cfg.yaml:4)".
  std::string source;
  // "uncased" or "keep_accents".
  std::string rule;
  bool value = false;
};

// The settings data.uncased and data.keep_accents make in the config at
// `config_path` (empty: none) with `overrides`, `data` being its parsed
// data section. A key left at its default is no setting: the default is
// nobody's choice. Sources read "data.uncased (FILE:LINE)" or
// "data.uncased (--set data.uncased=true)".
absl::StatusOr<std::vector<TextRuleSetting>> ConfigTextRuleSettings(
    const DataConfig& data, const std::string& config_path,
    const std::vector<std::string>& overrides);

// The text rules of a step that uses the tokenizer at `tokenizer_path`
// (`recorded`: its record, from RecordedTextRules). With a record, it is
// the answer and every setting must agree with it; without one, the first
// setting of each rule decides (false when none) and a later one must
// agree. A disagreement is an InvalidArgument error naming both sources,
// the values and the fix.
absl::StatusOr<TextRules> ResolveTextRules(
    const std::string& tokenizer_path, const std::optional<TextRules>& recorded,
    const std::vector<TextRuleSetting>& settings);

}  // namespace xlnet::data
