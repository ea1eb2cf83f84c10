#include "model_io/model_dir.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace xlnet {
namespace {

TEST(ModelDirTest, WriteReadRoundTripWithStateFiles) {
  testing::TempDir tmp;
  XLNetConfig config;
  config.vocab_size = 50;
  config.d_model = 8;
  config.n_head = 2;
  config.d_head = 4;
  config.n_layer = 1;
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
