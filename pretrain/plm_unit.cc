#include "pretrain/plm_unit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "data_pipeline/open_batch_source.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/tokenizer_identity.h"
#include "model/fused_elementwise.h"
#include "model/precision.h"
#include "model/sdpa_attention.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"

namespace xlnet {
namespace {

std::string StateFile(int rank) {
  return absl::StrCat("plm_state.rank", rank, ".safetensors");
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
        " (the global batch) must split evenly over ", world_size, " ranks x ",
        train.grad_accum_steps, " micro-batches",
        halves ? " into even (forward+backward) halves" : "",
        ": set it to a multiple of ", unit,
        ", or set train.batch_size_per_device (rows per rank per forward) "
        "instead"));
  }
  return absl::OkStatus();
}

namespace {

// The unigram baseline's log-probabilities: token frequencies of the
// training split (add-one smoothed) over the vocabulary. A blend
// counts every source's training split in proportion to its weight
// (each source's frequencies normalised, then mixed by the normalised
// weights), the mixture the batches are drawn from; with one source
// this is exactly the single-directory baseline.
torch::Tensor UnigramLogProbs(const std::vector<data::SourcePart>& parts,
                              int64_t vocab_size) {
  std::vector<double> counts(vocab_size, 1.0);
  std::vector<double> part_counts(vocab_size);
  std::vector<int32_t> chunk(1 << 20);
  int64_t all_tokens = 0;
  for (const data::SourcePart& part : parts) {
    all_tokens += part.sampler->corpus().size();
  }
  for (const data::SourcePart& part : parts) {
    const data::Corpus& corpus = part.sampler->corpus();
    std::fill(part_counts.begin(), part_counts.end(), 0.0);
    for (int64_t begin = 0; begin < corpus.size(); begin += chunk.size()) {
      const int64_t n =
          std::min<int64_t>(chunk.size(), corpus.size() - begin);
      corpus.CopyIds(begin, n, chunk.data());
      for (int64_t i = 0; i < n; ++i) {
        if (chunk[i] >= 0 && chunk[i] < vocab_size)
          part_counts[chunk[i]] += 1;
      }
    }
    // Weighted share of all training tokens this source stands for.
    const double scale = parts.size() == 1 || corpus.size() == 0
                             ? 1.0
                             : part.weight * all_tokens / corpus.size();
    for (size_t v = 0; v < counts.size(); ++v) {
      counts[v] += scale * part_counts[v];
    }
  }
  const torch::Tensor freq = torch::tensor(counts, torch::kFloat64);
  return (freq / freq.sum()).log().to(torch::kFloat);
}

// The model of a pretraining run on `device`: from `init_dir` (the same
// architecture; the run's settings (memory, bi_data, dropout, ...) are the
// config's, not those of the stored config.json) or freshly initialised
// from train.seed, with the attention core and activation checkpointing of
// the config.
absl::StatusOr<XLNetLMHeadModel> MakeModel(const Config& config,
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
  attention.impl = config.train.attention;
  if (attention.impl == AttentionImpl::kCuda && !CudaAttentionCompiled()) {
    return absl::InvalidArgumentError(
        "train.attention: 'cuda' needs a build with -DXLNET_WITH_CUDA=ON "
        "-DXLNET_CUDA_ATTENTION=ON; this build has no CUDA attention kernel");
  }
  if (attention.impl == AttentionImpl::kSdpa && !SdpaAvailable()) {
    return absl::InvalidArgumentError(
        "train.attention: 'sdpa' needs LibTorch >= 2.1 "
        "(scaled_dot_product_attention); this build has " +
        std::string(TORCH_VERSION) + " (use 'unfused' or 'tiled')");
  }
  model->transformer->SetAttention(attention);
  if (config.train.fused_elementwise && !FusedElementwiseCompiled()) {
    return absl::InvalidArgumentError(
        "train.fused_elementwise: needs a build with -DXLNET_WITH_CUDA=ON "
        "-DXLNET_CUDA_ATTENTION=ON; this build has no fused element-wise "
        "kernels (set it to false)");
  }
  model->transformer->SetFusedElementwise(config.train.fused_elementwise);
  return model;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlmUnit>> PlmUnit::Create(
    const PlmUnitOptions& options) {
  Config config = options.config;
  const TrainConfig& train = config.train;
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(train.device));
  const torch::ScalarType dtype = ScalarTypeOf(train.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  XLNET_RETURN_IF_ERROR(CheckBatchSplit(config, options.world_size));

  std::unique_ptr<PlmUnit> unit(new PlmUnit(config, device, dtype));
  unit->accum_ = train.grad_accum_steps;
  unit->allow_changed_settings_ = options.allow_changed_settings;
  unit->mems_.resize(unit->accum_);
  data::SamplerOptions sampler_options;
  sampler_options.data = config.data;
  sampler_options.data.loader_threads =
      CapThreads(config.data.loader_threads, "data.loader_threads");
  sampler_options.batch_size = train.batch_size;
  sampler_options.seed = train.seed;
  sampler_options.rank = options.rank;
  sampler_options.world_size = options.world_size;
  sampler_options.pin_memory = device.is_cuda();
  XLNET_ASSIGN_OR_RETURN(
      unit->train_, data::OpenBatchSource(options.data_dir, sampler_options));
  if (options.data_dir.empty()) {
    std::vector<std::string> names;
    for (const data::SourcePart& part : unit->train_->Parts()) {
      names.push_back(part.name);
    }
    unit->data_origin_ =
        absl::StrCat("data.sources ", absl::StrJoin(names, ", "));
  } else {
    unit->data_origin_ = absl::StrCat("--data ", options.data_dir);
  }
  if (unit->train_->tokenizer().vocab_size() > config.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer has ", unit->train_->tokenizer().vocab_size(),
        " pieces but model.vocab_size is ", config.model.vocab_size));
  }
  if (train.eval_steps > 0 && config.data.eval_fraction > 0) {
    sampler_options.split = data::Split::kEval;
    sampler_options.data.prefetch_batches = 0;
    XLNET_ASSIGN_OR_RETURN(
        unit->eval_, data::OpenBatchSource(options.data_dir, sampler_options));
    unit->unigram_log_probs_ =
        UnigramLogProbs(unit->train_->Parts(), config.model.vocab_size);
  }

  // --init with a model that carries its tokenizer: the one the training
  // data was made with (the sampler compared it with the shards' manifest),
  // or the model's ids would name other pieces.
  const std::string init_tokenizer =
      absl::StrCat(options.init_dir, "/", kTokenizerFile);
  if (!options.init_dir.empty() && PathExists(init_tokenizer)) {
    XLNET_RETURN_IF_ERROR(data::CheckSameTokenizer(
        unit->train_->tokenizer(),
        absl::StrCat("the tokenizer of the training data in ",
                     options.data_dir),
        init_tokenizer));
  }
  XLNET_ASSIGN_OR_RETURN(unit->model_,
                         MakeModel(config, options.init_dir, device));
  // Dropout streams differ per rank; initialisation above did not.
  torch::manual_seed(train.seed + 7919 * (options.rank + 1));
  return unit;
}

TrainingData PlmUnit::Data() {
  const std::string fingerprint = train_->State().fingerprint;
  return {fingerprint,
          absl::StrCat(data_origin_, " (fingerprint ", fingerprint, ")")};
}

NamedTensors PlmUnit::Parameters() {
  NamedTensors out;
  for (const auto& item : model_->named_parameters()) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

// The live parameters (HF names; lm_loss.weight is tied and not listed), on
// the model's device: the trainer loads checkpoints and broadcasts rank 0's
// weights into these tensors. HfStateDict's CPU copies would be written
// into and dropped on a GPU, leaving the model at its initial weights.
NamedTensors PlmUnit::StateDict() {
  NamedTensors out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

void PlmUnit::SetTraining(bool training) { model_->train(training); }

torch::Tensor PlmUnit::MicroRows(int64_t local_batch, int64_t micro) const {
  if (!config_.data.bi_data) {
    const int64_t n = local_batch / accum_;
    return torch::arange(micro * n, (micro + 1) * n);
  }
  // Keep the [forward; backward] halves the model expects.
  const int64_t half = local_batch / 2, n = half / accum_;
  return torch::cat({torch::arange(micro * n, (micro + 1) * n),
                     torch::arange(half + micro * n, half + (micro + 1) * n)});
}

StepOutput PlmUnit::Forward(const data::PlmBatch& batch,
                            std::vector<torch::Tensor>* mems) {
  // Batches in page-locked memory (SamplerOptions::pin_memory, on CUDA)
  // copy without waiting; the allocator keeps their host memory until the
  // copy is done.
  const auto to_device = [&](const torch::Tensor& t) {
    return t.to(device_, /*non_blocking=*/t.is_pinned());
  };
  XLNetInputs inputs;
  inputs.input_ids = to_device(batch.input_ids);
  inputs.token_type_ids = to_device(batch.token_type_ids);
  inputs.perm_mask = to_device(batch.perm_mask);
  inputs.target_mapping = to_device(batch.target_mapping);
  inputs.mems = *mems;
  const torch::Tensor target = to_device(batch.target);
  const torch::Tensor target_mask = to_device(batch.target_mask);
  XLNetForwardOptions forward;
  forward.use_mems = config_.model.mem_len.value_or(0) > 0;
  StepOutput out;
  torch::Tensor logits;
  {
    AutocastGuard autocast(device_, dtype_);
    XLNetLMOutputs result = model_->forward(inputs, forward);
    logits = result.logits;
    *mems = std::move(result.new_mems);
  }
  // Summed over targets; the trainer divides by the global target count.
  const torch::Tensor ce = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat).reshape({-1, logits.size(-1)}),
      target.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  out.loss = (ce * target_mask.reshape({-1})).sum();
  // Tensors on the device, not host numbers: the trainer reads them with
  // the step's other numbers in its one host read.
  const torch::Tensor targets = target_mask.sum().to(torch::kFloat64);
  out.normalizer = targets;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct =
        (logits.argmax(-1) == target).to(torch::kFloat) * target_mask;
    out.metrics["accuracy"] =
        correct.sum().to(torch::kFloat64) / targets.clamp_min(1.0);
  }
  out.tokens = batch.input_ids.numel();
  return out;
}

StepOutput PlmUnit::TrainStep() {
  if (micro_ == 0) current_ = train_->Next();
  StepOutput out;
  if (accum_ == 1) {
    out = Forward(current_, &mems_[0]);
  } else {
    const torch::Tensor rows = MicroRows(current_.input_ids.size(0), micro_);
    data::PlmBatch slice;
    slice.input_ids = current_.input_ids.index_select(0, rows);
    slice.token_type_ids = current_.token_type_ids.index_select(0, rows);
    slice.perm_mask = current_.perm_mask.index_select(0, rows);
    slice.target_mapping = current_.target_mapping.index_select(0, rows);
    slice.target = current_.target.index_select(0, rows);
    slice.target_mask = current_.target_mask.index_select(0, rows);
    out = Forward(slice, &mems_[micro_]);
  }
  micro_ = (micro_ + 1) % accum_;
  return out;
}

std::map<std::string, double> PlmUnit::LogValues(int64_t steps_done) {
  const std::vector<data::SourcePart> parts = train_->Parts();
  if (config_.data.sources.empty()) {
    // One corpus: its sampler's epochs (steps over steps per epoch; one
    // sampler step per optimizer step). A blend's sources each run their
    // own epochs, so a blend logs tokens per source instead.
    const int64_t per_epoch = parts.size() == 1 && parts[0].sampler != nullptr
                                  ? parts[0].sampler->steps_per_epoch()
                                  : 0;
    if (per_epoch <= 0) return {};
    return {{"epoch",
             static_cast<double>(steps_done) / static_cast<double>(per_epoch)}};
  }
  const std::vector<int64_t> tokens = train_->TokensConsumed(steps_done);
  std::map<std::string, double> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    out["tokens_" + parts[i].name] = static_cast<double>(tokens[i]);
  }
  return out;
}

std::map<std::string, double> PlmUnit::Evaluate() {
  if (!eval_) return {};
  // The same held-out batches every time, so evaluations compare.
  data::SamplerState start = eval_->State();
  start.step = 0;
  if (!eval_->Restore(start).ok()) return {};
  std::vector<torch::Tensor> mems;
  double loss_sum = 0, correct = 0, targets = 0, unigram_loss = 0,
         unigram_correct = 0;
  const int64_t most_frequent = unigram_log_probs_.argmax().item<int64_t>();
  for (int64_t i = 0; i < config_.train.eval_batches; ++i) {
    const data::PlmBatch batch = eval_->Next();
    StepOutput out = Forward(batch, &mems);
    const double n = out.normalizer.Value();
    loss_sum += out.loss.item<double>();
    correct += out.metrics["accuracy"].Value() * n;
    targets += n;
    const torch::Tensor mask = batch.target_mask.to(torch::kFloat);
    unigram_loss -=
        (unigram_log_probs_.index({batch.target}) * mask).sum().item<double>();
    unigram_correct +=
        ((batch.target == most_frequent).to(torch::kFloat) * mask)
            .sum()
            .item<double>();
  }
  if (targets == 0) return {};
  return {{"loss", loss_sum / targets},
          {"accuracy", correct / targets},
          {"unigram_loss", unigram_loss / targets},
          {"unigram_accuracy", unigram_correct / targets}};
}

absl::Status PlmUnit::SaveUnitState(
    int rank, std::map<std::string, NamedTensors>* files) {
  TORCH_CHECK(micro_ == 0, "checkpoint in the middle of an accumulation step");
  NamedTensors state;
  state.emplace_back("sampler_state", StringTensor(train_->State().ToString()));
  state.emplace_back("rows",
                     torch::tensor(train_->local_rows(), torch::kInt64));
  state.emplace_back("grad_accum_steps", torch::tensor(accum_));
  for (int64_t m = 0; m < accum_; ++m) {
    for (size_t l = 0; l < mems_[m].size(); ++l) {
      state.emplace_back(absl::StrCat("mems.", m, ".", l), mems_[m][l]);
    }
  }
  (*files)[StateFile(rank)] = std::move(state);
  return absl::OkStatus();
}

absl::Status PlmUnit::LoadUnitState(const std::string& dir, int rank) {
  // Any rank's file holds the (rank-independent) sampler position.
  std::string path = absl::StrCat(dir, "/", StateFile(rank));
  const bool own = PathExists(path);
  if (!own) path = absl::StrCat(dir, "/", StateFile(0));
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  XLNET_ASSIGN_OR_RETURN(torch::Tensor text, file.Load("sampler_state"));
  XLNET_ASSIGN_OR_RETURN(data::SamplerState state,
                         data::SamplerState::FromString(TensorString(text)));
  const bool same_setup = state.fingerprint == train_->State().fingerprint;
  XLNET_RETURN_IF_ERROR(
      Annotate(train_->Restore(state, allow_changed_settings_), path));
  micro_ = 0;
  for (auto& m : mems_) m.clear();
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
      own && accum.item<int64_t>() == accum_ &&
      torch::equal(rows, torch::tensor(train_->local_rows(), torch::kInt64));
  if (!same_layout) {
    XLOG(WARNING)
        << dir << ": the rank/accumulation layout changed since this "
        << "checkpoint; the data continues exactly but memory starts empty";
    return absl::OkStatus();
  }
  for (int64_t m = 0; m < accum_; ++m) {
    for (int64_t l = 0; l < config_.model.n_layer; ++l) {
      const std::string name = absl::StrCat("mems.", m, ".", l);
      if (!file.Contains(name)) break;
      XLNET_ASSIGN_OR_RETURN(torch::Tensor mem, file.Load(name));
      mems_[m].push_back(mem.to(device_));
    }
  }
  return absl::OkStatus();
}

}  // namespace xlnet
