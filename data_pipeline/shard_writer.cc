#include "data_pipeline/shard_writer.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/text.h"

namespace xlnet::data {
namespace {

// A contiguous part of an input file that becomes one shard.
struct Chunk {
  size_t file = 0;
  size_t begin = 0;
  size_t end = 0;
  int64_t first_line = 1;
  bool last_in_file = false;
};

// Whether [begin, end) holds only ASCII blanks (space, \t, \r, \v, \f):
// where the plan may cut. Deliberately narrower than a blank line in
// Python's sense (text.h), so the plan depends on bytes alone.
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
      const char* p = static_cast<const char*>(std::memchr(
          data + pos + target - 1, '\n', size - (pos + target - 1)));
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
    c.docs.push_back(
        DocEntry{doc_begin, end,
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
    if (IsPythonBlank(line)) {
      ++c.header.blank_lines;
      end_document();
      continue;
    }
    XLNET_RETURN_IF_ERROR(
        Annotate(tok.EncodeIds(line, &ids), path, ":", this_line));
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
  auto header = DecodeShardHeader((*file)->data(), (*file)->size(), path);
  if (!header.ok() || header->key != key) return std::nullopt;
  if (ShardBodyChecksum((*file)->data(), (*file)->size()) != header->checksum) {
    return std::nullopt;
  }
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
  XLNET_ASSIGN_OR_RETURN(
      std::unique_ptr<Tokenizer> tok,
      Tokenizer::Load(options.tokenizer_path, options.rules));

  // Map the inputs and plan the chunks.
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<Chunk> chunks;
  PrepareReport report;
  report.files = static_cast<int64_t>(paths.size());
  ShardManifest manifest;
  manifest.tokenizer_file = kShardTokenizerName;
  manifest.rules = options.rules;
  manifest.use_eod = options.use_eod;
  manifest.max_line_bytes = options.max_line_bytes;
  manifest.shard_bytes = options.shard_bytes;
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
    manifest.inputs.push_back(ManifestInput{paths[f], file->size()});
    files.push_back(std::move(file));
  }

  // Start clean: no manifest until every shard is finished.
  XLNET_RETURN_IF_ERROR(MakeDirs(options.out_dir));
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(options.out_dir).status());
  XLNET_RETURN_IF_ERROR(RemoveAll(options.out_dir + "/" + kManifestName));
  const std::string tokenizer_out = options.out_dir + "/" + kShardTokenizerName;
  {
    auto existing = ReadFile(tokenizer_out);
    if (!existing.ok() || *existing != tok->model_bytes()) {
      XLNET_RETURN_IF_ERROR(WriteFileAtomic(tokenizer_out, tok->model_bytes()));
    }
  }

  uint64_t base_key = 0x5851A2D5C0FFEEULL;
  base_key = MixKey(base_key, tok->hash());
  base_key = MixKey(
      base_key,
      absl::StrCat("v", kShardFormatVersion, " uncased=", options.rules.uncased,
                   " keep_accents=", options.rules.keep_accents, " use_eod=",
                   options.use_eod, " max_line=", options.max_line_bytes));

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
      const std::string out_path = options.out_dir + "/" + ShardFileName(i);
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
          const std::string bytes = SerializeShard(&content);
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
                   << ", shards " << chunks_done << "/" << chunks.size() << ", "
                   << WithCommas(tokens_done) << " tokens, "
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
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ShardHeader& h = headers[i];
    report.shards_skipped += skipped[i];
    report.lines += static_cast<int64_t>(h.lines);
    report.invalid_utf8_lines += static_cast<int64_t>(h.invalid_utf8_lines);
    report.overlong_lines += static_cast<int64_t>(h.overlong_lines);
    report.tokens += static_cast<int64_t>(h.num_tokens);
    report.docs += static_cast<int64_t>(h.num_docs);
    manifest.shards.push_back(ManifestShard{
        ShardFileName(i), chunks[i].file, chunks[i].begin, chunks[i].end,
        chunks[i].first_line, h.num_tokens, h.num_docs, h.key, h.checksum});
  }
  report.shards = static_cast<int64_t>(chunks.size());
  // Remove shards of an earlier, longer plan.
  for (size_t i = chunks.size();; ++i) {
    const std::string stale = options.out_dir + "/" + ShardFileName(i);
    if (!PathExists(stale)) break;
    XLNET_RETURN_IF_ERROR(RemoveAll(stale));
  }
  manifest.tokenizer_hash = tok->hash();
  manifest.vocab_size = tok->vocab_size();
  manifest.totals = ManifestTotals{
      report.files,         report.empty_files, report.lines,
      report.tokens,        report.docs,        report.invalid_utf8_lines,
      report.overlong_lines};
  XLNET_RETURN_IF_ERROR(WriteManifest(options.out_dir, manifest));
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace xlnet::data
