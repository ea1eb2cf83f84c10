// Per-rank checkpoint files: their naming, every rank's manifest, rank 0's
// merge (all ranks present and complete, or nothing committed) and the
// per-rank share of verifying.
#include "model_io/rank_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "model_io/checkpoint_manager.h"
#include "tests/model_io/checkpoint_contents.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::TinyModel;

// Rank `rank`'s own files: a stream state (with a memory of `mem_rows`
// rows) and an RNG state.
std::map<std::string, NamedTensors> RankState(int rank, int64_t mem_rows) {
  return {{RankFileName("stream_state", rank),
           {{"mems.0.0", torch::full({mem_rows, 4}, float(rank))}}},
          {RankFileName("rng", rank), {{"cpu", torch::tensor(rank)}}}};
}

// Stages `world` ranks' files for `step` (all but `skip`).
void Stage(const std::string& staging, int64_t step, int world, int skip = -1) {
  for (int rank = 0; rank < world; ++rank) {
    if (rank == skip) continue;
    ASSERT_TRUE(
        WriteRankFiles(staging, step, world, rank, RankState(rank, 16)).ok());
  }
}

// Stages `world` ranks' files for `step` and saves it (shared weights
// `value`).
absl::Status SaveStaged(CheckpointManager& manager, int64_t step, int world,
                        float value, SaveReport* report = nullptr) {
  const std::string staging = StagingDir(manager.checkpoints_dir(), step);
  Stage(staging, step, world);
  CheckpointContents contents = testing::Contents(value);
  contents.staging_dir = staging;
  contents.world_size = world;
  return manager.Save(step, ModelConfigToJson(TinyModel()), contents, report);
}

int64_t FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return static_cast<int64_t>(in.tellg());
}

TEST(RankFilesTest, NamingAndWhatEachRankLoads) {
  EXPECT_EQ(RankFileName("rng", 3), "rng.rank3.safetensors");
  EXPECT_EQ(RankOfFile("rng.rank3.safetensors"), 3);
  EXPECT_EQ(RankOfFile("stream_state.rank12.safetensors"), 12);
  EXPECT_EQ(RankOfFile("model.safetensors"), std::nullopt);
  EXPECT_EQ(RankOfFile("optimizer.safetensors"), std::nullopt);
  EXPECT_EQ(RankOfFile("x.rankA.safetensors"), std::nullopt);
  const std::vector<std::string> listed = {
      "model.safetensors", "rng.rank0.safetensors", "rng.rank1.safetensors",
      "stream_state.rank0.safetensors", "stream_state.rank1.safetensors"};
  EXPECT_EQ(FilesRankLoads(listed, 1),
            (std::set<std::string>{"rng.rank1.safetensors",
                                   "stream_state.rank1.safetensors"}));
  // A rank the checkpoint has no files of (resumed on more ranks) falls
  // back to rank 0's, as the loaders do.
  EXPECT_EQ(FilesRankLoads(listed, 3),
            (std::set<std::string>{"rng.rank0.safetensors",
                                   "stream_state.rank0.safetensors"}));
}

// Rank 0 checksums only what it writes; the ranks' files come in with
// their own checksums, and the checkpoint verifies as any other.
TEST(RankFilesTest, SaveMergesTheRankManifests) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/0);
  SaveReport report;
  ASSERT_TRUE(SaveStaged(manager, 5, 3, 1, &report).ok());
  const std::string dir = manager.StepDir(5);
  EXPECT_TRUE(VerifyChecksums(dir).ok());
  int64_t shared = 0;
  for (const char* name : {"config.json", "model.safetensors",
                           "optimizer.safetensors", "config.yaml"}) {
    shared += FileBytes(absl::StrCat(dir, "/", name));
  }
  EXPECT_EQ(report.checksummed_bytes, shared);
  EXPECT_EQ(report.merged_manifests, 3);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(
        PathExists(absl::StrCat(dir, "/", RankFileName("stream_state", rank))));
  }
  // The 4 shared files and the 3 ranks' 2 each; the rank manifests stay in
  // the staging directory.
  auto listed = ListedFiles(dir);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 4u + 6);
}

// A rank whose manifest is missing (it died, or failed, before writing it),
// or whose listed file is truncated: the save is refused naming the step and
// the rank or file, nothing is committed and the previous checkpoint stays
// the newest that verifies.
TEST(RankFilesTest, IncompleteRanksAreRefusedAtSave) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/0);
  const std::string config = ModelConfigToJson(TinyModel());
  ASSERT_TRUE(SaveStaged(manager, 2, 2, 1).ok());
  const std::string staging = StagingDir(manager.checkpoints_dir(), 4);
  CheckpointContents contents = testing::Contents(2);
  contents.staging_dir = staging;
  contents.world_size = 3;

  Stage(staging, 4, 3, /*skip=*/1);
  absl::Status status = manager.Save(4, config, contents);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("checkpoint step_4 is incomplete: no "
                                  "manifest from rank(s) 1 of 3 in " +
                                  staging),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("nothing was committed"), std::string::npos);
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{2}));
  EXPECT_EQ(**manager.LatestValid(), manager.StepDir(2));

  Stage(staging, 4, 3);
  const std::string truncated =
      absl::StrCat(staging, "/", RankFileName("stream_state", 2));
  const int64_t bytes = FileBytes(truncated);
  ASSERT_EQ(::truncate(truncated.c_str(), 10), 0);
  status = manager.Save(4, config, contents);
  EXPECT_NE(status.message().find(absl::StrCat(
                truncated, ": 10 bytes but rank 2's manifest lists ", bytes)),
            std::string::npos)
      << status;
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{2}));

  // A manifest of another attempt (another world size) is not this one's.
  ASSERT_TRUE(RemoveAll(staging).ok());
  Stage(staging, 4, 2);
  status = manager.Save(4, config, contents);
  EXPECT_NE(status.message().find("not rank 0's manifest of step 4 at 3 ranks "
                                  "(it says step 4, world size 2, rank 0)"),
            std::string::npos)
      << status;
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{2}));

  // Start-up removes what killed attempts staged.
  ASSERT_TRUE(RemoveStagingDirs(manager.checkpoints_dir()).ok());
  EXPECT_FALSE(PathExists(staging));
  EXPECT_TRUE(PathExists(manager.StepDir(2)));
}

// A scope reads only the files it selects; with the listing on, it still
// stats every file (a truncated unread one is refused) and refuses unlisted
// ones.
TEST(RankFilesTest, ScopedVerifyReadsOnlyItsShare) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/0);
  ASSERT_TRUE(SaveStaged(manager, 1, 2, 1).ok());
  const std::string dir = manager.StepDir(1);
  const std::string own = RankFileName("stream_state", 1);
  ChecksumScope scope;
  scope.listing = false;
  scope.read = [&](const std::string& name) { return name == own; };
  auto bytes = VerifyChecksums(dir, scope);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, FileBytes(dir + "/" + own));

  // Another rank's file changed (same size): not this rank's concern.
  const std::string other = dir + "/" + RankFileName("stream_state", 0);
  {
    std::fstream f(other, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_TRUE(VerifyChecksums(dir, scope).ok());
  EXPECT_FALSE(VerifyChecksums(dir).ok());
  // The listing is checked by stat: a truncated unread file fails it.
  scope.listing = true;
  ASSERT_EQ(::truncate(other.c_str(), 3), 0);
  EXPECT_NE(VerifyChecksums(dir, scope)
                .status()
                .message()
                .find(other + ": size 3 does not match"),
            std::string::npos);
}

}  // namespace
}  // namespace xlnet
