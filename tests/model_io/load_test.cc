// Weights in and out by HuggingFace names, and the xlnet-run logic.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "model_io/run.h"
#include "model_io/torch_pickle.h"
#include "tests/model/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::MakePlmInputs;
using testing::MakeRandomModel;
using testing::MaxAbsDiff;
using testing::ReadTensors;
using testing::ReportDiff;
using testing::TinyConfig;

std::string TempDir(const std::string& name) {
  std::string dir = std::string(XLNET_BINARY_DIR) + "/test_tmp/model_" + name +
                    "_" + std::to_string(::getpid());
  EXPECT_TRUE(RemoveAll(dir).ok());
  EXPECT_TRUE(MakeDirs(dir).ok());
  return dir;
}

TEST(CheckpointTest, SaveLoadIsBitExact) {
  auto config = TinyConfig();
  config.bi_data = true;
  config.ff_activation = "gelu_new";
  auto model = MakeRandomModel(config, 21);
  const std::string dir = TempDir("roundtrip") + "/model";
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  auto stored = ReadTensors(dir + "/model.safetensors");
  // What transformers needs to load it: model_type and the "pt" format tag.
  auto json = ReadFile(dir + "/config.json");
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(absl::StrContains(*json, "\"model_type\": \"xlnet\"")) << *json;
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(stored.count("lm_loss.weight"), 0u);
  EXPECT_EQ(stored.size(), model->named_parameters().size());
  auto loaded = LoadPretrained(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE((*loaded)->config().bi_data);
  EXPECT_EQ((*loaded)->config().ff_activation, "gelu_new");
  auto a = model->named_parameters();
  for (const auto& item : (*loaded)->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), a[item.key()])) << item.key();
  }
  (*loaded)->eval();
  auto x = MakePlmInputs(2, 8, 2, 50, {1, 0}, 22);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(
      torch::equal(model->forward(x).logits, (*loaded)->forward(x).logits));
}

TEST(CheckpointTest, GoldenLoadsAndBareXLNetModelNames) {
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  ASSERT_EQ(golden.size(), 37u);
  auto config = ReadModelConfigJson(GoldenDir() + "/config.json");
  ASSERT_TRUE(config.ok());
  // XLNetModel names (no prefix, no lm_loss) + a tied lm_loss.weight-free head.
  NamedTensors bare;
  for (const auto& [name, t] : golden) {
    if (absl::StartsWith(name, "transformer."))
      bare.emplace_back(name.substr(12), t);
  }
  XLNetLMHeadModel model(*config);
  auto status = LoadStateDict(*model, bare, "bare");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(
      torch::equal(model->named_parameters()["transformer.layer.1.rel_attn.r"],
                   golden.at("transformer.layer.1.rel_attn.r")));
  EXPECT_TRUE(torch::equal(model->lm_loss->bias, torch::zeros({128})));
  // A stored lm_loss.weight (tied) is accepted.
  NamedTensors with_weight(golden.begin(), golden.end());
  with_weight.emplace_back("lm_loss.weight",
                           golden.at("transformer.word_embedding.weight"));
  EXPECT_TRUE(LoadStateDict(*model, with_weight, "tied").ok());
}

TEST(CheckpointTest, AllProblemsInOneError) {
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  auto config = ReadModelConfigJson(GoldenDir() + "/config.json");
  ASSERT_TRUE(config.ok());
  NamedTensors bad;
  for (const auto& [name, t] : golden) {
    if (name == "transformer.layer.0.rel_attn.seg_embed") continue;  // missing
    if (name == "transformer.mask_emb") {
      bad.emplace_back(name, torch::zeros({1, 64}));  // wrong shape
      continue;
    }
    bad.emplace_back(name, t);
  }
  bad.emplace_back("transformer.layer.7.ff.layer_1.weight",
                   torch::zeros({2}));  // unexpected
  bad.emplace_back("sequence_summary.summary.bias",
                   torch::zeros({64}));  // a head
  XLNetLMHeadModel model(*config);
  auto before = model->transformer->mask_emb.clone();
  auto status = LoadStateDict(*model, bad, "bad.safetensors");
  ASSERT_FALSE(status.ok());
  const std::string msg(status.message());
  EXPECT_TRUE(absl::StrContains(msg, "bad.safetensors")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "transformer.layer.0.rel_attn.seg_embed"))
      << msg;
  EXPECT_TRUE(absl::StrContains(
      msg, "transformer.mask_emb: shape [1, 64] expected [1, 1, 64]"))
      << msg;
  EXPECT_TRUE(absl::StrContains(msg, "transformer.layer.7.ff.layer_1.weight"))
      << msg;
  EXPECT_TRUE(absl::StrContains(msg, "sequence_summary.summary.bias")) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_TRUE(torch::equal(before, model->transformer->mask_emb))
      << "nothing copied on error";
  // Heads are skipped when asked.
  LoadOptions skip_heads;
  skip_heads.ignore_prefixes = FineTuningHeadPrefixes();
  auto status2 = LoadStateDict(*model, bad, "bad", skip_heads);
  EXPECT_FALSE(absl::StrContains(status2.message(), "sequence_summary"))
      << status2;
}

TEST(CheckpointTest, PytorchBinThroughPickle) {
  // A zip-format pickle of a str -> Tensor dict, as LibTorch's
  // torch::pickle_save writes it.
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, t] : golden) dict.insert(name, t);
  auto bytes = torch::pickle_save(dict);
  const std::string dir = TempDir("bin");
  ASSERT_TRUE(WriteFileAtomic(dir + "/pytorch_model.bin",
                              std::string(bytes.begin(), bytes.end()))
                  .ok());
  auto config_text = ReadFile(GoldenDir() + "/config.json");
  ASSERT_TRUE(config_text.ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/config.json", *config_text).ok());
  auto model = LoadPretrained(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  for (const auto& item : (*model)->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), golden.at(item.key())))
        << item.key();
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/pytorch_model.bin", "not a pickle").ok());
  EXPECT_FALSE(LoadPretrained(dir).ok());
}

// An entry that declares a huge uncompressed size (a zip bomb: 2.7 MB that
// inflates to 4.3 GB) is refused from the central directory, before
// anything is inflated or allocated.
TEST(CheckpointTest, TorchSaveZipBombIsRefused) {
  c10::Dict<std::string, torch::Tensor> dict;
  dict.insert("w", torch::zeros({4}));
  const std::vector<char> saved = torch::pickle_save(dict);
  std::string bytes(saved.begin(), saved.end());
  const std::string dir = TempDir("bomb");
  ASSERT_TRUE(WriteFileAtomic(dir + "/ok.bin", bytes).ok());
  EXPECT_TRUE(ReadTorchSaveStateDict(dir + "/ok.bin").ok());
  // Every central directory entry: deflated, 0xF0000000 bytes declared.
  int patched = 0;
  for (size_t at = bytes.find("PK\x01\x02"); at != std::string::npos;
       at = bytes.find("PK\x01\x02", at + 4)) {
    bytes[at + 10] = 8;
    const char huge[4] = {0, 0, 0, static_cast<char>(0xF0)};
    bytes.replace(at + 24, 4, huge, 4);
    ++patched;
  }
  ASSERT_GT(patched, 0);
  ASSERT_TRUE(WriteFileAtomic(dir + "/bomb.bin", bytes).ok());
  auto bomb = ReadTorchSaveStateDict(dir + "/bomb.bin");
  ASSERT_FALSE(bomb.ok());
  EXPECT_TRUE(absl::StrContains(bomb.status().message(),
                                dir + "/bomb.bin: zip entry '"))
      << bomb.status();
  EXPECT_TRUE(
      absl::StrContains(bomb.status().message(), "4026531840 bytes declared"))
      << bomb.status();
}

TEST(CheckpointTest, TorchSaveOrderedDictStateDict) {
  // An OrderedDict state_dict with _metadata and views sharing a storage, in
  // torch.save's format (see tests/fixtures/torch_save/README.md).
  auto sd = ReadTorchSaveStateDict(
      std::string(XLNET_SOURCE_DIR) +
      "/tests/fixtures/torch_save/ordered_state_dict.bin");
  ASSERT_TRUE(sd.ok()) << sd.status();
  ASSERT_EQ(sd->size(), 4u);
  EXPECT_EQ((*sd)[0].first, "a.weight");
  auto base = torch::arange(12, torch::kFloat);
  EXPECT_TRUE(torch::equal((*sd)[0].second, base.view({3, 4})));
  EXPECT_EQ((*sd)[1].first, "a.bias");
  EXPECT_TRUE(torch::equal((*sd)[1].second, torch::tensor({2.0f, 3.0f})));
  EXPECT_TRUE(torch::equal((*sd)[2].second, base.view({3, 4}).t()));
  EXPECT_TRUE(torch::equal(
      (*sd)[3].second,
      torch::tensor({int64_t{7}, int64_t{-2}, int64_t{40000000000}})));
  const std::string dir = TempDir("badbin");
  ASSERT_TRUE(WriteFileAtomic(dir + "/x.bin", "PK not really").ok());
  auto bad = ReadTorchSaveStateDict(dir + "/x.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), dir + "/x.bin"))
      << bad.status();
}

TEST(RunToolTest, GoldenInputsGiveGoldenOutputs) {
  const std::string dir = TempDir("run");
  RunOptions options;
  options.model_dir = GoldenDir();
  options.inputs_path = GoldenDir() + "/inputs.safetensors";
  options.outputs_path = dir + "/out.safetensors";
  auto status = RunModel(options);
  ASSERT_TRUE(status.ok()) << status;
  auto out = ReadTensors(options.outputs_path);
  auto golden = ReadTensors(GoldenDir() + "/outputs.safetensors");
  EXPECT_LT(
      ReportDiff("xlnet-run logits", out.at("logits"), golden.at("lm.logits")),
      1e-4);
  EXPECT_LT(MaxAbsDiff(out.at("mems.1"), golden.at("lm.mems.1")), 1e-4);
  EXPECT_EQ(out.at("query_hidden_state").sizes(),
            (std::vector<int64_t>{2, 3, 64}));
  EXPECT_EQ(out.at("last_hidden_state").sizes(),
            (std::vector<int64_t>{2, 12, 64}));
  options.dtype = Dtype::kBf16;
  ASSERT_TRUE(RunModel(options).ok());
  auto bf16 = ReadTensors(options.outputs_path);
  EXPECT_LT(MaxAbsDiff(bf16.at("logits"), golden.at("lm.logits")), 0.5);
  options.dtype = Dtype::kFp16;
  EXPECT_FALSE(RunModel(options).ok());
}

TEST(RunToolTest, BadInputsAreClearErrors) {
  auto config = ReadModelConfigJson(GoldenDir() + "/config.json");
  ASSERT_TRUE(config.ok());
  auto in = ReadTensors(GoldenDir() + "/inputs.safetensors");
  auto expect_error = [&](std::map<std::string, torch::Tensor> t,
                          const std::string& needle) {
    auto r = InputsFromTensors(t, *config, torch::kCPU);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  };
  auto good = in;
  EXPECT_TRUE(InputsFromTensors(good, *config, torch::kCPU).ok());
  auto t = in;
  t.erase("input_ids");
  expect_error(t, "missing required input 'input_ids'");
  t = in;
  t["input_ids"] = in.at("input_ids").to(torch::kFloat);
  expect_error(t, "input_ids");
  t = in;
  t["perm_mask"] = torch::zeros({2, 12, 11});
  expect_error(
      t, "perm_mask': shape [2, 12, 11], expected [B, L, L] = [2, 12, 12]");
  t = in;
  t["target_mapping"] = torch::ones({2, 3, 12});
  expect_error(t, "one-hot");
  t = in;
  t["mems.0"] = torch::zeros({4, 2, 64});
  expect_error(t, "mems");
  t = in;
  t["mems.0"] = torch::zeros({4, 2, 64});
  t["mems.1"] = torch::zeros({4, 3, 64});
  expect_error(t, "mems.1");
  t = in;
  t["input_ids"] = torch::full({2, 12}, 500, torch::kLong);
  expect_error(t, "ids must be in [0, 128)");
  t = in;
  t["attention_mask"] = torch::full({2, 12}, 0.5);
  expect_error(t, "0 or 1");
  // A misspelled or out-of-range name was once ignored with a warning.
  t = in;
  t["attention_masks"] = torch::ones({2, 12});
  expect_error(t,
               "input 'attention_masks': not an input of the model; did "
               "you mean 'attention_mask'?");
  t = in;
  t["mems.9"] = torch::zeros({4, 2, 64});
  expect_error(t, "input 'mems.9': the model has mems.0 .. mems.1");
  // An input far longer than memory allows is refused before the forward
  // pass (its attention scores alone would be terabytes).
  t = in;
  t["input_ids"] = torch::zeros({1, int64_t{1} << 21}, torch::kLong);
  t.erase("perm_mask");
  t.erase("target_mapping");
  t.erase("token_type_ids");
  t.erase("attention_mask");
  expect_error(t, "input 'input_ids': [1, 2097152] with 0 memory positions");
}

TEST(RunToolTest, BinaryExitCodesAndOneLineErrors) {
  const std::string tool = std::string(XLNET_BINARY_DIR) + "/bin/xlnet-run";
  if (!PathExists(tool)) GTEST_SKIP() << "xlnet-run not built";
  const std::string dir = TempDir("bin_run");
  const std::string g = GoldenDir();
  auto run = [&](const std::string& args, std::string* err) {
    const std::string cmd =
        "XLNET_LOG_LEVEL=error " + tool + " " + args + " 2>" + dir + "/err";
    const int rc = std::system(cmd.c_str());
    auto text = ReadFile(dir + "/err");
    *err = text.ok() ? *text : "";
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  std::string err;
  EXPECT_EQ(run("--model " + g + " --inputs " + g +
                    "/inputs.safetensors --outputs " + dir + "/out.safetensors",
                &err),
            0)
      << err;
  EXPECT_EQ(ReadTensors(dir + "/out.safetensors").size(), 5u);
  EXPECT_EQ(
      run("--model " + g + " --inputs " + g +
              "/outputs.safetensors --outputs " + dir + "/bad.safetensors",
          &err),
      2);
  EXPECT_TRUE(absl::StartsWith(err, "xlnet-run: error: ")) << err;
  EXPECT_TRUE(absl::StrContains(err, "input_ids")) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(PathExists(dir + "/bad.safetensors"));
  EXPECT_EQ(
      run("--model " + g + " --inputs " + g + "/inputs.safetensors", &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "--outputs")) << err;
}

}  // namespace
}  // namespace xlnet
