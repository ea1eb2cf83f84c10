#include "data_pipeline/shards.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"

namespace xlnet::data {
namespace {

using Json = nlohmann::json;

constexpr char kMagic[8] = {'X', 'L', 'N', 'S', 'H', 'A', 'R', 'D'};
constexpr size_t kHeaderBytes = 128;
constexpr char kManifestName[] = "manifest.json";
constexpr char kTokenizerName[] = "spiece.model";

// The fixed header of a shard file.
struct ShardHeader {
  uint64_t num_tokens = 0;
  uint64_t num_docs = 0;
  uint64_t key = 0;
  uint64_t checksum = 0;
  uint64_t lines = 0;
  uint64_t invalid_utf8_lines = 0;
  uint64_t overlong_lines = 0;
  uint64_t blank_lines = 0;
};

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

// Byte layout of a shard's body for given counts.
struct Layout {
  size_t ids = kHeaderBytes;
  size_t flags = 0;
  size_t docs = 0;
  size_t total = 0;
};
Layout ShardLayout(uint64_t num_tokens, uint64_t num_docs) {
  Layout l;
  l.flags = l.ids + 4 * num_tokens;
  l.docs = Align8(l.flags + num_tokens);
  l.total = l.docs + 16 * num_docs;
  return l;
}

void EncodeHeader(const ShardHeader& h, char* out) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, 8);
  PutU32(out + 8, kShardFormatVersion);
  PutU32(out + 12, kHeaderBytes);
  PutU64(out + 16, h.num_tokens);
  PutU64(out + 24, h.num_docs);
  PutU64(out + 32, h.key);
  PutU64(out + 40, h.checksum);
  PutU64(out + 48, h.lines);
  PutU64(out + 56, h.invalid_utf8_lines);
  PutU64(out + 64, h.overlong_lines);
  PutU64(out + 72, h.blank_lines);
}

// Parses and checks a header against the file size.
absl::StatusOr<ShardHeader> DecodeHeader(const char* data, size_t size,
                                         const std::string& path) {
  if (size < kHeaderBytes || std::memcmp(data, kMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a shard file"));
  }
  const uint32_t version = GetU32(data + 8);
  if (version != kShardFormatVersion || GetU32(data + 12) != kHeaderBytes) {
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
      ShardLayout(h.num_tokens, h.num_docs).total != size) {
    return absl::DataLossError(absl::StrCat(
        path, ": size ", size, " does not match its header (", h.num_tokens,
        " tokens, ", h.num_docs, " documents); truncated or corrupt"));
  }
  return h;
}

// A contiguous part of an input file that becomes one shard.
struct Chunk {
  size_t file = 0;
  size_t begin = 0;
  size_t end = 0;
  int64_t first_line = 1;
  bool last_in_file = false;
};

bool IsAsciiBlank(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\v' && *p != '\f') {
      return false;
    }
  }
  return true;
}

// Cuts a file into chunks of about `target` bytes ending after a blank line.
void PlanFile(size_t file_index, const char* data, size_t size, size_t target,
              std::vector<Chunk>* chunks) {
  size_t pos = 0;
  int64_t line = 1;
  while (pos < size) {
    size_t end = size;
    if (size - pos > target) {
      // Start of the first line at or after pos + target.
      const char* p = static_cast<const char*>(
          std::memchr(data + pos + target - 1, '\n', size - (pos + target - 1)));
      size_t cursor = p ? static_cast<size_t>(p - data) + 1 : size;
      while (cursor < size) {
        const char* nl = static_cast<const char*>(
            std::memchr(data + cursor, '\n', size - cursor));
        const size_t line_end = nl ? static_cast<size_t>(nl - data) : size;
        if (IsAsciiBlank(data + cursor, data + line_end)) {
          cursor = nl ? line_end + 1 : size;
          break;
        }
        cursor = nl ? line_end + 1 : size;
      }
      end = cursor;
    }
    chunks->push_back(Chunk{file_index, pos, end, line, end == size});
    line += std::count(data + pos, data + end, '\n');
    pos = end;
  }
}

// The tokens of one chunk.
struct ShardContent {
  std::vector<int32_t> ids;
  std::vector<uint8_t> flags;
  std::vector<DocEntry> docs;
  ShardHeader header;
};

std::string SerializeShard(ShardContent& c) {
  c.header.num_tokens = c.ids.size();
  c.header.num_docs = c.docs.size();
  const Layout l = ShardLayout(c.ids.size(), c.docs.size());
  std::string bytes(l.total, '\0');
  if (!c.ids.empty()) {
    std::memcpy(&bytes[l.ids], c.ids.data(), 4 * c.ids.size());
    std::memcpy(&bytes[l.flags], c.flags.data(), c.flags.size());
  }
  for (size_t d = 0; d < c.docs.size(); ++d) {
    PutU64(&bytes[l.docs + 8 * d], static_cast<uint64_t>(c.docs[d].begin));
    PutU64(&bytes[l.docs + 8 * (c.docs.size() + d)], c.docs[d].hash);
  }
  c.header.checksum =
      Fnv1a64(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  EncodeHeader(c.header, bytes.data());
  return bytes;
}

std::string ShardName(size_t index) {
  return absl::StrFormat("shard-%05d.bin", index);
}

// Whether `s` is a blank line in Python's sense (only whitespace).
bool IsBlankLine(std::string_view s, const TextRules& rules) {
  if (IsAsciiBlank(s.data(), s.data() + s.size())) return true;
  // Non-ASCII whitespace (U+00A0, U+3000, ...): preprocessing removes it.
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return PreprocessText(s, TextRules{false, true}, false).text.empty();
    }
  }
  return false;
}

// Tokenizes one chunk. Errors (strict mode) name the file and line.
absl::Status TokenizeChunk(const Chunk& chunk, const char* data,
                           const std::string& path, const Tokenizer& tok,
                           const PrepareOptions& options, ShardContent* out) {
  ShardContent& c = *out;
  uint8_t sent_flag = 0;
  uint8_t last_flag = 0;
  int64_t doc_begin = 0;
  int64_t line_no = chunk.first_line;
  std::vector<int32_t> ids;
  auto end_document = [&]() {
    const int64_t n = static_cast<int64_t>(c.ids.size());
    if (n == doc_begin) return;
    if (options.use_eod) {
      c.ids.push_back(kEodId);
      c.flags.push_back(last_flag);
      sent_flag = last_flag ^ 1;
    }
    const int64_t end = static_cast<int64_t>(c.ids.size());
    c.docs.push_back(DocEntry{
        doc_begin, end,
        Fnv1a64(c.ids.data() + doc_begin, 4 * (end - doc_begin))});
    doc_begin = end;
  };
  size_t pos = chunk.begin;
  while (pos < chunk.end) {
    const char* nl = static_cast<const char*>(
        std::memchr(data + pos, '\n', chunk.end - pos));
    const size_t line_end = nl ? static_cast<size_t>(nl - data) : chunk.end;
    const std::string_view line(data + pos, line_end - pos);
    pos = nl ? line_end + 1 : chunk.end;
    const int64_t this_line = line_no++;
    ++c.header.lines;
    if (static_cast<int64_t>(line.size()) > options.max_line_bytes) {
      if (options.strict) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", this_line, ": line of ", line.size(),
            " bytes exceeds the limit of ", options.max_line_bytes, " bytes"));
      }
      ++c.header.overlong_lines;
      continue;
    }
    if (!IsValidUtf8(line)) {
      if (options.strict) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", this_line, ": invalid UTF-8"));
      }
      ++c.header.invalid_utf8_lines;
      continue;
    }
    if (IsBlankLine(line, options.rules)) {
      ++c.header.blank_lines;
      end_document();
      continue;
    }
    XLNET_RETURN_IF_ERROR(Annotate(tok.EncodeIds(line, &ids), path, ":",
                                   this_line));
    if (ids.empty()) continue;
    c.ids.insert(c.ids.end(), ids.begin(), ids.end());
    c.flags.insert(c.flags.end(), ids.size(), sent_flag);
    last_flag = sent_flag;
    sent_flag ^= 1;
  }
  if (chunk.last_in_file) end_document();
  return absl::OkStatus();
}

// Reads an existing shard; returns its header if it was made from `key`
// and is intact.
std::optional<ShardHeader> FinishedShard(const std::string& path,
                                         uint64_t key) {
  if (!PathExists(path)) return std::nullopt;
  auto file = MappedFile::Open(path);
  if (!file.ok()) return std::nullopt;
  auto header = DecodeHeader((*file)->data(), (*file)->size(), path);
  if (!header.ok() || header->key != key) return std::nullopt;
  const uint64_t checksum = Fnv1a64((*file)->data() + kHeaderBytes,
                                    (*file)->size() - kHeaderBytes);
  if (checksum != header->checksum) return std::nullopt;
  return *header;
}

uint64_t MixKey(uint64_t h, const std::string& s) {
  return Fnv1a64(s.data(), s.size(), h ^ (s.size() * 0x9E3779B97F4A7C15ULL));
}

}  // namespace

std::string PrepareReport::Summary() const {
  return absl::StrFormat(
      "%d files (%d empty), %d shards (%d already done), %s lines, %s tokens, "
      "%s documents, %d invalid UTF-8 lines, %d over-long lines, %.1f s, "
      "%.0f tokens/s",
      files, empty_files, shards, shards_skipped, WithCommas(lines),
      WithCommas(tokens), WithCommas(docs), invalid_utf8_lines, overlong_lines,
      seconds, seconds > 0 ? tokens / seconds : 0.0);
}

absl::StatusOr<std::vector<std::string>> ExpandInputs(
    const std::vector<std::string>& patterns) {
  std::vector<std::string> paths;
  for (const std::string& pattern : patterns) {
    if (pattern.find_first_of("*?[") == std::string::npos) {
      if (!PathExists(pattern)) {
        return absl::NotFoundError(absl::StrCat(pattern, ": no such file"));
      }
      if (IsDirectory(pattern)) {
        return absl::InvalidArgumentError(absl::StrCat(
            pattern, ": is a directory (give files or a glob like DIR/*.txt)"));
      }
      paths.push_back(pattern);
      continue;
    }
    glob_t g;
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      return absl::NotFoundError(
          absl::StrCat(pattern, ": the pattern matches no file"));
    }
    if (rc != 0) {
      globfree(&g);
      return absl::InvalidArgumentError(
          absl::StrCat(pattern, ": cannot expand the pattern"));
    }
    std::vector<std::string> matches;
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (!IsDirectory(g.gl_pathv[i])) matches.push_back(g.gl_pathv[i]);
    }
    globfree(&g);
    std::sort(matches.begin(), matches.end());
    paths.insert(paths.end(), matches.begin(), matches.end());
  }
  if (paths.empty()) return absl::InvalidArgumentError("no input files");
  return paths;
}

absl::StatusOr<PrepareReport> PrepareShards(const PrepareOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers must be >= 1 (got ", options.workers, ")"));
  }
  if (options.shard_bytes < 1) {
    return absl::InvalidArgumentError("shard_bytes must be positive");
  }
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("no output directory (--out)");
  }
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                         ExpandInputs(options.inputs));
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                         Tokenizer::Load(options.tokenizer_path, options.rules));

  // Map the inputs and plan the chunks.
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<Chunk> chunks;
  PrepareReport report;
  report.files = static_cast<int64_t>(paths.size());
  Json inputs = Json::array();
  std::optional<size_t> first_empty_file;
  for (size_t f = 0; f < paths.size(); ++f) {
    XLNET_ASSIGN_OR_RETURN(auto file, MappedFile::Open(paths[f]));
    if (std::all_of(file->data(), file->data() + file->size(), [](char c) {
          return c == '\n' || c == ' ' || c == '\t' || c == '\r';
        })) {
      // With --strict this fails, after earlier files' errors (below).
      if (!first_empty_file) first_empty_file = f;
      ++report.empty_files;
    }
    PlanFile(f, file->data(), file->size(),
             static_cast<size_t>(options.shard_bytes), &chunks);
    inputs.push_back(Json{{"path", paths[f]},
                          {"bytes", file->size()}});
    files.push_back(std::move(file));
  }

  // Start clean: no manifest until every shard is finished.
  XLNET_RETURN_IF_ERROR(MakeDirs(options.out_dir));
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(options.out_dir).status());
  XLNET_RETURN_IF_ERROR(RemoveAll(options.out_dir + "/" + kManifestName));
  const std::string tokenizer_out = options.out_dir + "/" + kTokenizerName;
  {
    auto existing = ReadFile(tokenizer_out);
    if (!existing.ok() || *existing != tok->model_bytes()) {
      XLNET_RETURN_IF_ERROR(WriteFileAtomic(tokenizer_out, tok->model_bytes()));
    }
  }

  uint64_t base_key = 0x5851A2D5C0FFEEULL;
  base_key = MixKey(base_key, tok->hash());
  base_key = MixKey(base_key,
                    absl::StrCat("v", kShardFormatVersion, " uncased=",
                                 options.rules.uncased, " keep_accents=",
                                 options.rules.keep_accents, " use_eod=",
                                 options.use_eod, " max_line=",
                                 options.max_line_bytes));

  // Tokenize on a pool of workers; results are placed by chunk index.
  std::vector<ShardHeader> headers(chunks.size());
  std::vector<uint8_t> skipped(chunks.size(), 0);
  std::vector<absl::Status> errors(chunks.size());
  std::atomic<size_t> next_chunk{0};
  std::atomic<bool> failed{false};
  std::atomic<int64_t> tokens_done{0};
  std::atomic<int64_t> chunks_done{0};
  std::vector<std::atomic<int64_t>> chunks_left(files.size());
  for (auto& c : chunks_left) c = 0;
  for (const Chunk& c : chunks) ++chunks_left[c.file];
  std::atomic<int64_t> files_done{0};
  for (auto& c : chunks_left) {
    if (c == 0) ++files_done;
  }
  std::mutex mu;
  std::condition_variable cv;
  int running = options.workers;

  auto worker = [&]() {
    while (!failed) {
      const size_t i = next_chunk++;
      if (i >= chunks.size()) break;
      const Chunk& chunk = chunks[i];
      const char* data = files[chunk.file]->data();
      const uint64_t key =
          Fnv1a64(data + chunk.begin, chunk.end - chunk.begin, base_key);
      const std::string out_path = options.out_dir + "/" + ShardName(i);
      absl::Status status;
      auto done = FinishedShard(out_path, key);
      // In strict mode a shard that skipped bad lines is redone (and fails).
      if (done && options.strict &&
          (done->invalid_utf8_lines > 0 || done->overlong_lines > 0)) {
        done.reset();
      }
      if (done) {
        headers[i] = *done;
        skipped[i] = 1;
      } else {
        ShardContent content;
        content.header.key = key;
        status = TokenizeChunk(chunk, data, paths[chunk.file], *tok, options,
                               &content);
        if (status.ok()) {
          const std::string bytes = SerializeShard(content);
          status = WriteFileAtomic(out_path, bytes);
          headers[i] = content.header;
        }
      }
      if (!status.ok()) {
        errors[i] = status;
        failed = true;
        break;
      }
      tokens_done += static_cast<int64_t>(headers[i].num_tokens);
      ++chunks_done;
      if (--chunks_left[chunk.file] == 0) ++files_done;
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < options.workers; ++w) threads.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    auto last_report = start;
    while (running > 0) {
      cv.wait_for(lock, std::chrono::seconds(1));
      const auto now = std::chrono::steady_clock::now();
      if (running > 0 && options.progress &&
          now - last_report >= std::chrono::seconds(1)) {
        last_report = now;
        const double secs = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
        XLOG(INFO) << "prepare: files " << files_done << "/" << files.size()
                   << ", shards " << chunks_done << "/" << chunks.size()
                   << ", " << WithCommas(tokens_done) << " tokens, "
                   << static_cast<int64_t>(tokens_done / std::max(secs, 1e-9))
                   << " tokens/s";
      }
    }
  }
  for (auto& t : threads) t.join();
  // Report the first problem in input order.
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (options.strict && first_empty_file &&
        *first_empty_file < chunks[i].file) {
      break;
    }
    if (!errors[i].ok()) return errors[i];
  }
  if (options.strict && first_empty_file) {
    return absl::InvalidArgumentError(
        absl::StrCat(paths[*first_empty_file], ": empty file (no text)"));
  }
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }

  // The manifest, in chunk order (independent of the worker count).
  Json shards = Json::array();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ShardHeader& h = headers[i];
    report.shards_skipped += skipped[i];
    report.lines += static_cast<int64_t>(h.lines);
    report.invalid_utf8_lines += static_cast<int64_t>(h.invalid_utf8_lines);
    report.overlong_lines += static_cast<int64_t>(h.overlong_lines);
    report.tokens += static_cast<int64_t>(h.num_tokens);
    report.docs += static_cast<int64_t>(h.num_docs);
    shards.push_back(Json{{"file", ShardName(i)},
                          {"input", chunks[i].file},
                          {"byte_begin", chunks[i].begin},
                          {"byte_end", chunks[i].end},
                          {"first_line", chunks[i].first_line},
                          {"tokens", h.num_tokens},
                          {"docs", h.num_docs},
                          {"key", HexU64(h.key)},
                          {"checksum", HexU64(h.checksum)}});
  }
  report.shards = static_cast<int64_t>(chunks.size());
  // Remove shards of an earlier, longer plan.
  for (size_t i = chunks.size();; ++i) {
    const std::string stale = options.out_dir + "/" + ShardName(i);
    if (!PathExists(stale)) break;
    XLNET_RETURN_IF_ERROR(RemoveAll(stale));
  }
  Json manifest = {
      {"format", "xlnet-data-shards"},
      {"format_version", kShardFormatVersion},
      {"tokenizer",
       {{"file", kTokenizerName},
        {"hash", tok->hash()},
        {"vocab_size", tok->vocab_size()}}},
      {"text_rules",
       {{"uncased", options.rules.uncased},
        {"keep_accents", options.rules.keep_accents},
        {"use_eod", options.use_eod},
        {"max_line_bytes", options.max_line_bytes}}},
      {"shard_bytes", options.shard_bytes},
      {"inputs", inputs},
      {"shards", shards},
      {"totals",
       {{"files", report.files},
        {"empty_files", report.empty_files},
        {"lines", report.lines},
        {"tokens", report.tokens},
        {"docs", report.docs},
        {"invalid_utf8_lines", report.invalid_utf8_lines},
        {"overlong_lines", report.overlong_lines}}},
  };
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(
      options.out_dir + "/" + kManifestName, manifest.dump(2) + "\n"));
  report.seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  return report;
}

// ---------------------------------------------------------------------------
// Reading.

struct ShardSet::Mapping {
  std::unique_ptr<MappedFile> file;
};

ShardSet::~ShardSet() = default;

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Open(const std::string& dir,
                                                         bool verify) {
  const std::string manifest_path = dir + "/" + kManifestName;
  if (!PathExists(manifest_path)) {
    return absl::NotFoundError(absl::StrCat(
        manifest_path, ": missing; run `xlnet-data prepare --out ", dir,
        "` (or let an interrupted run finish)"));
  }
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(manifest_path));
  Json m;
  try {
    m = Json::parse(text);
  } catch (const Json::exception& e) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": invalid JSON: ", e.what()));
  }
  auto set = std::unique_ptr<ShardSet>(new ShardSet());
  set->dir_ = dir;
  try {
    if (m.at("format").get<std::string>() != "xlnet-data-shards" ||
        m.at("format_version").get<uint32_t>() != kShardFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          manifest_path, ": format ", m.at("format").dump(), " version ",
          m.at("format_version").dump(), "; this build reads version ",
          kShardFormatVersion));
    }
    const Json& tok = m.at("tokenizer");
    set->tokenizer_file_ = dir + "/" + tok.at("file").get<std::string>();
    set->tokenizer_hash_ = tok.at("hash").get<std::string>();
    set->vocab_size_ = tok.at("vocab_size").get<int64_t>();
    const Json& rules = m.at("text_rules");
    set->rules_.uncased = rules.at("uncased").get<bool>();
    set->rules_.keep_accents = rules.at("keep_accents").get<bool>();
    set->use_eod_ = rules.at("use_eod").get<bool>();
    for (const Json& s : m.at("shards")) {
      const std::string path = dir + "/" + s.at("file").get<std::string>();
      XLNET_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
      XLNET_ASSIGN_OR_RETURN(ShardHeader h,
                             DecodeHeader(file->data(), file->size(), path));
      if (h.num_tokens != s.at("tokens").get<uint64_t>() ||
          HexU64(h.checksum) != s.at("checksum").get<std::string>()) {
        return absl::DataLossError(absl::StrCat(
            path, ": does not match ", manifest_path,
            " (tokens or checksum differ); re-run xlnet-data prepare"));
      }
      if (verify) {
        const uint64_t sum =
            Fnv1a64(file->data() + kHeaderBytes, file->size() - kHeaderBytes);
        if (sum != h.checksum) {
          return absl::DataLossError(
              absl::StrCat(path, ": checksum mismatch (corrupt shard)"));
        }
      }
      const Layout l = ShardLayout(h.num_tokens, h.num_docs);
      ShardView view;
      view.path = path;
      view.num_tokens = static_cast<int64_t>(h.num_tokens);
      view.ids = reinterpret_cast<const int32_t*>(file->data() + l.ids);
      view.flags = reinterpret_cast<const uint8_t*>(file->data() + l.flags);
      for (uint64_t d = 0; d < h.num_docs; ++d) {
        DocEntry doc;
        doc.begin = static_cast<int64_t>(GetU64(file->data() + l.docs + 8 * d));
        doc.hash = GetU64(file->data() + l.docs + 8 * (h.num_docs + d));
        view.docs.push_back(doc);
      }
      for (size_t d = 0; d < view.docs.size(); ++d) {
        view.docs[d].end = d + 1 < view.docs.size() ? view.docs[d + 1].begin
                                                    : view.num_tokens;
        if (view.docs[d].begin < (d ? view.docs[d - 1].begin : 0) ||
            view.docs[d].end < view.docs[d].begin) {
          return absl::DataLossError(
              absl::StrCat(path, ": corrupt document table"));
        }
      }
      if (!view.docs.empty() && view.docs.front().begin != 0) {
        return absl::DataLossError(
            absl::StrCat(path, ": corrupt document table"));
      }
      if (verify) {
        for (int64_t t = 0; t < view.num_tokens; ++t) {
          if (view.ids[t] < 0 || view.ids[t] >= set->vocab_size_ ||
              view.flags[t] > 1) {
            return absl::DataLossError(absl::StrCat(
                path, ": token ", t, " has id ", view.ids[t],
                " outside the vocabulary of ", set->vocab_size_));
          }
        }
      }
      set->num_tokens_ += view.num_tokens;
      set->shards_.push_back(std::move(view));
      set->mappings_.push_back(std::make_unique<Mapping>(Mapping{std::move(file)}));
    }
  } catch (const Json::exception& e) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": unexpected content: ", e.what()));
  }
  return set;
}

absl::StatusOr<Corpus> Corpus::Create(const ShardSet& shards, Split split,
                                      double eval_fraction) {
  // Pick held-out documents by content hash.
  struct DocRef {
    size_t shard;
    size_t doc;
    uint64_t hash;
  };
  std::vector<DocRef> all;
  for (size_t s = 0; s < shards.shards().size(); ++s) {
    const auto& docs = shards.shards()[s].docs;
    for (size_t d = 0; d < docs.size(); ++d) {
      all.push_back(DocRef{s, d, docs[d].hash});
    }
  }
  auto is_eval = [&](uint64_t hash) {
    return static_cast<double>(hash >> 11) * (1.0 / 9007199254740992.0) <
           eval_fraction;
  };
  std::vector<uint8_t> eval(all.size(), 0);
  bool any_eval = false;
  for (size_t i = 0; i < all.size(); ++i) {
    eval[i] = is_eval(all[i].hash);
    any_eval |= eval[i] != 0;
  }
  if (eval_fraction > 0 && !any_eval && all.size() >= 2) {
    size_t best = 0;
    for (size_t i = 1; i < all.size(); ++i) {
      if (all[i].hash < all[best].hash) best = i;
    }
    eval[best] = 1;
  }
  Corpus corpus;
  const bool want_eval = split == Split::kEval;
  for (size_t i = 0; i < all.size(); ++i) {
    if ((eval[i] != 0) != want_eval) continue;
    const ShardView& view = shards.shards()[all[i].shard];
    const DocEntry& doc = view.docs[all[i].doc];
    if (doc.end == doc.begin) continue;
    ++corpus.num_docs_;
    // Extend the previous segment when this document follows it directly.
    if (!corpus.segments_.empty()) {
      Segment& last = corpus.segments_.back();
      if (last.ids + last.length == view.ids + doc.begin) {
        last.length += doc.end - doc.begin;
        corpus.size_ += doc.end - doc.begin;
        continue;
      }
    }
    Segment seg;
    seg.start = corpus.size_;
    seg.ids = view.ids + doc.begin;
    seg.flags = view.flags + doc.begin;
    seg.length = doc.end - doc.begin;
    corpus.segments_.push_back(seg);
    corpus.size_ += seg.length;
  }
  // Keep the sentence flags alternating across segments.
  for (size_t s = 1; s < corpus.segments_.size(); ++s) {
    const Segment& prev = corpus.segments_[s - 1];
    Segment& cur = corpus.segments_[s];
    const uint8_t prev_last = prev.flags[prev.length - 1] ^ prev.invert;
    cur.invert = (cur.flags[0] == prev_last) ? 1 : 0;
  }
  if (corpus.size_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        shards.dir(), ": the ", want_eval ? "evaluation" : "training",
        " split holds no tokens (", all.size(), " documents, eval_fraction ",
        eval_fraction, ")"));
  }
  return corpus;
}

size_t Corpus::FindSegment(int64_t pos) const {
  auto it = std::upper_bound(
      segments_.begin(), segments_.end(), pos,
      [](int64_t p, const Segment& s) { return p < s.start; });
  return static_cast<size_t>(it - segments_.begin()) - 1;
}

void Corpus::CopyIds(int64_t begin, int64_t n, int32_t* out) const {
  TORCH_CHECK(begin >= 0 && n >= 0 && begin + n <= size_,
              "Corpus::CopyIds out of range");
  size_t s = FindSegment(begin);
  while (n > 0) {
    const Segment& seg = segments_[s];
    const int64_t off = begin - seg.start;
    const int64_t take = std::min(n, seg.length - off);
    std::memcpy(out, seg.ids + off, 4 * take);
    out += take, begin += take, n -= take, ++s;
  }
}

void Corpus::CopyFlags(int64_t begin, int64_t n, uint8_t* out) const {
  TORCH_CHECK(begin >= 0 && n >= 0 && begin + n <= size_,
              "Corpus::CopyFlags out of range");
  size_t s = FindSegment(begin);
  while (n > 0) {
    const Segment& seg = segments_[s];
    const int64_t off = begin - seg.start;
    const int64_t take = std::min(n, seg.length - off);
    for (int64_t k = 0; k < take; ++k) out[k] = seg.flags[off + k] ^ seg.invert;
    out += take, begin += take, n -= take, ++s;
  }
}

int32_t Corpus::Id(int64_t pos) const {
  int32_t id;
  CopyIds(pos, 1, &id);
  return id;
}

}  // namespace xlnet::data
