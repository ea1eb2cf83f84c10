#include "finetune/finetune_unit.h"

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/runtime.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "finetune/chunks.h"
#include "finetune/classification_task.h"
#include "finetune/multiple_choice_task.h"
#include "finetune/squad_task.h"
#include "model/precision.h"
#include "model_io/model_dir.h"
#include "model_io/rank_files.h"
#include "model_io/run_layout.h"

namespace xlnet::finetune {
namespace {

// The per-rank naming a checkpoint's savers and verifiers share.
std::string StateFile(int rank) { return RankFileName("finetune_state", rank); }

}  // namespace

// ---------------------------------------------------------------------------
// RowStream

void RowStream::Shuffle() {
  // A generator of its own per epoch: the order depends on (seed, epoch)
  // only, never on what else consumed random numbers.
  auto gen = at::detail::createCPUGenerator(
      static_cast<uint64_t>(seed_) * 1000003ULL + epoch_);
  const torch::Tensor perm = torch::randperm(rows_, gen, torch::kLong);
  order_.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + rows_);
}

std::vector<int64_t> RowStream::Next(int64_t n) {
  TORCH_CHECK(rows_ > 0, "RowStream over an empty set");
  std::vector<int64_t> out;
  out.reserve(n);
  while (static_cast<int64_t>(out.size()) < n) {
    if (order_.empty()) Shuffle();
    out.push_back(order_[offset_]);
    if (++offset_ == rows_) {
      ++epoch_;
      offset_ = 0;
      order_.clear();
    }
  }
  return out;
}

void RowStream::Restore(int64_t epoch, int64_t offset) {
  epoch_ = epoch;
  offset_ = offset;
  order_.clear();
  if (offset_ > 0) Shuffle();
}

// ---------------------------------------------------------------------------
// FinetuneUnit

absl::StatusOr<std::unique_ptr<TaskHead>> MakeTaskHead(
    const TaskHeadOptions& options, torch::Device device,
    torch::ScalarType dtype) {
  switch (options.task) {
    case Task::kSquad:
      if (UsesChunks(options.config.finetune)) {
        return absl::InvalidArgumentError(
            "finetune.long_inputs: chunks is for classification, regression "
            "and multiple choice; SQuAD covers long contexts with windows "
            "(finetune.doc_stride)");
      }
      return SquadHead::Create(options, device, dtype);
    case Task::kMultipleChoice:
      return MultipleChoiceHead::Create(options, device, dtype);
    case Task::kClassification:
    case Task::kRegression:
      return ClassificationHead::Create(options, device, dtype);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no head for task ", static_cast<int>(options.task)));
}

// ---------------------------------------------------------------------------
// FinetuneUnit

absl::Status CheckFinetuneBatchSplit(const TrainConfig& tc,
                                     int64_t world_size) {
  if (tc.batch_size_per_device > 0) return absl::OkStatus();
  const int64_t per_step = world_size * tc.grad_accum_steps;
  if (tc.batch_size % per_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size=", tc.batch_size,
        " (the global batch) must split "
        "evenly over ",
        world_size, " ranks x ", tc.grad_accum_steps,
        " micro-batches (train.grad_accum_steps): set it to a multiple of ",
        per_step,
        ", or set train.batch_size_per_device (rows per rank per "
        "forward) instead"));
  }
  return absl::OkStatus();
}

FinetuneUnit::FinetuneUnit(FinetuneUnitOptions options,
                           std::unique_ptr<TaskHead> head)
    : options_(std::move(options)), head_(std::move(head)) {}

absl::StatusOr<std::unique_ptr<FinetuneUnit>> FinetuneUnit::Create(
    const FinetuneUnitOptions& options, TensorRows train,
    std::optional<EvalSet> dev) {
  const TrainConfig& tc = options.config.train;
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(tc.device));
  const torch::ScalarType dtype = ScalarTypeOf(tc.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  XLNET_RETURN_IF_ERROR(CheckFinetuneBatchSplit(tc, options.world_size));
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<TaskHead> head,
                         MakeTaskHead(options, device, dtype));
  std::unique_ptr<FinetuneUnit> unit(
      new FinetuneUnit(options, std::move(head)));
  unit->accum_ = tc.grad_accum_steps;
  unit->train_ = std::move(train);
  unit->dev_ = std::move(dev);
  if (unit->train_.size() > 0) {
    unit->stream_ = std::make_unique<RowStream>(unit->train_.size(), tc.seed);
  }
  // Dropout streams differ per rank; initialisation above did not.
  torch::manual_seed(tc.seed + 7919 * (options.rank + 1));
  return unit;
}

TrainingData FinetuneUnit::Data() {
  if (train_.size() == 0) return {};
  // The bytes of every training tensor, in a fixed order (targets by name).
  std::vector<torch::Tensor> parts = {train_.input_ids, train_.token_type_ids,
                                      train_.attention_mask};
  for (const auto& [name, t] : train_.targets) parts.push_back(t);
  size_t hash = 0;
  for (const torch::Tensor& part : parts) {
    const torch::Tensor t = part.contiguous().cpu();
    const std::string_view bytes(static_cast<const char*>(t.data_ptr()),
                                 t.numel() * t.element_size());
    hash = hash * 1000003 ^ std::hash<std::string_view>{}(bytes);
  }
  const std::string key = absl::StrCat(absl::Hex(hash, absl::kZeroPad16));
  return {key, absl::StrCat(train_.size(), " training rows (hash ", key, ")")};
}

NamedTensors FinetuneUnit::Named(bool parameters_only) {
  torch::nn::Module& m = head_->model();
  NamedTensors out;
  for (const auto& item : m.named_parameters()) {
    out.emplace_back(item.key(), item.value());
  }
  if (!parameters_only) {
    for (const auto& item : m.named_buffers()) {
      out.emplace_back(item.key(), item.value());
    }
  }
  return out;
}

NamedTensors FinetuneUnit::Parameters() { return Named(true); }
NamedTensors FinetuneUnit::StateDict() { return Named(false); }

std::string FinetuneUnit::ModelConfigJson() { return head_->ModelConfigJson(); }

void FinetuneUnit::SetTraining(bool training) {
  head_->model().train(training);
}

StepOutput FinetuneUnit::TrainStep() {
  TORCH_CHECK(stream_, "fine-tuning without training data");
  const int64_t global = options_.config.train.batch_size;
  const int64_t world = options_.world_size;
  if (micro_ == 0) {
    const std::vector<int64_t> rows = stream_->Next(global);
    const int64_t per_rank = global / world;
    local_rows_.assign(rows.begin() + options_.rank * per_rank,
                       rows.begin() + (options_.rank + 1) * per_rank);
  }
  const int64_t n = static_cast<int64_t>(local_rows_.size()) / accum_;
  const torch::Tensor index = torch::tensor(
      std::vector<int64_t>(local_rows_.begin() + micro_ * n,
                           local_rows_.begin() + (micro_ + 1) * n),
      torch::kLong);
  micro_ = (micro_ + 1) % accum_;
  const TensorRows batch = train_.Select(index);
  StepOutput out;
  out.loss = head_->Losses(batch).sum();
  out.normalizer = static_cast<double>(n);
  // A device tensor: the trainer reads it with the step's other numbers.
  out.tokens = batch.attention_mask.sum();
  return out;
}

std::optional<double> FinetuneUnit::StepsPerEpoch() {
  if (!stream_ || train_.size() == 0) return std::nullopt;
  return static_cast<double>(train_.size()) /
         static_cast<double>(options_.config.train.batch_size);
}

std::map<std::string, double> FinetuneUnit::LogValues(int64_t steps_done) {
  if (!stream_ || train_.size() == 0) return {};
  const double rows = static_cast<double>(train_.size());
  return {{"epoch", (static_cast<double>(stream_->epoch()) * rows +
                     static_cast<double>(stream_->offset())) /
                        rows}};
}

std::map<std::string, double> FinetuneUnit::Evaluate() {
  if (!dev_) return {};
  auto scores = Score(*dev_, nullptr);
  TORCH_CHECK(scores.ok(), "evaluation failed: ", scores.status().ToString());
  return *scores;
}

absl::StatusOr<std::map<std::string, double>> FinetuneUnit::Score(
    const EvalSet& set, Predictions* predictions) {
  const bool was_training = head_->model().is_training();
  SetTraining(false);
  torch::NoGradGuard no_grad;
  auto metrics = head_->Score(set, predictions);
  SetTraining(was_training);
  return metrics;
}

absl::Status FinetuneUnit::SaveUnitState(
    int rank, std::map<std::string, NamedTensors>* files) {
  TORCH_CHECK(micro_ == 0, "checkpoint in the middle of an accumulation step");
  if (!stream_) return absl::OkStatus();
  (*files)[StateFile(rank)] = {
      {"epoch", torch::tensor(stream_->epoch(), torch::kLong)},
      {"offset", torch::tensor(stream_->offset(), torch::kLong)},
      {"rows", torch::tensor(train_.size(), torch::kLong)}};
  return absl::OkStatus();
}

absl::Status FinetuneUnit::LoadUnitState(const std::string& dir, int rank) {
  if (!stream_) return absl::OkStatus();
  // Every rank holds the same global stream position; rank 0's file is
  // enough when the world size changed.
  std::string path = dir + "/" + StateFile(rank);
  XLNET_ASSIGN_OR_RETURN(
      SafetensorsFile file,
      SafetensorsFile::Open(PathExists(path) ? path
                                             : dir + "/" + StateFile(0)));
  XLNET_ASSIGN_OR_RETURN(torch::Tensor rows, file.Load("rows"));
  if (rows.item<int64_t>() != train_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": the checkpoint was trained on ", rows.item<int64_t>(),
        " training rows but the training data now has ", train_.size()));
  }
  XLNET_ASSIGN_OR_RETURN(torch::Tensor epoch, file.Load("epoch"));
  XLNET_ASSIGN_OR_RETURN(torch::Tensor offset, file.Load("offset"));
  stream_->Restore(epoch.item<int64_t>(), offset.item<int64_t>());
  micro_ = 0;
  return absl::OkStatus();
}

absl::Status FinetuneUnit::LoadWeights(const std::string& dir) {
  return CopyWeightsFromDir(dir, StateDict());
}

absl::Status FinetuneUnit::WritePredictions(
    const std::string& out_dir, const EvalSet& set,
    const Predictions& predictions) const {
  return head_->WritePredictions(
      predictions,
      RunPath(out_dir, absl::StrCat(kPredictionsPrefix, set.name)));
}

}  // namespace xlnet::finetune
