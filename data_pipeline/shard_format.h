// The on-disk format of a prepared directory (format version 2), shared by
// the writer (shard_writer.h) and the reader (shard_reader.h): shard files
// `shard-NNNNN.bin`, `manifest.json` and the tokenizer beside them.
//
// Shard file (little-endian):
//   [0,128)   header: "XLNSHARD", u32 version, u32 header bytes (128),
//             u64 num_tokens, u64 num_docs, u64 key, u64 checksum (FNV-1a 64
//             of every byte after the header), u64 lines, u64 invalid UTF-8
//             lines, u64 over-long lines, u64 blank lines; version 2: u32
//             id bytes, u32 zero, u64 skipped JSON Lines records; zero
//             padding
//   ids[num_tokens]                token ids, <eod> at document ends:
//                                  uint16 when the vocabulary has at most
//                                  65536 pieces (id bytes 2), else int32
//   uint8  sent_flags[num_tokens]  alternating sentence flag (0/1) per token;
//                                  the chunk's first sentence has flag 0
//   zero padding to a multiple of 8
//   u64    doc_begin[num_docs]     first token of each document
//   u64    doc_hash[num_docs]      FNV-1a 64 of the document's ids as int32
//
// Version 1 (still read) is version 2 with int32 ids always and no id-bytes
// field. Document hashes are over int32 ids in both, so the evaluation split
// of a corpus does not depend on the version.
//
// Sentence flags follow the official data_utils.py: every line flips the
// flag; <eod> keeps the flag of the sentence it ends. When shards (or
// document runs) are concatenated, a piece whose first flag equals the
// previous piece's last flag is inverted, keeping the alternation.
//
// manifest.json (written last, so a directory with one is complete): format
// name and version, the tokenizer (file, hash, vocab size), the text rules
// (and the JSON Lines text field), the inputs (path, size on disk), every
// shard (its input's byte range in the decompressed text, first line,
// counts, key, checksum) and the totals. A part of a preparation split over
// hosts (prepare --num_tasks) also names its task; readers refuse it until
// the parts are combined (shard_combine.h). The optional "split" object
// (ManifestSplit) records the training/evaluation split for one
// eval_fraction: per shard each split's tokens, documents and last sentence
// flag, and the training split's token counts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// The version written; versions 1 and 2 are read.
inline constexpr uint32_t kShardFormatVersion = 2;
inline constexpr size_t kShardHeaderBytes = 128;
inline constexpr char kManifestName[] = "manifest.json";
// The tokenizer's file name in a prepared directory.
inline constexpr char kShardTokenizerName[] = "spiece.model";
// manifest.json is read whole; a real one is a few hundred bytes per shard
// (2 MB for a 100 GB corpus in 16 MB shards), so this bounds the read.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{256} << 20;

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
  uint32_t version = kShardFormatVersion;
  // Bytes per token id: 2 (uint16) or 4 (int32).
  uint32_t id_bytes = 4;
  uint64_t num_tokens = 0;
  uint64_t num_docs = 0;
  uint64_t key = 0;
  uint64_t checksum = 0;
  uint64_t lines = 0;
  uint64_t invalid_utf8_lines = 0;
  uint64_t overlong_lines = 0;
  uint64_t blank_lines = 0;
  // JSON Lines records skipped (not JSON, no text field).
  uint64_t skipped_records = 0;
};

// Bytes per id for a vocabulary: 2 when every id fits in uint16.
uint32_t IdBytesForVocab(int64_t vocab_size);

// Byte offsets of a shard file's parts for given counts.
struct ShardLayout {
  uint32_t id_bytes = 4;
  size_t ids = kShardHeaderBytes;
  size_t flags = 0;
  size_t docs = 0;
  size_t total = 0;
};
ShardLayout GetShardLayout(uint64_t num_tokens, uint64_t num_docs,
                           uint32_t id_bytes);
ShardLayout GetShardLayout(const ShardHeader& header);

// What one shard holds, as the writer builds it.
struct ShardContent {
  std::vector<int32_t> ids;
  std::vector<uint8_t> flags;
  std::vector<DocEntry> docs;
  // Key, line counts and id_bytes set by the writer.
  ShardHeader header;
};

// The bytes of a shard file (version 2, ids of header.id_bytes bytes); sets
// the header's counts and checksum.
std::string SerializeShard(ShardContent* content);

// FNV-1a 64 of the bytes after the header of a shard file of `size` bytes.
uint64_t ShardBodyChecksum(const char* data, size_t size);

// Parses a shard file's header (version 1 or 2) and checks it against the
// file size; errors name `path` (DataLoss, or FailedPrecondition for
// another format version).
absl::StatusOr<ShardHeader> DecodeShardHeader(const char* data, size_t size,
                                              const std::string& path);

// The document table of a shard file whose header DecodeShardHeader
// accepted; a table out of order is a DataLoss error naming `path`.
absl::StatusOr<std::vector<DocEntry>> DecodeDocTable(const char* data,
                                                     const ShardHeader& header,
                                                     const std::string& path);

// Checks what the header cannot: the body's checksum, every token id in
// [0, vocab_size) and every sentence flag 0 or 1. One pass over the file;
// errors are DataLoss naming `path` (and the first bad token).
absl::Status VerifyShardBody(const char* data, size_t size,
                             const ShardHeader& header, int64_t vocab_size,
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
  int64_t skipped_records = 0;
};

// The training/evaluation split of the documents for one eval_fraction,
// recorded by prepare (and combine) so that a reader places its streams,
// and forms the unigram baseline, without reading any shard
// (shard_reader.h). Sizes follow the shards (one entry per shard).
struct ManifestSplit {
  // The data.eval_fraction the split was made with; a reader with another
  // one reads every shard's document table instead.
  double eval_fraction = 0.01;
  // One split (index 0 training, 1 evaluation) in one shard.
  struct Part {
    // Tokens of the split in the shard, and its non-empty documents.
    uint64_t tokens = 0;
    uint64_t docs = 0;
    // The sentence flag, after the alternation kept across runs of
    // documents, of the split's last token in this shard or before it (0
    // when there is none yet).
    uint8_t last_flag = 0;
  };
  std::vector<std::array<Part, 2>> shards;
  // The document held out although its hash is not below eval_fraction
  // (the at-least-one-document rule), as shard and document index; -1
  // when none.
  int64_t forced_shard = -1;
  int64_t forced_doc = -1;
  // Occurrences of every id (vocab_size entries) in the training split.
  std::vector<int64_t> train_unigram;
};

struct ShardManifest {
  std::string tokenizer_file = kShardTokenizerName;  // relative
  std::string tokenizer_hash;
  int64_t vocab_size = 0;
  TextRules rules;
  bool use_eod = true;
  int64_t max_line_bytes = 0;
  // The field of a JSON Lines record that holds its text.
  std::string json_key = "text";
  int64_t shard_bytes = 0;
  // A part of a preparation split over hosts: task `task` of `num_tasks`
  // (num_tasks 1: a whole preparation).
  int64_t task = 0;
  int64_t num_tasks = 1;
  std::vector<ManifestInput> inputs;
  std::vector<ManifestShard> shards;
  ManifestTotals totals;
  // Absent in manifests written before it was recorded.
  std::optional<ManifestSplit> split;
};

// Checks the header of `dir`/`shard.file` against its manifest entry
// (tokens, documents, key, checksum); a DataLoss error naming both
// otherwise.
absl::Status CheckShardMatchesManifest(const ShardHeader& header,
                                       const ManifestShard& shard,
                                       const std::string& dir);

// Writes `dir`/manifest.json atomically.
absl::Status WriteManifest(const std::string& dir,
                           const ShardManifest& manifest);

// Reads `dir`/manifest.json (at most kMaxManifestBytes; a FIFO or device is
// refused). The file names it holds (shards, tokenizer) must be plain names
// inside `dir`: no '/', not "." or "..". Errors name it: NotFound when
// missing (a directory not prepared, or a run not finished),
// FailedPrecondition for another format or version, DataLoss for anything
// else.
absl::StatusOr<ShardManifest> ReadManifest(const std::string& dir);

}  // namespace xlnet::data
