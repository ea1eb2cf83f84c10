#include "data_pipeline/shard_writer.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/mapped_file.h"
#include "common/progress.h"
#include "common/status.h"
#include "common/strings.h"
#include "data_pipeline/input_reader.h"
#include "data_pipeline/sentence_splitter.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/text.h"

namespace xlnet::data {
namespace {

// A document with no blank line is cut after this many times shard_bytes,
// so a chunk (and a worker's memory) stays bounded.
constexpr int64_t kMaxChunkFactor = 4;
// Plain-text lines examined per file for the one-document-per-line warning.
constexpr int64_t kSampledLines = 1000;

// Whether `line` holds only ASCII blanks (space, \t, \r, \v, \f): where the
// plan may cut. Deliberately narrower than a blank line in Python's sense
// (text.h), so the plan depends on bytes alone.
bool IsAsciiBlank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\v' && c != '\f') {
      return false;
    }
  }
  return true;
}

// One line of a chunk: its text in Chunk::text, or an over-long line that
// was read past.
struct ChunkLine {
  uint64_t begin = 0;
  uint64_t size = 0;
  bool overlong = false;
};

// A run of lines of one input that becomes one shard.
struct Chunk {
  size_t index = 0;    // the shard's number in this run
  size_t file = 0;     // index in the input list
  uint64_t begin = 0;  // byte range in the (decompressed) file
  uint64_t end = 0;
  int64_t first_line = 1;
  // Its last document ends with the chunk (end of file, or a cut of an
  // over-long document).
  bool ends_document = false;
  bool forced_cut = false;
  uint64_t key = 0;
  std::string text;
  std::vector<ChunkLine> lines;
};

// What the reader learns about one input file.
struct FileStats {
  int64_t lines = 0;
  int64_t blank_lines = 0;
  bool any_text = false;
  // Sentences (by the splitter) in the first kSampledLines non-blank lines.
  int64_t sampled_lines = 0;
  int64_t sampled_sentences = 0;
};

// Where a worker adds its progress as it tokenizes: input bytes and tokens.
struct ShardProgress {
  std::atomic<int64_t>* bytes = nullptr;
  std::atomic<int64_t>* tokens = nullptr;
};

// Tokenizes one chunk. Errors (strict mode) name the file and line.
absl::Status TokenizeChunk(const Chunk& chunk, const std::string& path,
                           TextFormat format, const Tokenizer& tok,
                           const PrepareOptions& options,
                           const ShardProgress& progress, ShardContent* out) {
  ShardContent& c = *out;
  // Progress every 256 lines, so a large shard shows before it is done; the
  // last report tops the bytes up to the chunk's exact size.
  int64_t line_bytes = 0, reported_bytes = 0, reported_tokens = 0;
  auto report = [&](int64_t bytes) {
    if (progress.bytes == nullptr) return;
    *progress.bytes += bytes - reported_bytes;
    reported_bytes = bytes;
    const int64_t tokens = static_cast<int64_t>(c.ids.size());
    *progress.tokens += tokens - reported_tokens;
    reported_tokens = tokens;
  };
  uint8_t sent_flag = 0;
  uint8_t last_flag = 0;
  int64_t doc_begin = 0;
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
  // Appends one sentence; the flag flips per sentence (per line of text).
  auto add_sentence = [&](std::string_view sentence,
                          int64_t line_no) -> absl::Status {
    XLNET_RETURN_IF_ERROR(
        Annotate(tok.EncodeIds(sentence, &ids), path, ":", line_no));
    if (ids.empty()) return absl::OkStatus();
    c.ids.insert(c.ids.end(), ids.begin(), ids.end());
    c.flags.insert(c.flags.end(), ids.size(), sent_flag);
    last_flag = sent_flag;
    sent_flag ^= 1;
    return absl::OkStatus();
  };
  std::string record_text;
  std::vector<std::string_view> sentences;
  for (size_t k = 0; k < chunk.lines.size(); ++k) {
    const ChunkLine& cl = chunk.lines[k];
    const int64_t line_no = chunk.first_line + static_cast<int64_t>(k);
    if (k > 0 && k % 256 == 0) report(line_bytes);
    line_bytes += static_cast<int64_t>(cl.size) + 1;
    ++c.header.lines;
    if (cl.overlong) {
      if (options.strict) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_no, ": line of ", cl.size,
            " bytes exceeds the limit of ", options.max_line_bytes, " bytes"));
      }
      ++c.header.overlong_lines;
      continue;
    }
    const std::string_view line(chunk.text.data() + cl.begin, cl.size);
    if (!IsValidUtf8(line)) {
      if (options.strict) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": invalid UTF-8"));
      }
      ++c.header.invalid_utf8_lines;
      continue;
    }
    if (IsPythonBlank(line)) {
      ++c.header.blank_lines;
      if (format == TextFormat::kPlain) end_document();
      continue;
    }
    if (format == TextFormat::kPlain) {
      XLNET_RETURN_IF_ERROR(add_sentence(line, line_no));
      continue;
    }
    // JSON Lines: one document per record, its text split into sentences.
    const absl::Status parsed =
        RecordText(line, options.json_key, &record_text);
    if (!parsed.ok()) {
      if (options.strict) return Annotate(parsed, path, ":", line_no);
      ++c.header.skipped_records;
      continue;
    }
    sentences.clear();
    SplitSentences(record_text, &sentences);
    for (std::string_view sentence : sentences) {
      XLNET_RETURN_IF_ERROR(add_sentence(sentence, line_no));
    }
    end_document();
  }
  if (chunk.ends_document) end_document();
  report(static_cast<int64_t>(chunk.end - chunk.begin));
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
  if (!header.ok() || header->key != key ||
      header->version != kShardFormatVersion) {
    return std::nullopt;
  }
  if (ShardBodyChecksum((*file)->data(), (*file)->size()) != header->checksum) {
    return std::nullopt;
  }
  return *header;
}

uint64_t MixKey(uint64_t h, const std::string& s) {
  return Fnv1a64(s.data(), s.size(), h ^ (s.size() * 0x9E3779B97F4A7C15ULL));
}

// A bounded queue of chunks between the reader and the workers.
class ChunkQueue {
 public:
  explicit ChunkQueue(size_t capacity) : capacity_(capacity) {}
  // False when the queue was closed (a worker failed).
  bool Push(Chunk chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || queue_.size() < capacity_; });
    if (closed_) return false;
    queue_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }
  // False when the queue is finished and empty, or closed.
  bool Pop(Chunk* chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || finished_ || !queue_.empty(); });
    if (closed_ || queue_.empty()) return false;
    *chunk = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }
  // No more chunks will come.
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  // Stops everything (an error).
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  bool finished_ = false;
  bool closed_ = false;
};

// Cuts one input file into chunks and hands them to `push` (which returns
// false to stop).
absl::Status ChunkFile(size_t file_index, const std::string& path,
                       const PrepareOptions& options, uint64_t base_key,
                       size_t* next_index, FileStats* stats,
                       int64_t* split_documents,
                       const std::function<bool(Chunk)>& push) {
  const TextFormat format = KindOfInput(path).format;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader,
                         LineReader::Open(path, options.max_line_bytes));
  const uint64_t target = static_cast<uint64_t>(options.shard_bytes);
  const uint64_t hard_limit = kMaxChunkFactor * target;
  uint64_t offset = 0;
  Chunk chunk;
  bool want_cut = false;
  std::vector<std::string_view> sentences;
  auto start_chunk = [&](int64_t first_line) {
    chunk = Chunk();
    chunk.file = file_index;
    chunk.begin = offset;
    chunk.first_line = first_line;
    chunk.key = base_key;
    want_cut = false;
  };
  auto emit = [&](bool ends_document, bool forced) -> bool {
    chunk.index = (*next_index)++;
    chunk.end = offset;
    chunk.ends_document = ends_document;
    chunk.forced_cut = forced;
    return push(std::move(chunk));
  };
  start_chunk(1);
  Line line;
  while (true) {
    XLNET_ASSIGN_OR_RETURN(const bool more, reader->Next(&line));
    if (!more) break;
    ++stats->lines;
    offset += line.bytes + (line.newline ? 1 : 0);
    ChunkLine cl;
    cl.size = line.bytes;
    cl.overlong = line.overlong;
    bool blank = false;
    if (line.overlong) {
      stats->any_text = true;
      const uint64_t marker[3] = {0x4F5645524C4F4E47ULL, line.bytes,
                                  line.overlong_hash};
      chunk.key = Fnv1a64(marker, sizeof(marker), chunk.key);
    } else {
      cl.begin = chunk.text.size();
      chunk.text.append(line.text);
      chunk.key = Fnv1a64(line.text.data(), line.text.size(), chunk.key);
      chunk.key = Fnv1a64("\n", 1, chunk.key);
      blank = IsAsciiBlank(line.text);
      if (blank) {
        ++stats->blank_lines;
      } else {
        stats->any_text = true;
        if (format == TextFormat::kPlain &&
            stats->sampled_lines < kSampledLines) {
          sentences.clear();
          SplitSentences(line.text, &sentences);
          ++stats->sampled_lines;
          stats->sampled_sentences += static_cast<int64_t>(sentences.size());
        }
      }
    }
    chunk.lines.push_back(cl);
    const uint64_t size = offset - chunk.begin;
    if (size >= target) want_cut = true;
    const bool at_boundary = format == TextFormat::kJsonLines || blank;
    if (want_cut && at_boundary) {
      if (!emit(false, false)) return absl::OkStatus();
      start_chunk(line.number + 1);
    } else if (size >= hard_limit && format == TextFormat::kPlain) {
      ++*split_documents;
      if (!emit(true, true)) return absl::OkStatus();
      start_chunk(line.number + 1);
    }
  }
  if (!chunk.lines.empty()) emit(true, false);
  return absl::OkStatus();
}

// A warning when a plain-text file looks like one document (or paragraph)
// per line rather than one sentence per line; "" otherwise.
std::string FormatWarning(const std::string& path, const FileStats& s) {
  const std::string format_rule =
      "plain text is one sentence a line with a blank line between documents";
  if (s.sampled_lines >= 20) {
    const double per_line =
        static_cast<double>(s.sampled_sentences) / s.sampled_lines;
    if (per_line >= 2.5) {
      return absl::StrFormat(
          "%s: its lines hold %.1f sentences on average (first %d non-blank "
          "lines), so it looks like one document or paragraph per line; %s. "
          "Each line is read as one sentence, which makes the A/B segments "
          "whole paragraphs; for one document per line write JSON Lines "
          "(one {\"text\": ...} per line, *.jsonl) so sentences are split",
          path, per_line, s.sampled_lines, format_rule);
    }
  }
  if (s.blank_lines == 0 && s.lines >= kSampledLines) {
    return absl::StrFormat(
        "%s: %s lines and no blank line: read as one document (%s)", path,
        WithCommas(s.lines), format_rule);
  }
  return "";
}

// The flags' ranges and the required ones.
absl::Status CheckPrepareOptions(const PrepareOptions& options) {
  if (options.workers < 1 || options.workers > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers must be in [1, 1024] (got ", options.workers, ")"));
  }
  if (options.shard_bytes < 1 || options.shard_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard_bytes must be in [1, 2^30] (got ", options.shard_bytes, ")"));
  }
  if (options.num_tasks < 1 || options.task < 0 ||
      options.task >= options.num_tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task ", options.task,
                     " is not in [0, --num_tasks=", options.num_tasks, ")"));
  }
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("no output directory (--out)");
  }
  if (options.json_key.empty()) {
    return absl::InvalidArgumentError("--json_key must not be empty");
  }
  return absl::OkStatus();
}

// The key every shard's key derives from: the tokenizer and every option
// that changes a shard's content, so a finished shard is reused only when
// it would be written the same.
uint64_t BaseKey(const Tokenizer& tok, const PrepareOptions& options) {
  uint64_t base_key = 0x5851A2D5C0FFEEULL;
  base_key = MixKey(base_key, tok.hash());
  return MixKey(
      base_key,
      absl::StrCat("v", kShardFormatVersion, " uncased=", options.rules.uncased,
                   " keep_accents=", options.rules.keep_accents, " use_eod=",
                   options.use_eod, " max_line=", options.max_line_bytes,
                   " json_key=", options.json_key));
}

// What became of one chunk, by shard index.
struct ShardResult {
  size_t file = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t first_line = 1;
  ShardHeader header;
  bool skipped = false;
  absl::Status error;

  // The shard `chunk` is planned as, before a worker writes it.
  static ShardResult Of(const Chunk& chunk) {
    ShardResult r;
    r.file = chunk.file;
    r.begin = chunk.begin;
    r.end = chunk.end;
    r.first_line = chunk.first_line;
    return r;
  }
};

// Writes the shard of `chunk` (of input `path`) to `out_path`, or keeps a
// finished one with the same key (`skipped`); `header` is the shard's.
absl::Status WriteShard(const Chunk& chunk, const std::string& path,
                        const std::string& out_path, const Tokenizer& tok,
                        const PrepareOptions& options,
                        const ShardProgress& progress, ShardHeader* header,
                        bool* skipped) {
  auto done = FinishedShard(out_path, chunk.key);
  // In strict mode a shard that skipped bad input is redone (and fails).
  if (done && options.strict &&
      (done->invalid_utf8_lines > 0 || done->overlong_lines > 0 ||
       done->skipped_records > 0)) {
    done.reset();
  }
  if (done) {
    *header = *done;
    *skipped = true;
    if (progress.bytes != nullptr) {
      *progress.bytes += static_cast<int64_t>(chunk.end - chunk.begin);
      *progress.tokens += static_cast<int64_t>(done->num_tokens);
    }
    return absl::OkStatus();
  }
  ShardContent content;
  content.header.key = chunk.key;
  content.header.id_bytes = IdBytesForVocab(tok.vocab_size());
  XLNET_RETURN_IF_ERROR(TokenizeChunk(chunk, path, KindOfInput(path).format,
                                      tok, options, progress, &content));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(out_path, SerializeShard(&content)));
  *header = content.header;
  return absl::OkStatus();
}

// The first problem in input order: a failed shard, an unreadable file,
// or (strict) an empty file. Counts the empty files into `report`.
absl::Status FirstProblem(const std::vector<size_t>& mine,
                          const std::vector<std::string>& paths,
                          const std::vector<FileStats>& stats,
                          const std::vector<ShardResult>& results,
                          const absl::Status& reader_error, bool strict,
                          PrepareReport* report) {
  std::optional<size_t> first_empty_file;
  for (size_t f : mine) {
    if (!stats[f].any_text) {
      ++report->empty_files;
      if (!first_empty_file) first_empty_file = f;
    }
  }
  for (const ShardResult& r : results) {
    if (strict && first_empty_file && *first_empty_file < r.file) {
      break;
    }
    if (!r.error.ok()) return r.error;
  }
  if (!reader_error.ok()) return reader_error;
  if (strict && first_empty_file) {
    return absl::InvalidArgumentError(
        absl::StrCat(paths[*first_empty_file], ": empty file (no text)"));
  }
  return absl::OkStatus();
}

// A JSON Lines input that gave no document yet skipped records may have
// been read with the wrong --json_key: if no record of it has the key,
// that is an error naming the file, the key and the fields it does have
// (instead of a run that "succeeds" with 0 tokens).
absl::Status CheckJsonKeys(const std::vector<size_t>& mine,
                           const std::vector<std::string>& paths,
                           const std::vector<ShardResult>& results,
                           const PrepareOptions& options) {
  for (size_t f : mine) {
    if (KindOfInput(paths[f]).format != TextFormat::kJsonLines) continue;
    uint64_t docs = 0;
    uint64_t skipped_records = 0;
    for (const ShardResult& r : results) {
      if (r.file != f) continue;
      docs += r.header.num_docs;
      skipped_records += r.header.skipped_records;
    }
    if (docs > 0 || skipped_records == 0) continue;
    XLNET_RETURN_IF_ERROR(CheckJsonKeyPresent(paths[f], options.json_key,
                                              options.max_line_bytes));
  }
  return absl::OkStatus();
}

// The shards into the manifest, in shard order (independent of the worker
// count), and their counts into the report.
void AddShards(const std::vector<ShardResult>& results,
               ShardManifest* manifest, PrepareReport* report) {
  for (size_t i = 0; i < results.size(); ++i) {
    const ShardResult& r = results[i];
    const ShardHeader& h = r.header;
    report->shards_skipped += r.skipped;
    report->lines += static_cast<int64_t>(h.lines);
    report->invalid_utf8_lines += static_cast<int64_t>(h.invalid_utf8_lines);
    report->overlong_lines += static_cast<int64_t>(h.overlong_lines);
    report->skipped_records += static_cast<int64_t>(h.skipped_records);
    report->tokens += static_cast<int64_t>(h.num_tokens);
    report->docs += static_cast<int64_t>(h.num_docs);
    manifest->shards.push_back(ManifestShard{
        ShardFileName(i), r.file, r.begin, r.end, r.first_line, h.num_tokens,
        h.num_docs, h.key, h.checksum});
  }
}

// The manifest's settings (what a reader checks against its config).
ShardManifest ManifestOfOptions(const PrepareOptions& options) {
  ShardManifest manifest;
  manifest.tokenizer_file = kShardTokenizerName;
  manifest.rules = options.rules;
  manifest.use_eod = options.use_eod;
  manifest.max_line_bytes = options.max_line_bytes;
  manifest.json_key = options.json_key;
  manifest.shard_bytes = options.shard_bytes;
  manifest.task = options.task;
  manifest.num_tasks = options.num_tasks;
  return manifest;
}

// Lists every input in the manifest (size on disk), so all parts list the
// same ones; `mine` gets the indices of this task's slice.
absl::Status ListInputs(const std::vector<std::string>& paths,
                        const PrepareOptions& options, ShardManifest* manifest,
                        std::vector<size_t>* mine) {
  for (size_t f = 0; f < paths.size(); ++f) {
    struct stat st;
    if (::stat(paths[f].c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(paths[f], ": cannot stat"));
    }
    manifest->inputs.push_back(
        ManifestInput{paths[f], static_cast<uint64_t>(st.st_size)});
    if (static_cast<int>(f % options.num_tasks) == options.task) {
      mine->push_back(f);
    }
  }
  return absl::OkStatus();
}

// Starts clean: no manifest until every shard is finished, no stale
// temporaries, and the tokenizer beside the shards.
absl::Status StartOutput(const std::string& out_dir, const Tokenizer& tok) {
  XLNET_RETURN_IF_ERROR(MakeDirs(out_dir));
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(out_dir).status());
  XLNET_RETURN_IF_ERROR(RemoveAll(out_dir + "/" + kManifestName));
  const std::string tokenizer_out = out_dir + "/" + kShardTokenizerName;
  auto existing = ReadFile(tokenizer_out, kMaxTokenizerBytes);
  if (!existing.ok() || *existing != tok.model_bytes()) {
    XLNET_RETURN_IF_ERROR(WriteFileAtomic(tokenizer_out, tok.model_bytes()));
  }
  return absl::OkStatus();
}

// After every shard is written: removes the shards of an earlier, longer
// plan, writes the manifest (totals from `report`, which must hold every
// shard already), and logs each input's warnings into `report`.
absl::Status FinishOutput(const std::string& out_dir, const Tokenizer& tok,
                          const std::vector<size_t>& mine,
                          const std::vector<std::string>& paths,
                          const std::vector<FileStats>& stats,
                          double eval_fraction, ShardManifest* manifest,
                          PrepareReport* report) {
  for (size_t i = manifest->shards.size();; ++i) {
    const std::string stale = out_dir + "/" + ShardFileName(i);
    if (!PathExists(stale)) break;
    XLNET_RETURN_IF_ERROR(RemoveAll(stale));
  }
  manifest->tokenizer_hash = tok.hash();
  manifest->vocab_size = tok.vocab_size();
  manifest->totals = ManifestTotals{
      report->files,          report->empty_files,
      report->lines,          report->tokens,
      report->docs,           report->invalid_utf8_lines,
      report->overlong_lines, report->skipped_records};
  // The split, from the shards just written (in the page cache).
  XLNET_ASSIGN_OR_RETURN(const std::unique_ptr<ShardSet> written,
                         ShardSet::OpenWithManifest(out_dir, *manifest));
  XLNET_ASSIGN_OR_RETURN(manifest->split, RecordSplit(*written, eval_fraction));
  XLNET_RETURN_IF_ERROR(WriteManifest(out_dir, *manifest));
  for (size_t f : mine) {
    const std::string warning = FormatWarning(paths[f], stats[f]);
    if (warning.empty()) continue;
    XLOG(WARNING) << warning;
    report->warnings.push_back(warning);
  }
  return absl::OkStatus();
}

// The paths of this task's inputs.
std::vector<std::string> MyPaths(const std::vector<size_t>& mine,
                                 const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (size_t f : mine) out.push_back(paths[f]);
  return out;
}

// Logs prepare's progress about once a second (when `show`) until
// `all_done`; `cv` wakes it for the end. `bytes_done` and `tokens_done`
// count the input bytes and tokens tokenized so far (shards found done
// count whole); `total_bytes` is this task's input size, 0 when unknown
// (compressed inputs).
void LogProgress(std::mutex* mu, std::condition_variable* cv,
                 const std::atomic<bool>& all_done, bool show,
                 std::chrono::steady_clock::time_point start,
                 int64_t total_bytes, const std::atomic<int64_t>& shards_done,
                 const std::atomic<int64_t>& bytes_done,
                 const std::atomic<int64_t>& tokens_done) {
  ProgressMeter meter(total_bytes);
  std::unique_lock<std::mutex> lock(*mu);
  while (!all_done) {
    cv->wait_for(lock, std::chrono::seconds(1));
    if (all_done || !show) continue;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    meter.Add(secs, bytes_done);
    XLOG(INFO) << "prepare: " << meter.BytesLine() << "; " << shards_done
               << " shards, " << WithCommas(tokens_done) << " tokens, "
               << WithCommas(
                      static_cast<int64_t>(tokens_done / std::max(secs, 1e-9)))
               << " tokens/s";
  }
}

// Where this task writes: --out, or its part directory of a split.
std::string OutputDir(const PrepareOptions& options) {
  return options.num_tasks > 1
             ? absl::StrCat(options.out_dir, "/",
                            PartDirName(options.task, options.num_tasks))
             : options.out_dir;
}

}  // namespace

std::string PartDirName(int task, int num_tasks) {
  return absl::StrFormat("part-%05d-of-%05d", task, num_tasks);
}

std::string PrepareReport::Summary() const {
  std::string s = absl::StrFormat(
      "%d files (%d empty), %d shards (%d already done), %s lines, %s tokens, "
      "%s documents, %d invalid UTF-8 lines, %d over-long lines",
      files, empty_files, shards, shards_skipped, WithCommas(lines),
      WithCommas(tokens), WithCommas(docs), invalid_utf8_lines, overlong_lines);
  if (skipped_records > 0) {
    absl::StrAppend(&s, ", ", skipped_records, " JSON records without text");
  }
  if (split_documents > 0) {
    absl::StrAppend(&s, ", ", split_documents,
                    " documents cut at 4x shard_bytes");
  }
  absl::StrAppendFormat(&s, ", %.1f s, %.0f tokens/s", seconds,
                        seconds > 0 ? tokens / seconds : 0.0);
  return s;
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
  // A file given twice (a pattern and a name, or a name repeated) would be
  // read twice.
  std::vector<std::string> sorted = paths;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(*twice, ": given twice among the inputs"));
  }
  return paths;
}

absl::StatusOr<PrepareReport> PrepareShards(const PrepareOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  XLNET_RETURN_IF_ERROR(CheckPrepareOptions(options));
  XLNET_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                         ExpandInputs(options.inputs));
  XLNET_ASSIGN_OR_RETURN(
      std::unique_ptr<Tokenizer> tok,
      Tokenizer::Load(options.tokenizer_path, options.rules));
  const std::string out_dir = OutputDir(options);

  PrepareReport report;
  report.dir = out_dir;
  ShardManifest manifest = ManifestOfOptions(options);
  std::vector<size_t> mine;
  XLNET_RETURN_IF_ERROR(ListInputs(paths, options, &manifest, &mine));
  report.files = static_cast<int64_t>(mine.size());
  XLNET_RETURN_IF_ERROR(StartOutput(out_dir, *tok));

  const uint64_t base_key = BaseKey(*tok, options);

  // Results by shard index (the reader numbers chunks in input order).
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ShardResult> results;
  std::vector<FileStats> stats(paths.size());
  std::atomic<bool> failed{false};
  std::atomic<int64_t> tokens_done{0};
  std::atomic<int64_t> shards_done{0};
  std::atomic<int64_t> bytes_read{0};
  std::atomic<int64_t> bytes_done{0};
  absl::Status reader_error;
  int64_t split_documents = 0;
  ChunkQueue queue(static_cast<size_t>(options.workers));

  auto reader = [&]() {
    size_t next_index = 0;
    for (size_t f : mine) {
      const absl::Status status = ChunkFile(
          f, paths[f], options, base_key, &next_index, &stats[f],
          &split_documents, [&](Chunk chunk) {
            {
              std::lock_guard<std::mutex> lock(mu);
              if (results.size() <= chunk.index) {
                results.resize(chunk.index + 1);
              }
              results[chunk.index] = ShardResult::Of(chunk);
            }
            bytes_read += static_cast<int64_t>(chunk.end - chunk.begin);
            return queue.Push(std::move(chunk));
          });
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        reader_error = status;
        failed = true;
        queue.Close();
        break;
      }
      if (failed) break;
    }
    queue.Finish();
  };
  auto worker = [&]() {
    Chunk chunk;
    while (!failed && queue.Pop(&chunk)) {
      const std::string& path = paths[chunk.file];
      const std::string out_path = out_dir + "/" + ShardFileName(chunk.index);
      ShardHeader header;
      bool skipped = false;
      const absl::Status status = WriteShard(
          chunk, path, out_path, *tok, options,
          ShardProgress{&bytes_done, &tokens_done}, &header, &skipped);
      {
        std::lock_guard<std::mutex> lock(mu);
        ShardResult& r = results[chunk.index];
        r.header = header;
        r.skipped = skipped;
        r.error = status;
      }
      if (!status.ok()) {
        failed = true;
        queue.Close();
        break;
      }
      ++shards_done;
    }
  };
  std::thread reader_thread(reader);
  std::vector<std::thread> threads;
  for (int w = 0; w < options.workers; ++w) threads.emplace_back(worker);
  std::atomic<bool> all_done{false};
  std::thread progress([&]() {
    LogProgress(&mu, &cv, all_done, options.progress, start,
                PlainInputBytes(MyPaths(mine, paths)), shards_done, bytes_done,
                tokens_done);
  });
  reader_thread.join();
  for (auto& t : threads) t.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    all_done = true;
    cv.notify_all();
  }
  progress.join();

  XLNET_RETURN_IF_ERROR(FirstProblem(mine, paths, stats, results, reader_error,
                                     options.strict, &report));
  XLNET_RETURN_IF_ERROR(CheckJsonKeys(mine, paths, results, options));

  // The manifest, in shard order (independent of the worker count).
  AddShards(results, &manifest, &report);
  report.shards = static_cast<int64_t>(results.size());
  report.split_documents = split_documents;
  report.text_bytes = bytes_read;
  XLNET_RETURN_IF_ERROR(FinishOutput(out_dir, *tok, mine, paths, stats,
                                     options.eval_fraction, &manifest,
                                     &report));
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace xlnet::data
