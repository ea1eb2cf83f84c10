// The tokenizer's casing, recorded in spiece.model when it is trained
// (data_pipeline/tokenizer_rules.h): the record round-trips, SentencePiece
// ignores it, a tokenizer without one reads as "not recorded", and the
// resolution of a step's settings against it.
#include "data_pipeline/tokenizer_rules.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "data_pipeline/tokenizer.h"
#include "tests/data_pipeline/data_test_env.h"

namespace xlnet::data::testing {
namespace {

std::string Bytes() { return ReadAll(TokenizerPath()); }

TEST(TokenizerRulesTest, TrainingRecordsTheRulesAndSentencePieceIgnoresThem) {
  // The shared fixture was trained with the default rules.
  auto recorded = RecordedTextRules(Bytes(), TokenizerPath());
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_TRUE(recorded->has_value());
  EXPECT_FALSE((*recorded)->uncased);
  EXPECT_FALSE((*recorded)->keep_accents);

  // Re-recording replaces the record (one, not two) and keeps the pieces.
  auto uncased = RecordTextRules(Bytes(), {true, true});
  ASSERT_TRUE(uncased.ok()) << uncased.status();
  EXPECT_EQ(uncased->size() + 2, Bytes().size());  // "true" vs "false" twice
  auto back = RecordedTextRules(*uncased, "uncased.model");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE((*back)->uncased);
  EXPECT_TRUE((*back)->keep_accents);
  auto a = Tokenizer::FromBytes(Bytes(), "a.model");
  auto b = Tokenizer::FromBytes(*uncased, "b.model");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> ids_a, ids_b;
  ASSERT_TRUE(
      (*a)->EncodeIds("The Quick brown fox, 1,000 times.", &ids_a).ok());
  ASSERT_TRUE(
      (*b)->EncodeIds("The Quick brown fox, 1,000 times.", &ids_b).ok());
  EXPECT_EQ(ids_a, ids_b);
  EXPECT_NE((*a)->hash(), (*b)->hash()) << "the hash covers the record";
}

// The fixture as a tokenizer made elsewhere (no record).
std::string WithoutRecord() {
  auto plain = WithoutTextRules(Bytes());
  EXPECT_TRUE(plain.ok()) << plain.status();
  return plain.ok() ? *plain : "";
}

TEST(TokenizerRulesTest, ATokenizerMadeElsewhereRecordsNothing) {
  const std::string plain = WithoutRecord();
  EXPECT_LT(plain.size(), Bytes().size());
  ASSERT_TRUE(Tokenizer::FromBytes(plain, "plain.model").ok());
  auto recorded = RecordedTextRules(plain, "plain.model");
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_FALSE(recorded->has_value());
  // Without a record the first setting decides; a later one must agree.
  auto rules = ResolveTextRules("plain.model", std::nullopt,
                                {{"--uncased", "uncased", true}});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_TRUE(rules->uncased);
  EXPECT_FALSE(rules->keep_accents);
  auto clash =
      ResolveTextRules("plain.model", std::nullopt,
                       {{"shards/manifest.json", "uncased", false},
                        {"data.uncased (cfg.yaml:3)", "uncased", true}});
  ASSERT_FALSE(clash.ok());
  const std::string msg(clash.status().message());
  EXPECT_NE(msg.find("data.uncased (cfg.yaml:3) says uncased=true but "
                     "shards/manifest.json says uncased=false"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("plain.model records no casing"), std::string::npos);
}

TEST(TokenizerRulesTest, ASettingThatContradictsTheRecordIsAnError) {
  const TextRules uncased{true, false};
  auto agree = ResolveTextRules("tok.model", uncased,
                                {{"--uncased", "uncased", true},
                                 {"--keep_accents", "keep_accents", false}});
  ASSERT_TRUE(agree.ok()) << agree.status();
  EXPECT_TRUE(agree->uncased);
  auto taken = ResolveTextRules("tok.model", uncased, {});
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->uncased) << "no setting: the record decides";
  auto clash =
      ResolveTextRules("tok.model", uncased, {{"--uncased", "uncased", false}});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(clash.status().message());
  EXPECT_NE(msg.find("--uncased says uncased=false but the tokenizer "
                     "tok.model was trained with uncased=true"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("xlnet-data tokenizer --uncased=false"), std::string::npos)
      << msg;
}

TEST(TokenizerRulesTest, ABadRecordOrNoModelIsAnErrorNamingTheFile) {
  auto junk = RecordedTextRules(std::string("\xff\xff\xff", 3), "junk.model");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.model: not a SentencePiece"),
            std::string::npos)
      << junk.status();
  std::string odd = WithoutRecord();
  const std::string record = "{\"uncased\":true,\"shout\":1}";
  odd += std::string("\xe2\x84\x0b", 3);  // field kTextRulesField, bytes
  odd += static_cast<char>(record.size());
  odd += record;
  auto bad = RecordedTextRules(odd, "odd.model");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("odd.model"), std::string::npos);
  EXPECT_NE(bad.status().message().find("unknown key 'shout'"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace xlnet::data::testing
