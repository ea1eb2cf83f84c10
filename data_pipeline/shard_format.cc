#include "data_pipeline/shard_format.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json.h"
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
  PutU32(out + 8, h.version);
  PutU32(out + 12, kShardHeaderBytes);
  PutU64(out + 16, h.num_tokens);
  PutU64(out + 24, h.num_docs);
  PutU64(out + 32, h.key);
  PutU64(out + 40, h.checksum);
  PutU64(out + 48, h.lines);
  PutU64(out + 56, h.invalid_utf8_lines);
  PutU64(out + 64, h.overlong_lines);
  PutU64(out + 72, h.blank_lines);
  if (h.version >= 2) {
    PutU32(out + 80, h.id_bytes);
    PutU64(out + 88, h.skipped_records);
  }
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

// A file name read from a manifest must stay inside its directory.
void CheckPlainName(const std::string& name, const char* field) {
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw std::invalid_argument(
        absl::StrCat(field, " '", name,
                     "' is not a file name inside the directory (no '/', "
                     "not '.' or '..')"));
  }
}

}  // namespace

std::string ShardFileName(size_t index) {
  return absl::StrFormat("shard-%05d.bin", index);
}

uint32_t IdBytesForVocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

ShardLayout GetShardLayout(uint64_t num_tokens, uint64_t num_docs,
                           uint32_t id_bytes) {
  ShardLayout l;
  l.id_bytes = id_bytes;
  l.flags = l.ids + id_bytes * num_tokens;
  l.docs = Align8(l.flags + num_tokens);
  l.total = l.docs + 16 * num_docs;
  return l;
}

ShardLayout GetShardLayout(const ShardHeader& header) {
  return GetShardLayout(header.num_tokens, header.num_docs, header.id_bytes);
}

std::string SerializeShard(ShardContent* content) {
  ShardContent& c = *content;
  c.header.version = kShardFormatVersion;
  c.header.num_tokens = c.ids.size();
  c.header.num_docs = c.docs.size();
  TORCH_CHECK(c.header.id_bytes == 2 || c.header.id_bytes == 4,
              "id_bytes must be 2 or 4, got ", c.header.id_bytes);
  const ShardLayout l = GetShardLayout(c.header);
  std::string bytes(l.total, '\0');
  if (!c.ids.empty()) {
    if (l.id_bytes == 4) {
      std::memcpy(&bytes[l.ids], c.ids.data(), 4 * c.ids.size());
    } else {
      for (size_t t = 0; t < c.ids.size(); ++t) {
        TORCH_CHECK(c.ids[t] >= 0 && c.ids[t] < 65536, "id ", c.ids[t],
                    " does not fit 2 bytes");
        const uint16_t id = static_cast<uint16_t>(c.ids[t]);
        std::memcpy(&bytes[l.ids + 2 * t], &id, 2);
      }
    }
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

absl::Status VerifyShardBody(const char* data, size_t size,
                             const ShardHeader& header, int64_t vocab_size,
                             const std::string& path) {
  if (ShardBodyChecksum(data, size) != header.checksum) {
    return absl::DataLossError(absl::StrCat(
        path,
        ": checksum mismatch: the file's content is not what xlnet-data "
        "prepare wrote (corrupt shard; re-run prepare to rebuild it)"));
  }
  const ShardLayout l = GetShardLayout(header);
  const uint8_t* flags = reinterpret_cast<const uint8_t*>(data + l.flags);
  const uint64_t n = header.num_tokens;
  const uint32_t limit = static_cast<uint32_t>(vocab_size);
  auto id_at = [&](uint64_t t) -> int64_t {
    if (l.id_bytes == 2) {
      uint16_t id;
      std::memcpy(&id, data + l.ids + 2 * t, 2);
      return id;
    }
    int32_t id;
    std::memcpy(&id, data + l.ids + 4 * t, 4);
    return id;
  };
  // Branch-free scan, then locate the first bad token only when needed.
  bool bad = false;
  for (uint64_t t = 0; t < n; ++t) {
    bad |= static_cast<uint32_t>(id_at(t)) >= limit || flags[t] > 1;
  }
  if (!bad) return absl::OkStatus();
  for (uint64_t t = 0; t < n; ++t) {
    const int64_t id = id_at(t);
    if (static_cast<uint32_t>(id) >= limit) {
      return absl::DataLossError(
          absl::StrCat(path, ": token ", t, " has id ", id,
                       ", outside the tokenizer's vocabulary of ", vocab_size,
                       " (corrupt shard or another tokenizer)"));
    }
    if (flags[t] > 1) {
      return absl::DataLossError(absl::StrCat(path, ": token ", t,
                                              " has sentence flag ", flags[t],
                                              " (corrupt shard)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardHeader> DecodeShardHeader(const char* data, size_t size,
                                              const std::string& path) {
  if (size < kShardHeaderBytes || std::memcmp(data, kMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a shard file"));
  }
  const uint32_t version = GetU32(data + 8);
  if (version < 1 || version > kShardFormatVersion ||
      GetU32(data + 12) != kShardHeaderBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": shard format version ", version, ", this build reads 1 to ",
        kShardFormatVersion, "; re-run xlnet-data prepare"));
  }
  ShardHeader h;
  h.version = version;
  h.id_bytes = version >= 2 ? GetU32(data + 80) : 4;
  if (h.id_bytes != 2 && h.id_bytes != 4) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", h.id_bytes, " bytes per id (corrupt header)"));
  }
  h.num_tokens = GetU64(data + 16);
  h.num_docs = GetU64(data + 24);
  h.key = GetU64(data + 32);
  h.checksum = GetU64(data + 40);
  h.lines = GetU64(data + 48);
  h.invalid_utf8_lines = GetU64(data + 56);
  h.overlong_lines = GetU64(data + 64);
  h.blank_lines = GetU64(data + 72);
  if (version >= 2) h.skipped_records = GetU64(data + 88);
  if (h.num_tokens > size || h.num_docs > size ||
      GetShardLayout(h).total != size) {
    return absl::DataLossError(absl::StrCat(
        path, ": size ", size, " does not match its header (", h.num_tokens,
        " tokens, ", h.num_docs, " documents); truncated or corrupt"));
  }
  return h;
}

absl::StatusOr<std::vector<DocEntry>> DecodeDocTable(const char* data,
                                                     const ShardHeader& header,
                                                     const std::string& path) {
  const ShardLayout l = GetShardLayout(header);
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

absl::Status CheckShardMatchesManifest(const ShardHeader& header,
                                       const ManifestShard& shard,
                                       const std::string& dir) {
  if (header.num_tokens != shard.tokens || header.num_docs != shard.docs ||
      header.key != shard.key || header.checksum != shard.checksum) {
    return absl::DataLossError(absl::StrCat(
        dir, "/", shard.file, ": does not match ", dir, "/", kManifestName,
        " (tokens, documents, key or checksum differ); re-run xlnet-data "
        "prepare"));
  }
  return absl::OkStatus();
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
  Json json = {
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
        {"max_line_bytes", manifest.max_line_bytes},
        {"json_key", manifest.json_key}}},
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
        {"overlong_lines", t.overlong_lines},
        {"skipped_records", t.skipped_records}}},
  };
  if (manifest.num_tasks > 1) {
    json["part"] = {{"task", manifest.task}, {"num_tasks", manifest.num_tasks}};
  }
  if (manifest.split) {
    const ManifestSplit& sp = *manifest.split;
    Json split = {{"eval_fraction", sp.eval_fraction},
                  {"train_unigram", sp.train_unigram}};
    const char* names[2] = {"train", "eval"};
    for (int k = 0; k < 2; ++k) {
      Json tokens = Json::array(), docs = Json::array(), flags = Json::array();
      for (const auto& parts : sp.shards) {
        tokens.push_back(parts[k].tokens);
        docs.push_back(parts[k].docs);
        flags.push_back(parts[k].last_flag);
      }
      split[absl::StrCat(names[k], "_tokens")] = tokens;
      split[absl::StrCat(names[k], "_docs")] = docs;
      split[absl::StrCat(names[k], "_last_flags")] = flags;
    }
    if (sp.forced_shard >= 0) {
      split["forced_eval"] = {sp.forced_shard, sp.forced_doc};
    }
    json["split"] = split;
  }
  return WriteFileAtomic(dir + "/" + kManifestName, json.dump(2) + "\n");
}

namespace {

// obj[key] as a non-negative int64 (every signed count of a manifest is):
// nlohmann's get<int64_t>() of a float is a plain cast, undefined behaviour
// for 1e300 (found by fuzz/manifest_fuzzer.cc), so JsonInteger checks it.
// Throws std::invalid_argument naming the key.
int64_t JsonInt(const Json& obj, const char* key) {
  absl::StatusOr<int64_t> v = JsonInteger(obj.at(key), key, 0, INT64_MAX);
  if (!v.ok()) throw std::invalid_argument(std::string(v.status().message()));
  return *v;
}

// `v` as a non-negative integer; `key` names it in the error.
uint64_t UnsignedOf(const Json& v, const char* key) {
  if (!v.is_number_unsigned()) {
    throw std::invalid_argument(absl::StrCat(
        key, ": ", v.dump(), " is not a non-negative 64-bit integer"));
  }
  return v.get<uint64_t>();
}

// obj[key] as a non-negative integer.
uint64_t JsonUnsigned(const Json& obj, const char* key) {
  return UnsignedOf(obj.at(key), key);
}

// The "split" object of a manifest with `m.shards` already read; throws
// std::invalid_argument naming the field.
ManifestSplit ReadSplit(const Json& j, const ShardManifest& m) {
  ManifestSplit sp;
  sp.eval_fraction = j.at("eval_fraction").get<double>();
  if (!(sp.eval_fraction >= 0 && sp.eval_fraction <= 1)) {
    throw std::invalid_argument("split.eval_fraction: not in [0, 1]");
  }
  const size_t n = m.shards.size();
  sp.shards.resize(n);
  const char* names[2] = {"train", "eval"};
  for (int k = 0; k < 2; ++k) {
    const Json& tokens = j.at(absl::StrCat(names[k], "_tokens"));
    const Json& docs = j.at(absl::StrCat(names[k], "_docs"));
    const Json& flags = j.at(absl::StrCat(names[k], "_last_flags"));
    if (!tokens.is_array() || !docs.is_array() || !flags.is_array() ||
        tokens.size() != n || docs.size() != n || flags.size() != n) {
      throw std::invalid_argument(
          absl::StrCat("split.", names[k],
                       "_*: not arrays of one entry per shard (", n, ")"));
    }
    for (size_t s = 0; s < n; ++s) {
      ManifestSplit::Part& part = sp.shards[s][k];
      part.tokens = UnsignedOf(tokens[s], "tokens");
      part.docs = UnsignedOf(docs[s], "docs");
      const uint64_t flag = UnsignedOf(flags[s], "last_flags");
      if (flag > 1) throw std::invalid_argument("split: a flag is not 0 or 1");
      part.last_flag = static_cast<uint8_t>(flag);
    }
  }
  for (size_t s = 0; s < n; ++s) {
    if (sp.shards[s][0].tokens + sp.shards[s][1].tokens > m.shards[s].tokens ||
        sp.shards[s][0].docs + sp.shards[s][1].docs > m.shards[s].docs) {
      throw std::invalid_argument(
          absl::StrCat("split: shard ", m.shards[s].file,
                       " has more split tokens or documents than the shard"));
    }
  }
  if (j.contains("forced_eval")) {
    const Json& f = j.at("forced_eval");
    if (!f.is_array() || f.size() != 2) {
      throw std::invalid_argument("split.forced_eval: not [shard, document]");
    }
    sp.forced_shard = static_cast<int64_t>(UnsignedOf(f[0], "forced_eval"));
    sp.forced_doc = static_cast<int64_t>(UnsignedOf(f[1], "forced_eval"));
    if (static_cast<size_t>(sp.forced_shard) >= n ||
        static_cast<uint64_t>(sp.forced_doc) >=
            m.shards[sp.forced_shard].docs) {
      throw std::invalid_argument("split.forced_eval: no such document");
    }
  }
  const Json& unigram = j.at("train_unigram");
  if (!unigram.is_array() ||
      unigram.size() != static_cast<size_t>(m.vocab_size)) {
    throw std::invalid_argument(
        "split.train_unigram: not one count per vocabulary id");
  }
  sp.train_unigram.reserve(unigram.size());
  for (const Json& c : unigram) {
    sp.train_unigram.push_back(
        static_cast<int64_t>(UnsignedOf(c, "train_unigram")));
  }
  return sp;
}

}  // namespace

absl::StatusOr<ShardManifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  if (!PathExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": missing; run `xlnet-data prepare --out ", dir,
                     "` (or let an interrupted run finish)"));
  }
  XLNET_ASSIGN_OR_RETURN(const std::string text,
                         ReadFile(path, kMaxManifestBytes));
  // Our own file: damage (bad JSON, a repeated key) is data loss.
  absl::StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
  const Json m = std::move(*parsed);
  ShardManifest out;
  try {
    const uint64_t version = JsonUnsigned(m, "format_version");
    if (m.at("format").get<std::string>() != kFormatName || version < 1 ||
        version > kShardFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": format ", m.at("format").dump(), " version ",
          m.at("format_version").dump(), "; this build reads versions 1 to ",
          kShardFormatVersion));
    }
    const Json& tok = m.at("tokenizer");
    out.tokenizer_file = tok.at("file").get<std::string>();
    CheckPlainName(out.tokenizer_file, "tokenizer file");
    out.tokenizer_hash = tok.at("hash").get<std::string>();
    out.vocab_size = JsonInt(tok, "vocab_size");
    const Json& rules = m.at("text_rules");
    out.rules.uncased = rules.at("uncased").get<bool>();
    out.rules.keep_accents = rules.at("keep_accents").get<bool>();
    out.use_eod = rules.at("use_eod").get<bool>();
    out.max_line_bytes = JsonInt(rules, "max_line_bytes");
    // Version 1 manifests have no json_key (their inputs were plain text).
    out.json_key = rules.value("json_key", std::string("text"));
    out.shard_bytes = JsonInt(m, "shard_bytes");
    for (const Json& in : m.at("inputs")) {
      out.inputs.push_back(ManifestInput{in.at("path").get<std::string>(),
                                         JsonUnsigned(in, "bytes")});
    }
    for (const Json& s : m.at("shards")) {
      ManifestShard shard;
      shard.file = s.at("file").get<std::string>();
      CheckPlainName(shard.file, "shard file");
      shard.input = JsonUnsigned(s, "input");
      shard.byte_begin = JsonUnsigned(s, "byte_begin");
      shard.byte_end = JsonUnsigned(s, "byte_end");
      shard.first_line = JsonInt(s, "first_line");
      shard.tokens = JsonUnsigned(s, "tokens");
      shard.docs = JsonUnsigned(s, "docs");
      shard.key = ParseHexU64(s.at("key"));
      shard.checksum = ParseHexU64(s.at("checksum"));
      out.shards.push_back(std::move(shard));
    }
    const Json& t = m.at("totals");
    out.totals.files = JsonInt(t, "files");
    out.totals.empty_files = JsonInt(t, "empty_files");
    out.totals.lines = JsonInt(t, "lines");
    out.totals.tokens = JsonInt(t, "tokens");
    out.totals.docs = JsonInt(t, "docs");
    out.totals.invalid_utf8_lines = JsonInt(t, "invalid_utf8_lines");
    out.totals.overlong_lines = JsonInt(t, "overlong_lines");
    out.totals.skipped_records =
        t.contains("skipped_records") ? JsonInt(t, "skipped_records") : 0;
    if (m.contains("part")) {
      out.task = JsonInt(m.at("part"), "task");
      out.num_tasks = JsonInt(m.at("part"), "num_tasks");
      if (out.num_tasks < 2 || out.task < 0 || out.task >= out.num_tasks) {
        throw std::invalid_argument("part: task not in [0, num_tasks)");
      }
    }
    if (m.contains("split")) out.split = ReadSplit(m.at("split"), out);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": unexpected content: ", e.what()));
  }
  return out;
}

}  // namespace xlnet::data
