// The per-rank share of a checkpoint. Shared files (the model, optimizer,
// trainer state, config) are written by rank 0; each rank's own state (data
// position, memory, RNG) is a per-rank file named STEM.rankR.EXT, the one
// naming that says which files belong to which rank (RankFileName,
// RankOfFile, FilesRankLoads).
//
// Saving at W ranks: every rank writes its per-rank files into the staging
// directory (checkpoints/.staging_step_N) and then, last and atomically, its
// rank manifest (.rankR.manifest.json: the CRC-32 and size of each of its
// files, the step and the world size). Rank 0 merges the W manifests
// (MergeRankManifests: all present, each for this step and world size, each
// listed file present with its listed size, by stat only) into the
// checkpoint's checksums.json beside the checksums of the shared files it
// wrote itself, so that no rank reads another rank's bytes and rank 0's work
// does not grow with W.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "model_io/checksums.h"

namespace xlnet {

// STEM.rankR.safetensors: the per-rank file of `stem` for `rank`.
std::string RankFileName(const std::string& stem, int rank);
// The rank of a per-rank file name (STEM.rankR.EXT), nullopt for a shared
// file.
std::optional<int> RankOfFile(const std::string& name);

// Of a checkpoint's `listed` files, the per-rank ones `rank` loads: its own,
// and for each stem it has none of (a run resumed on more ranks than saved
// it), rank 0's, which the loaders fall back to.
std::set<std::string> FilesRankLoads(const std::vector<std::string>& listed,
                                     int rank);

// The hidden staging directory of step `step`'s per-rank files in
// `checkpoints_dir` (skipped by ListDirectoryFiles and by ListSteps).
std::string StagingDir(const std::string& checkpoints_dir, int64_t step);
// Removes every staging directory in `checkpoints_dir` (left by a save that
// was killed or failed), so that none is mistaken for a later attempt's.
// Call it before any rank saves (rank 0 at start-up, before a collective).
absl::Status RemoveStagingDirs(const std::string& checkpoints_dir);

// Writes this rank's per-rank `files` (file name -> tensors; names must be
// RankFileName(..., rank)) into `staging`, then its rank manifest, last and
// atomically. Returns the bytes it read back to checksum (its own files).
absl::StatusOr<int64_t> WriteRankFiles(
    const std::string& staging, int64_t step, int world_size, int rank,
    const std::map<std::string, NamedTensors>& files);

// Rank 0's merge: the checksums of every rank's files in `staging` from the
// `world_size` rank manifests (not from the files, which are only stat'ed).
// DataLoss naming the step and every rank whose manifest is missing, of
// another step or world size, or whose listed files are missing or of
// another size.
absl::StatusOr<ChecksumEntries> MergeRankManifests(const std::string& staging,
                                                   int64_t step,
                                                   int world_size);

}  // namespace xlnet
