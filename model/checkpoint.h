// Model weights in and out under HuggingFace names.
//
// A model directory holds config.json (HF XLNetConfig keys) and either
// model.safetensors or pytorch_model.bin. Names may be XLNetLMHeadModel's
// (`transformer.` prefix, `lm_loss.bias`) or XLNetModel's (no prefix; then
// lm_loss.bias keeps its zero init). `lm_loss.weight`, if present, is the tied
// word embedding and is only shape-checked. Saving writes config.json +
// model.safetensors atomically (no lm_loss.weight, as HF does when tied).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "model/xlnet.h"

namespace xlnet {

struct LoadOptions {
  // Names starting with one of these are skipped (e.g. fine-tuning heads
  // "sequence_summary.", "logits_proj.", "qa_outputs." when only the
  // backbone and LM head are wanted). Anything else unknown is an error.
  std::vector<std::string> ignore_prefixes;
};

// The heads of HF's fine-tuning models; the tool ignores them when loading.
const std::vector<std::string>& FineTuningHeadPrefixes();

// Maps a stored tensor name to the module's parameter name; "" skips it.
using ParameterNameMap = std::function<std::string(const std::string&)>;

// Copies `tensors` into the parameters of any module, `name_map` (null =
// identity) giving the parameter name of each stored name. Parameters named
// in `may_be_missing` keep their values when absent; `extra_problems` are
// reported with the others. Every problem (missing, unexpected, shape
// mismatch, non-float data) is collected and returned in one InvalidArgument
// error naming `source` and the stored names; nothing is copied then.
absl::Status LoadParameters(
    torch::nn::Module& module,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::string& source, const ParameterNameMap& name_map,
    const std::vector<std::string>& may_be_missing,
    std::vector<std::string> extra_problems = {});

// Reads and validates DIR/config.json (errors name the file).
absl::StatusOr<XLNetConfig> ReadPretrainedConfig(const std::string& dir);

// The stored tensors of a model directory and the file they came from.
struct StoredWeights {
  std::string path;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

// DIR/model.safetensors, else DIR/pytorch_model.bin (ReadTorchSaveStateDict).
absl::StatusOr<StoredWeights> ReadStoredWeights(const std::string& dir);

// Copies `tensors` (HF names) into `model`. Every problem (missing names,
// unexpected names, shape mismatches, non-float data) is collected and
// returned together in one InvalidArgument error naming `source`.
absl::Status LoadStateDict(
    XLNetLMHeadModelImpl& model,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
    const std::string& source, const LoadOptions& options = {});

// Builds a model from `dir` (config.json + model.safetensors, else
// pytorch_model.bin read by ReadTorchSaveStateDict). fp32 parameters on the
// CPU.
absl::StatusOr<XLNetLMHeadModel> LoadPretrained(const std::string& dir,
                                                const LoadOptions& options = {});

// The HF state dict of `model` (its named_parameters: for
// XLNetLMHeadModel no lm_loss.weight), CPU, contiguous.
std::vector<std::pair<std::string, torch::Tensor>> HfStateDict(
    torch::nn::Module& model);

// ModelConfigToJson(config) with the keys of `extra` added: HF keys that
// XLNetConfig does not hold (problem_type, torch_dtype). Validates `config`.
absl::StatusOr<std::string> ModelConfigJsonWith(const XLNetConfig& config,
                                                const nlohmann::json& extra);

// Writes config.json + model.safetensors into `dir` atomically.
absl::Status SavePretrained(XLNetLMHeadModelImpl& model, const std::string& dir);

}  // namespace xlnet
