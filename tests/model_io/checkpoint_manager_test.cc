#include "model_io/checkpoint_manager.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/model_io/checkpoint_contents.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::Contents;
using testing::TinyModel;

TEST(CheckpointTest, SaveVerifyAndKeepNewest) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/2);
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{20, 30}));
  auto found = manager.LatestValid();
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  const std::string latest = **found;
  EXPECT_EQ(latest, manager.StepDir(30));
  EXPECT_TRUE(VerifyChecksums(latest).ok());
  auto dir = ReadModelDir(latest);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(
      dir->Tensor("transformer.word_embedding.weight")->max().item<float>(),
      30.0f);
  EXPECT_TRUE(PathExists(latest + "/optimizer.safetensors"));
  EXPECT_TRUE(PathExists(latest + "/config.yaml"));
}

TEST(CheckpointTest, CorruptNewestFallsBackToPrevious) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(1, TinyModel(), Contents(1)).ok());
  ASSERT_TRUE(manager.Save(2, TinyModel(), Contents(2)).ok());
  // Flip one byte in the newest weights.
  const std::string weights = manager.StepDir(2) + "/model.safetensors";
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const absl::Status status = VerifyChecksums(manager.StepDir(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("model.safetensors: checksum mismatch"),
            std::string::npos);
  EXPECT_EQ(*manager.LatestValid(), manager.StepDir(1));
}

// A manifest's numbers are range-checked, not cast: crc32 + 2^32 would pass
// for the true CRC under get<uint32_t>(), a fractional size for its floor.
TEST(CheckpointTest, ManifestNumbersAreRangeChecked) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(1, TinyModel(), Contents(1)).ok());
  const std::string dir = manager.StepDir(1);
  const std::string manifest_path = dir + "/checksums.json";
  const nlohmann::json good = testing::ReadJsonFile(manifest_path);
  ASSERT_TRUE(VerifyChecksums(dir).ok());
  const nlohmann::json entry = good["files"]["model.safetensors"];
  const uint64_t crc = entry["crc32"].get<uint64_t>();
  const uint64_t bytes = entry["bytes"].get<uint64_t>();
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"crc32", crc + (uint64_t{1} << 32)}, {"bytes", bytes}},
       "model.safetensors: crc32: "},
      {{{"crc32", crc}, {"bytes", static_cast<double>(bytes) + 0.5}},
       "model.safetensors: bytes: "},
      {{{"crc32", -1}, {"bytes", bytes}}, "model.safetensors: crc32: "},
      {{{"bytes", bytes}}, "'model.safetensors' needs bytes and crc32"},
  };
  for (const auto& [bad, expected] : cases) {
    nlohmann::json manifest = good;
    manifest["files"]["model.safetensors"] = bad;
    ASSERT_TRUE(WriteFileAtomic(manifest_path, manifest.dump()).ok());
    const absl::Status s = VerifyChecksums(dir);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << bad.dump();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s;
  }
}

TEST(CheckpointTest, TruncatedOrUnmanifestedCheckpointIsNeverLoaded) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(5, TinyModel(), Contents(5)).ok());
  ASSERT_TRUE(manager.Save(6, TinyModel(), Contents(6)).ok());
  ASSERT_TRUE(manager.Save(7, TinyModel(), Contents(7)).ok());
  // step_7 truncated, step_6 lost its manifest (e.g. copied by hand).
  ::truncate((manager.StepDir(7) + "/optimizer.safetensors").c_str(), 4);
  ASSERT_TRUE(RemoveAll(manager.StepDir(6) + "/checksums.json").ok());
  EXPECT_EQ(*manager.LatestValid(), manager.StepDir(5));
  // A half-written checkpoint is a hidden temporary, not a step_ directory.
  ASSERT_TRUE(MakeDirs(manager.checkpoints_dir() + "/.step_8.tmp-1-0").ok());
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{5, 6, 7}));
}

// checksums.json is ours, but a hand-edited or forged one must not make the
// verifier read outside the checkpoint, read a device or FIFO forever, or
// follow a link out: each is an error naming the entry.
TEST(CheckpointTest, ManifestNamesAreConfinedAndSpecialFilesRefused) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(1, TinyModel(), Contents(1)).ok());
  const std::string dir = manager.StepDir(1);
  const std::string manifest_path = dir + "/checksums.json";
  const nlohmann::json good = testing::ReadJsonFile(manifest_path);
  // A regular file outside the checkpoint, with its true size and CRC.
  const std::string outside = tmp.Join("outside.bin");
  ASSERT_TRUE(WriteFileAtomic(outside, "secret").ok());
  const uint32_t outside_crc = *FileCrc32(outside);
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (dir + "/link").c_str()), 0);
  struct Case {
    std::string name;
    nlohmann::json entry;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"../../outside.bin",
       {{"crc32", outside_crc}, {"bytes", 6}},
       "'../../outside.bin' is not a file name in the checkpoint"},
      {"../../../../../../../../dev/zero",
       {{"crc32", 0}, {"bytes", 0}},
       "is not a file name in the checkpoint"},
      {"fifo", {{"crc32", 0}, {"bytes", 0}}, "fifo: not a regular file"},
      {"link",
       {{"crc32", outside_crc}, {"bytes", 6}},
       "link: not a regular file"},
      {"", {{"crc32", 0}, {"bytes", 0}}, "'' is not a file name"},
  };
  for (const Case& c : cases) {
    nlohmann::json manifest = good;
    manifest["files"][c.name] = c.entry;
    ASSERT_TRUE(WriteFileAtomic(manifest_path, manifest.dump()).ok());
    // Run the check on a thread so that a verifier reading a device forever
    // fails the test instead of hanging it.
    auto done = std::make_shared<std::promise<absl::Status>>();
    std::future<absl::Status> status = done->get_future();
    std::thread([done, dir]() {
      done->set_value(VerifyChecksums(dir));
    }).detach();
    ASSERT_EQ(status.wait_for(std::chrono::seconds(20)),
              std::future_status::ready)
        << c.name << ": still reading";
    const absl::Status s = status.get();
    EXPECT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.message().find(c.expected), std::string::npos)
        << c.name << ": " << s;
  }
}

// Every state file is read with a bound: a checksums.json of a gigabyte (a
// sparse file here) is refused before it is read.
TEST(CheckpointTest, OversizedManifestIsRefused) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(1, TinyModel(), Contents(1)).ok());
  const std::string manifest = manager.StepDir(1) + "/checksums.json";
  ASSERT_EQ(::truncate(manifest.c_str(), int64_t{1} << 30), 0);
  const absl::Status s = VerifyChecksums(manager.StepDir(1));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("checksums.json: larger than the limit"),
            std::string::npos)
      << s;
}

// Bytes of the regular files under `dir`, recursively.
uint64_t TreeBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

// The entries of `dir` whose names start with '.'.
std::vector<std::string> HiddenEntries(const std::string& dir) {
  std::vector<std::string> hidden;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '.') hidden.push_back(name);
  }
  return hidden;
}

// A killed save's leftover: `.step_N.tmp-...` holding `bytes` bytes.
std::string MakeStaleTemp(const CheckpointManager& manager, int64_t step,
                          size_t bytes) {
  const std::string stale =
      absl::StrCat(manager.checkpoints_dir(), "/.step_", step, ".tmp-xyz");
  EXPECT_TRUE(MakeDirs(stale).ok());
  EXPECT_TRUE(
      WriteFileAtomic(stale + "/model.safetensors", std::string(bytes, 'x'))
          .ok());
  return stale;
}

// The leftover of a save killed mid-way goes before the next save writes,
// so that a save which itself fails (here: a file it cannot create) has
// still given back the space; a crash on a full disk must not turn into a
// save that fails for the same lack of space on every restart.
TEST(CheckpointTest, StaleTemporaryIsRemovedBeforeWriting) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(4, TinyModel(), Contents(4)).ok());
  const std::string stale = MakeStaleTemp(manager, 5, 1 << 20);

  CheckpointContents failing = Contents(5);
  failing.text_files["no_such_dir/notes.txt"] = "x";
  EXPECT_FALSE(manager.Save(5, TinyModel(), failing).ok());
  EXPECT_FALSE(PathExists(stale));
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{4}));

  MakeStaleTemp(manager, 5, 1 << 20);
  ASSERT_TRUE(manager.Save(5, TinyModel(), Contents(5)).ok());
  EXPECT_FALSE(PathExists(stale));
  EXPECT_TRUE(HiddenEntries(manager.checkpoints_dir()).empty());
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{4, 5}));
}

// A disk of `capacity` bytes that holds only the checkpoints directory.
CheckpointManager::FreeBytesFunction FakeDisk(uint64_t capacity) {
  return [capacity](const std::string& dir) -> absl::StatusOr<uint64_t> {
    const uint64_t used = TreeBytes(dir);
    return used >= capacity ? 0 : capacity - used;
  };
}

// On a disk with room for two checkpoints, one checkpoint plus a killed
// save's leftover of the same size leave no room for a third copy: the
// save succeeds only because the leftover goes before the space is checked.
TEST(CheckpointTest, StaleTemporaryFreesSpaceForTheNextSave) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(4, TinyModel(), Contents(4)).ok());
  const uint64_t checkpoint = TreeBytes(manager.StepDir(4));
  const std::string stale = MakeStaleTemp(manager, 5, checkpoint);
  manager.set_free_bytes_function(FakeDisk(2 * checkpoint + 100));

  const absl::Status status = manager.Save(5, TinyModel(), Contents(5));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(PathExists(stale));
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{4, 5}));
}

// A save killed after its commit but before pruning leaves keep + 1
// checkpoints. On a disk with room for keep + 1 of them (plus a little),
// the next save fits only because the old checkpoint is pruned before the
// space is checked; otherwise every restart would fail the same way (seen
// with scripts/kill_loop.sh on a small tmpfs).
TEST(CheckpointTest, CheckpointsLeftUnprunedGoBeforeTheNextSave) {
  testing::TempDir tmp;
  CheckpointManager unpruned(tmp.path(), /*keep=*/0);
  for (int64_t step : {2, 4, 6}) {
    ASSERT_TRUE(unpruned.Save(step, TinyModel(), Contents(step)).ok());
  }
  const uint64_t checkpoint = TreeBytes(unpruned.StepDir(6));
  CheckpointManager manager(tmp.path(), /*keep=*/2);
  manager.set_free_bytes_function(FakeDisk(3 * checkpoint + 100));
  const absl::Status status = manager.Save(8, TinyModel(), Contents(8));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{6, 8}));
}

// Too little space for another checkpoint as large as the newest: an error
// with the numbers, before anything is written.
TEST(CheckpointTest, TooLittleFreeSpaceFailsBeforeWriting) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 0);
  ASSERT_TRUE(manager.Save(4, TinyModel(), Contents(4)).ok());
  const uint64_t checkpoint = TreeBytes(manager.StepDir(4));
  manager.set_free_bytes_function(
      [](const std::string&) -> absl::StatusOr<uint64_t> { return 1000; });

  const absl::Status status = manager.Save(5, TinyModel(), Contents(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  const std::string message(status.message());
  EXPECT_EQ(message.rfind(manager.checkpoints_dir() + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(absl::StrCat("needs about ", checkpoint, " bytes")),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("has 1000 bytes free"), std::string::npos) << message;
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{4}));
  EXPECT_TRUE(HiddenEntries(manager.checkpoints_dir()).empty());

  // Nothing to compare with before the first checkpoint.
  testing::TempDir empty;
  CheckpointManager first(empty.path(), 0);
  first.set_free_bytes_function(
      [](const std::string&) -> absl::StatusOr<uint64_t> { return 0; });
  EXPECT_TRUE(first.Save(1, TinyModel(), Contents(1)).ok());
}

// A run whose first non-finite step was step 25: pruning keeps step_20 (the
// newest from before it) beside the newest `keep`, however many follow; the
// checkpoints between it and the newest `keep` go as before.
TEST(CheckpointTest, PruningKeepsTheNewestCheckpointBeforeAStep) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/2);
  for (int64_t step : {10, 20}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  manager.set_keep_newest_before(25);
  EXPECT_EQ(manager.NewestBefore(25), 20);
  EXPECT_EQ(manager.NewestBefore(10), std::nullopt);
  for (int64_t step : {30, 40, 50, 60}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{20, 50, 60}));
  EXPECT_TRUE(VerifyChecksums(manager.StepDir(20)).ok());
  // Without it, only the newest two.
  manager.set_keep_newest_before(std::nullopt);
  ASSERT_TRUE(manager.Save(70, TinyModel(), Contents(70)).ok());
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{60, 70}));
}

// Checkpoints newer than a step move, unchanged and still verifying, into
// abandoned/after_step_<step>/ (.2 for a second resume from that step);
// nothing lists or prunes them there, and a later save is pruned among the
// remaining ones only.
TEST(CheckpointTest, SetAsideNewerThanMovesTheLaterTimeline) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), /*keep=*/2);
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  ASSERT_EQ(manager.ListSteps(), (std::vector<int64_t>{20, 30}));
  auto none = manager.SetAsideNewerThan(30);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "");
  auto aside = manager.SetAsideNewerThan(10);
  ASSERT_TRUE(aside.ok()) << aside.status();
  EXPECT_EQ(*aside, tmp.Join("checkpoints/abandoned/after_step_10"));
  EXPECT_TRUE(manager.ListSteps().empty());
  EXPECT_TRUE(VerifyChecksums(*aside + "/step_20").ok());
  EXPECT_TRUE(VerifyChecksums(*aside + "/step_30").ok());
  for (int64_t step : {20, 30, 40}) {
    ASSERT_TRUE(manager.Save(step, TinyModel(), Contents(step)).ok());
  }
  EXPECT_EQ(manager.ListSteps(), (std::vector<int64_t>{30, 40}));
  EXPECT_TRUE(PathExists(*aside + "/step_20"));
  auto again = manager.SetAsideNewerThan(10);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, tmp.Join("checkpoints/abandoned/after_step_10.2"));
  EXPECT_TRUE(PathExists(*again + "/step_30"));
  EXPECT_TRUE(PathExists(*again + "/step_40"));
  EXPECT_TRUE(PathExists(*aside + "/step_30"));
}

TEST(CheckpointTest, NoCheckpoints) {
  testing::TempDir tmp;
  CheckpointManager manager(tmp.path(), 3);
  EXPECT_TRUE(manager.ListSteps().empty());
  auto latest = manager.LatestValid();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_FALSE(latest->has_value());
}

}  // namespace
}  // namespace xlnet
