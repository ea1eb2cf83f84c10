#include "model_io/model_dir.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/checksums.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

// The config of the directories below (vocabulary 50, d_model 8).
XLNetConfig OneLayerConfig() {
  XLNetConfig config;
  config.vocab_size = 50;
  config.d_model = 8;
  config.n_head = 2;
  config.d_head = 4;
  config.n_layer = 1;
  return config;
}

// A one-layer model directory as our tools write it (checksums.json
// included), with a spiece.model of ours beside the weights.
std::string WriteVerifiedDir(const testing::TempDir& tmp,
                             const std::string& name = "step_7") {
  const XLNetConfig config = OneLayerConfig();
  torch::manual_seed(5);
  const std::string dir = tmp.Join(name);
  const absl::Status written = WriteModelDir(
      dir, config,
      {{"transformer.word_embedding.weight", torch::randn({50, 8})},
       {"lm_loss.bias", torch::randn({50})}},
      [](const AtomicDirWriter& w) {
        return WriteFileAtomic(w.Path(kTokenizerFile), "pieces of ours");
      });
  EXPECT_TRUE(written.ok()) << written;
  return dir;
}

// Every read path of a model directory (ReadModelDirConfig, ReadModelDir,
// CopyWeightsFromDir) fails with DataLoss whose message contains `needle`.
void ExpectEveryReadFails(const std::string& dir, const std::string& needle) {
  const absl::Status config = ReadModelDirConfig(dir).status();
  const absl::Status whole = ReadModelDir(dir).status();
  const absl::Status copy =
      CopyWeightsFromDir(dir, {{"lm_loss.bias", torch::zeros({50})}});
  for (const absl::Status& s : {config, whole, copy}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  }
}

// Flips one bit of the byte at `offset` of `path`.
void FlipBit(const std::string& path, size_t offset) {
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_LT(offset, bytes->size());
  (*bytes)[offset] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomic(path, *bytes).ok());
}

TEST(ModelDirTest, WrittenDirectoriesCarryACompleteManifest) {
  testing::TempDir tmp;
  const std::string dir = WriteVerifiedDir(tmp);
  EXPECT_TRUE(VerifyChecksums(dir).ok());
  const nlohmann::json manifest =
      testing::ReadJsonFile(dir + "/" + kChecksumsFile);
  for (const char* name : {kConfigFile, kWeightsFile, kTokenizerFile}) {
    EXPECT_TRUE(manifest["files"].contains(name)) << name;
  }
  auto loaded = ReadModelDir(dir);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
}

// A bit flipped in the weights, or a foreign spiece.model, is refused by
// every reader (export, --init and inspect read through them), naming the
// file.
TEST(ModelDirTest, DamagedFilesAreRefusedByEveryReader) {
  testing::TempDir tmp;
  const std::string dir = WriteVerifiedDir(tmp);
  const std::string weights = dir + "/" + kWeightsFile;
  // Past the header: a tensor's value, which no format check would notice.
  auto size = ReadFile(weights);
  ASSERT_TRUE(size.ok());
  FlipBit(weights, size->size() - 3);
  ExpectEveryReadFails(dir, weights + ": checksum mismatch");

  const std::string other = WriteVerifiedDir(tmp, "step_8");
  ASSERT_TRUE(ReadModelDir(other).ok());
  ASSERT_TRUE(
      WriteFileAtomic(other + "/" + kTokenizerFile, "pieces of others").ok());
  ExpectEveryReadFails(other, other + "/" + kTokenizerFile);
}

// The bytes of `dir`'s files other than checksums.json.
int64_t ListedBytes(const std::string& dir) {
  auto files = ListDirectoryFiles(dir);
  EXPECT_TRUE(files.ok()) << files.status();
  int64_t bytes = 0;
  for (const std::string& name : *files) {
    if (name == kChecksumsFile) continue;
    auto text = ReadFile(dir + "/" + name);
    EXPECT_TRUE(text.ok()) << text.status();
    bytes += static_cast<int64_t>(text->size());
  }
  return bytes;
}

// Verifying reads every byte: one load verifies each file once, and a
// caller that verified already (the checkpoint chosen for a resume, the
// --init whose config was read) is not made to read them again.
TEST(ModelDirTest, OneLoadVerifiesEachFileOnce) {
  testing::TempDir tmp;
  const std::string dir = WriteVerifiedDir(tmp);
  const int64_t listed = ListedBytes(dir);
  ASSERT_GT(listed, 0);
  int64_t before = VerifiedBytes();
  ASSERT_TRUE(ReadModelDir(dir).ok());
  EXPECT_EQ(VerifiedBytes() - before, listed);

  before = VerifiedBytes();
  ASSERT_TRUE(
      CopyWeightsFromDir(dir, {{"lm_loss.bias", torch::zeros({50})}}).ok());
  EXPECT_EQ(VerifiedBytes() - before, listed);

  before = VerifiedBytes();
  ASSERT_TRUE(ReadModelDir(dir, Checksums::kAlreadyVerified).ok());
  ASSERT_TRUE(CopyWeightsFromDir(dir, {{"lm_loss.bias", torch::zeros({50})}},
                                 Checksums::kAlreadyVerified)
                  .ok());
  EXPECT_EQ(VerifiedBytes() - before, 0);
}

// A manifest of no files, or one that leaves out the weights, checks
// nothing that matters: refused, naming the file left out.
TEST(ModelDirTest, IncompleteManifestsAreRefused) {
  testing::TempDir tmp;
  const std::string dir = WriteVerifiedDir(tmp);
  const std::string path = dir + "/" + kChecksumsFile;
  const nlohmann::json good = testing::ReadJsonFile(path);
  nlohmann::json empty = good;
  empty["files"] = nlohmann::json::object();
  nlohmann::json no_weights = good;
  no_weights["files"].erase(kWeightsFile);
  // The first file left out is named (config.json sorts first).
  for (const auto& [manifest, left_out] :
       {std::pair{empty, kConfigFile}, std::pair{no_weights, kWeightsFile}}) {
    ASSERT_TRUE(WriteFileAtomic(path, manifest.dump()).ok());
    EXPECT_EQ(VerifyChecksums(dir).code(), absl::StatusCode::kDataLoss)
        << manifest.dump();
    ExpectEveryReadFails(dir, absl::StrCat(dir, "/", left_out,
                                           ": not listed in ", kChecksumsFile));
  }
  // A literal {} is not a manifest at all.
  ASSERT_TRUE(WriteFileAtomic(path, "{}").ok());
  EXPECT_FALSE(ReadModelDir(dir).ok());
}

// A HuggingFace directory has no checksums.json: read unverified.
TEST(ModelDirTest, DirectoryWithoutManifestIsRead) {
  testing::TempDir tmp;
  const std::string dir = WriteVerifiedDir(tmp);
  ASSERT_EQ(std::remove((dir + "/" + kChecksumsFile).c_str()), 0);
  auto loaded = ReadModelDir(dir);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
}

TEST(ModelDirTest, WriteReadRoundTripWithStateFiles) {
  testing::TempDir tmp;
  const XLNetConfig config = OneLayerConfig();
  torch::manual_seed(3);
  NamedTensors tensors = {
      {"transformer.word_embedding.weight", torch::randn({50, 8})},
      {"lm_loss.bias", torch::randn({50})}};
  const std::string dir = tmp.Join("ckpt/step_10");
  ASSERT_TRUE(WriteModelDir(dir, config, tensors, [](const AtomicDirWriter& w) {
                return WriteStateJson(w.Path("trainer_state.json"),
                                      "trainer_state", 1, {{"step", 10}});
              }).ok());
  auto loaded = ReadModelDir(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.vocab_size, 50);
  for (const auto& [name, t] : tensors) {
    EXPECT_TRUE(torch::equal(*loaded->Tensor(name), t)) << name;
  }
  auto state = ReadStateJson(dir + "/trainer_state.json", "trainer_state", 1);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ((*state)["step"], 10);
}

TEST(ModelDirTest, ClearErrors) {
  testing::TempDir tmp;
  EXPECT_NE(ReadModelDir(tmp.Join("none"))
                .status()
                .message()
                .find("no such directory"),
            std::string::npos);
  EXPECT_NE(ReadModelDir(tmp.path()).status().message().find("no config.json"),
            std::string::npos);
  // An invalid config is refused before anything is written.
  XLNetConfig bad;
  bad.n_head = 3;
  EXPECT_FALSE(WriteModelDir(tmp.Join("bad"), bad, {}).ok());
  EXPECT_FALSE(PathExists(tmp.Join("bad")));

  const std::string state = tmp.Join("state.json");
  ASSERT_TRUE(WriteStateJson(state, "trainer_state", 3, {}).ok());
  auto newer = ReadStateJson(state, "trainer_state", 2);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("format_version 3"),
            std::string::npos);
  EXPECT_FALSE(ReadStateJson(state, "optimizer", 3).ok());
  // 2^32 + 1 is not version 1 (get<int>() used to truncate it).
  ASSERT_TRUE(WriteFileAtomic(state, R"({"format": "trainer_state",
      "format_version": 4294967297})")
                  .ok());
  auto wrapped = ReadStateJson(state, "trainer_state", 3);
  EXPECT_EQ(wrapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrapped.status().message().find("format_version 4294967297"),
            std::string::npos)
      << wrapped.status();
  ASSERT_TRUE(WriteFileAtomic(state, R"({"format": "trainer_state",
      "format_version": 1.5})")
                  .ok());
  EXPECT_FALSE(ReadStateJson(state, "trainer_state", 3).ok());
  ASSERT_TRUE(WriteFileAtomic(state, "{\"format\": ").ok());
  EXPECT_EQ(ReadStateJson(state, "trainer_state", 3).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace xlnet
