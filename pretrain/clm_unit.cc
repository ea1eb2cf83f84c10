#include "pretrain/clm_unit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data_pipeline/token_bytes.h"
#include "model/precision.h"

namespace xlnet {

absl::StatusOr<std::unique_ptr<ClmUnit>> ClmUnit::Create(
    const PretrainUnitOptions& options) {
  const Config& config = options.config;
  const TrainConfig& train = config.train;
  if (train.objective != Objective::kClm) {
    return absl::InvalidArgumentError(
        "ClmUnit trains train.objective: clm (PlmUnit trains plm)");
  }
  XLNET_RETURN_IF_ERROR(ValidateConfig(config));
  if (!config.data.sources.empty() || options.data_dir.empty()) {
    return absl::InvalidArgumentError(
        "train.objective clm reads one prepared directory (--data); "
        "data.sources blends are not supported for it");
  }
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(train.device));
  const torch::ScalarType dtype = ScalarTypeOf(train.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  XLNET_RETURN_IF_ERROR(CheckBatchSplit(config, options.world_size));

  std::unique_ptr<ClmUnit> unit(new ClmUnit(config, device, dtype, options));
  unit->data_origin_ = absl::StrCat("--data ", options.data_dir);
  data::SamplerOptions source_options = PretrainSourceOptions(options, device);
  XLNET_ASSIGN_OR_RETURN(unit->train_, data::LmStreamSource::Create(
                                           options.data_dir, source_options));
  const data::Tokenizer& tokenizer = unit->train_->tokenizer();
  XLNET_RETURN_IF_ERROR(CheckVocabFits(tokenizer, config));
  if (train.eval_steps > 0 && config.data.eval_fraction > 0) {
    source_options.split = data::Split::kEval;
    source_options.data.prefetch_batches = 0;
    XLNET_ASSIGN_OR_RETURN(unit->eval_, data::LmStreamSource::Create(
                                            options.data_dir, source_options));
    const std::vector<int32_t> bytes = data::TokenTextBytes(tokenizer);
    unit->token_bytes_ = torch::tensor(bytes, torch::kFloat64);
  }
  XLNET_RETURN_IF_ERROR(
      CheckInitTokenizer(tokenizer, options.data_dir, options.init_dir));
  XLNET_ASSIGN_OR_RETURN(unit->model_,
                         MakePretrainModel(config, options.init_dir, device));
  // Dropout streams differ per rank; initialisation above did not.
  torch::manual_seed(train.seed + 7919 * (options.rank + 1));
  return unit;
}

StepOutput ClmUnit::Forward(const data::LmBatch& batch,
                            std::vector<torch::Tensor>* mems) {
  // Batches in page-locked memory (on CUDA) copy without waiting.
  const auto to_device = [&](const torch::Tensor& t) {
    return t.to(device_, /*non_blocking=*/t.is_pinned());
  };
  XLNetInputs inputs;
  inputs.input_ids = to_device(batch.input_ids);
  inputs.mems = *mems;
  const torch::Tensor target = to_device(batch.target);
  XLNetForwardOptions forward;
  forward.use_mems = config_.model.mem_len.value_or(0) > 0;
  torch::Tensor logits;
  {
    AutocastGuard autocast(device_, dtype_);
    XLNetLMOutputs result = model_->forward(inputs, forward);
    logits = result.logits;
    *mems = std::move(result.new_mems);
  }
  StepOutput out;
  // Summed over targets; the trainer divides by the global target count.
  out.loss = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat).reshape({-1, logits.size(-1)}),
      target.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  const double targets = static_cast<double>(target.numel());
  out.normalizer = targets;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct =
        (logits.argmax(-1) == target).to(torch::kFloat64).sum();
    out.metrics["accuracy"] = correct / targets;
    out.metrics["ppl"] =
        (out.loss.detach().to(torch::kFloat64) / targets).exp();
  }
  out.tokens = batch.input_ids.numel();
  return out;
}

StepOutput ClmUnit::TrainStep() {
  if (micro_ == 0) current_ = train_->Next();
  StepOutput out;
  if (accum_ == 1) {
    out = Forward(current_, &mems_[0]);
  } else {
    const torch::Tensor rows =
        ContiguousRows(current_.input_ids.size(0), accum_, micro_);
    data::LmBatch slice;
    slice.input_ids = current_.input_ids.index_select(0, rows);
    slice.target = current_.target.index_select(0, rows);
    out = Forward(slice, &mems_[micro_]);
  }
  micro_ = (micro_ + 1) % accum_;
  return out;
}

std::optional<double> ClmUnit::StepsPerEpoch() {
  return static_cast<double>(train_->steps_per_epoch());
}

std::map<std::string, double> ClmUnit::LogValues(int64_t steps_done) {
  return {{"epoch", static_cast<double>(steps_done) / *StepsPerEpoch()}};
}

std::map<std::string, double> ClmUnit::Evaluate() {
  if (!eval_) return {};
  // The same held-out text every time, from the split's start, so
  // evaluations compare.
  data::SamplerState start = eval_->State();
  start.step = 0;
  if (!eval_->Restore(start).ok()) return {};
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> mems;
  double loss_sum = 0, correct = 0, targets = 0, bytes = 0;
  // At most one epoch of the split, so no text counts twice.
  const int64_t steps =
      std::min(config_.train.eval_batches, eval_->steps_per_epoch());
  for (int64_t i = 0; i < steps; ++i) {
    const data::LmBatch batch = eval_->Next();
    StepOutput out = Forward(batch, &mems);
    const double n = out.normalizer.Value();
    loss_sum += out.loss.item<double>();
    correct += out.metrics["accuracy"].Value() * n;
    targets += n;
    bytes += token_bytes_.index({batch.target}).sum().item<double>();
  }
  if (targets == 0) return {};
  std::map<std::string, double> result = {{"loss", loss_sum / targets},
                                          {"ppl", std::exp(loss_sum / targets)},
                                          {"accuracy", correct / targets}};
  if (bytes > 0) result["bpb"] = loss_sum / std::log(2.0) / bytes;
  return result;
}

}  // namespace xlnet
