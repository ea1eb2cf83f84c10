// Model directories in HuggingFace's layout, plus our own state files: the
// one reader (ReadModelDir) and the one writer (WriteModelDir) of the format
// that checkpoints, RUN/best, fine-tuned models and exports share.
//
//   DIR/config.json          XLNetConfig with HF keys (transformers loads it)
//   DIR/model.safetensors    parameters under HF names (or, read only,
//                            HF's pytorch_model.bin)
//   DIR/spiece.model         the tokenizer (ours carry it; optional)
//   DIR/<other files>        ours: optimizer, trainer state, ... (optional)
//   DIR/checksums.json       ours: CRC-32 and size of every other file
//                            (checkpoint_manager.h), written last
//
// Writing is atomic: the whole directory appears at once or not at all.
// Reading verifies: every directory we write (checkpoints, RUN/best,
// fine-tuned models, exports) has a checksums.json listing all its files,
// and ReadModelDirConfig, ReadModelDir and CopyWeightsFromDir refuse one
// that does not verify (DataLoss naming the file) before reading anything
// else. A directory without checksums.json (HuggingFace's, or one written
// by hand) is read unverified.
// State files of our own are JSON with a "format" name and "format_version"
// so a reader can refuse files it does not understand with a clear message.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "model_io/checksums.h"
#include "model_io/state_json.h"

namespace xlnet {

inline constexpr char kConfigFile[] = "config.json";
inline constexpr char kWeightsFile[] = "model.safetensors";
inline constexpr char kTorchWeightsFile[] = "pytorch_model.bin";
inline constexpr char kTokenizerFile[] = "spiece.model";

// A model directory as read.
struct ModelDir {
  std::string path;
  // config.json, validated (d_model = n_head * d_head included).
  XLNetConfig config;
  // config.json as stored: HF keys XLNetConfig does not hold (problem_type,
  // torch_dtype, ...) are read from here.
  nlohmann::json config_json;
  // The file the tensors came from (model.safetensors, else
  // pytorch_model.bin).
  std::string weights_path;
  // Every stored tensor under its stored name, in file order, CPU.
  NamedTensors tensors;

  // The stored tensor `name`; NotFound names the weights file.
  absl::StatusOr<torch::Tensor> Tensor(const std::string& name) const;
};

// Verifies DIR/checksums.json (VerifyChecksums) when DIR has one; OK when
// it has none.
absl::Status VerifyModelDir(const std::string& dir);

// Whether a read verifies the directory first (VerifyModelDir), or its
// caller already has, so that one load reads each file once to verify it
// (verifying reads every byte: a checkpoint verified when it is chosen is
// not verified again when its weights are copied).
enum class Checksums { kVerify, kAlreadyVerified };

// Reads DIR/config.json and every tensor of DIR/model.safetensors (else
// DIR/pytorch_model.bin, read by ReadTorchSaveStateDict), after
// VerifyModelDir unless `checksums` says the caller did. Errors name the
// directory or file.
absl::StatusOr<ModelDir> ReadModelDir(const std::string& dir,
                                      Checksums checksums = Checksums::kVerify);

// Reads and validates DIR/config.json without loading a tensor (after
// VerifyModelDir, which reads every file once to check it): its sizes
// (vocab_size, d_model, n_layer, n_head, d_head, d_inner) are checked
// against the shapes in DIR/model.safetensors' header when there is one, and
// the model they describe against the memory available, so that nothing is
// allocated for a config.json that disagrees with its weights.
absl::StatusOr<XLNetConfig> ReadModelDirConfig(const std::string& dir);

// Resuming: copies the tensors of model directory `dir` into `tensors` by
// exact name (every one must be stored, with its shape; each keeps its
// device and dtype). Errors name the directory and tensor.
absl::Status CopyWeightsFromDir(const std::string& dir,
                                const NamedTensors& tensors,
                                Checksums checksums = Checksums::kVerify);

// Files a writer moves into the temporary directory after checksumming
// its own, with the checksums their writers computed (a checkpoint's
// per-rank files, rank_files.h): it returns their checksums.json entries.
using AdoptFiles =
    std::function<absl::StatusOr<ChecksumEntries>(const AtomicDirWriter&)>;

// Writes `dir` atomically: config.json (`config_json`'s text),
// model.safetensors (`tensors` in the given order, metadata {"format": "pt"}
// as transformers writes), then whatever `write_extra` puts into the
// temporary directory, then checksums.json over all of them and the files
// `adopt` moves in. `checksummed_bytes`, when set, gets the bytes read to
// checksum (the files written here, not the adopted ones).
absl::Status WriteModelDir(
    const std::string& dir, const std::string& config_json,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra = {},
    const AdoptFiles& adopt = {}, int64_t* checksummed_bytes = nullptr);

// The same with config.json written from a validated XLNetConfig.
absl::Status WriteModelDir(
    const std::string& dir, const XLNetConfig& config,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra =
        {});

// What an HF directory's tokenizer_config.json says about text rules.
struct HfTokenizerConfig {
  std::string path;
  // XLNetTokenizer's do_lower_case / keep_accents; an absent key is false,
  // as transformers reads it.
  bool do_lower_case = false;
  bool keep_accents = false;
  std::optional<int64_t> model_max_length;
};

// DIR/tokenizer_config.json, or nullopt when DIR has none. A value of the
// wrong type is an error naming the file and key.
absl::StatusOr<std::optional<HfTokenizerConfig>> ReadTokenizerConfig(
    const std::string& dir);

}  // namespace xlnet
