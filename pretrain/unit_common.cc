#include "pretrain/unit_common.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "data_pipeline/tokenizer_identity.h"
#include "model/attention.h"
#include "model/fused_elementwise.h"
#include "model/precision.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/rank_files.h"
#include "model_io/save.h"

namespace xlnet {
namespace {

// The per-rank naming a checkpoint's savers and verifiers share.
std::string StateFile(const std::string& prefix, int rank) {
  return RankFileName(prefix, rank);
}

torch::Tensor StringTensor(const std::string& s) {
  return torch::from_blob(const_cast<char*>(s.data()),
                          {static_cast<int64_t>(s.size())}, torch::kUInt8)
      .clone();
}

std::string TensorString(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel());
}

}  // namespace

absl::Status CheckBatchSplit(const Config& config, int64_t world_size) {
  const TrainConfig& train = config.train;
  const bool halves = config.data.bi_data;
  if (train.batch_size_per_device > 0) {
    if (halves && train.batch_size_per_device % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "train.batch_size_per_device=", train.batch_size_per_device,
          " must be even with data.bi_data (each rank's rows are a forward "
          "and a backward half)"));
    }
    return absl::OkStatus();
  }
  const int64_t per_step = world_size * train.grad_accum_steps;
  const int64_t unit = per_step * (halves ? 2 : 1);
  if (train.batch_size % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size=", train.batch_size,
        " (the global batch) must split evenly over ", world_size,
        " ranks x ", train.grad_accum_steps, " micro-batches",
        halves ? " into even (forward+backward) halves" : "",
        ": set it to a multiple of ", unit,
        ", or set train.batch_size_per_device (rows per rank per forward) "
        "instead"));
  }
  return absl::OkStatus();
}

data::SamplerOptions PretrainSourceOptions(const PretrainUnitOptions& options,
                                           torch::Device device) {
  const Config& config = options.config;
  data::SamplerOptions out;
  out.data = config.data;
  out.data.loader_threads =
      CapThreads(config.data.loader_threads, "data.loader_threads");
  out.batch_size = config.train.batch_size;
  out.seed = config.train.seed;
  out.rank = options.rank;
  out.world_size = options.world_size;
  out.pin_memory = device.is_cuda();
  out.compact_masks = true;  // the units copy the masks to the device as is
  return out;
}

absl::Status CheckVocabFits(const data::Tokenizer& tokenizer,
                            const Config& config) {
  if (tokenizer.vocab_size() <= config.model.vocab_size) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the tokenizer has ", tokenizer.vocab_size(),
      " pieces but model.vocab_size is ", config.model.vocab_size));
}

absl::StatusOr<XLNetLMHeadModel> MakePretrainModel(const Config& config,
                                                   const std::string& init_dir,
                                                   torch::Device device) {
  XLNetLMHeadModel model{nullptr};
  if (!init_dir.empty()) {
    XLNET_ASSIGN_OR_RETURN(ModelDir init, ReadModelDir(init_dir));
    XLNET_RETURN_IF_ERROR(
        CheckSameArchitecture(init.config, config.model, init_dir));
    model = XLNetLMHeadModel(config.model);
    LoadOptions load;
    load.ignore_prefixes = FineTuningHeadPrefixes();
    XLNET_RETURN_IF_ERROR(
        LoadStateDict(*model, init.tensors, init.weights_path, load));
  } else {
    torch::manual_seed(config.train.seed);
    model = XLNetLMHeadModel(config.model);
    model->ResetParameters();
  }
  model->to(device);
  model->transformer->SetActivationCheckpointing(
      config.train.activation_checkpointing);
  AttentionOptions attention;
  attention.impl =
      ResolveAttention(config.train.attention, device,
                       ScalarTypeOf(config.train.dtype), config.model.d_head);
  if (config.train.attention == AttentionImpl::kAuto) {
    XLOG(INFO) << "train.attention: auto runs '" << EnumName(attention.impl)
               << "'";
  }
  XLNET_RETURN_IF_ERROR(CheckAttentionAvailable(attention.impl, device));
  model->transformer->SetAttention(attention);
  XLNET_ASSIGN_OR_RETURN(
      const bool fused_elementwise,
      UseFusedElementwise(config.train.fused_elementwise, device));
  model->transformer->SetFusedElementwise(fused_elementwise);
  return model;
}

NamedTensors LiveParameters(XLNetLMHeadModel& model) {
  NamedTensors out;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

absl::Status CheckInitTokenizer(const data::Tokenizer& tokenizer,
                                const std::string& data_origin,
                                const std::string& init_dir) {
  const std::string init_tokenizer =
      absl::StrCat(init_dir, "/", kTokenizerFile);
  if (init_dir.empty() || !PathExists(init_tokenizer)) {
    return absl::OkStatus();
  }
  return data::CheckSameTokenizer(
      tokenizer,
      absl::StrCat("the tokenizer of the training data in ", data_origin),
      init_tokenizer);
}

torch::Tensor ContiguousRows(int64_t local_batch, int64_t accum,
                             int64_t micro) {
  const int64_t n = local_batch / accum;
  return torch::arange(micro * n, (micro + 1) * n);
}

void SaveStreamState(const std::string& file_prefix, int rank,
                     const data::SamplerState& position,
                     const std::vector<int64_t>& rows, int64_t accum,
                     const SliceMems& mems, SaveMemory save_memory,
                     std::map<std::string, NamedTensors>* files) {
  NamedTensors state;
  state.emplace_back("sampler_state", StringTensor(position.ToString()));
  state.emplace_back("rows", torch::tensor(rows, torch::kInt64));
  state.emplace_back("grad_accum_steps", torch::tensor(accum));
  for (int64_t m = 0; m < accum && save_memory != SaveMemory::kNone; ++m) {
    for (size_t l = 0; l < mems[m].size(); ++l) {
      state.emplace_back(absl::StrCat("mems.", m, ".", l),
                         save_memory == SaveMemory::kBf16
                             ? mems[m][l].to(torch::kBFloat16)
                             : mems[m][l]);
    }
  }
  (*files)[StateFile(file_prefix, rank)] = std::move(state);
}

absl::Status LoadStreamState(const std::string& dir,
                             const std::string& file_prefix, int rank,
                             const StreamStateTarget& target, SliceMems* mems) {
  // Any rank's file holds the (rank-independent) data position.
  std::string path = absl::StrCat(dir, "/", StateFile(file_prefix, rank));
  const bool own = PathExists(path);
  if (!own) path = absl::StrCat(dir, "/", StateFile(file_prefix, 0));
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  XLNET_ASSIGN_OR_RETURN(torch::Tensor text, file.Load("sampler_state"));
  XLNET_ASSIGN_OR_RETURN(data::SamplerState state,
                         data::SamplerState::FromString(TensorString(text)));
  const bool same_setup = state.fingerprint == target.fingerprint;
  XLNET_RETURN_IF_ERROR(
      Annotate(target.restore(state, target.allow_changed_settings), path));
  mems->assign(target.accum, {});
  if (!same_setup) {
    XLOG(WARNING) << dir
                  << ": the batches were made with other data settings, seed "
                     "or batch size; the data goes on from step "
                  << state.step << " as this run makes it, memory empty";
    return absl::OkStatus();
  }
  XLNET_ASSIGN_OR_RETURN(torch::Tensor rows, file.Load("rows"));
  XLNET_ASSIGN_OR_RETURN(torch::Tensor accum, file.Load("grad_accum_steps"));
  const bool same_layout =
      own && accum.item<int64_t>() == target.accum &&
      torch::equal(rows, torch::tensor(target.rows, torch::kInt64));
  if (!same_layout) {
    XLOG(WARNING)
        << dir << ": the rank/accumulation layout changed since this "
        << "checkpoint; the data continues exactly but memory starts empty";
    return absl::OkStatus();
  }
  if (target.n_layer > 0 && target.mem_len > 0 && !file.Contains("mems.0.0")) {
    XLOG(INFO) << path
               << " holds no memory (saved with train.save_memory none): the "
                  "data continues exactly, the memory starts empty";
  }
  for (int64_t m = 0; m < target.accum; ++m) {
    for (int64_t l = 0; l < target.n_layer; ++l) {
      const std::string name = absl::StrCat("mems.", m, ".", l);
      if (!file.Contains(name)) break;
      XLNET_ASSIGN_OR_RETURN(torch::Tensor mem, file.Load(name));
      // Memory is computed in fp32 (LayerNorm outputs, also under
      // autocast); train.save_memory bf16 stored it rounded.
      if (mem.scalar_type() == torch::kBFloat16) mem = mem.to(torch::kFloat32);
      (*mems)[m].push_back(mem.to(target.device));
    }
  }
  return absl::OkStatus();
}

}  // namespace xlnet
