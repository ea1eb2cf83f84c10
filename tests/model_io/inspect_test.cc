// Runs the real xlnet-inspect binary: a user's view of errors and exit codes.
#include <gtest/gtest.h>

#include <fstream>

#include "common/file_util.h"
#include "common/safetensors.h"
#include "model_io/model_dir.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using xlnet::testing::CommandResult;
using Result = CommandResult;

Result RunInspect(const std::string& args) {
  return xlnet::testing::RunCommand(xlnet::testing::ToolPath("inspect") + " " +
                                    args);
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class InspectToolTest : public ::testing::Test {
 protected:
  xlnet::testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(InspectToolTest, PrintsSafetensors) {
  const std::string path = dir_ + "/t.safetensors";
  ASSERT_TRUE(
      WriteSafetensors(path, {{"layer.weight", torch::zeros({4, 3})},
                              {"ids", torch::zeros({2}, torch::kInt64)}})
          .ok());
  Result r = RunInspect(path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layer.weight"), std::string::npos);
  EXPECT_NE(r.output.find("F32"), std::string::npos);
  EXPECT_NE(r.output.find("[4, 3]"), std::string::npos);
  EXPECT_NE(r.output.find("I64"), std::string::npos);
  EXPECT_NE(r.output.find("2 tensors, 14 elements"), std::string::npos);
}

TEST_F(InspectToolTest, PrintsModelDirectory) {
  const std::string model = dir_ + "/model";
  ASSERT_TRUE(MakeDirs(model).ok());
  auto json = ReadFile(std::string(XLNET_SOURCE_DIR) +
                       "/tests/fixtures/hf_config.json");
  ASSERT_TRUE(json.ok());
  ASSERT_TRUE(WriteFileAtomic(model + "/config.json", *json).ok());
  ASSERT_TRUE(WriteSafetensors(
                  model + "/model.safetensors",
                  {{"a", torch::zeros({10, 10})}, {"b", torch::zeros({5})}})
                  .ok());
  Result r = RunInspect(model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layers 2, d_model 64"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("parameters 105 in 2 tensors"), std::string::npos)
      << r.output;
}

// A directory we wrote is verified against its checksums.json: intact, it
// says so; a bit flipped in its weights is an error naming the file.
TEST_F(InspectToolTest, VerifiesAModelDirectory) {
  const std::string model = dir_ + "/ours";
  XLNetConfig config;
  config.vocab_size = 10;
  config.d_model = 4;
  config.n_head = 1;
  config.d_head = 4;
  config.n_layer = 1;
  ASSERT_TRUE(WriteModelDir(
                  model, config,
                  {{"transformer.word_embedding.weight", torch::ones({10, 4})}})
                  .ok());
  Result r = RunInspect(model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checksums.json: every file verified"),
            std::string::npos)
      << r.output;
  const std::string weights = model + "/model.safetensors";
  auto bytes = ReadFile(weights);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(weights, *bytes).ok());
  r = RunInspect(model);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(weights + ": checksum mismatch"), std::string::npos)
      << r.output;
}

TEST_F(InspectToolTest, PrintsResolvedConfig) {
  Result r = RunInspect(std::string(XLNET_SOURCE_DIR) +
                        "/configs/tiny.yaml --set train.lr=0.5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("lr: 0.5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("finetune:"), std::string::npos);
}

TEST_F(InspectToolTest, MalformedInputsGiveOneLineErrors) {
  const std::string bad_yaml = dir_ + "/bad.yaml";
  std::ofstream(bad_yaml) << "model:\n  n_layers: 3\n";
  Result r = RunInspect(bad_yaml);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("bad.yaml:2: unknown key 'model.n_layers' (did you "
                          "mean 'n_layer'?)"),
            std::string::npos)
      << r.output;

  const std::string bad_st = dir_ + "/bad.safetensors";
  std::ofstream(bad_st) << "\x10\x00\x00\x00\x00\x00\x00\x00{not json";
  r = RunInspect(bad_st);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("xlnet-inspect: error: "), std::string::npos);

  r = RunInspect(dir_ + "/nothing.safetensors");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;

  r = RunInspect("--bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag --bogus"), std::string::npos);

  r = RunInspect("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage: xlnet-inspect"), std::string::npos);
}

}  // namespace
}  // namespace xlnet
