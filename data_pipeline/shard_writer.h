// `xlnet-data prepare`: tokenizes corpus files into the shards of a prepared
// directory (format in shard_format.h).
//
// Inputs (input_reader.h) are plain text (one sentence a line, a blank line
// between documents) or JSON Lines (one document per record, its text split
// into sentences by sentence_splitter.h), optionally .gz or .zst. They are
// streamed: one reader thread cuts them into chunks of about `shard_bytes`
// of text ending after a blank line (after any record for JSON Lines), and a
// pool of workers tokenizes each chunk into one shard. Memory is a few
// chunks per worker, whatever the corpus size. A document longer than four
// times `shard_bytes` with no blank line is cut there (and counted). The
// plan depends only on the input bytes and options, so the output is
// byte-identical for any worker count. A shard already on disk with the
// same key (hash of its chunk, tokenizer, rules and format version) and a
// valid checksum is kept, so a re-run skips finished work.
//
// Over several hosts: `num_tasks` N and `task` I make this run take the
// inputs i with i % N == I (in the expanded input list, globs sorted, as the
// official --task/--num_task) and write a part directory
// `out_dir/part-0000I-of-0000N/`; CombineParts (shard_combine.h) then makes
// `out_dir` exactly what one task would have written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

struct PrepareOptions {
  // Files or glob patterns (each pattern's matches in sorted order).
  std::vector<std::string> inputs;
  // spiece.model; copied into the output directory.
  std::string tokenizer_path;
  std::string out_dir;
  int workers = 1;
  // Fail on the first invalid UTF-8 line, over-long line, skipped JSON
  // Lines record or empty file instead of counting and skipping it.
  bool strict = false;
  TextRules rules;
  // Append <eod> at every document end.
  bool use_eod = true;
  // The data.eval_fraction whose training/evaluation split the manifest
  // records (ManifestSplit), so that readers with it need not read the
  // shards to form the split; from the config given to prepare.
  double eval_fraction = DataConfig().eval_fraction;
  // Target text bytes per shard (a shard ends at the next blank line).
  int64_t shard_bytes = 16 << 20;
  // Lines longer than this are skipped (or fail with strict).
  int64_t max_line_bytes = 1 << 20;
  // The field of a JSON Lines record that holds the document's text.
  std::string json_key = "text";
  // This run is task `task` of `num_tasks` (see above).
  int num_tasks = 1;
  int task = 0;
  // Log a progress line about once a second.
  bool progress = true;
};

struct PrepareReport {
  int64_t files = 0;
  int64_t empty_files = 0;
  int64_t shards = 0;
  int64_t shards_skipped = 0;  // already finished by an earlier run
  int64_t lines = 0;
  int64_t invalid_utf8_lines = 0;
  int64_t overlong_lines = 0;
  int64_t skipped_records = 0;  // JSON Lines records without text
  int64_t split_documents = 0;  // cut at four times shard_bytes
  int64_t tokens = 0;
  int64_t docs = 0;
  int64_t text_bytes = 0;  // decompressed input bytes read
  double seconds = 0;
  // Where this run wrote (out_dir, or its part directory).
  std::string dir;
  // Things about the input worth a look (e.g. a file that looks like one
  // document per line); also logged.
  std::vector<std::string> warnings;
  // One-line summary.
  std::string Summary() const;
};

// Tokenizes `options.inputs` into `options.out_dir` (shards, manifest.json,
// spiece.model), or its part directory with num_tasks > 1. Every file is
// written atomically; manifest.json last.
absl::StatusOr<PrepareReport> PrepareShards(const PrepareOptions& options);

// Expands files and glob patterns; a pattern that matches nothing, a
// missing file or a file given twice is an error.
absl::StatusOr<std::vector<std::string>> ExpandInputs(
    const std::vector<std::string>& patterns);

// "part-00002-of-00004".
std::string PartDirName(int task, int num_tasks);

}  // namespace xlnet::data
