#include "pretrain/plm_unit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/open_batch_source.h"
#include "data_pipeline/sampler.h"
#include "model/precision.h"
#include "model_io/model_dir.h"

namespace xlnet {

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
    if (const std::vector<int64_t>* recorded = corpus.recorded_unigram()) {
      // Counted by xlnet-data prepare: no shard is read.
      const size_t n = std::min(recorded->size(), part_counts.size());
      for (size_t v = 0; v < n; ++v) {
        part_counts[v] = static_cast<double>((*recorded)[v]);
      }
    } else {
      for (int64_t begin = 0; begin < corpus.size(); begin += chunk.size()) {
        const int64_t n =
            std::min<int64_t>(chunk.size(), corpus.size() - begin);
        corpus.CopyIds(begin, n, chunk.data());
        for (int64_t i = 0; i < n; ++i) {
          if (chunk[i] >= 0 && chunk[i] < vocab_size)
            part_counts[chunk[i]] += 1;
        }
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

absl::StatusOr<std::unique_ptr<PlmUnit>> PlmUnit::Create(
    const PlmUnitOptions& options) {
  Config config = options.config;
  const TrainConfig& train = config.train;
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(train.device));
  const torch::ScalarType dtype = ScalarTypeOf(train.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  XLNET_RETURN_IF_ERROR(CheckBatchSplit(config, options.world_size));

  std::unique_ptr<PlmUnit> unit(new PlmUnit(config, device, dtype, options));
  data::SamplerOptions sampler_options = PretrainSourceOptions(options, device);
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
  XLNET_RETURN_IF_ERROR(CheckVocabFits(unit->train_->tokenizer(), config));
  if (train.eval_steps > 0 && config.data.eval_fraction > 0) {
    sampler_options.split = data::Split::kEval;
    sampler_options.data.prefetch_batches = 0;
    XLNET_ASSIGN_OR_RETURN(
        unit->eval_, data::OpenBatchSource(options.data_dir, sampler_options));
    unit->unigram_log_probs_ =
        UnigramLogProbs(unit->train_->Parts(), config.model.vocab_size);
  }

  // The sampler compared the data's tokenizer with the shards' manifest.
  XLNET_RETURN_IF_ERROR(CheckInitTokenizer(unit->train_->tokenizer(),
                                           options.data_dir, options.init_dir));
  XLNET_ASSIGN_OR_RETURN(unit->model_,
                         MakePretrainModel(config, options.init_dir, device));
  // Dropout streams differ per rank; initialisation above did not.
  torch::manual_seed(train.seed + 7919 * (options.rank + 1));
  return unit;
}

torch::Tensor PlmUnit::MicroRows(int64_t local_batch, int64_t micro) const {
  if (!config_.data.bi_data) return ContiguousRows(local_batch, accum_, micro);
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

std::optional<double> PlmUnit::StepsPerEpoch() {
  // One corpus: its sampler's epoch (one sampler step per optimizer step).
  // A blend's sources each run their own epochs.
  if (!config_.data.sources.empty()) return std::nullopt;
  const std::vector<data::SourcePart> parts = train_->Parts();
  if (parts.size() != 1 || parts[0].sampler == nullptr ||
      parts[0].sampler->steps_per_epoch() <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(parts[0].sampler->steps_per_epoch());
}

std::map<std::string, double> PlmUnit::LogValues(int64_t steps_done) {
  if (config_.data.sources.empty()) {
    const std::optional<double> per_epoch = StepsPerEpoch();
    if (!per_epoch) return {};
    return {{"epoch", static_cast<double>(steps_done) / *per_epoch}};
  }
  // A blend logs tokens per source instead.
  const std::vector<data::SourcePart> parts = train_->Parts();
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

}  // namespace xlnet
