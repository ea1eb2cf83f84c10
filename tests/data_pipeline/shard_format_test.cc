// Shard files and manifests (data_pipeline/shard_format.h) round trip, and
// damaged ones are refused with the file named.
#include "data_pipeline/shard_format.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet::data {
namespace {

ShardContent TwoDocuments() {
  ShardContent c;
  c.ids = {10, 11, kEodId, 12, kEodId};
  c.flags = {0, 1, 1, 0, 0};
  c.docs = {{0, 3, Fnv1a64(c.ids.data(), 12)},
            {3, 5, Fnv1a64(c.ids.data() + 3, 8)}};
  c.header.key = 0x1234;
  c.header.lines = 4;
  c.header.blank_lines = 1;
  return c;
}

TEST(ShardFormatTest, ShardRoundTrips) {
  ShardContent c = TwoDocuments();
  const std::string bytes = SerializeShard(&c);
  const ShardLayout l = GetShardLayout(5, 2, 4);
  EXPECT_EQ(l.flags, kShardHeaderBytes + 20);
  EXPECT_EQ(l.docs, 160u);  // 153 rounded up to a multiple of 8
  ASSERT_EQ(bytes.size(), l.total);
  EXPECT_EQ(bytes.substr(0, 8), "XLNSHARD");
  EXPECT_EQ(c.header.num_tokens, 5u);
  EXPECT_EQ(c.header.checksum, ShardBodyChecksum(bytes.data(), bytes.size()));

  auto h = DecodeShardHeader(bytes.data(), bytes.size(), "s.bin");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->num_docs, 2u);
  EXPECT_EQ(h->key, 0x1234u);
  EXPECT_EQ(h->lines, 4u);
  EXPECT_EQ(h->blank_lines, 1u);
  auto docs = DecodeDocTable(bytes.data(), *h, "s.bin");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1].begin, 3);
  EXPECT_EQ((*docs)[1].end, 5);
  EXPECT_EQ((*docs)[1].hash, c.docs[1].hash);
  EXPECT_EQ(ShardFileName(7), "shard-00007.bin");
}

TEST(ShardFormatTest, TwoByteIdsHalveTheIds) {
  ShardContent wide = TwoDocuments();
  ShardContent narrow = TwoDocuments();
  narrow.header.id_bytes = 2;
  const std::string w = SerializeShard(&wide);
  const std::string n = SerializeShard(&narrow);
  const ShardLayout l = GetShardLayout(5, 2, 2);
  EXPECT_EQ(l.flags, kShardHeaderBytes + 10);
  ASSERT_EQ(n.size(), l.total);
  EXPECT_LT(n.size(), w.size());
  auto h = DecodeShardHeader(n.data(), n.size(), "s.bin");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->version, 2u);
  EXPECT_EQ(h->id_bytes, 2u);
  uint16_t third;
  std::memcpy(&third, n.data() + l.ids + 4, 2);
  EXPECT_EQ(third, kEodId);
  EXPECT_TRUE(VerifyShardBody(n.data(), n.size(), *h, 1000, "s.bin").ok());
  EXPECT_FALSE(VerifyShardBody(n.data(), n.size(), *h, 12, "s.bin").ok());
  // Document hashes are over int32 ids whatever the width on disk.
  auto docs = DecodeDocTable(n.data(), *h, "s.bin");
  ASSERT_TRUE(docs.ok());
  EXPECT_EQ((*docs)[0].hash, wide.docs[0].hash);
  // Version 1: int32 ids and no id-bytes field.
  std::string v1 = w;
  v1[8] = 1;
  std::memset(&v1[80], 0, 4);
  auto h1 = DecodeShardHeader(v1.data(), v1.size(), "v1.bin");
  ASSERT_TRUE(h1.ok()) << h1.status();
  EXPECT_EQ(h1->version, 1u);
  EXPECT_EQ(h1->id_bytes, 4u);
  EXPECT_TRUE(VerifyShardBody(v1.data(), v1.size(), *h1, 1000, "v1.bin").ok());
}

TEST(ShardFormatTest, DamagedShardsNameTheFile) {
  ShardContent c = TwoDocuments();
  std::string bytes = SerializeShard(&c);
  auto cut = DecodeShardHeader(bytes.data(), bytes.size() - 8, "s.bin");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("s.bin: size"), std::string::npos);
  auto junk = DecodeShardHeader("hello", 5, "s.bin");
  EXPECT_EQ(junk.status().message(), "s.bin: not a shard file");
  bytes[8] = 3;  // a format version from the future
  auto version = DecodeShardHeader(bytes.data(), bytes.size(), "s.bin");
  EXPECT_EQ(version.status().code(), absl::StatusCode::kFailedPrecondition);
  // A document table out of order.
  ShardContent bad = TwoDocuments();
  bad.docs[1].begin = 6;
  const std::string unordered = SerializeShard(&bad);
  auto h = DecodeShardHeader(unordered.data(), unordered.size(), "s.bin");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(DecodeDocTable(unordered.data(), *h, "s.bin").status().message(),
            "s.bin: corrupt document table");
}

TEST(ShardFormatTest, ManifestRoundTrips) {
  ::xlnet::testing::TempDir tmp;
  ShardManifest m;
  m.tokenizer_hash = "00112233aabbccdd";
  m.vocab_size = 1000;
  m.rules.uncased = true;
  m.use_eod = false;
  m.max_line_bytes = 4096;
  m.shard_bytes = 60000;
  m.inputs = {{"a.txt", 123}};
  m.shards = {{"shard-00000.bin", 0, 0, 123, 1, 40, 2, 0xfedcba9876543210ULL,
               0x0123456789abcdefULL}};
  m.totals.files = 1;
  m.totals.lines = 9;
  m.totals.tokens = 40;
  ASSERT_TRUE(WriteManifest(tmp.path(), m).ok());
  const std::string text = *ReadFile(tmp.Join(kManifestName));
  EXPECT_NE(text.find("\"key\": \"fedcba9876543210\""), std::string::npos);
  EXPECT_NE(text.find("\"format\": \"xlnet-data-shards\""), std::string::npos);

  auto back = ReadManifest(tmp.path());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tokenizer_file, "spiece.model");
  EXPECT_EQ(back->tokenizer_hash, m.tokenizer_hash);
  EXPECT_EQ(back->vocab_size, 1000);
  EXPECT_TRUE(back->rules.uncased);
  EXPECT_FALSE(back->rules.keep_accents);
  EXPECT_FALSE(back->use_eod);
  EXPECT_EQ(back->max_line_bytes, 4096);
  ASSERT_EQ(back->inputs.size(), 1u);
  EXPECT_EQ(back->inputs[0].bytes, 123u);
  ASSERT_EQ(back->shards.size(), 1u);
  EXPECT_EQ(back->shards[0].key, 0xfedcba9876543210ULL);
  EXPECT_EQ(back->shards[0].checksum, 0x0123456789abcdefULL);
  EXPECT_EQ(back->shards[0].tokens, 40u);
  EXPECT_EQ(back->totals.lines, 9);
  // Writing what was read gives the same bytes.
  ASSERT_TRUE(WriteManifest(tmp.path(), *back).ok());
  EXPECT_EQ(*ReadFile(tmp.Join(kManifestName)), text);

  // A negative or fractional count is damage, not a value to cast.
  for (const char* bad : {"-1000", "1000.5", "1e300"}) {
    std::string edited = text;
    const size_t at = edited.find("\"vocab_size\": 1000");
    ASSERT_NE(at, std::string::npos);
    edited.replace(at, 18, absl::StrCat("\"vocab_size\": ", bad));
    ASSERT_TRUE(WriteFileAtomic(tmp.Join(kManifestName), edited).ok());
    auto refused = ReadManifest(tmp.path());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_NE(refused.status().message().find("vocab_size: "),
              std::string::npos)
        << refused.status();
  }
}

TEST(ShardFormatTest, BadManifestsNameTheFile) {
  ::xlnet::testing::TempDir tmp;
  const std::string path = tmp.Join(kManifestName);
  EXPECT_EQ(ReadManifest(tmp.path()).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomic(path, "{").ok());
  auto json = ReadManifest(tmp.path());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(json.status().message().find(path + ": not valid JSON"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(path, R"({"format": "a", "format": "b"})").ok());
  auto dup = ReadManifest(tmp.path());
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(dup.status().message(), path + ": duplicate key 'format'");
  ASSERT_TRUE(
      WriteFileAtomic(path, R"({"format": "other", "format_version": 1})")
          .ok());
  EXPECT_EQ(ReadManifest(tmp.path()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      WriteFileAtomic(path,
                      R"({"format": "xlnet-data-shards", "format_version": 1})")
          .ok());
  auto partial = ReadManifest(tmp.path());
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(partial.status().message().find(path + ": unexpected content"),
            std::string::npos);
}

}  // namespace
}  // namespace xlnet::data
