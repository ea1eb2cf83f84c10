// Model weights in and out under HuggingFace names.
//
// A model directory holds config.json (HF XLNetConfig keys) and either
// model.safetensors or pytorch_model.bin. Names may be XLNetLMHeadModel's
// (`transformer.` prefix, `lm_loss.bias`) or XLNetModel's (no prefix; then
// lm_loss.bias keeps its zero init). `lm_loss.weight`, if present, is the tied
// word embedding and is only shape-checked. Saving writes config.json +
// model.safetensors atomically (no lm_loss.weight, as HF does when tied).
#pragma once

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

// The HF state dict of `model` (no lm_loss.weight), CPU, contiguous.
std::vector<std::pair<std::string, torch::Tensor>> HfStateDict(
    XLNetLMHeadModelImpl& model);

// Writes config.json + model.safetensors into `dir` atomically.
absl::Status SavePretrained(XLNetLMHeadModelImpl& model, const std::string& dir);

}  // namespace xlnet
