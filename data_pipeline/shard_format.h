// The on-disk format of a prepared directory (format version 1), shared by
// the writer (shard_writer.h) and the reader (shard_reader.h): shard files
// `shard-NNNNN.bin`, `manifest.json` and the tokenizer beside them.
//
// Shard file (little-endian):
//   [0,128)   header: "XLNSHARD", u32 version, u32 header bytes (128),
//             u64 num_tokens, u64 num_docs, u64 key, u64 checksum (FNV-1a 64
//             of every byte after the header), u64 lines, u64 invalid UTF-8
//             lines, u64 over-long lines, u64 blank lines, zero padding
//   int32  ids[num_tokens]         token ids, <eod> at document ends
//   uint8  sent_flags[num_tokens]  alternating sentence flag (0/1) per token;
//                                  the chunk's first sentence has flag 0
//   zero padding to a multiple of 8
//   u64    doc_begin[num_docs]     first token of each document
//   u64    doc_hash[num_docs]      FNV-1a 64 of the document's ids
//
// Sentence flags follow the official data_utils.py: every line flips the
// flag; <eod> keeps the flag of the sentence it ends. When shards (or
// document runs) are concatenated, a piece whose first flag equals the
// previous piece's last flag is inverted, keeping the alternation.
//
// manifest.json (written last, so a directory with one is complete): format
// name and version, the tokenizer (file, hash, vocab size), the text rules,
// the inputs, every shard (its input's byte range, first line, counts, key,
// checksum) and the totals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

inline constexpr uint32_t kShardFormatVersion = 1;
inline constexpr size_t kShardHeaderBytes = 128;
inline constexpr char kManifestName[] = "manifest.json";
// The tokenizer's file name in a prepared directory.
inline constexpr char kShardTokenizerName[] = "spiece.model";

// "shard-00007.bin".
std::string ShardFileName(size_t index);

// A document of a shard.
struct DocEntry {
  int64_t begin = 0;  // token offset in the shard
  int64_t end = 0;
  uint64_t hash = 0;
};

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

// Byte offsets of a shard file's parts for given counts.
struct ShardLayout {
  size_t ids = kShardHeaderBytes;
  size_t flags = 0;
  size_t docs = 0;
  size_t total = 0;
};
ShardLayout GetShardLayout(uint64_t num_tokens, uint64_t num_docs);

// What one shard holds, as the writer builds it.
struct ShardContent {
  std::vector<int32_t> ids;
  std::vector<uint8_t> flags;
  std::vector<DocEntry> docs;
  ShardHeader header;  // key and line counts set by the writer
};

// The bytes of a shard file; sets the header's counts and checksum.
std::string SerializeShard(ShardContent* content);

// FNV-1a 64 of the bytes after the header of a shard file of `size` bytes.
uint64_t ShardBodyChecksum(const char* data, size_t size);

// Parses a shard file's header and checks it against the file size; errors
// name `path` (DataLoss, or FailedPrecondition for another format version).
absl::StatusOr<ShardHeader> DecodeShardHeader(const char* data, size_t size,
                                              const std::string& path);

// The document table of a shard file whose header DecodeShardHeader
// accepted; a table out of order is a DataLoss error naming `path`.
absl::StatusOr<std::vector<DocEntry>> DecodeDocTable(const char* data,
                                                     const ShardHeader& header,
                                                     const std::string& path);

// One input file of a manifest.
struct ManifestInput {
  std::string path;
  uint64_t bytes = 0;
};

// One shard of a manifest: the chunk of an input it was made from, its
// counts, key and checksum (as in its header).
struct ManifestShard {
  std::string file;  // relative to the directory
  uint64_t input = 0;
  uint64_t byte_begin = 0;
  uint64_t byte_end = 0;
  int64_t first_line = 1;
  uint64_t tokens = 0;
  uint64_t docs = 0;
  uint64_t key = 0;
  uint64_t checksum = 0;
};

struct ManifestTotals {
  int64_t files = 0;
  int64_t empty_files = 0;
  int64_t lines = 0;
  int64_t tokens = 0;
  int64_t docs = 0;
  int64_t invalid_utf8_lines = 0;
  int64_t overlong_lines = 0;
};

struct ShardManifest {
  std::string tokenizer_file = kShardTokenizerName;  // relative
  std::string tokenizer_hash;
  int64_t vocab_size = 0;
  TextRules rules;
  bool use_eod = true;
  int64_t max_line_bytes = 0;
  int64_t shard_bytes = 0;
  std::vector<ManifestInput> inputs;
  std::vector<ManifestShard> shards;
  ManifestTotals totals;
};

// Writes `dir`/manifest.json atomically.
absl::Status WriteManifest(const std::string& dir,
                           const ShardManifest& manifest);

// Reads `dir`/manifest.json. Errors name it: NotFound when missing (a
// directory not prepared, or a run not finished), FailedPrecondition for
// another format or version, DataLoss for anything else.
absl::StatusOr<ShardManifest> ReadManifest(const std::string& dir);

}  // namespace xlnet::data
