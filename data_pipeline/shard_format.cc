#include "data_pipeline/shard_format.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"

namespace xlnet::data {
namespace {

using Json = nlohmann::json;

constexpr char kMagic[8] = {'X', 'L', 'N', 'S', 'H', 'A', 'R', 'D'};
constexpr char kFormatName[] = "xlnet-data-shards";

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

void EncodeHeader(const ShardHeader& h, char* out) {
  std::memset(out, 0, kShardHeaderBytes);
  std::memcpy(out, kMagic, 8);
  PutU32(out + 8, kShardFormatVersion);
  PutU32(out + 12, kShardHeaderBytes);
  PutU64(out + 16, h.num_tokens);
  PutU64(out + 24, h.num_docs);
  PutU64(out + 32, h.key);
  PutU64(out + 40, h.checksum);
  PutU64(out + 48, h.lines);
  PutU64(out + 56, h.invalid_utf8_lines);
  PutU64(out + 64, h.overlong_lines);
  PutU64(out + 72, h.blank_lines);
}

// A key or checksum as written in the manifest (16 hex digits).
uint64_t ParseHexU64(const Json& j) {
  const std::string text = j.get<std::string>();
  uint64_t value = 0;
  if (text.size() != 16 || !absl::SimpleHexAtoi(text, &value)) {
    throw std::invalid_argument(
        absl::StrCat("'", text, "' is not 16 hexadecimal digits"));
  }
  return value;
}

}  // namespace

std::string ShardFileName(size_t index) {
  return absl::StrFormat("shard-%05d.bin", index);
}

ShardLayout GetShardLayout(uint64_t num_tokens, uint64_t num_docs) {
  ShardLayout l;
  l.flags = l.ids + 4 * num_tokens;
  l.docs = Align8(l.flags + num_tokens);
  l.total = l.docs + 16 * num_docs;
  return l;
}

std::string SerializeShard(ShardContent* content) {
  ShardContent& c = *content;
  c.header.num_tokens = c.ids.size();
  c.header.num_docs = c.docs.size();
  const ShardLayout l = GetShardLayout(c.ids.size(), c.docs.size());
  std::string bytes(l.total, '\0');
  if (!c.ids.empty()) {
    std::memcpy(&bytes[l.ids], c.ids.data(), 4 * c.ids.size());
    std::memcpy(&bytes[l.flags], c.flags.data(), c.flags.size());
  }
  for (size_t d = 0; d < c.docs.size(); ++d) {
    PutU64(&bytes[l.docs + 8 * d], static_cast<uint64_t>(c.docs[d].begin));
    PutU64(&bytes[l.docs + 8 * (c.docs.size() + d)], c.docs[d].hash);
  }
  c.header.checksum = ShardBodyChecksum(bytes.data(), bytes.size());
  EncodeHeader(c.header, bytes.data());
  return bytes;
}

uint64_t ShardBodyChecksum(const char* data, size_t size) {
  return Fnv1a64(data + kShardHeaderBytes, size - kShardHeaderBytes);
}

absl::StatusOr<ShardHeader> DecodeShardHeader(const char* data, size_t size,
                                              const std::string& path) {
  if (size < kShardHeaderBytes || std::memcmp(data, kMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a shard file"));
  }
  const uint32_t version = GetU32(data + 8);
  if (version != kShardFormatVersion ||
      GetU32(data + 12) != kShardHeaderBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": shard format version ", version, ", this build reads ",
        kShardFormatVersion, "; re-run xlnet-data prepare"));
  }
  ShardHeader h;
  h.num_tokens = GetU64(data + 16);
  h.num_docs = GetU64(data + 24);
  h.key = GetU64(data + 32);
  h.checksum = GetU64(data + 40);
  h.lines = GetU64(data + 48);
  h.invalid_utf8_lines = GetU64(data + 56);
  h.overlong_lines = GetU64(data + 64);
  h.blank_lines = GetU64(data + 72);
  if (h.num_tokens > size || h.num_docs > size ||
      GetShardLayout(h.num_tokens, h.num_docs).total != size) {
    return absl::DataLossError(absl::StrCat(
        path, ": size ", size, " does not match its header (", h.num_tokens,
        " tokens, ", h.num_docs, " documents); truncated or corrupt"));
  }
  return h;
}

absl::StatusOr<std::vector<DocEntry>> DecodeDocTable(const char* data,
                                                     const ShardHeader& header,
                                                     const std::string& path) {
  const ShardLayout l = GetShardLayout(header.num_tokens, header.num_docs);
  std::vector<DocEntry> docs(header.num_docs);
  for (uint64_t d = 0; d < header.num_docs; ++d) {
    docs[d].begin = static_cast<int64_t>(GetU64(data + l.docs + 8 * d));
    docs[d].hash = GetU64(data + l.docs + 8 * (header.num_docs + d));
  }
  const int64_t num_tokens = static_cast<int64_t>(header.num_tokens);
  for (size_t d = 0; d < docs.size(); ++d) {
    docs[d].end = d + 1 < docs.size() ? docs[d + 1].begin : num_tokens;
    if (docs[d].begin < (d ? docs[d - 1].begin : 0) ||
        docs[d].end < docs[d].begin) {
      return absl::DataLossError(
          absl::StrCat(path, ": corrupt document table"));
    }
  }
  if (!docs.empty() && docs.front().begin != 0) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt document table"));
  }
  return docs;
}

absl::Status WriteManifest(const std::string& dir,
                           const ShardManifest& manifest) {
  Json inputs = Json::array();
  for (const ManifestInput& in : manifest.inputs) {
    inputs.push_back(Json{{"path", in.path}, {"bytes", in.bytes}});
  }
  Json shards = Json::array();
  for (const ManifestShard& s : manifest.shards) {
    shards.push_back(Json{{"file", s.file},
                          {"input", s.input},
                          {"byte_begin", s.byte_begin},
                          {"byte_end", s.byte_end},
                          {"first_line", s.first_line},
                          {"tokens", s.tokens},
                          {"docs", s.docs},
                          {"key", HexU64(s.key)},
                          {"checksum", HexU64(s.checksum)}});
  }
  const ManifestTotals& t = manifest.totals;
  const Json json = {
      {"format", kFormatName},
      {"format_version", kShardFormatVersion},
      {"tokenizer",
       {{"file", manifest.tokenizer_file},
        {"hash", manifest.tokenizer_hash},
        {"vocab_size", manifest.vocab_size}}},
      {"text_rules",
       {{"uncased", manifest.rules.uncased},
        {"keep_accents", manifest.rules.keep_accents},
        {"use_eod", manifest.use_eod},
        {"max_line_bytes", manifest.max_line_bytes}}},
      {"shard_bytes", manifest.shard_bytes},
      {"inputs", inputs},
      {"shards", shards},
      {"totals",
       {{"files", t.files},
        {"empty_files", t.empty_files},
        {"lines", t.lines},
        {"tokens", t.tokens},
        {"docs", t.docs},
        {"invalid_utf8_lines", t.invalid_utf8_lines},
        {"overlong_lines", t.overlong_lines}}},
  };
  return WriteFileAtomic(dir + "/" + kManifestName, json.dump(2) + "\n");
}

absl::StatusOr<ShardManifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  if (!PathExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": missing; run `xlnet-data prepare --out ", dir,
                     "` (or let an interrupted run finish)"));
  }
  XLNET_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  Json m;
  try {
    m = Json::parse(text);
  } catch (const Json::exception& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
  ShardManifest out;
  try {
    if (m.at("format").get<std::string>() != kFormatName ||
        m.at("format_version").get<uint32_t>() != kShardFormatVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": format ", m.at("format").dump(), " version ",
                       m.at("format_version").dump(),
                       "; this build reads version ", kShardFormatVersion));
    }
    const Json& tok = m.at("tokenizer");
    out.tokenizer_file = tok.at("file").get<std::string>();
    out.tokenizer_hash = tok.at("hash").get<std::string>();
    out.vocab_size = tok.at("vocab_size").get<int64_t>();
    const Json& rules = m.at("text_rules");
    out.rules.uncased = rules.at("uncased").get<bool>();
    out.rules.keep_accents = rules.at("keep_accents").get<bool>();
    out.use_eod = rules.at("use_eod").get<bool>();
    out.max_line_bytes = rules.at("max_line_bytes").get<int64_t>();
    out.shard_bytes = m.at("shard_bytes").get<int64_t>();
    for (const Json& in : m.at("inputs")) {
      out.inputs.push_back(ManifestInput{in.at("path").get<std::string>(),
                                         in.at("bytes").get<uint64_t>()});
    }
    for (const Json& s : m.at("shards")) {
      ManifestShard shard;
      shard.file = s.at("file").get<std::string>();
      shard.input = s.at("input").get<uint64_t>();
      shard.byte_begin = s.at("byte_begin").get<uint64_t>();
      shard.byte_end = s.at("byte_end").get<uint64_t>();
      shard.first_line = s.at("first_line").get<int64_t>();
      shard.tokens = s.at("tokens").get<uint64_t>();
      shard.docs = s.at("docs").get<uint64_t>();
      shard.key = ParseHexU64(s.at("key"));
      shard.checksum = ParseHexU64(s.at("checksum"));
      out.shards.push_back(std::move(shard));
    }
    const Json& t = m.at("totals");
    out.totals.files = t.at("files").get<int64_t>();
    out.totals.empty_files = t.at("empty_files").get<int64_t>();
    out.totals.lines = t.at("lines").get<int64_t>();
    out.totals.tokens = t.at("tokens").get<int64_t>();
    out.totals.docs = t.at("docs").get<int64_t>();
    out.totals.invalid_utf8_lines = t.at("invalid_utf8_lines").get<int64_t>();
    out.totals.overlong_lines = t.at("overlong_lines").get<int64_t>();
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": unexpected content: ", e.what()));
  }
  return out;
}

}  // namespace xlnet::data
