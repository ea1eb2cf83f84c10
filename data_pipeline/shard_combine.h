// Combining the parts of a preparation split over hosts
// (`xlnet-data prepare --num_tasks N --task I`, see shard_writer.h).
//
// Task I writes OUT/part-0000I-of-0000N/: the shards of its inputs (those
// with index i % N == I in the expanded input list), numbered from 0, and a
// manifest naming its task. CombineParts(OUT) checks that all N parts are
// there, finished and made alike (tokenizer, text rules, shard size, the
// same input list) and that every shard is intact (header against the
// manifest, checksum, ids, flags, counts adding up), then gives every shard the
// number it has in a one-task run (by input, then position in it), writes
// OUT/manifest.json (the same bytes a one-task run writes, so the sampler gives
// the same batches) and removes the part directories. Shards are hard-linked
// into OUT (copied when that fails), and the manifest is written last, so a
// failure midway leaves the parts intact and OUT without a manifest. An OUT
// that already has a manifest.json is refused (never replaced).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace xlnet::data {

struct CombineReport {
  int64_t parts = 0;
  int64_t shards = 0;
  int64_t tokens = 0;
  int64_t docs = 0;
  std::string Summary() const;
};

// Combines OUT/part-*-of-N into OUT. Errors name the part that is missing,
// unfinished or made differently (e.g. with another tokenizer).
absl::StatusOr<CombineReport> CombineParts(const std::string& out_dir);

}  // namespace xlnet::data
