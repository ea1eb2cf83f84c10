// What the pretraining units (PlmUnit, plm_unit.h; ClmUnit, clm_unit.h)
// share: their options, the model they train, its live parameters, the
// --init tokenizer check, micro-batch row slices, and the per-rank state
// they checkpoint beside the weights (the data position and the memory
// carried per micro-batch slice).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "data_pipeline/step_batches.h"
#include "data_pipeline/tokenizer.h"
#include "model/xlnet.h"

namespace xlnet {

struct PretrainUnitOptions {
  Config config;
  // Prepared shards (xlnet-data prepare). Exactly one of this and
  // config.data.sources is set (the causal LM reads --data only).
  std::string data_dir;
  // Start from this model directory instead of a fresh initialisation.
  std::string init_dir;
  int rank = 0;
  int world_size = 1;
  // Resuming may continue the data from a checkpoint whose batches were
  // made with other data settings, seed or batch size (the data goes on at
  // the checkpoint's step, the memory starts empty); without it that is an
  // error (--allow_changed_settings).
  bool allow_changed_settings = false;
};

// train.batch_size (the global batch) must split over `world_size` ranks
// and the accumulation micro-steps (into forward+backward halves with
// bi_data), or train.batch_size_per_device be even with bi_data; the error
// says which key to change. Checked by PlmUnit::Create and ClmUnit::Create,
// and before --nproc_per_node starts any rank.
absl::Status CheckBatchSplit(const Config& config, int64_t world_size);

// The batch options of a unit's training data: the config's data section
// (loader threads capped), global batch, seed, this rank, and page-locked
// batches on CUDA.
data::SamplerOptions PretrainSourceOptions(const PretrainUnitOptions& options,
                                           torch::Device device);

// An error unless the data's tokenizer fits model.vocab_size.
absl::Status CheckVocabFits(const data::Tokenizer& tokenizer,
                            const Config& config);

// The model of a pretraining run on `device`: from `init_dir` (the same
// architecture; the run's settings (memory, bi_data, attn_type, dropout,
// ...) are the config's, not those of the stored config.json) or freshly
// initialised from train.seed, with the attention core, fused element-wise
// ops and activation checkpointing of the config.
absl::StatusOr<XLNetLMHeadModel> MakePretrainModel(const Config& config,
                                                   const std::string& init_dir,
                                                   torch::Device device);

// The live parameters (HF names; lm_loss.weight is tied and not listed), on
// the model's device: the trainer loads checkpoints and broadcasts rank 0's
// weights into these tensors, so they must not be copies.
NamedTensors LiveParameters(XLNetLMHeadModel& model);

// --init with a model that carries its tokenizer (spiece.model): it must be
// the one the training data in `data_origin` was made with (`tokenizer`),
// or the model's ids would name other pieces.
absl::Status CheckInitTokenizer(const data::Tokenizer& tokenizer,
                                const std::string& data_origin,
                                const std::string& init_dir);

// The rows [micro * n, (micro + 1) * n) of a local batch of `local_batch`
// rows split into `accum` micro-batches of n rows.
torch::Tensor ContiguousRows(int64_t local_batch, int64_t accum, int64_t micro);

// Memory per micro-batch slice: mems[micro][layer] = [M, rows, D].
using SliceMems = std::vector<std::vector<torch::Tensor>>;

// A unit's per-rank state beside the weights: `position` (the batch
// source's), this rank's rows and accumulation layout, and the memory of
// every slice as `save_memory` says (train.save_memory: as computed, in
// bf16, or not at all), as `file_prefix`.rankR.safetensors.
void SaveStreamState(const std::string& file_prefix, int rank,
                     const data::SamplerState& position,
                     const std::vector<int64_t>& rows, int64_t accum,
                     const SliceMems& mems, SaveMemory save_memory,
                     std::map<std::string, NamedTensors>* files);

// What LoadStreamState restores into.
struct StreamStateTarget {
  // The batch source's current fingerprint, rows and a call that moves it to
  // a saved position (BatchSource / LmStreamSource::Restore).
  std::string fingerprint;
  std::vector<int64_t> rows;
  std::function<absl::Status(const data::SamplerState&, bool allow_other)>
      restore;
  int64_t accum = 1;
  int64_t n_layer = 0;
  // model.mem_len: 0 when the model keeps no memory.
  int64_t mem_len = 0;
  torch::Device device = torch::kCPU;
  // PretrainUnitOptions::allow_changed_settings.
  bool allow_changed_settings = false;
};

// The target of a unit whose batches come from `source` (a BatchSource or
// an LmStreamSource).
template <typename Source>
StreamStateTarget StreamStateTargetOf(Source& source, const Config& config,
                                      int64_t accum, torch::Device device,
                                      bool allow_changed_settings) {
  StreamStateTarget target;
  target.fingerprint = source.State().fingerprint;
  target.rows = source.local_rows();
  target.restore = [&source](const data::SamplerState& state,
                             bool allow_other) {
    return source.Restore(state, allow_other);
  };
  target.accum = accum;
  target.n_layer = config.model.n_layer;
  target.mem_len = config.model.mem_len.value_or(0);
  target.device = device;
  target.allow_changed_settings = allow_changed_settings;
  return target;
}

// Reads `file_prefix`.rankR.safetensors of checkpoint `dir` (rank 0's when
// this rank has none, e.g. more ranks than at save time), restores the data
// position and fills `mems` (cleared first; memory saved in bf16 comes
// back as fp32). The memory stays empty, with a warning, when the data
// settings or the rank/accumulation layout changed, and with an INFO line
// when the checkpoint holds none (train.save_memory none).
absl::Status LoadStreamState(const std::string& dir,
                             const std::string& file_prefix, int rank,
                             const StreamStateTarget& target, SliceMems* mems);

}  // namespace xlnet
