// The logic of `xlnet-run`: load a model directory, read batch-first inputs
// from a safetensors file, run one eval-mode forward pass, write the outputs.
//
// Inputs (names as HF's forward arguments):
//   input_ids [B, L] int64 (required); token_type_ids [B, L] integer;
//   attention_mask [B, L] float or integer (1 real, 0 pad); perm_mask
//   [B, L, L]; target_mapping [B, P, L] (one-hot or all-zero rows);
//   mems.0 .. mems.{n_layer-1} [M, B, D] (all or none).
// Outputs (fp32): last_hidden_state [B, L, D]; query_hidden_state [B, P, D]
//   with target_mapping; logits [B, P, V] with target_mapping else
//   [B, L, V]; mems.i [M', B, D] when the config's use_mems_eval is true.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "model/xlnet.h"

namespace xlnet {

struct RunOptions {
  // Model directory (config.json + model.safetensors / pytorch_model.bin).
  std::string model_dir;
  // Input and output safetensors files.
  std::string inputs_path;
  std::string outputs_path;
  // Compute precision: fp32 or bf16 (autocast), fp16 on CUDA.
  Dtype dtype = Dtype::kFp32;
  // "cpu", "cuda", "cuda:N".
  std::string device = "cpu";
  // Query stream over all L positions (HF's way) instead of the P targets.
  bool query_all_positions = false;
};

// Checks names, dtypes and shapes of `tensors` against `config` and returns
// them as model inputs on `device`. Unknown names are skipped (logged)
// unless within two edits of an input's name (a misspelling); every other
// problem is an InvalidArgument naming the tensor, an input whose
// attention scores (B x n_head x L x (M + L) floats, a few per layer) would
// not fit in the memory available, included.
absl::StatusOr<XLNetInputs> InputsFromTensors(
    const std::map<std::string, torch::Tensor>& tensors,
    const XLNetConfig& config, torch::Device device);

absl::Status RunModel(const RunOptions& options);

}  // namespace xlnet
