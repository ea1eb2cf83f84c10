// xlnet-export: export -> load gives the same outputs (fp32 exactly, bf16 as
// the bf16-rounded weights), encoder-only names are HF XLNetModel's, the
// tokenizer is found in run directories, bad inputs leave nothing behind,
// and --overwrite replaces only an earlier export.
#include "model_io/export.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "common/file_lock.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/version.h"
#include "config/config.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/run_layout.h"
#include "model_io/save.h"
#include "tests/model/test_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::GoldenDir;
using testing::ReadTensors;
using testing::ReportDiff;
using testing::RunCommand;
using testing::TempDir;
using testing::ToolPath;

constexpr char kTokenizerBytes[] = "not a real sentencepiece model\n";

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// What an export directory holds, sorted.
std::vector<std::string> ExportFiles() {
  return {"README.md",
          "checksums.json",
          "config.json",
          "model.safetensors",
          "special_tokens_map.json",
          "spiece.model",
          "tokenizer_config.json",
          kExportMarkerFile};
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = ReadTensors(GoldenDir() + "/inputs.safetensors");
    // A pretraining run: RUN/spiece.model, RUN/checkpoints/step_5/.
    run_ = tmp_.Join("run");
    step_ = run_ + "/checkpoints/step_5";
    ASSERT_TRUE(MakeDirs(step_).ok());
    ASSERT_TRUE(
        WriteFileAtomic(run_ + "/" + kTokenizerFile, kTokenizerBytes).ok());
    // The run's resolved config (cased, seq_len 64).
    WriteRunConfig(/*uncased=*/false);
    for (const char* f : {"config.json", "model.safetensors"}) {
      auto bytes = ReadFile(GoldenDir() + "/" + f);
      ASSERT_TRUE(bytes.ok());
      ASSERT_TRUE(WriteFileAtomic(step_ + "/" + f, *bytes).ok());
    }
  }
  void WriteRunConfig(bool uncased) {
    Config config;
    config.data.uncased = uncased;
    config.data.seq_len = 64;
    config.data.reuse_len = 32;
    config.data.perm_size = 32;
    config.data.num_predict = 10;
    config.finetune.max_seq_length = 48;
    ASSERT_TRUE(WriteConfigYaml(config, run_ + "/config.yaml").ok());
  }
  nlohmann::json Json(const std::string& path) {
    auto text = ReadFile(path);
    EXPECT_TRUE(text.ok()) << text.status();
    if (!text.ok()) return nullptr;
    auto j = ParseJson(*text, path);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : nullptr;
  }
  XLNetInputs Inputs(bool two_stream) {
    XLNetInputs x;
    x.input_ids = in_.at("input_ids");
    x.token_type_ids = in_.at("token_type_ids");
    x.attention_mask = in_.at("attention_mask");
    if (two_stream) {
      x.perm_mask = in_.at("perm_mask");
      x.target_mapping = in_.at("target_mapping");
    }
    return x;
  }
  ExportOptions Options(const std::string& out) {
    ExportOptions o;
    o.checkpoint = step_;
    o.out = tmp_.Join(out);
    // The tokenizer check of xlnet-export is data::Tokenizer's (tested in
    // tests/tools); here a stand-in that accepts the fixture's bytes.
    o.tokenizer_pieces =
        [](const std::string& bytes,
           const std::string& path) -> absl::StatusOr<int64_t> {
      if (bytes != kTokenizerBytes) {
        return absl::InvalidArgumentError(path + ": not the fixture");
      }
      return 100;
    };
    return o;
  }
  torch::Tensor LmLogits(const std::string& dir) {
    auto model = LoadPretrained(dir);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    (*model)->eval();
    torch::NoGradGuard no_grad;
    return (*model)->forward(Inputs(true)).logits;
  }
  TempDir tmp_;
  std::string run_, step_;
  std::map<std::string, torch::Tensor> in_;
};

TEST_F(ExportTest, LmCheckpointRoundTripsExactly) {
  auto o = Options("hf");
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetLMHeadModel");
  EXPECT_EQ(summary->tokenizer, run_ + "/" + kTokenizerFile);
  EXPECT_EQ(ListDir(o.out), ExportFiles());
  EXPECT_EQ(*ReadFile(o.out + "/spiece.model"), kTokenizerBytes);
  auto json = *ReadFile(o.out + "/config.json");
  EXPECT_TRUE(absl::StrContains(json, "\"XLNetLMHeadModel\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"torch_dtype\": \"float32\"")) << json;
  // Same names and values as the checkpoint (which has HF names already).
  auto golden = ReadTensors(GoldenDir() + "/model.safetensors");
  auto exported = ReadTensors(o.out + "/model.safetensors");
  ASSERT_EQ(exported.size(), golden.size());
  for (const auto& [name, t] : golden) {
    ASSERT_EQ(exported.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(exported.at(name), t)) << name;
  }
  EXPECT_EQ(exported.count("lm_loss.weight"), 0u) << "tied, not stored";
  EXPECT_TRUE(torch::equal(LmLogits(o.out), LmLogits(step_)));
}

TEST_F(ExportTest, EncoderOnlyHasExactlyHfXLNetModelNames) {
  auto o = Options("enc");
  o.encoder_only = true;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetModel");
  std::set<std::string> expected;
  for (const auto& [name, t] :
       ReadTensors(GoldenDir() + "/model.safetensors")) {
    if (absl::StartsWith(name, "transformer."))
      expected.insert(name.substr(12));
  }
  std::set<std::string> names;
  for (const auto& [name, t] : ReadTensors(o.out + "/model.safetensors")) {
    names.insert(name);
  }
  EXPECT_EQ(names, expected);
  EXPECT_EQ(names.count("mask_emb"), 1u);
  EXPECT_TRUE(
      absl::StrContains(*ReadFile(o.out + "/config.json"), "\"XLNetModel\""));
  // It loads back (bare names) with the same content stream.
  auto a = LoadPretrained(o.out);
  auto b = LoadPretrained(step_);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  (*a)->eval();
  (*b)->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(
      (*a)->transformer->forward(Inputs(false)).last_hidden_state,
      (*b)->transformer->forward(Inputs(false)).last_hidden_state));
  // Exporting that encoder again keeps it an encoder.
  auto again = Options("enc2");
  again.checkpoint = o.out;
  auto s2 = ExportModel(again);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->architecture, "XLNetModel");
}

TEST_F(ExportTest, Bf16IsTheRoundedModel) {
  auto o = Options("bf16");
  o.dtype = Dtype::kBf16;
  ASSERT_TRUE(ExportModel(o).ok());
  auto file = SafetensorsFile::Open(o.out + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  for (const auto& entry : file->entries()) {
    EXPECT_EQ(entry.dtype, "BF16") << entry.name;
  }
  auto json = *ReadFile(o.out + "/config.json");
  EXPECT_TRUE(absl::StrContains(json, "\"torch_dtype\": \"bfloat16\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"dtype\": \"bfloat16\"")) << json;
  // Loaded (as fp32) it is exactly the fp32 model with bf16-rounded weights.
  auto rounded = LoadPretrained(step_);
  ASSERT_TRUE(rounded.ok());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : (*rounded)->parameters()) {
      p.copy_(p.to(torch::kBFloat16).to(torch::kFloat));
    }
  }
  (*rounded)->eval();
  torch::NoGradGuard no_grad;
  auto logits = LmLogits(o.out);
  EXPECT_TRUE(torch::equal(logits, (*rounded)->forward(Inputs(true)).logits));
  // Against the fp32 model: bf16 weights (8-bit mantissa) move the logits by
  // about 1% of their spread.
  auto full = LmLogits(step_);
  const double diff = ReportDiff("bf16 export logits", logits, full);
  EXPECT_LT(diff, 0.02 * (full.max() - full.min()).item<double>());
}

TEST_F(ExportTest, FineTunedHeadsExportWholeOrEncoder) {
  auto qa = LoadForQuestionAnswering(step_);
  ASSERT_TRUE(qa.ok()) << qa.status();
  const std::string ft = run_ + "/finetune/qa";
  ASSERT_TRUE(SavePretrained(**qa, ft).ok());
  auto o = Options("qa");
  o.checkpoint = ft;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetForQuestionAnswering");
  EXPECT_EQ(summary->tokenizer, run_ + "/" + kTokenizerFile);  // DIR/../..
  EXPECT_TRUE(absl::StrContains(*ReadFile(o.out + "/config.json"),
                                "\"XLNetForQuestionAnswering\""));
  auto stored = ReadTensors(o.out + "/model.safetensors");
  EXPECT_EQ(stored.count("answer_class.dense_1.weight"), 1u);
  EXPECT_EQ(stored.count("answer_class.dense_1.bias"), 0u);
  EXPECT_EQ(stored.count("lm_loss.bias"), 0u);
  auto loaded = LoadForQuestionAnswering(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  (*qa)->eval();
  (*loaded)->eval();
  torch::NoGradGuard no_grad;
  auto p_mask = torch::zeros({2, 12});
  auto a = (*qa)->Predict(Inputs(false), p_mask);
  auto b = (*loaded)->Predict(Inputs(false), p_mask);
  EXPECT_TRUE(torch::equal(a.end_top_log_probs, b.end_top_log_probs));
  EXPECT_TRUE(torch::equal(a.cls_logits, b.cls_logits));

  auto enc = Options("qa_enc");
  enc.checkpoint = ft;
  enc.encoder_only = true;
  ASSERT_TRUE(ExportModel(enc).ok());
  auto names = ReadTensors(enc.out + "/model.safetensors");
  EXPECT_EQ(names.count("word_embedding.weight"), 1u);
  EXPECT_EQ(names.count("start_logits.dense.weight"), 0u);
  EXPECT_EQ(names.count("transformer.word_embedding.weight"), 0u);
}

TEST_F(ExportTest, ClassifierKeepsLabelsAndProblemType) {
  HeadLoadOptions options;
  options.labels = {"neg", "neu", "pos"};
  auto cls = LoadForSequenceClassification(step_, options);
  ASSERT_TRUE(cls.ok()) << cls.status();
  const std::string ft = run_ + "/finetune/cls";
  ASSERT_TRUE(SavePretrained(**cls, ft).ok());
  auto o = Options("cls");
  o.checkpoint = ft;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetForSequenceClassification");
  const auto json = *ReadFile(o.out + "/config.json");
  EXPECT_TRUE(absl::StrContains(
      json, "\"problem_type\": \"single_label_classification\""))
      << json;
  EXPECT_TRUE(absl::StrContains(json, "\"2\": \"pos\"")) << json;
  auto loaded = LoadForSequenceClassification(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  (*cls)->eval();
  (*loaded)->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal((*loaded)->forward(Inputs(false)).logits,
                           (*cls)->forward(Inputs(false)).logits));
}

TEST_F(ExportTest, BadInputsFailClearlyAndWriteNothing) {
  // Unknown dtype.
  auto o = Options("x");
  o.dtype = Dtype::kFp16;
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "fp16")) << s.status();
  // No config.json.
  ASSERT_TRUE(MakeDirs(tmp_.Join("noconfig")).ok());
  o = Options("x");
  o.checkpoint = tmp_.Join("noconfig");
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "no config.json"))
      << s.status();
  // No weights (tokenizer present beside it).
  const std::string noweights = run_ + "/checkpoints/step_6";
  ASSERT_TRUE(MakeDirs(noweights).ok());
  ASSERT_TRUE(WriteFileAtomic(noweights + "/config.json",
                              *ReadFile(step_ + "/config.json"))
                  .ok());
  o.checkpoint = noweights;
  s = ExportModel(o);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "model.safetensors"))
      << s.status();
  // Weights that do not fit the config: named in one error.
  auto bad_config = *ReadFile(step_ + "/config.json");
  const auto pos = bad_config.find("\"d_inner\": 256");
  ASSERT_NE(pos, std::string::npos);
  bad_config.replace(pos, 14, "\"d_inner\": 128");
  ASSERT_TRUE(WriteFileAtomic(noweights + "/config.json", bad_config).ok());
  ASSERT_TRUE(WriteFileAtomic(noweights + "/model.safetensors",
                              *ReadFile(step_ + "/model.safetensors"))
                  .ok());
  s = ExportModel(o);
  EXPECT_FALSE(s.ok());
  // config.json's sizes are checked against the stored shapes before a
  // model is built from them.
  EXPECT_TRUE(absl::StrContains(
      s.status().message(),
      "config.json: d_inner 128 but transformer.layer.0.ff.layer_1.weight is "
      "[256, 64]"))
      << s.status();
  // No tokenizer anywhere: every place looked at is named.
  const std::string lone = tmp_.Join("lone/a/b");
  ASSERT_TRUE(MakeDirs(lone).ok());
  for (const char* f : {"config.json", "model.safetensors"}) {
    ASSERT_TRUE(
        WriteFileAtomic(lone + "/" + f, *ReadFile(step_ + "/" + f)).ok());
  }
  o.checkpoint = lone;
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  for (const std::string& where :
       {lone, tmp_.Join("lone/a"), tmp_.Join("lone")}) {
    EXPECT_TRUE(
        absl::StrContains(s.status().message(), where + "/spiece.model"))
        << s.status();
  }
  // None of that wrote anything (no output, no temporaries).
  EXPECT_EQ(ListDir(tmp_.path()),
            (std::vector<std::string>{"lone", "noconfig", "run"}));

  // An existing non-empty output that is not an export is kept (with
  // --overwrite too: OverwriteRefusesAForeignDirectory).
  const std::string out = tmp_.Join("existing");
  ASSERT_TRUE(MakeDirs(out).ok());
  ASSERT_TRUE(WriteFileAtomic(out + "/keep.txt", "mine").ok());
  o = Options("existing");
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), out)) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "keep.txt"))
      << s.status();
  EXPECT_EQ(ListDir(out), std::vector<std::string>{"keep.txt"});
  // An empty existing directory is fine without --overwrite.
  ASSERT_TRUE(MakeDirs(tmp_.Join("empty")).ok());
  EXPECT_TRUE(ExportModel(Options("empty")).ok());
}

// A checkpoint with a checksum manifest is verified before anything is
// written: a bit flipped in its weights, or a foreign spiece.model copied
// over its own, is DataLoss naming the file, and no export appears. The
// export itself ships a manifest that verifies.
TEST_F(ExportTest, DamagedCheckpointIsRefused) {
  ASSERT_TRUE(
      WriteFileAtomic(step_ + "/" + kTokenizerFile, kTokenizerBytes).ok());
  ASSERT_TRUE(WriteChecksums(step_).ok());
  auto exported = ExportModel(Options("good"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_TRUE(VerifyChecksums(tmp_.Join("good")).ok());

  const std::string weights = step_ + "/" + kWeightsFile;
  auto bytes = ReadFile(weights);
  ASSERT_TRUE(bytes.ok());
  std::string flipped = *bytes;
  flipped[flipped.size() - 5] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomic(weights, flipped).ok());
  auto o = Options("flipped");
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), weights)) << s.status();
  EXPECT_FALSE(PathExists(o.out));

  ASSERT_TRUE(WriteFileAtomic(weights, *bytes).ok());
  ASSERT_TRUE(
      WriteFileAtomic(step_ + "/" + kTokenizerFile, "another tokenizer\n")
          .ok());
  o = Options("foreign");
  // Whatever the tokenizer check says of the foreign file, the manifest
  // refuses it.
  o.tokenizer_pieces = [](const std::string&,
                          const std::string&) -> absl::StatusOr<int64_t> {
    return 100;
  };
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_TRUE(
      absl::StrContains(s.status().message(), step_ + "/" + kTokenizerFile))
      << s.status();
  EXPECT_FALSE(PathExists(o.out));
}

// The tokenizer is checked before anything is written: the check's error
// comes back, and more pieces than the model's vocab_size is an error.
TEST_F(ExportTest, TokenizerIsChecked) {
  auto o = Options("hf");
  o.tokenizer_pieces = [](const std::string&,
                          const std::string& path) -> absl::StatusOr<int64_t> {
    return absl::InvalidArgumentError(path + ": bad tokenizer");
  };
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().message(), run_ + "/spiece.model: bad tokenizer");
  o.tokenizer_pieces = [](const std::string&,
                          const std::string&) -> absl::StatusOr<int64_t> {
    return 129;  // the golden model's vocab_size is 128
  };
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "spiece.model has 129 pieces but the model's "
                                "vocab_size is 128"))
      << s.status();
  o.tokenizer_pieces = nullptr;
  EXPECT_FALSE(ExportModel(o).ok());
  EXPECT_FALSE(PathExists(o.out));
}

// --overwrite replaces the output, never the source: an --out that holds
// the checkpoint (its run directory) or lies inside it is refused, and both
// stay as they were.
TEST_F(ExportTest, OverwriteNeverDeletesTheSource) {
  for (const std::string& out : {run_, run_ + "/checkpoints", step_ + "/hf"}) {
    ExportOptions o = Options("unused");
    o.out = out;
    o.overwrite = true;
    auto s = ExportModel(o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << out << ": " << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), "--checkpoint"))
        << s.status();
    EXPECT_EQ(ListDir(step_),
              (std::vector<std::string>{"config.json", "model.safetensors"}));
    EXPECT_TRUE(PathExists(run_ + "/" + kTokenizerFile));
  }
}

// Exporting twice to one --out: the second export is refused without
// --overwrite and replaces the first with it. The marker says who wrote
// the directory and from what.
TEST_F(ExportTest, OverwriteReplacesAnEarlierExport) {
  auto o = Options("hf");
  ASSERT_TRUE(ExportModel(o).ok());
  EXPECT_EQ(ListDir(o.out), ExportFiles());
  const nlohmann::json marker = Json(o.out + "/" + kExportMarkerFile);
  EXPECT_EQ(marker["format"], "xlnet_export") << marker;
  EXPECT_EQ(marker["format_version"], 1) << marker;
  EXPECT_EQ(marker["tool"], "xlnet-export") << marker;
  EXPECT_EQ(marker["version"], ProjectVersion()) << marker;
  EXPECT_EQ(marker["commit"], GitCommit()) << marker;
  // Relative to the export, never absolute.
  const std::string source = marker["source"].get<std::string>();
  EXPECT_FALSE(source.empty() || source[0] == '/') << marker;
  EXPECT_EQ(std::filesystem::weakly_canonical(std::filesystem::path(o.out) /
                                              source),
            std::filesystem::weakly_canonical(step_))
      << marker;

  // The first export is an LM; the second, encoder only, must replace it.
  EXPECT_TRUE(absl::StrContains(*ReadFile(o.out + "/config.json"),
                                "\"XLNetLMHeadModel\""));
  o.encoder_only = true;
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--overwrite"))
      << s.status();
  EXPECT_TRUE(absl::StrContains(*ReadFile(o.out + "/config.json"),
                                "\"XLNetLMHeadModel\""));
  o.overwrite = true;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetModel");
  EXPECT_EQ(ListDir(o.out), ExportFiles());
  const std::string json = *ReadFile(o.out + "/config.json");
  EXPECT_TRUE(absl::StrContains(json, "\"XLNetModel\"")) << json;
  EXPECT_FALSE(absl::StrContains(json, "XLNetLMHeadModel")) << json;
  // No temporaries left beside it.
  EXPECT_EQ(ListDir(tmp_.path()), (std::vector<std::string>{"hf", "run"}));
}

// --overwrite never deletes a directory export did not write: a foreign
// file makes it refuse, naming the directory and the file, and the file
// stays.
TEST_F(ExportTest, OverwriteRefusesAForeignDirectory) {
  auto o = Options("mine");
  ASSERT_TRUE(MakeDirs(o.out).ok());
  ASSERT_TRUE(WriteFileAtomic(o.out + "/notes.txt", "my notes").ok());
  o.overwrite = true;
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), o.out)) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "notes.txt"))
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "another --out"))
      << s.status();
  EXPECT_EQ(ListDir(o.out), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(ReadFile(o.out + "/notes.txt").value_or(""), "my notes");
  // A directory with only an export's file names but no marker (e.g. an HF
  // download or another run's RUN/best) is not ours either.
  const std::string hf = tmp_.Join("hf_download");
  ASSERT_TRUE(MakeDirs(hf).ok());
  ASSERT_TRUE(WriteFileAtomic(hf + "/config.json", "{}").ok());
  o.out = hf;
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), kExportMarkerFile))
      << s.status();
  EXPECT_EQ(ReadFile(hf + "/config.json").value_or(""), "{}");
}

// --overwrite into a directory that holds a run (a live one, locked, or
// another finished one) is refused and leaves every file of it.
TEST_F(ExportTest, OverwriteRefusesARunDirectory) {
  const std::string other = tmp_.Join("other_run");
  ASSERT_TRUE(MakeDirs(other + "/" + kCheckpointsDir + "/step_1").ok());
  ASSERT_TRUE(WriteFileAtomic(RunPath(other, kRunInfoFile),
                              "{\"kind\": \"pretraining\"}\n")
                  .ok());
  ASSERT_TRUE(
      WriteFileAtomic(RunPath(other, kMetricsFile), "{\"step\": 1}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(
                  other + "/" + kCheckpointsDir + "/step_1/config.json", "{}")
                  .ok());
  const std::vector<std::string> before = ListDir(other);
  auto o = Options("other_run");
  o.overwrite = true;
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), other)) << s.status();
  // The first entry in name order that an export does not write.
  EXPECT_TRUE(absl::StrContains(s.status().message(), kCheckpointsDir))
      << s.status();
  EXPECT_EQ(ListDir(other), before);
  EXPECT_TRUE(
      PathExists(other + "/" + kCheckpointsDir + "/step_1/config.json"));

  // A live run: its lock is held.
  auto lock = FileLock::Acquire(RunPath(other, kRunLockFile), other);
  ASSERT_TRUE(lock.ok()) << lock.status();
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
      << s.status();
  EXPECT_EQ(ListDir(other),
            (std::vector<std::string>{kCheckpointsDir, kMetricsFile,
                                      kRunInfoFile, kRunLockFile}));
}

// An export directory with anything added to it is no longer only an
// export: --overwrite refuses it and names what was added.
TEST_F(ExportTest, OverwriteRefusesAnExportWithMore) {
  auto o = Options("hf");
  ASSERT_TRUE(ExportModel(o).ok());
  o.overwrite = true;
  // A file, or a file in a new subdirectory (named by the subdirectory).
  for (const auto& [dir, file] :
       std::vector<std::pair<std::string, std::string>>{{"", "eval.txt"},
                                                        {"sub", "file.txt"}}) {
    const std::string entry = dir.empty() ? file : dir;
    if (!dir.empty()) {
      ASSERT_TRUE(MakeDirs(o.out + "/" + dir).ok());
    }
    const std::string path =
        o.out + "/" + entry + (dir.empty() ? "" : "/" + file);
    ASSERT_TRUE(WriteFileAtomic(path, "added").ok());
    auto s = ExportModel(o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
        << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), o.out + ": " + entry))
        << s.status();
    EXPECT_EQ(ReadFile(path).value_or(""), "added");
    EXPECT_EQ(ListDir(o.out).size(), ExportFiles().size() + 1);
    ASSERT_TRUE(RemoveAll(o.out + "/" + entry).ok());
  }
  // A subdirectory named like an export's file is not one either.
  ASSERT_TRUE(RemoveAll(o.out + "/README.md").ok());
  ASSERT_TRUE(MakeDirs(o.out + "/README.md").ok());
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "README.md"))
      << s.status();
  EXPECT_TRUE(IsDirectory(o.out + "/README.md"));
}

// tokenizer_config.json and special_tokens_map.json carry the run's casing
// (the bug: an uncased model silently tokenized cased in transformers).
TEST_F(ExportTest, TokenizerFilesFollowTheRunConfig) {
  for (const bool uncased : {false, true}) {
    WriteRunConfig(uncased);
    auto o = Options(uncased ? "uncased" : "cased");
    auto summary = ExportModel(o);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->run_config, run_ + "/config.yaml");
    const nlohmann::json t = Json(o.out + "/tokenizer_config.json");
    EXPECT_EQ(t["tokenizer_class"], "XLNetTokenizer");
    EXPECT_EQ(t["do_lower_case"], uncased);
    EXPECT_EQ(t["keep_accents"], false);
    EXPECT_EQ(t["remove_space"], true);
    EXPECT_EQ(t["padding_side"], "left");
    EXPECT_EQ(t["model_max_length"], 64) << "data.seq_len of an LM";
    const nlohmann::json expected_map = {
        {"bos_token", "<s>"},
        {"eos_token", "</s>"},
        {"unk_token", "<unk>"},
        {"sep_token", "<sep>"},
        {"pad_token", "<pad>"},
        {"cls_token", "<cls>"},
        {"mask_token", "<mask>"},
        {"additional_special_tokens", {"<eop>", "<eod>"}}};
    EXPECT_EQ(Json(o.out + "/special_tokens_map.json"), expected_map);
    for (const auto& [k, v] : expected_map.items()) EXPECT_EQ(t[k], v) << k;
  }
}

// A source without config.yaml needs the casing said; a given casing must
// agree with a config.yaml; nothing is written on either error.
TEST_F(ExportTest, CasingWithoutARunConfig) {
  ASSERT_TRUE(RemoveAll(run_ + "/config.yaml").ok());
  auto o = Options("hf");
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--uncased=true|false"))
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), run_ + "/config.yaml"))
      << s.status();
  EXPECT_FALSE(PathExists(o.out));
  o.uncased = true;
  o.keep_accents = true;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->run_config, "");
  const nlohmann::json t = Json(o.out + "/tokenizer_config.json");
  EXPECT_EQ(t["do_lower_case"], true);
  EXPECT_EQ(t["keep_accents"], true);
  EXPECT_FALSE(t.contains("model_max_length")) << "seq_len unknown";
  // An export (or HF directory) carries its casing in tokenizer_config.json:
  // exporting it again keeps it; a flag that disagrees is an error.
  const std::string first = o.out;
  o = Options("again");
  o.checkpoint = first;
  summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->run_config, first + "/tokenizer_config.json");
  EXPECT_EQ(Json(o.out + "/tokenizer_config.json"), t);
  o = Options("again2");
  o.checkpoint = first;
  o.uncased = false;
  s = ExportModel(o);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "--uncased=false disagrees with do_lower_case: "
                                "true in " +
                                    first + "/tokenizer_config.json"))
      << s.status();

  WriteRunConfig(/*uncased=*/false);
  o = Options("disagree");
  o.uncased = true;
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "--uncased=true disagrees with data.uncased: "
                                "false in " +
                                    run_ + "/config.yaml"))
      << s.status();
  EXPECT_FALSE(PathExists(o.out));
}

// A tokenizer that records its casing (xlnet-data tokenizer) is the one
// source: with no config.yaml and no flag its record is written; a
// config.yaml or a flag that contradicts it is an error naming both.
TEST_F(ExportTest, CasingFromTheTokenizersRecord) {
  const auto recording = [](bool uncased) {
    return [uncased](const std::string& bytes, const std::string& path)
               -> absl::StatusOr<std::optional<TokenizerCasing>> {
      if (bytes != kTokenizerBytes) {
        return absl::InvalidArgumentError(path + ": not the fixture");
      }
      return TokenizerCasing{uncased, false};
    };
  };
  const std::string tokenizer = run_ + "/" + kTokenizerFile;
  // The run's config.yaml agrees (pretraining writes the shards' rules).
  WriteRunConfig(/*uncased=*/true);
  auto o = Options("recorded");
  o.tokenizer_casing = recording(true);
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->run_config, tokenizer);
  EXPECT_EQ(Json(o.out + "/tokenizer_config.json")["do_lower_case"], true);
  // No config.yaml, no flags: the record alone decides.
  ASSERT_TRUE(RemoveAll(run_ + "/config.yaml").ok());
  o = Options("record_only");
  o.tokenizer_casing = recording(true);
  summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(Json(o.out + "/tokenizer_config.json")["do_lower_case"], true);
  EXPECT_EQ(Json(o.out + "/tokenizer_config.json")["keep_accents"], false);
  // A flag that contradicts the record.
  o = Options("flag_clash");
  o.tokenizer_casing = recording(true);
  o.uncased = false;
  auto s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      s.status().message(),
      "--uncased=false disagrees with uncased: true in " + tokenizer))
      << s.status();
  EXPECT_FALSE(PathExists(o.out));
  // A config.yaml that contradicts the record.
  WriteRunConfig(/*uncased=*/false);
  o = Options("yaml_clash");
  o.tokenizer_casing = recording(true);
  s = ExportModel(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "data.uncased=false in " + run_ +
                                    "/config.yaml disagrees with uncased: "
                                    "true in " +
                                    tokenizer))
      << s.status();
  EXPECT_FALSE(PathExists(o.out));
}

// The model card says the architecture, the casing, the steps trained and
// the run's evaluations; a fine-tuned model's model_max_length is
// finetune.max_seq_length.
TEST_F(ExportTest, ModelCardFromTheRun) {
  WriteRunConfig(/*uncased=*/true);
  ASSERT_TRUE(WriteStateJson(step_ + "/trainer_state.json", "trainer_state", 1,
                             {{"step", 5}})
                  .ok());
  // Eval lines after the checkpoint's step are not its results.
  ASSERT_TRUE(WriteFileAtomic(run_ + "/metrics.jsonl",
                              "{\"step\": 4, \"loss\": 3.5}\n"
                              "{\"step\": 5, \"eval_loss\": 2.25}\n"
                              "{\"step\": 6, \"eval_loss\": 1.75}\n"
                              "{\"step\": 7, \"eva")
                  .ok());
  auto o = Options("card");
  ASSERT_TRUE(ExportModel(o).ok());
  const std::string card = *ReadFile(o.out + "/README.md");
  for (const std::string& want :
       {std::string("XLNetLMHeadModel"), std::string("| n_layer | 2 |"),
        std::string("uncased (do_lower_case): true"),
        std::string("seq_len: 64"), std::string("steps trained: 5"),
        std::string("eval_loss 2.25"), std::string("```yaml"),
        std::string("uncased: true")}) {
    EXPECT_TRUE(absl::StrContains(card, want)) << want << "\n" << card;
  }
  EXPECT_FALSE(absl::StrContains(card, "1.75")) << card;

  // A fine-tuned RUN/best: its best.json gives the step and the metric.
  const std::string best = run_ + "/best";
  HeadLoadOptions head;
  head.labels = {"a", "b", "c"};
  auto cls = LoadForSequenceClassification(step_, head);
  ASSERT_TRUE(cls.ok()) << cls.status();
  ASSERT_TRUE(SavePretrained(**cls, best).ok());
  ASSERT_TRUE(WriteFileAtomic(best + "/best.json",
                              "{\"step\": 5, \"metric\": \"accuracy\", "
                              "\"value\": 0.625, \"eval\": {\"accuracy\": "
                              "0.625}}\n")
                  .ok());
  // As Trainer::SaveBest writes it: best.json under the manifest.
  ASSERT_TRUE(WriteChecksums(best).ok());
  o = Options("card_best");
  o.checkpoint = best;
  ASSERT_TRUE(ExportModel(o).ok());
  const std::string best_card = *ReadFile(o.out + "/README.md");
  EXPECT_TRUE(absl::StrContains(best_card, "steps trained: 5")) << best_card;
  EXPECT_TRUE(absl::StrContains(best_card, "best checkpoint")) << best_card;
  EXPECT_TRUE(absl::StrContains(best_card, "value 0.625")) << best_card;
  EXPECT_EQ(Json(o.out + "/tokenizer_config.json")["model_max_length"], 48)
      << "finetune.max_seq_length of a fine-tuned model";
}

// A checkpoint of a run that had non-finite steps before it: the summary
// and the card say how many and from which step (what the divergence guard
// recorded in trainer_state.json); one without says nothing of them.
TEST_F(ExportTest, NonFiniteStepsOfTheRunAreReported) {
  ASSERT_TRUE(WriteStateJson(step_ + "/trainer_state.json", "trainer_state", 1,
                             {{"step", 5},
                              {"bad_steps", 2},
                              {"first_bad_step", 3},
                              {"skipped_steps", 2}})
                  .ok());
  auto o = Options("diverged");
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bad_steps, 2);
  EXPECT_EQ(summary->first_bad_step, 3);
  const std::string card = *ReadFile(o.out + "/README.md");
  EXPECT_TRUE(absl::StrContains(
      card, "- non-finite steps: 2, skipped, the first at step 3"))
      << card;

  ASSERT_TRUE(WriteStateJson(step_ + "/trainer_state.json", "trainer_state", 1,
                             {{"step", 5}})
                  .ok());
  o = Options("clean");
  summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->first_bad_step, 0);
  EXPECT_FALSE(
      absl::StrContains(*ReadFile(o.out + "/README.md"), "non-finite"));
}

// A card names files only relative to the run ("checkpoints/step_5",
// "spiece.model"), never by an absolute path, so it says nothing of the
// machine that wrote it.
void ExpectPortable(const std::string& card, const std::string& tmp) {
  EXPECT_FALSE(absl::StrContains(card, tmp)) << card;
  EXPECT_FALSE(absl::StrContains(card, "`/")) << card;
  EXPECT_FALSE(absl::StrContains(card, ": /")) << card;
}

// Every kind of export names its architecture (from the exported weights),
// carries the licence, and cites paths relative to the run.
TEST_F(ExportTest, ModelCardNamesTheArchitectureAndNoAbsolutePath) {
  ASSERT_TRUE(WriteStateJson(step_ + "/trainer_state.json", "trainer_state", 1,
                             {{"step", 5}})
                  .ok());
  HeadLoadOptions head;
  head.labels = {"x", "y"};
  auto cls = LoadForSequenceClassification(step_, head);
  ASSERT_TRUE(cls.ok()) << cls.status();
  ASSERT_TRUE(SavePretrained(**cls, run_ + "/ft/cls").ok());
  auto qa = LoadForQuestionAnswering(step_);
  ASSERT_TRUE(qa.ok()) << qa.status();
  ASSERT_TRUE(SavePretrained(**qa, run_ + "/ft/qa").ok());
  auto mc = LoadForMultipleChoice(step_);
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_TRUE(SavePretrained(**mc, run_ + "/ft/mc").ok());
  struct Case {
    std::string name, checkpoint;
    bool encoder_only;
    std::string architecture, from;
  };
  const std::vector<Case> cases = {
      {"lm", step_, false, "XLNetLMHeadModel",
       "from `checkpoints/step_5` of the run `run`"},
      {"enc", step_, true, "XLNetModel", "from `checkpoints/step_5`"},
      {"cls", run_ + "/ft/cls", false, "XLNetForSequenceClassification",
       "from `ft/cls` of the run `run`"},
      {"qa", run_ + "/ft/qa", false, "XLNetForQuestionAnswering",
       "from `ft/qa`"},
      {"mc", run_ + "/ft/mc", false, "XLNetForMultipleChoice", "from `ft/mc`"},
      {"cls_enc", run_ + "/ft/cls", true, "XLNetModel",
       "encoder of a fine-tuned XLNetForSequenceClassification"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto o = Options(c.name);
    o.checkpoint = c.checkpoint;
    o.encoder_only = c.encoder_only;
    auto summary = ExportModel(o);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->architecture, c.architecture);
    const std::string card = *ReadFile(o.out + "/README.md");
    for (const std::string& want :
         {"# XLNet (" + c.architecture + ")",
          "| architecture | " + c.architecture + " |", c.from,
          std::string("\nlicense: apache-2.0\n"), std::string("## License"),
          std::string("(from `spiece.model`)"),
          "architectures: [" + c.architecture + "]"}) {
      EXPECT_TRUE(absl::StrContains(card, want)) << want << "\n" << card;
    }
    ExpectPortable(card, tmp_.path());
    EXPECT_EQ(Json(o.out + "/config.json")["architectures"][0], c.architecture);
  }
  // An HF directory (no run around it): the directory by its own name.
  auto o = Options("again");
  o.checkpoint = tmp_.Join("lm");
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const std::string card = *ReadFile(o.out + "/README.md");
  EXPECT_TRUE(absl::StrContains(card, "from `lm`.")) << card;
  EXPECT_TRUE(absl::StrContains(card, "casing from `tokenizer_config.json`"))
      << card;
  ExpectPortable(card, tmp_.path());
}

// A fine-tuned classifier's card: the fine-tuning settings it was trained
// with (not the pretraining data keys its config.yaml holds at their
// defaults), and the run's final dev and test scores when they are of the
// exported RUN/best.
TEST_F(ExportTest, FineTunedModelCardShowsItsSettingsAndScores) {
  const std::string ft = run_ + "/ft";
  const std::string best = ft + "/" + kBestDir;
  Config config;  // data.seq_len 512, data.bi_data true: unread defaults
  config.data.tokenizer = run_ + "/" + kTokenizerFile;
  config.finetune.max_seq_length = 48;
  config.train.max_steps = 30;
  ASSERT_TRUE(MakeDirs(ft).ok());
  ASSERT_TRUE(WriteConfigYaml(config, ft + "/config.yaml").ok());
  HeadLoadOptions head;
  head.labels = {"neg", "pos"};
  auto cls = LoadForSequenceClassification(step_, head);
  ASSERT_TRUE(cls.ok()) << cls.status();
  ASSERT_TRUE(SavePretrained(**cls, best).ok());
  ASSERT_TRUE(
      WriteFileAtomic(best + "/" + kTokenizerFile, kTokenizerBytes).ok());
  ASSERT_TRUE(WriteConfigYaml(config, best + "/config.yaml").ok());
  ASSERT_TRUE(WriteFileAtomic(best + "/best.json",
                              "{\"step\": 20, \"metric\": \"accuracy\", "
                              "\"value\": 0.5}\n")
                  .ok());
  ASSERT_TRUE(WriteChecksums(best).ok());
  // As xlnet-finetune writes it: best_dir as given (here relative).
  ASSERT_TRUE(WriteFileAtomic(ft + "/eval_results.json",
                              "{\"dev\": {\"accuracy\": 0.5}, \"test\": "
                              "{\"accuracy\": 0.4375}, \"best_dir\": "
                              "\"runs/x/ft/best\"}\n")
                  .ok());
  auto o = Options("ft_card");
  o.checkpoint = best;
  auto summary = ExportModel(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->architecture, "XLNetForSequenceClassification");
  const std::string card = *ReadFile(o.out + "/README.md");
  for (const char* want :
       {"from `best` of the run `ft`", "task: classification",
        "labels (id order): neg, pos", "max_seq_length: 48",
        "test (`eval_results.json`): accuracy 0.4375",
        "dev (`eval_results.json`): accuracy 0.5", "steps trained: 20",
        "best checkpoint (`best/best.json`)", "(`best/config.yaml`)",
        "max_seq_length: 48\n", "tokenizer: spiece.model", "max_steps: 30",
        "architectures: [XLNetForSequenceClassification]"}) {
    EXPECT_TRUE(absl::StrContains(card, want)) << want << "\n" << card;
  }
  for (const char* unwanted :
       {"bi_data", "seq_len:", "reuse_len", "num_predict", "best_dir",
        "attention:", "XLNetLMHeadModel"}) {
    EXPECT_FALSE(absl::StrContains(card, unwanted)) << unwanted << "\n" << card;
  }
  ExpectPortable(card, tmp_.path());

  // Another checkpoint of the run: the final scores are not its own.
  o = Options("ft_step");
  o.checkpoint = run_ + "/ft/cls";
  ASSERT_TRUE(SavePretrained(**cls, o.checkpoint).ok());
  ASSERT_TRUE(ExportModel(o).ok());
  const std::string other = *ReadFile(o.out + "/README.md");
  EXPECT_TRUE(absl::StrContains(other, "not of this directory")) << other;
  EXPECT_FALSE(absl::StrContains(other, "0.4375")) << other;
}

TEST_F(ExportTest, Tool) {
  // The fixture's spiece.model is not a SentencePiece model: the tool checks
  // it as every tool loads one (a real export runs in tests/tools).
  const std::string out = tmp_.Join("tool_out");
  auto r = RunCommand(ToolPath("export") + " --checkpoint " + step_ +
                      " --out " + out + " --encoder_only --dtype bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, run_ + "/spiece.model")) << r.output;
  EXPECT_FALSE(PathExists(out));
  r = RunCommand(ToolPath("export") + " --checkpoint " + step_ + " --out " +
                 tmp_.Join("o2") + " --dtype int8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "xlnet-export: error: --dtype"))
      << r.output;
  EXPECT_FALSE(PathExists(tmp_.Join("o2")));
  r = RunCommand(ToolPath("export") + " --out " + tmp_.Join("o3"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "checkpoint")) << r.output;
}

}  // namespace
}  // namespace xlnet
