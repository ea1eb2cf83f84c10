// `xlnet-data prepare`: tokenizes text files into the shards of a prepared
// directory (format in shard_format.h).
//
// Input files are cut into chunks of about `shard_bytes` at document
// boundaries (blank lines); each chunk becomes one shard, tokenized on a
// pool of workers. The plan depends only on the input bytes and options, so
// the output is byte-identical for any worker count. A shard already on disk
// with the same key (hash of its chunk, tokenizer and rules) and a valid
// checksum is kept, so a re-run skips finished work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

struct PrepareOptions {
  // Files or glob patterns (each pattern's matches in sorted order).
  std::vector<std::string> inputs;
  // spiece.model; copied into the output directory.
  std::string tokenizer_path;
  std::string out_dir;
  int workers = 1;
  // Fail on the first invalid UTF-8 line, over-long line or empty file
  // instead of counting and skipping it.
  bool strict = false;
  TextRules rules;
  // Append <eod> at every document end.
  bool use_eod = true;
  // Target text bytes per shard (a shard ends at the next blank line).
  int64_t shard_bytes = 16 << 20;
  // Lines longer than this are skipped (or fail with strict).
  int64_t max_line_bytes = 1 << 20;
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
  int64_t tokens = 0;
  int64_t docs = 0;
  double seconds = 0;
  // One-line summary.
  std::string Summary() const;
};

// Tokenizes `options.inputs` into `options.out_dir` (shards, manifest.json,
// spiece.model). Every file is written atomically; manifest.json last.
absl::StatusOr<PrepareReport> PrepareShards(const PrepareOptions& options);

// Expands files and glob patterns; a pattern that matches nothing or a
// missing file is an error.
absl::StatusOr<std::vector<std::string>> ExpandInputs(
    const std::vector<std::string>& patterns);

}  // namespace xlnet::data
