#include "data_pipeline/hf_tokenizer_json.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data_pipeline/protobuf_wire.h"
#include "data_pipeline/text.h"

namespace xlnet::data {
namespace {

// ModelProto's fields (sentencepiece_model.proto).
constexpr uint64_t kPiecesField = 1;
constexpr uint64_t kNormalizerSpecField = 3;
// ModelProto.SentencePiece.
constexpr uint64_t kPieceField = 1;
constexpr uint64_t kScoreField = 2;
constexpr uint64_t kTypeField = 3;
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };
// NormalizerSpec.
constexpr uint64_t kPrecompiledCharsmapField = 2;
constexpr uint64_t kAddDummyPrefixField = 3;
constexpr uint64_t kRemoveExtraWhitespacesField = 4;
constexpr uint64_t kEscapeWhitespacesField = 5;

// The converter's penalty for a piece ending in a digit and a comma.
constexpr double kDigitCommaPenalty = 100.0;

struct Piece {
  std::string text;
  float score = 0;
  int type = kNormal;
};

std::string_view Payload(const std::string& bytes, const WireField& f) {
  return std::string_view(bytes).substr(f.payload, f.end - f.payload);
}

absl::StatusOr<Piece> ParsePiece(const std::string& bytes,
                                 const std::string& where) {
  XLNET_ASSIGN_OR_RETURN(const std::vector<WireField> fields,
                         MessageFields(bytes, where));
  Piece piece;
  for (const WireField& f : fields) {
    if (f.number == kPieceField && f.wire_type == 2) {
      piece.text = std::string(Payload(bytes, f));
    } else if (f.number == kScoreField && f.wire_type == 5) {
      std::memcpy(&piece.score, bytes.data() + f.payload, sizeof(float));
    } else if (f.number == kTypeField && f.wire_type == 0) {
      piece.type = static_cast<int>(f.varint);
    }
  }
  return piece;
}

// "1," and "١," (any Python str.isdigit() before the final comma).
bool EndsWithDigitComma(const std::string& piece) {
  if (piece.size() < 2 || piece.back() != ',') return false;
  size_t start = 0;
  return IsPythonDigit(LastCodePoint(piece, piece.size() - 1, &start));
}

nlohmann::json Replace(nlohmann::json pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", pattern}, {"content", content}};
}

nlohmann::json Metaspace() {
  return {{"type", "Metaspace"},
          {"replacement", "\u2581"},
          {"prepend_scheme", "always"},
          {"split", true}};
}

nlohmann::json TemplatePart(const char* kind, const std::string& id,
                            int type_id) {
  return {{kind, {{"id", id}, {"type_id", type_id}}}};
}

}  // namespace

absl::StatusOr<std::string> HfTokenizerJson(
    const std::string& model_bytes, const TextRules& rules,
    const std::vector<std::string>& special_tokens, const std::string& source) {
  XLNET_ASSIGN_OR_RETURN(const std::vector<WireField> fields,
                         MessageFields(model_bytes, source));
  std::vector<Piece> pieces;
  std::string charsmap;
  for (const WireField& f : fields) {
    if (f.wire_type != 2) continue;
    const std::string payload(Payload(model_bytes, f));
    if (f.number == kPiecesField) {
      XLNET_ASSIGN_OR_RETURN(
          Piece piece,
          ParsePiece(payload, absl::StrCat(source, ": piece ", pieces.size())));
      pieces.push_back(std::move(piece));
    } else if (f.number == kNormalizerSpecField) {
      const std::string where = absl::StrCat(source, ": normalizer_spec");
      XLNET_ASSIGN_OR_RETURN(const std::vector<WireField> spec,
                             MessageFields(payload, where));
      for (const WireField& g : spec) {
        if (g.number == kPrecompiledCharsmapField && g.wire_type == 2) {
          charsmap = std::string(Payload(payload, g));
        } else if ((g.number == kAddDummyPrefixField ||
                    g.number == kRemoveExtraWhitespacesField ||
                    g.number == kEscapeWhitespacesField) &&
                   g.wire_type == 0 && g.varint == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": field ", g.number,
              " turns off SentencePiece's default whitespace handling, "
              "which tokenizer.json's Metaspace pre-tokenizer cannot "
              "express"));
        }
      }
    }
  }
  std::map<std::string, int64_t> ids;
  std::optional<int64_t> unk_id;
  bool byte_fallback = false;
  nlohmann::json vocab = nlohmann::json::array();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (!IsValidUtf8(p.text)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": piece ", i, " is not valid UTF-8"));
    }
    ids.emplace(p.text, static_cast<int64_t>(i));
    if (p.type == kUnknown && !unk_id) unk_id = static_cast<int64_t>(i);
    byte_fallback = byte_fallback || p.type == kByte;
    double score = p.score;
    if (EndsWithDigitComma(p.text)) score -= kDigitCommaPenalty;
    vocab.push_back(nlohmann::json::array({p.text, score}));
  }
  if (!unk_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no piece of type UNKNOWN (<unk>)"));
  }
  nlohmann::json added = nlohmann::json::array();
  std::set<int64_t> added_ids;
  for (const std::string& token : special_tokens) {
    const auto it = ids.find(token);
    if (it == ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the special token ", token, " is not a piece"));
    }
    if (!added_ids.insert(it->second).second) continue;
    added.push_back({{"id", it->second},
                     {"content", token},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  for (const char* token : {"<sep>", "<cls>"}) {
    if (!ids.count(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": no piece ", token));
    }
  }
  // XLNet's preprocess_text, in the converter's order.
  nlohmann::json normalizers = nlohmann::json::array(
      {Replace({{"String", "``"}}, "\""), Replace({{"String", "''"}}, "\"")});
  if (!rules.keep_accents) {
    normalizers.push_back({{"type", "NFKD"}});
    normalizers.push_back({{"type", "StripAccents"}});
  }
  if (rules.uncased) normalizers.push_back({{"type", "Lowercase"}});
  if (!charsmap.empty()) {
    normalizers.push_back(
        {{"type", "Precompiled"},
         {"precompiled_charsmap", absl::Base64Escape(charsmap)}});
  }
  normalizers.push_back(Replace({{"Regex", " {2,}"}}, " "));
  nlohmann::json special_map = nlohmann::json::object();
  for (const char* token : {"<cls>", "<sep>"}) {
    special_map[token] = {{"id", token},
                          {"ids", nlohmann::json::array({ids.at(token)})},
                          {"tokens", nlohmann::json::array({token})}};
  }
  const nlohmann::json post_processor = {
      {"type", "TemplateProcessing"},
      {"single",
       nlohmann::json::array({TemplatePart("Sequence", "A", 0),
                              TemplatePart("SpecialToken", "<sep>", 0),
                              TemplatePart("SpecialToken", "<cls>", 2)})},
      {"pair",
       nlohmann::json::array({TemplatePart("Sequence", "A", 0),
                              TemplatePart("SpecialToken", "<sep>", 0),
                              TemplatePart("Sequence", "B", 1),
                              TemplatePart("SpecialToken", "<sep>", 1),
                              TemplatePart("SpecialToken", "<cls>", 2)})},
      {"special_tokens", special_map}};
  const nlohmann::json out = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
      {"pre_tokenizer", Metaspace()},
      {"post_processor", post_processor},
      {"decoder", Metaspace()},
      {"model",
       {{"type", "Unigram"},
        {"unk_id", *unk_id},
        {"vocab", vocab},
        {"byte_fallback", byte_fallback}}}};
  return out.dump(1, ' ', /*ensure_ascii=*/false,
                  nlohmann::json::error_handler_t::strict) +
         "\n";
}

}  // namespace xlnet::data
