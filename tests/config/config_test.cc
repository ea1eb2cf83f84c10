#include "config/config.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/version.h"
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
  EXPECT_EQ(config->train.dtype, Dtype::kFp32);
  EXPECT_TRUE(config->train.tensorboard);
  // model.reuse_len and model.bi_data (config.json keys) follow data.*.
  EXPECT_EQ(config->model.reuse_len, config->data.reuse_len);
  EXPECT_EQ(config->model.bi_data, config->data.bi_data);
}

TEST(ConfigTest, ReadsEveryType) {
  auto config = ParseConfig(R"(
model:
  d_model: 32
  n_head: 2
  d_head: 16
  mem_len: null
  dropout: 0.25
  untie_r: false
  ff_activation: relu
  id2label: [neg, pos, neutral]
data:
  seq_len: 16
  reuse_len: 8
  perm_size: 4
  num_predict: 4
  bi_data: false
train:
  lr: 3e-4
  device: "cuda:1"
  tensorboard: false
)",
                            "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.d_model, 32);
  EXPECT_FALSE(config->model.mem_len.has_value());
  EXPECT_EQ(config->model.reuse_len, 8);
  EXPECT_FALSE(config->model.bi_data);
  EXPECT_DOUBLE_EQ(config->model.dropout, 0.25);
  EXPECT_FALSE(config->model.untie_r);
  EXPECT_EQ(config->model.ff_activation, "relu");
  EXPECT_EQ(config->model.id2label.size(), 3u);
  EXPECT_DOUBLE_EQ(config->train.lr, 3e-4);
  EXPECT_EQ(config->train.device, "cuda:1");
  EXPECT_FALSE(config->train.tensorboard);
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
  // The fused element-wise kernels are CUDA only.
  config = ParseConfig("train:\n  fused_elementwise: true\n", "r.yaml");
  EXPECT_NE(Message(config.status())
                .find("r.yaml:2: train.fused_elementwise: needs device cuda"),
            std::string::npos)
      << Message(config.status());
  config = ParseConfig("train:\n  device: cuda\n  fused_elementwise: true\n",
                       "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.fused_elementwise, FusedElementwise::kOn);
  // auto (the default) and false are valid anywhere; so is the bool's name.
  config = ParseConfig("train:\n  fused_elementwise: false\n", "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.fused_elementwise, FusedElementwise::kOff);
  config = ParseConfig("", "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.fused_elementwise, FusedElementwise::kAuto);
  EXPECT_EQ(config->train.attention, AttentionImpl::kAuto);
  config = ParseConfig("train:\n  fused_elementwise: yes\n", "r.yaml");
  EXPECT_NE(Message(config.status()).find("auto, true, false"),
            std::string::npos)
      << Message(config.status());
  // Early stopping counts evaluations: it needs eval_steps.
  config = ParseConfig("train:\n  patience: 3\n", "r.yaml");
  EXPECT_EQ(Message(config.status()),
            "r.yaml:2: train.patience: needs train.eval_steps > 0 (early "
            "stopping counts evaluations)");
  config = ParseConfig("train:\n  patience: 3\n  eval_steps: 100\n", "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.patience, 3);
  config = ParseConfig(
      "train:\n  eval_steps: 100\n  patience_min_delta: -0.1\n", "r.yaml");
  EXPECT_NE(Message(config.status()).find("train.patience_min_delta"),
            std::string::npos);
}

// Every enumerated setting's table names each value once, and names and
// values convert both ways.
template <typename E>
void ExpectTableRoundTrips(size_t count) {
  const std::vector<std::string> names = EnumNames<E>();
  EXPECT_EQ(names.size(), count);
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << EnumNameList<E>();
  for (const auto& [value, name] : EnumTable<E>::kNames) {
    EXPECT_FALSE(std::string(name).empty());
    EXPECT_EQ(ParseEnum<E>(name), value) << name;
    EXPECT_STREQ(EnumName(value), name);
  }
  EXPECT_FALSE(ParseEnum<E>("").has_value());
  EXPECT_FALSE(ParseEnum<E>(names[0] + "x").has_value());
}

// A run with an infinite learning rate (or clip, epsilon, decay) would
// diverge on its first step; such values are refused up front.
TEST(ConfigTest, InfiniteTrainerNumbersAreRefused) {
  for (const char* set :
       {"train.lr=.inf", "train.weight_decay=.inf", "train.adam_epsilon=.inf",
        "train.clip=.inf", "train.lr=.nan"}) {
    auto config = ParseConfig("", "c.yaml", {set});
    ASSERT_FALSE(config.ok()) << set;
    EXPECT_NE(Message(config.status()).find("must be a finite number"),
              std::string::npos)
        << config.status();
  }
  EXPECT_TRUE(ParseConfig("", "c.yaml", {"train.lr=3e-4"}).ok());
  for (const char* set : {"train.num_epochs=-1", "train.num_epochs=.nan",
                          "train.num_epochs=.inf", "train.num_epochs=2e6"}) {
    auto config = ParseConfig("", "c.yaml", {set});
    ASSERT_FALSE(config.ok()) << set;
    EXPECT_NE(Message(config.status())
                  .find("train.num_epochs: must be in [0, 1e+06] (0 = off)"),
              std::string::npos)
        << config.status();
  }
  auto epochs = ParseConfig("", "c.yaml", {"train.num_epochs=2.5"});
  ASSERT_TRUE(epochs.ok()) << epochs.status();
  EXPECT_EQ(epochs->train.num_epochs, 2.5);
}

// HuggingFace TrainingArguments names, in a section or flat at the top,
// are errors naming the key that holds the setting here.
TEST(ConfigTest, HuggingFaceNamesNameOurKey) {
  auto config = ParseConfig("train:\n  learning_rate: 3.0e-5\n", "hf.yaml");
  EXPECT_EQ(Message(config.status()),
            "hf.yaml:2: train.learning_rate: HuggingFace's learning_rate is "
            "train.lr here");
  config = ParseConfig("", "hf.yaml", {"train.num_train_epochs=3"});
  EXPECT_EQ(Message(config.status()),
            "--set train.num_train_epochs=3: train.num_train_epochs: "
            "HuggingFace's num_train_epochs is train.num_epochs here");
  config = ParseConfig("max_grad_norm: 1.0\n", "hf.yaml");
  EXPECT_EQ(Message(config.status()),
            "hf.yaml:1: max_grad_norm: HuggingFace's max_grad_norm is "
            "train.clip here");
  config = ParseConfig("", "hf.yaml", {"train.per_device_train_batch_size=8"});
  EXPECT_NE(Message(config.status())
                .find("train.batch_size_per_device here (rows per rank"),
            std::string::npos)
      << config.status();
  // Our own key of the same name is not caught.
  config = ParseConfig("train:\n  seed: 7\n  weight_decay: 0.01\n", "hf.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.seed, 7);
}

// One of the two batch keys: the per-device one derives the global batch
// from the world size; both at once is an error naming both places.
TEST(ConfigTest, OneOfTheGlobalAndThePerDeviceBatch) {
  auto config = ParseConfig("train:\n  batch_size: 32\n", "a.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(GlobalBatchSize(config->train, 8), 32);

  config = ParseConfig(
      "train:\n  batch_size_per_device: 4\n"
      "  grad_accum_steps: 2\n",
      "a.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.batch_size, 0);
  EXPECT_EQ(GlobalBatchSize(config->train, 1), 8);
  EXPECT_EQ(GlobalBatchSize(config->train, 16), 128);
  // Written out and read back, the config means the same.
  auto again = ParseConfig(ConfigToYaml(*config), "config.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->train.batch_size, 0);
  EXPECT_EQ(again->train.batch_size_per_device, 4);

  // A file's global batch and a per-device override.
  config = ParseConfig("train:\n  batch_size: 32\n", "a.yaml",
                       {"train.batch_size_per_device=4"});
  EXPECT_EQ(Message(config.status()),
            "--set train.batch_size_per_device=4: "
            "train.batch_size_per_device=4 and train.batch_size=32 (a.yaml:2) "
            "are both set: keep one (the rows per rank per forward, or the "
            "global batch over all ranks and micro-steps), or set "
            "train.batch_size=0");
  config = ParseConfig("train:\n  batch_size: 32\n", "a.yaml",
                       {"train.batch_size_per_device=4", "train.batch_size=0"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(GlobalBatchSize(config->train, 2), 8);
  config = ParseConfig("train:\n  batch_size: 0\n", "a.yaml");
  EXPECT_NE(Message(config.status())
                .find("train.batch_size: must be positive (or set "
                      "train.batch_size_per_device)"),
            std::string::npos)
      << config.status();
  config = ParseConfig("train:\n  batch_size_per_device: -1\n", "a.yaml");
  EXPECT_FALSE(config.ok());
}

TEST(SettingsTest, EveryTableNamesEachValueOnce) {
  ExpectTableRoundTrips<Objective>(2);
  ExpectTableRoundTrips<Dtype>(3);
  ExpectTableRoundTrips<LrDecay>(2);
  ExpectTableRoundTrips<AttentionImpl>(5);
  ExpectTableRoundTrips<BadRowPolicy>(2);
  ExpectTableRoundTrips<LongInputs>(2);
  ExpectTableRoundTrips<AnswerClassStart>(2);
  ExpectTableRoundTrips<DeviceKind>(2);
  EXPECT_EQ(EnumNameList<Dtype>(), "fp32, bf16, fp16");
  auto parsed = ParseEnumSetting<AttentionImpl>("--impls", "sdpaa");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(
      std::string(parsed.status().message()),
      "--impls: must be one of auto, unfused, tiled, cuda, sdpa (got 'sdpaa') "
      "(did you mean 'sdpa'?)");
}

// train.device: a DeviceKind and, for cuda:N, the index; anything else is
// refused with the forms it may take.
TEST(SettingsTest, DeviceSettingsParse) {
  auto cpu = ParseDeviceSetting("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->kind, DeviceKind::kCpu);
  EXPECT_FALSE(cpu->is_cuda());
  auto cuda = ParseDeviceSetting("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_TRUE(cuda->is_cuda());
  EXPECT_EQ(cuda->index, -1);
  auto third = ParseDeviceSetting("cuda:13");
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->is_cuda());
  EXPECT_EQ(third->index, 13);
  for (const char* bad : {"", "tpu", "cuda:", "cuda:x", "cuda:-1", "cpu:0",
                          "cuda:99999", "CUDA", "cuda 0"}) {
    auto parsed = ParseDeviceSetting(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(std::string(parsed.status().message()),
              absl::StrCat("must be cpu, cuda or cuda:N (got '", bad, "')"));
  }
  // In a config: the file and line, then the forms.
  auto config = ParseConfig("train:\n  device: cuda:x\n", "d.yaml");
  EXPECT_EQ(Message(config.status()),
            "d.yaml:2: train.device: must be cpu, cuda or cuda:N (got "
            "'cuda:x')");
}

// Enumerated keys read from YAML and --set, are written back by name, and
// a value of the wrong shape names the key and the allowed names.
TEST(ConfigTest, EnumeratedKeysReadWriteAndRefuse) {
  auto config = ParseConfig(
      "train:\n  attention: tiled\n  decay: cos\nfinetune:\n  bad_rows: "
      "skip\n  answer_class_start: hf\n",
      "e.yaml", {"train.dtype=bf16", "finetune.long_inputs=chunks"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.attention, AttentionImpl::kTiled);
  EXPECT_EQ(config->train.decay, LrDecay::kCos);
  EXPECT_EQ(config->train.dtype, Dtype::kBf16);
  EXPECT_EQ(config->finetune.bad_rows, BadRowPolicy::kSkip);
  EXPECT_EQ(config->finetune.long_inputs, LongInputs::kChunks);
  EXPECT_EQ(config->finetune.answer_class_start, AnswerClassStart::kHf);
  const std::string yaml = ConfigToYaml(*config);
  EXPECT_NE(yaml.find("attention: \"tiled\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("dtype: \"bf16\""), std::string::npos) << yaml;
  auto again = ParseConfig(yaml, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ConfigToYaml(*again), yaml);
  config = ParseConfig("train:\n  decay: [cos]\n", "e.yaml");
  EXPECT_EQ(std::string(config.status().message()),
            "e.yaml:2: train.decay: expected one of linear, cos, got a list");
  config = ParseConfig("", "e.yaml", {"train.attention=flash"});
  EXPECT_EQ(Message(config.status())
                .rfind("--set train.attention=flash: train.attention: must be "
                       "one of auto, unfused, tiled, cuda, sdpa (got 'flash')",
                       0),
            0u)
      << config.status();
}

// A command's scope: keys it does not read are errors naming the command,
// the key and where it was set; other keys of the section still parse.
TEST(ConfigTest, ScopeRefusesKeysTheCommandDoesNotRead) {
  ConfigScope scope;
  scope.command = "xlnet-demo";
  scope.sections = {"train"};
  scope.unread_keys = {{"train.attention", "the demo has one core"}};
  auto config = ParseConfigFor(scope, "train:\n  lr: 0.5\n  attention: tiled\n",
                               "s.yaml");
  EXPECT_EQ(std::string(config.status().message()),
            "s.yaml:3: train.attention is not read by xlnet-demo (the demo "
            "has one core); remove it");
  config = ParseConfigFor(scope, "", "s.yaml", {"train.attention=unfused"});
  EXPECT_EQ(std::string(config.status().message()),
            "--set train.attention=unfused: train.attention is not read by "
            "xlnet-demo (the demo has one core); remove it");
  config = ParseConfigFor(scope, "train:\n  lr: 0.5\n", "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.lr, 0.5);
  config = ParseConfigFor(scope, "model:\n  n_layer: 2\n", "s.yaml");
  EXPECT_FALSE(config.ok());
}

TEST(ConfigTest, FinetuneLongInputs) {
  auto config = ParseConfig("finetune:\n  long_inputs: chunk\n", "r.yaml");
  EXPECT_EQ(Message(config.status()),
            "r.yaml:2: finetune.long_inputs: must be one of truncate, chunks "
            "(got 'chunk') (did you mean 'chunks'?)");
  config = ParseConfig("finetune:\n  max_chunks: 0\n", "r.yaml");
  EXPECT_EQ(Message(config.status()).rfind("r.yaml:2: finetune.max_chunks", 0),
            0u)
      << Message(config.status());
  config = ParseConfig("finetune:\n  mem_len: -2\n", "r.yaml");
  EXPECT_EQ(Message(config.status()).rfind("r.yaml:2: finetune.mem_len", 0), 0u)
      << Message(config.status());
  config = ParseConfig(
      "finetune:\n  long_inputs: chunks\n  max_chunks: 4\n  mem_len: 0\n",
      "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->finetune.long_inputs, LongInputs::kChunks);
  EXPECT_EQ(config->finetune.max_chunks, 4);
  EXPECT_EQ(config->finetune.mem_len, 0);
  // The defaults: truncation, as the official code.
  config = ParseConfig("", "r.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->finetune.long_inputs, LongInputs::kTruncate);
  EXPECT_EQ(config->finetune.max_chunks, 8);
  EXPECT_EQ(config->finetune.mem_len, -1);
}

TEST(ConfigTest, FinetuneInputColumns) {
  auto config = ParseConfig(
      "finetune:\n  text_column: review\n  text_b_column: title\n"
      "  label_column: stars\n  id_column: review_id\n",
      "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->finetune.text_column, "review");
  EXPECT_EQ(config->finetune.text_b_column, "title");
  EXPECT_EQ(config->finetune.label_column, "stars");
  EXPECT_EQ(config->finetune.id_column, "review_id");
  auto again = ParseConfig(ConfigToYaml(*config), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->finetune.text_b_column, "title");
  EXPECT_EQ(again->finetune.id_column, "review_id");
  // Empty (the default) detects the columns.
  EXPECT_EQ(ParseConfig("", "c.yaml")->finetune.text_column, "");
  config = ParseConfig("", "c.yaml", {"finetune.text_b_column=title"});
  EXPECT_EQ(Message(config.status()),
            "--set finetune.text_b_column=title: finetune.text_b_column: "
            "needs finetune.text_column (the first text) set too");
}

TEST(ConfigTest, RanksSharingOneGpu) {
  EXPECT_EQ(ParseConfig("", "g.yaml")->train.ranks_per_device, 1);
  auto config =
      ParseConfig("train:\n  device: cuda\n  ranks_per_device: 2\n", "g.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.ranks_per_device, 2);
  config =
      ParseConfig("train:\n  device: cuda\n  ranks_per_device: 0\n", "g.yaml");
  EXPECT_EQ(Message(config.status()),
            "g.yaml:3: train.ranks_per_device: must be in [1, 64] (got 0)");
  config = ParseConfig("train:\n  device: cuda:1\n  ranks_per_device: 2\n",
                       "g.yaml");
  EXPECT_EQ(Message(config.status()),
            "g.yaml:3: train.ranks_per_device: above 1 applies to device cuda "
            "(got 'cuda:1')");
  config = ParseConfig("train:\n  ranks_per_device: 2\n", "g.yaml");
  EXPECT_NE(Message(config.status()).find("(got 'cpu')"), std::string::npos)
      << Message(config.status());
}

TEST(ConfigTest, InvalidYamlNamesLine) {
  auto config = ParseConfig("model:\n  d_model: [1,\n", "bad.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(Message(config.status()).find("bad.yaml:"), std::string::npos);
  EXPECT_NE(Message(config.status()).find("invalid YAML"), std::string::npos);
  config = ParseConfig("- 1\n- 2\n", "list.yaml");
  EXPECT_FALSE(config.ok());
}

// A key given twice (in a section, or a section twice) and a second YAML
// document are errors naming both lines, not silently first-wins or ignored.
TEST(ConfigTest, DuplicateKeysAndSecondDocumentsAreErrors) {
  auto config = ParseConfig("train:\n  lr: 1e-3\n  lr: 5e-5\n", "d.yaml");
  EXPECT_EQ(Message(config.status()),
            "d.yaml:3: duplicate key 'train.lr' (first set at line 2)");
  config = ParseConfig(
      "train:\n  lr: 1e-3\nmodel:\n  d_model: 64\ntrain:\n  seed: 1\n",
      "d.yaml");
  EXPECT_EQ(Message(config.status()),
            "d.yaml:5: duplicate section 'train' (first at line 1)");
  config =
      ParseConfig("train:\n  lr: 1e-3\n---\ntrain:\n  lr: 5e-5\n", "two.yaml");
  EXPECT_EQ(Message(config.status()),
            "two.yaml:4: a second YAML document; a config file holds one");
  // A document end marker or a trailing empty document is no second config.
  EXPECT_TRUE(ParseConfig("train:\n  lr: 1e-3\n...\n", "end.yaml").ok());
  EXPECT_TRUE(ParseConfig("train:\n  lr: 1e-3\n---\n", "end.yaml").ok());
  // Documents are walked with a bound, not yaml-cpp's LoadAll (which can
  // loop forever on malformed text): yaml-cpp reads this as two documents
  // with no marker between them.
  config = ParseConfig("- a\n\"d\"\n", "m.yaml");
  EXPECT_EQ(Message(config.status()),
            "m.yaml: invalid YAML: it reads as 2 or more documents but has 0 "
            "document markers ('---', '...')");
  // config.json: the same rule (JSON readers differ on which one wins).
  auto json =
      ParseModelConfigJson(R"({"d_model": 64, "d_model": 128})", "c.json");
  EXPECT_EQ(Message(json.status()), "c.json: duplicate key 'd_model'");
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
      "--set train.batch_size=-3: train.batch_size: must be positive (or set "
      "train.batch_size_per_device) (got -3)");
}

TEST(ConfigTest, YamlRoundTrip) {
  auto config = ParseConfig(
      "model:\n  dropout: 0.3\n  id2label: [a, b]\ndata:\n  seq_len: 28\n"
      "  reuse_len: 7\n  perm_size: 7\n  num_predict: 5\ntrain:\n  lr: "
      "0.00025\n  tensorboard: false\n",
      "rt.yaml");
  ASSERT_TRUE(config.ok());
  const std::string yaml = ConfigToYaml(*config);
  auto again = ParseConfig(yaml, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_EQ(ConfigToYaml(*again), yaml);
  EXPECT_DOUBLE_EQ(again->model.dropout, 0.3);
  EXPECT_EQ(again->model.reuse_len, 7);
  EXPECT_DOUBLE_EQ(again->train.lr, 0.00025);
  EXPECT_FALSE(again->train.tensorboard);
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
  // The first line is a comment naming the build; the rest is the config,
  // and reading it back writes the same text again.
  const std::string text = *ReadFile(path);
  const std::string first = text.substr(0, text.find('\n') + 1);
  EXPECT_EQ(first, std::string("# written by xlnet.cpp ") + ProjectVersion() +
                       " (commit " + GitCommit() + ")\n");
  EXPECT_FALSE(std::string(GitCommit()).empty());
  EXPECT_EQ(text, first + ConfigToYaml(*config));
  EXPECT_EQ(ConfigFileText(*again), text);
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
  // A 21-byte file must not make a million label names (the fuzzer's
  // {"num_labels":885656} took over 20 s under ASan); 65536 is the most.
  auto many = ParseModelConfigJson(R"({"num_labels": 885656})", "c.json");
  EXPECT_EQ(Message(many.status()),
            "c.json: num_labels 885656: must be in [1, 65536]");
  auto most = ParseModelConfigJson(R"({"num_labels": 65536})", "c.json");
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(most->id2label.size(), 65536u);
}

// One key per setting: old homes are errors naming the new key, in the file
// (with its line) and in --set.
TEST(ConfigTest, MovedKeysNameTheirNewHome) {
  auto config =
      ParseConfig("model:\n  d_model: 64\n  bi_data: true\n", "old.yaml");
  EXPECT_EQ(Message(config.status()),
            "old.yaml:3: model.bi_data has moved to data.bi_data (the batches "
            "and the positional encoding use one value; config.json's "
            "bi_data is written from it)");
  config = ParseConfig("model:\n  reuse_len: 8\n", "old.yaml");
  EXPECT_NE(Message(config.status())
                .find("old.yaml:2: model.reuse_len has moved to "
                      "data.reuse_len"),
            std::string::npos);
  for (const char* key :
       {"max_steps", "lr", "warmup_steps", "batch_size", "eval_steps"}) {
    config =
        ParseConfig(absl::StrCat("finetune:\n  ", key, ": 1\n"), "ft.yaml");
    EXPECT_EQ(
        Message(config.status()),
        absl::StrCat("ft.yaml:2: finetune.", key, " has moved to train.", key,
                     " (fine-tuning runs on the same trainer keys)"));
    config = ParseConfig("", "ft.yaml", {absl::StrCat("finetune.", key, "=1")});
    EXPECT_EQ(Message(config.status()),
              absl::StrCat("--set finetune.", key, "=1: finetune.", key,
                           " has moved to train.", key,
                           " (fine-tuning runs on the same trainer keys)"));
  }
  // data.* is the one home; the model keys follow it.
  config = ParseConfig("", "d.yaml", {"data.bi_data=false"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->model.bi_data);
  config = ParseConfig("", "d.yaml", {"data.bi_data=true"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->model.bi_data);
  // The resolved YAML has no model.reuse_len/bi_data and reads back.
  const std::string yaml = ConfigToYaml(*config);
  EXPECT_EQ(yaml.find("  bi_data: true\n  clamp_len"), std::string::npos);
  EXPECT_TRUE(ParseConfig(yaml, "resolved.yaml").ok());
  // config.json still carries them (HF reads them).
  EXPECT_NE(ModelConfigToJson(config->model).find("\"bi_data\": true"),
            std::string::npos);
}

TEST(ConfigTest, CommandsRejectSectionsTheyDoNotRead) {
  const std::vector<std::string> finetune = {"data", "train", "finetune"};
  auto config = ParseConfig("train:\n  lr: 0.1\nmodel:\n  d_model: 8\n",
                            "ft.yaml", {}, finetune);
  EXPECT_EQ(Message(config.status()),
            "ft.yaml:3: section 'model' is not read by this command (the model "
            "comes from --init's config.json); it reads data, train, finetune");
  config = ParseConfig("", "ft.yaml", {"model.dropout=0.2"}, finetune);
  EXPECT_NE(Message(config.status())
                .find("--set model.dropout=0.2: section 'model' is not read"),
            std::string::npos);
  config = ParseConfig("finetune:\n  max_seq_length: 64\n", "pt.yaml", {},
                       {"model", "data", "train"});
  EXPECT_NE(Message(config.status())
                .find("pt.yaml:1: section 'finetune' is not read by this "
                      "command; it reads model, data, train"),
            std::string::npos);
  EXPECT_TRUE(ParseConfig("train:\n  lr: 0.1\n", "ft.yaml", {}, finetune).ok());
}

TEST(ConfigTest, SameArchitectureNamesEveryDifference) {
  XLNetConfig a;
  XLNetConfig b = a;
  b.dropout = 0.3;  // not architecture
  b.mem_len = 16;   // not architecture
  EXPECT_TRUE(CheckSameArchitecture(a, b, "init").ok());
  b.untie_r = !a.untie_r;
  b.d_inner = a.d_inner * 2;
  b.ff_activation = "relu";
  EXPECT_EQ(Message(CheckSameArchitecture(a, b, "DIR")),
            absl::StrCat("DIR: its architecture differs from the config's "
                         "model section (d_inner 4096 vs 8192, untie_r true vs "
                         "false, ff_activation gelu vs relu; stored vs "
                         "configured)"));
}

// The shipped fine-tuning configs parse as fine-tuning configs, and the
// pretraining ones as pretraining configs.
TEST(ConfigTest, ShippedConfigsFitTheirCommands) {
  for (const char* name : {"tiny", "small", "brown-small", "brown-medium",
                           "xlnet-base", "xlnet-large"}) {
    const std::string path =
        absl::StrCat(XLNET_SOURCE_DIR, "/configs/", name, ".yaml");
    auto config = LoadConfig(path, {}, {"model", "data", "train"});
    EXPECT_TRUE(config.ok()) << config.status();
  }
  for (const char* name :
       {"tiny", "brown-small", "brown-medium", "xlnet-base", "xlnet-large"}) {
    const std::string path =
        absl::StrCat(XLNET_SOURCE_DIR, "/configs/", name, "-finetune.yaml");
    auto config = LoadConfig(path, {}, {"data", "train", "finetune"});
    EXPECT_TRUE(config.ok()) << config.status();
  }
}

// yaml-cpp 0.7 allocates without end on "&a\rb," (an anchor, a lone
// carriage return, a plain scalar with a comma; found by the config fuzzer
// after 480k executions): a lone CR is refused before yaml-cpp sees the
// text, with the line; Windows line endings still parse.
TEST(ConfigTest, LoneCarriageReturnIsRefusedAndCrLfParses) {
  for (const std::string text : {"&a\rb,", "model:\r  d_model: 8\n", "\r"}) {
    auto config = ParseConfig(text, "c.yaml");
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_NE(std::string(config.status().message())
                  .find("c.yaml:1: invalid YAML: a carriage return without "
                        "a line feed"),
              std::string::npos)
        << config.status();
  }
  auto crlf = ParseConfig(
      "model:\r\n  d_model: 8\r\n  n_head: 2\r\n"
      "  d_head: 4\r\n",
      "c.yaml");
  ASSERT_TRUE(crlf.ok()) << crlf.status();
  EXPECT_EQ(crlf->model.d_model, 8);
}

// data.sources (#17): a list of {path, weight, name}; names default to the
// directory's basename and are written back, so RUN/config.yaml round-trips.
TEST(ConfigTest, DataSourcesParseAndRoundTrip) {
  const std::string text =
      "data:\n"
      "  sources:\n"
      "    - path: corpora/wiki/\n"
      "      weight: 0.75\n"
      "    - {path: /data/books, weight: 0.25, name: novels}\n"
      "    - path: web\n"
      "  source_block_steps: 20\n";
  auto config = ParseConfig(text, "s.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<DataSource> expected = {{"corpora/wiki/", 0.75, "wiki"},
                                            {"/data/books", 0.25, "novels"},
                                            {"web", 1.0, "web"}};
  EXPECT_EQ(config->data.sources, expected);
  EXPECT_EQ(config->data.source_block_steps, 20);
  const std::string yaml = ConfigToYaml(*config);
  auto again = ParseConfig(yaml, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_EQ(again->data.sources, config->data.sources);
  EXPECT_EQ(again->data.source_block_steps, 20);
  EXPECT_EQ(ConfigToYaml(*again), yaml);
  // Defaults: no sources (the --data directory), blocks of 100 steps; an
  // empty list writes and reads back as such.
  auto plain = ParseConfig("", "p.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->data.sources.empty());
  EXPECT_EQ(plain->data.source_block_steps, 100);
  auto plain_again = ParseConfig(ConfigToYaml(*plain), "p2.yaml");
  ASSERT_TRUE(plain_again.ok()) << plain_again.status();
  EXPECT_TRUE(plain_again->data.sources.empty());
  EXPECT_EQ(DataSourceName({"a/b//", 1.0, ""}), "b");
  EXPECT_EQ(DataSourceName({"a/b", 1.0, "x"}), "x");
}

TEST(ConfigTest, BadDataSourcesNameTheEntry) {
  auto error = [](const std::string& text,
                  const std::vector<std::string>& overrides = {}) {
    auto config = ParseConfig(text, "s.yaml", overrides);
    EXPECT_FALSE(config.ok()) << text;
    return config.ok() ? std::string() : Message(config.status());
  };
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n    - path: b\n"
                  "      wieght: 2\n"),
            "s.yaml:5: unknown key 'data.sources[1].wieght' (did you mean "
            "'weight'?); an entry has path, weight and name");
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n      weight: 0\n"),
            "s.yaml:4: data.sources[0].weight: must be a finite number > 0 "
            "(got 0)");
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n      weight: -1.5\n"),
            "s.yaml:4: data.sources[0].weight: must be a finite number > 0 "
            "(got -1.5)");
  EXPECT_EQ(error("data:\n  sources:\n    - weight: 2\n"),
            "s.yaml:3: data.sources[0].path: must name a prepared directory "
            "(xlnet-data prepare)");
  EXPECT_EQ(error("data:\n  sources:\n    - path: ''\n"),
            "s.yaml:3: data.sources[0].path: must name a prepared directory "
            "(xlnet-data prepare)");
  EXPECT_EQ(error("data:\n  sources:\n    - path: x/wiki\n"
                  "    - path: y/wiki\n"),
            "s.yaml:4: data.sources[1].name: 'wiki' is also the name of "
            "data.sources[0]; names must be unique (set name to tell them "
            "apart)");
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n      name: my corpus\n"),
            "s.yaml:4: data.sources[0].name: 'my corpus' must be letters, "
            "digits, '_', '-' or '.' (it names the metric tokens_<name>); "
            "set name");
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n      weight: heavy\n"),
            "s.yaml:4: data.sources[0].weight: expected a number, got "
            "'heavy'");
  EXPECT_EQ(error("data:\n  sources:\n    - path: a\n      path: b\n"),
            "s.yaml:4: duplicate key 'data.sources[0].path'");
  EXPECT_EQ(error("data:\n  sources:\n    - a_dir\n"),
            "s.yaml:3: data.sources[0]: expected a map {path, weight, name}, "
            "got 'a_dir'");
  EXPECT_NE(
      error("data:\n  sources: a_dir\n")
          .find("s.yaml:2: data.sources: expected a list of {path, weight, "
                "name} maps"),
      std::string::npos);
  EXPECT_EQ(error("data:\n  source_block_steps: 0\n"),
            "s.yaml:2: data.source_block_steps: must be >= 1 (got 0)");
}

// --set data.sources takes the list in YAML flow syntax; errors name the
// override.
TEST(ConfigTest, DataSourcesFromSetUseYamlFlowSyntax) {
  auto config =
      ParseConfig("data:\n  sources:\n    - path: old\n", "s.yaml",
                  {"data.sources=[{path: dirA, weight: 0.75, name: wiki}, "
                   "{path: dirB, weight: 0.25}]"});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<DataSource> expected = {{"dirA", 0.75, "wiki"},
                                            {"dirB", 0.25, "dirB"}};
  EXPECT_EQ(config->data.sources, expected);
  const std::string set = "data.sources=[{path: a, wieght: 2}]";
  config = ParseConfig("", "s.yaml", {set});
  EXPECT_EQ(Message(config.status()),
            "--set " + set +
                ": unknown key 'data.sources[0].wieght' (did you mean "
                "'weight'?); an entry has path, weight and name");
  config = ParseConfig("", "s.yaml", {"data.sources=dirA:0.5"});
  EXPECT_NE(
      Message(config.status())
          .find("--set data.sources=dirA:0.5: data.sources: expected a "
                "list of {path, weight, name} maps (--set: "
                "data.sources=[{path: DIR_A, weight: 3}, {path: DIR_B}])"),
      std::string::npos)
      << config.status();
  // An empty list turns blending off again.
  config = ParseConfig("data:\n  sources:\n    - path: a\n", "s.yaml",
                       {"data.sources=[]"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->data.sources.empty());
}

}  // namespace
}  // namespace xlnet
