// Tokenizer identity: where a tokenizer in use meets another one (a model
// directory's spiece.model at --init, the shards' manifest), they must be
// the same file, compared by Tokenizer::hash() (FNV-1a 64 of the model
// bytes). Comparing vocabulary sizes is not enough: a different tokenizer of
// the same size gives every id another piece and silently scrambles the
// embeddings a model learned.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// The fingerprint Tokenizer::hash() gives the tokenizer in `path` (a regular
// file of at most kMaxTokenizerBytes), without loading it.
absl::StatusOr<std::string> TokenizerFileHash(const std::string& path);

// OK when `other_path` holds the tokenizer `used` (which `used_name`
// describes in errors, e.g. its file); FailedPrecondition naming both and
// their hashes otherwise.
absl::Status CheckSameTokenizer(const Tokenizer& used,
                                const std::string& used_name,
                                const std::string& other_path);

}  // namespace xlnet::data
