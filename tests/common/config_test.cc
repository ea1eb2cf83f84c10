#include "common/config.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ConfigTest, PresetsParseAndValidate) {
  for (const char* name : {"tiny", "small", "brown-small", "brown-medium",
                           "xlnet-base", "xlnet-large"}) {
    auto config = LoadConfig(std::string(XLNET_SOURCE_DIR) + "/configs/" +
                             name + ".yaml");
    ASSERT_TRUE(config.ok()) << name << ": " << config.status();
  }
  auto base =
      LoadConfig(std::string(XLNET_SOURCE_DIR) + "/configs/xlnet-base.yaml");
  EXPECT_EQ(base->model.n_layer, 12);
  EXPECT_EQ(base->model.d_model, 768);
  EXPECT_EQ(base->data.num_predict, 85);
  EXPECT_EQ(base->model.mem_len, 384);
}

TEST(ConfigTest, EmptyTextGivesDefaults) {
  auto config = ParseConfig("", "empty.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.vocab_size, 32000);
  EXPECT_EQ(config->train.dtype, "fp32");
  EXPECT_FALSE(config->model.reuse_len.has_value());
}

TEST(ConfigTest, ReadsEveryType) {
  auto config = ParseConfig(R"(
model:
  d_model: 32
  n_head: 2
  d_head: 16
  mem_len: null
  reuse_len: 4
  dropout: 0.25
  untie_r: false
  ff_activation: relu
  id2label: [neg, pos, neutral]
train:
  lr: 3e-4
  device: "cuda:1"
)",
                            "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.d_model, 32);
  EXPECT_FALSE(config->model.mem_len.has_value());
  EXPECT_EQ(config->model.reuse_len, 4);
  EXPECT_DOUBLE_EQ(config->model.dropout, 0.25);
  EXPECT_FALSE(config->model.untie_r);
  EXPECT_EQ(config->model.ff_activation, "relu");
  EXPECT_EQ(config->model.id2label.size(), 3u);
  EXPECT_DOUBLE_EQ(config->train.lr, 3e-4);
  EXPECT_EQ(config->train.device, "cuda:1");
}

TEST(ConfigTest, UnknownKeyNamesFileLineAndSuggestion) {
  auto config = ParseConfig("model:\n  d_model: 64\n  n_layr: 2\n", "my.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(config.status()),
            "my.yaml:3: unknown key 'model.n_layr' (did you mean 'n_layer'?)");
}

TEST(ConfigTest, UnknownSection) {
  auto config = ParseConfig("trian:\n  lr: 1\n", "my.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(Message(config.status()).find("my.yaml:1: unknown section 'trian'"),
            std::string::npos);
  EXPECT_NE(Message(config.status()).find("did you mean 'train'"),
            std::string::npos);
}

TEST(ConfigTest, WrongTypeNamesKeyAndLine) {
  auto config =
      ParseConfig("train:\n  lr: 1e-3\n  batch_size: eight\n", "x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(Message(config.status()),
            "x.yaml:3: train.batch_size: expected an integer, got 'eight'");
  config = ParseConfig("model:\n  untie_r: maybe\n", "x.yaml");
  EXPECT_EQ(Message(config.status()),
            "x.yaml:2: model.untie_r: expected true or false, got 'maybe'");
  config = ParseConfig("model:\n  d_model: [1, 2]\n", "x.yaml");
  EXPECT_EQ(Message(config.status()),
            "x.yaml:2: model.d_model: expected an integer, got a list");
  config = ParseConfig("train:\n  batch_size: 2.5\n", "x.yaml");
  EXPECT_FALSE(config.ok());
}

TEST(ConfigTest, OutOfRangeNamesKeyAndLine) {
  auto config = ParseConfig("model:\n  n_head: 5\n", "r.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(Message(config.status())
                .find("model.d_head: n_head * d_head must "
                      "equal d_model"),
            std::string::npos);
  config = ParseConfig(
      "data:\n  seq_len: 128\n  reuse_len: 64\n  perm_size: 48\n", "r.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(Message(config.status()).rfind("r.yaml:4: data.perm_size", 0), 0u)
      << Message(config.status());
  config = ParseConfig("train:\n  dtype: fp8\n", "r.yaml");
  EXPECT_EQ(
      Message(config.status()),
      "r.yaml:2: train.dtype: must be one of fp32, bf16, fp16 (got 'fp8') "
      "(did you mean 'fp32'?)");
  config = ParseConfig("model:\n  dropout: 1.5\n", "r.yaml");
  EXPECT_EQ(Message(config.status()),
            "r.yaml:2: model.dropout: must be in [0, 1) (got 1.5)");
  config = ParseConfig("train:\n  dtype: fp16\n", "r.yaml");
  EXPECT_NE(Message(config.status()).find("fp16 needs device cuda"),
            std::string::npos);
  config = ParseConfig("train:\n  device: tpu\n", "r.yaml");
  EXPECT_NE(Message(config.status()).find("train.device"), std::string::npos);
}

TEST(ConfigTest, InvalidYamlNamesLine) {
  auto config = ParseConfig("model:\n  d_model: [1,\n", "bad.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(Message(config.status()).find("bad.yaml:"), std::string::npos);
  EXPECT_NE(Message(config.status()).find("invalid YAML"), std::string::npos);
  config = ParseConfig("- 1\n- 2\n", "list.yaml");
  EXPECT_FALSE(config.ok());
}

TEST(ConfigTest, OverridesApplyAndAreNamedInErrors) {
  auto config =
      ParseConfig("train:\n  lr: 1e-3\n", "o.yaml",
                  {"train.lr=5e-5", "model.mem_len=null", "train.device=cuda"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->train.lr, 5e-5);
  EXPECT_FALSE(config->model.mem_len.has_value());
  EXPECT_EQ(config->train.device, "cuda");

  config = ParseConfig("", "o.yaml", {"train.lr"});
  EXPECT_EQ(Message(config.status()),
            "--set train.lr: expected section.key=value");
  config = ParseConfig("", "o.yaml", {"train.lrr=1"});
  EXPECT_EQ(Message(config.status()),
            "--set train.lrr=1: unknown key 'train.lrr' (did you mean 'lr'?)");
  config = ParseConfig("", "o.yaml", {"train.batch_size=-3"});
  EXPECT_EQ(
      Message(config.status()),
      "--set train.batch_size=-3: train.batch_size: must be positive (got -3)");
}

TEST(ConfigTest, YamlRoundTrip) {
  auto config = ParseConfig(
      "model:\n  dropout: 0.3\n  reuse_len: 7\n  id2label: [a, b]\ntrain:\n"
      "  lr: 0.00025\n",
      "rt.yaml");
  ASSERT_TRUE(config.ok());
  const std::string yaml = ConfigToYaml(*config);
  auto again = ParseConfig(yaml, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_EQ(ConfigToYaml(*again), yaml);
  EXPECT_DOUBLE_EQ(again->model.dropout, 0.3);
  EXPECT_EQ(again->model.reuse_len, 7);
  EXPECT_DOUBLE_EQ(again->train.lr, 0.00025);
  EXPECT_EQ(again->model.id2label, (std::vector<std::string>{"a", "b"}));
}

TEST(ConfigTest, WriteConfigYamlReadsBack) {
  testing::TempDir tmp;
  auto config =
      ParseConfig("train:\n  lr: 0.125\n", "w.yaml", {"model.n_layer=3"});
  ASSERT_TRUE(config.ok());
  const std::string path = tmp.Join("config.yaml");
  ASSERT_TRUE(WriteConfigYaml(*config, path).ok());
  auto again = LoadConfig(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->model.n_layer, 3);
  EXPECT_DOUBLE_EQ(again->train.lr, 0.125);
}

TEST(ConfigTest, ModelJsonRoundTripAndHfFile) {
  auto golden = ReadModelConfigJson(std::string(XLNET_SOURCE_DIR) +
                                    "/tests/fixtures/hf_config.json");
  ASSERT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(golden->vocab_size, 128);
  EXPECT_EQ(golden->d_head, 16);
  EXPECT_EQ(golden->mem_len, 8);
  EXPECT_FALSE(golden->reuse_len.has_value());
  EXPECT_EQ(golden->id2label.size(), 2u);
  const std::string json = ModelConfigToJson(*golden);
  auto again = ParseModelConfigJson(json, "again.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ModelConfigToJson(*again), json);
  EXPECT_NE(json.find("\"model_type\": \"xlnet\""), std::string::npos);
  EXPECT_NE(json.find("\"label2id\""), std::string::npos);
}

TEST(ConfigTest, ModelJsonErrors) {
  EXPECT_FALSE(ParseModelConfigJson("{", "c.json").ok());
  auto wrong = ParseModelConfigJson(R"({"d_model": "big"})", "c.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(Message(wrong.status()).find("c.json: key 'd_model'"),
            std::string::npos);
  auto other = ParseModelConfigJson(R"({"model_type": "bert"})", "c.json");
  EXPECT_NE(Message(other.status()).find("expected \"xlnet\""),
            std::string::npos);
  // Keys that transformers adds to every config are ignored; d_head derived.
  auto ok = ParseModelConfigJson(
      R"({"d_model": 64, "n_head": 4, "torch_dtype": "float32", "return_dict": true})",
      "c.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->d_head, 16);
}

}  // namespace
}  // namespace xlnet
