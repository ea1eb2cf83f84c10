// tokenizer.json for transformers' fast tokenizer (hf_tokenizer_json.h): the
// vocabulary in id order with SentencePiece's scores, XLNet's special
// pieces as the only added tokens (user-defined pieces stay in the Unigram
// vocabulary), the text rules as normalizers, the digit-comma penalty, and
// models the format cannot express refused with the file named. That
// transformers then gives xlnet.cpp's ids is checked against the real
// library by xlnet_hf_check_test.
#include "data_pipeline/hf_tokenizer_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/escaping.h"
#include "data_pipeline/protobuf_wire.h"
#include "data_pipeline/tokenizer.h"
#include "tests/data_pipeline/data_test_env.h"

namespace xlnet::data::testing {
namespace {

nlohmann::json Parse(const absl::StatusOr<std::string>& text) {
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// The normalizers' types, in order.
std::vector<std::string> NormalizerTypes(const nlohmann::json& j) {
  std::vector<std::string> types;
  for (const auto& n : j["normalizer"]["normalizers"]) {
    types.push_back(n["type"].get<std::string>());
  }
  return types;
}

TEST(HfTokenizerJsonTest, TrainedTokenizerVocabularyAndAddedTokens) {
  const std::string bytes = ReadAll(TokenizerPath());
  auto tokenizer = Tokenizer::FromBytes(bytes, TokenizerPath());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const nlohmann::json j =
      Parse(HfTokenizerJson(bytes, {}, SpecialPieces(), TokenizerPath()));
  const auto& vocab = j["model"]["vocab"];
  ASSERT_EQ(vocab.size(), static_cast<size_t>((*tokenizer)->vocab_size()));
  for (int32_t id = 0; id < (*tokenizer)->vocab_size(); ++id) {
    EXPECT_EQ(vocab[id][0].get<std::string>(), (*tokenizer)->IdToPiece(id));
  }
  EXPECT_EQ(j["model"]["type"], "Unigram");
  EXPECT_EQ(j["model"]["unk_id"], 0);
  EXPECT_EQ(j["model"]["byte_fallback"], false);
  // Exactly the nine special pieces, at their ids; the user-defined
  // punctuation (ids 9-16) is vocabulary only.
  std::set<std::string> added;
  for (const auto& t : j["added_tokens"]) {
    const std::string content = t["content"];
    EXPECT_EQ(t["id"].get<int32_t>(), (*tokenizer)->PieceToId(content));
    EXPECT_TRUE(t["special"].get<bool>());
    added.insert(content);
  }
  EXPECT_EQ(added, std::set<std::string>(SpecialPieces().begin(),
                                         SpecialPieces().end()));
  for (const char* piece : {".", "(", ")", "\"", "-"}) {
    EXPECT_EQ(added.count(piece), 0u) << piece;
  }
  // A <sep> <cls>, and A <sep> B <sep> <cls> with segments 0, 1, 2.
  const auto& post = j["post_processor"];
  EXPECT_EQ(post["special_tokens"]["<sep>"]["ids"][0], kSepId);
  EXPECT_EQ(post["special_tokens"]["<cls>"]["ids"][0], kClsId);
  ASSERT_EQ(post["pair"].size(), 5u);
  EXPECT_EQ(post["pair"][2]["Sequence"]["type_id"], 1);
  EXPECT_EQ(post["pair"][4]["SpecialToken"]["type_id"], 2);
  EXPECT_EQ(j["pre_tokenizer"]["type"], "Metaspace");
  EXPECT_EQ(j["pre_tokenizer"]["prepend_scheme"], "always");
}

TEST(HfTokenizerJsonTest, TextRulesBecomeNormalizers) {
  const std::string bytes = ReadAll(TokenizerPath());
  using Types = std::vector<std::string>;
  EXPECT_EQ(
      NormalizerTypes(Parse(HfTokenizerJson(bytes, {}, SpecialPieces(), "m"))),
      (Types{"Replace", "Replace", "NFKD", "StripAccents", "Precompiled",
             "Replace"}));
  EXPECT_EQ(NormalizerTypes(Parse(HfTokenizerJson(
                bytes, {/*uncased=*/true, /*keep_accents=*/false},
                SpecialPieces(), "m"))),
            (Types{"Replace", "Replace", "NFKD", "StripAccents", "Lowercase",
                   "Precompiled", "Replace"}));
  EXPECT_EQ(
      NormalizerTypes(Parse(
          HfTokenizerJson(bytes, {/*uncased=*/true, /*keep_accents=*/true},
                          SpecialPieces(), "m"))),
      (Types{"Replace", "Replace", "Lowercase", "Precompiled", "Replace"}));
}

// A hand-made ModelProto: pieces (text, score, type) and a normalizer spec.
std::string Field(uint64_t number, const std::string& payload) {
  std::string out;
  WriteVarint((number << 3) | 2, &out);
  WriteVarint(payload.size(), &out);
  return out + payload;
}

std::string PieceMessage(const std::string& text, float score, int type) {
  std::string out = Field(1, text);
  WriteVarint((2 << 3) | 5, &out);
  char raw[4];
  std::memcpy(raw, &score, 4);
  out.append(raw, 4);
  WriteVarint(3 << 3, &out);
  WriteVarint(type, &out);
  return out;
}

std::string Model(const std::string& normalizer_spec) {
  std::string model;
  model += Field(1, PieceMessage("<unk>", 0, 2));
  model += Field(1, PieceMessage("<sep>", 0, 3));
  model += Field(1, PieceMessage("<cls>", 0, 3));
  model += Field(1, PieceMessage("9,", -2.5f, 1));
  model += Field(1, PieceMessage("\u0661,", -3, 1));  // Arabic-Indic one
  model += Field(1, PieceMessage("a,", -4, 1));
  model += Field(1, PieceMessage("-", 0, 4));
  model += Field(3, normalizer_spec);
  return model;
}

TEST(HfTokenizerJsonTest, DigitCommaPenaltyAndCharsmap) {
  const nlohmann::json j =
      Parse(HfTokenizerJson(Model(Field(2, std::string("\x01\x02\x00\xff", 4))),
                            {}, {"<unk>", "<sep>", "<cls>"}, "hand.model"));
  const auto& vocab = j["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 7u);
  EXPECT_DOUBLE_EQ(vocab[3][1].get<double>(), -102.5);
  EXPECT_DOUBLE_EQ(vocab[4][1].get<double>(), -103.0);
  EXPECT_DOUBLE_EQ(vocab[5][1].get<double>(), -4.0);
  EXPECT_EQ(vocab[6][0], "-");
  EXPECT_EQ(j["added_tokens"].size(), 3u);
  bool found = false;
  for (const auto& n : j["normalizer"]["normalizers"]) {
    if (n["type"] != "Precompiled") continue;
    found = true;
    EXPECT_EQ(n["precompiled_charsmap"],
              absl::Base64Escape(std::string("\x01\x02\x00\xff", 4)));
  }
  EXPECT_TRUE(found);
}

TEST(HfTokenizerJsonTest, WhatTheFormatCannotExpressIsRefused) {
  const std::vector<std::string> specials = {"<unk>", "<sep>", "<cls>"};
  std::string no_dummy_prefix;
  WriteVarint(3 << 3, &no_dummy_prefix);
  WriteVarint(0, &no_dummy_prefix);
  auto refused =
      HfTokenizerJson(Model(no_dummy_prefix), {}, specials, "odd.model");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("odd.model: normalizer_spec"),
            std::string::npos)
      << refused.status();
  auto missing = HfTokenizerJson(Model(""), {}, {"<mask>"}, "m.model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("m.model: the special token "
                                            "<mask> is not a piece"),
            std::string::npos)
      << missing.status();
  auto malformed = HfTokenizerJson("\x0a\xff", {}, specials, "bad.model");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("bad.model"), std::string::npos);
  const std::string invalid_utf8 =
      Model("") + Field(1, PieceMessage("\xc3", 0, 1));
  auto invalid = HfTokenizerJson(invalid_utf8, {}, specials, "u.model");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("u.model: piece 7 is not valid "
                                            "UTF-8"),
            std::string::npos)
      << invalid.status();
}

}  // namespace
}  // namespace xlnet::data::testing
