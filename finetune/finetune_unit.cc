#include "finetune/finetune_unit.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "finetune/metrics.h"
#include "finetune/race.h"
#include "finetune/squad_eval.h"
#include "model/precision.h"
#include "model_io/load.h"
#include "model_io/model_dir.h"
#include "model_io/save.h"

namespace xlnet::finetune {
namespace {

std::string StateFile(int rank) {
  return absl::StrCat("finetune_state.rank", rank, ".safetensors");
}

// labels [N] and the argmax of logits [N, C], as vectors.
std::pair<std::vector<int64_t>, std::vector<int64_t>> GoldAndPredicted(
    const torch::Tensor& logits, const torch::Tensor& labels) {
  const torch::Tensor pred = logits.argmax(-1).to(torch::kLong).contiguous();
  const torch::Tensor gold = labels.to(torch::kLong).contiguous();
  return {std::vector<int64_t>(gold.data_ptr<int64_t>(),
                               gold.data_ptr<int64_t>() + gold.numel()),
          std::vector<int64_t>(pred.data_ptr<int64_t>(),
                               pred.data_ptr<int64_t>() + pred.numel())};
}

}  // namespace

absl::StatusOr<Task> ParseTask(const std::string& name) {
  if (name == "classification") return Task::kClassification;
  if (name == "regression") return Task::kRegression;
  if (name == "squad") return Task::kSquad;
  if (name == "multiple_choice") return Task::kMultipleChoice;
  return absl::InvalidArgumentError(
      absl::StrCat("--task: unknown task '", name,
                   "' (classification, regression, squad or multiple_choice)"));
}

const char* TaskName(Task task) {
  switch (task) {
    case Task::kClassification:
      return "classification";
    case Task::kRegression:
      return "regression";
    case Task::kSquad:
      return "squad";
    case Task::kMultipleChoice:
      return "multiple_choice";
  }
  return "?";
}

std::string DefaultMetric(Task task) {
  switch (task) {
    case Task::kClassification:
      return "accuracy";
    case Task::kRegression:
      return "pearson";
    case Task::kSquad:
      return "f1";
    case Task::kMultipleChoice:
      return "accuracy";
  }
  return "loss";
}

bool LowerIsBetter(const std::string& metric) {
  return metric == "loss" || metric == "mse";
}

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
// TensorRows

// ---------------------------------------------------------------------------
// FinetuneUnit

FinetuneUnit::FinetuneUnit(FinetuneUnitOptions options, torch::Device device,
                           torch::ScalarType dtype)
    : options_(std::move(options)), device_(device), dtype_(dtype) {}

absl::StatusOr<std::unique_ptr<FinetuneUnit>> FinetuneUnit::Create(
    const FinetuneUnitOptions& options, TensorRows train,
    std::optional<EvalSet> dev) {
  const TrainConfig& tc = options.config.train;
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(tc.device));
  const torch::ScalarType dtype = ScalarTypeOf(tc.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  const int64_t per_step = options.world_size * tc.grad_accum_steps;
  if (tc.batch_size % per_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size=", tc.batch_size, " must split evenly over ",
        options.world_size, " ranks x ", tc.grad_accum_steps,
        " micro-batches (train.grad_accum_steps)"));
  }
  std::unique_ptr<FinetuneUnit> unit(new FinetuneUnit(options, device, dtype));
  if (UsesChunks(options.config.finetune)) {
    if (options.task == Task::kSquad) {
      return absl::InvalidArgumentError(
          "finetune.long_inputs: chunks is for classification, regression and "
          "multiple choice; SQuAD covers long contexts with windows "
          "(finetune.doc_stride)");
    }
    unit->chunks_ =
        ChunkOptionsFromConfig(options.config.finetune, options.config.model);
  }
  unit->accum_ = tc.grad_accum_steps;
  unit->train_ = std::move(train);
  unit->dev_ = std::move(dev);
  if (unit->train_.size() > 0) {
    unit->stream_ = std::make_unique<RowStream>(unit->train_.size(), tc.seed);
  }

  HeadLoadOptions load;
  load.labels = options.labels;
  load.seed = static_cast<uint64_t>(tc.seed);
  if (options.task == Task::kSquad) {
    XLNET_ASSIGN_OR_RETURN(unit->qa_,
                           LoadForQuestionAnswering(options.init_dir, load));
    if (options.from_scratch) {
      torch::manual_seed(tc.seed);
      unit->qa_->ResetParameters();
    }
    unit->qa_->answer_class_start = options.config.finetune.answer_class_start;
    unit->qa_->to(device);
  } else if (options.task == Task::kMultipleChoice) {
    XLNET_ASSIGN_OR_RETURN(unit->choice_,
                           LoadForMultipleChoice(options.init_dir, load));
    if (options.from_scratch) {
      torch::manual_seed(tc.seed);
      unit->choice_->ResetParameters();
    }
    unit->choice_->to(device);
  } else {
    XLNET_ASSIGN_OR_RETURN(unit->classifier_, LoadForSequenceClassification(
                                                  options.init_dir, load));
    if (unit->classifier_->is_regression() !=
        (options.task == Task::kRegression)) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.init_dir, ": the model has ", unit->classifier_->num_labels(),
          " outputs, which does not fit --task ", TaskName(options.task)));
    }
    if (options.from_scratch) {
      torch::manual_seed(tc.seed);
      unit->classifier_->ResetParameters();
    }
    unit->classifier_->to(device);
  }
  // Dropout streams differ per rank; initialisation above did not.
  torch::manual_seed(tc.seed + 7919 * (options.rank + 1));
  return unit;
}

NamedTensors FinetuneUnit::Named(bool parameters_only) {
  torch::nn::Module& m = qa_ ? static_cast<torch::nn::Module&>(*qa_)
                         : choice_
                             ? static_cast<torch::nn::Module&>(*choice_)
                             : static_cast<torch::nn::Module&>(*classifier_);
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

std::string FinetuneUnit::ModelConfigJson() {
  if (choice_) {
    auto json = MultipleChoiceConfigJson(choice_->config());
    TORCH_CHECK(json.ok(), json.status().ToString());
    return *json;
  }
  XLNetConfig config = qa_ ? qa_->config() : classifier_->config();
  if (qa_) {
    config.architectures = {"XLNetForQuestionAnswering"};
  } else {
    config.architectures = {"XLNetForSequenceClassification"};
    config.id2label =
        options_.labels.empty() ? config.id2label : options_.labels;
  }
  if (qa_) return ModelConfigToJson(config);
  auto json = ModelConfigJsonWith(
      config, {{"problem_type",
                ProblemType(static_cast<int64_t>(config.id2label.size()))}});
  TORCH_CHECK(json.ok(), json.status().ToString());
  return *json;
}

void FinetuneUnit::SetTraining(bool training) {
  if (qa_) qa_->train(training);
  if (classifier_) classifier_->train(training);
  if (choice_) choice_->train(training);
}

XLNetInputs FinetuneUnit::Inputs(const TensorRows& batch) const {
  XLNetInputs in;
  in.input_ids = batch.input_ids.to(device_);
  in.token_type_ids = batch.token_type_ids.to(device_);
  in.attention_mask = batch.attention_mask.to(device_);
  return in;
}

torch::Tensor FinetuneUnit::Losses(const TensorRows& batch) {
  AutocastGuard autocast(device_, dtype_);
  if (qa_) {
    const XLNetInputs in = Inputs(batch);
    QuestionAnsweringLabels labels;
    labels.start_positions = batch.targets.at("start_positions").to(device_);
    labels.end_positions = batch.targets.at("end_positions").to(device_);
    labels.cls_index = batch.targets.at("cls_index").to(device_);
    labels.is_impossible = batch.targets.at("is_impossible").to(device_);
    return qa_->Loss(in, batch.targets.at("p_mask").to(device_), labels)
        .loss.to(torch::kFloat);
  }
  return LabelLosses(Logits(batch), batch.targets.at("labels"))
      .to(torch::kFloat);
}

torch::Tensor FinetuneUnit::Logits(const TensorRows& batch) {
  const XLNetInputs in = Inputs(batch);
  if (choice_ && !chunks_) return choice_->forward(in);
  if (choice_) {
    // Every option of every question is one chunked row: [B, C, K*C'] ->
    // [B*C, K*C'], read in chunks, scored on the last one.
    const int64_t choices = in.input_ids.size(1);
    XLNetInputs flat;
    flat.input_ids = in.input_ids.flatten(0, 1);
    if (in.token_type_ids.defined()) {
      flat.token_type_ids = in.token_type_ids.flatten(0, 1);
    }
    if (in.attention_mask.defined()) {
      flat.attention_mask = in.attention_mask.flatten(0, 1);
    }
    return choice_->ForwardFlat(
        LastChunkWithMemory(*choice_->transformer, flat, *chunks_), choices);
  }
  if (!chunks_) return classifier_->forward(in).logits;
  return classifier_
      ->forward(LastChunkWithMemory(*classifier_->transformer, in, *chunks_))
      .logits;
}

torch::Tensor FinetuneUnit::LabelLosses(const torch::Tensor& logits,
                                        const torch::Tensor& labels) const {
  const torch::Tensor gold = labels.to(device_);
  if (choice_) return MultipleChoiceLoss(logits, gold);
  return classifier_->is_regression() ? RegressionLoss(logits, gold)
                                      : ClassificationLoss(logits, gold);
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
  out.loss = Losses(batch).sum();
  out.normalizer = static_cast<double>(n);
  out.tokens = batch.attention_mask.sum().item<int64_t>();
  return out;
}

std::map<std::string, double> FinetuneUnit::Evaluate() {
  if (!dev_) return {};
  auto scores = Score(*dev_, nullptr);
  TORCH_CHECK(scores.ok(), "evaluation failed: ", scores.status().ToString());
  return *scores;
}

std::map<std::string, double> ScoreLabels(Task task,
                                          const torch::Tensor& logits,
                                          const torch::Tensor& labels) {
  if (task == Task::kRegression) {
    const torch::Tensor pred = logits.reshape({-1}).to(torch::kDouble);
    const torch::Tensor gold = labels.to(torch::kDouble);
    std::vector<double> p(pred.data_ptr<double>(),
                          pred.data_ptr<double>() + pred.numel());
    std::vector<double> g(gold.data_ptr<double>(),
                          gold.data_ptr<double>() + gold.numel());
    return RegressionMetrics(g, p);
  }
  const auto [g, p] = GoldAndPredicted(logits, labels);
  return ClassificationMetrics(g, p, logits.size(-1));
}

std::map<std::string, double> ScoreChoices(
    const torch::Tensor& logits, const torch::Tensor& labels,
    const std::vector<std::string>& levels) {
  const auto [g, p] = GoldAndPredicted(logits, labels);
  std::vector<std::string> l = levels;
  l.resize(g.size());  // a set without levels: all ""
  return MultipleChoiceMetrics(g, p, l);
}

absl::StatusOr<std::map<std::string, double>> FinetuneUnit::Score(
    const EvalSet& set, Predictions* predictions) {
  const bool was_training = qa_       ? qa_->is_training()
                            : choice_ ? choice_->is_training()
                                      : classifier_->is_training();
  SetTraining(false);
  torch::NoGradGuard no_grad;
  const int64_t n = set.rows.size();
  const int64_t batch =
      std::max<int64_t>(1, options_.config.finetune.eval_batch_size);
  std::map<std::string, double> metrics;
  double loss_sum = 0;
  const bool labelled = set.labelled;
  if (qa_) {
    // Windows built with training targets also give a dev loss.
    const bool has_targets = set.rows.targets.count("start_positions") > 0;
    std::vector<torch::Tensor> stl, sti, etl, eti, cls;
    for (int64_t begin = 0; begin < n; begin += batch) {
      const int64_t end = std::min(n, begin + batch);
      const TensorRows rows = set.rows.Select(torch::arange(begin, end));
      if (has_targets) loss_sum += Losses(rows).sum().item<double>();
      AutocastGuard autocast(device_, dtype_);
      const QuestionAnsweringBeam beam =
          qa_->Predict(Inputs(rows), rows.targets.at("p_mask").to(device_),
                       rows.targets.at("cls_index").to(device_));
      stl.push_back(beam.start_top_log_probs.to(torch::kCPU, torch::kFloat));
      sti.push_back(beam.start_top_index.to(torch::kCPU));
      etl.push_back(beam.end_top_log_probs.to(torch::kCPU, torch::kFloat));
      eti.push_back(beam.end_top_index.to(torch::kCPU));
      cls.push_back(beam.cls_logits.to(torch::kCPU, torch::kFloat));
    }
    std::vector<SquadWindowResult> results;
    if (n > 0) {
      results = SquadResultsFromTensors(
          torch::cat(stl), torch::cat(sti), torch::cat(etl), torch::cat(eti),
          torch::cat(cls), EndTopLayout::kStartMajor);
    }
    SquadPredictOptions post;
    const FinetuneConfig& ft = options_.config.finetune;
    post.n_best_size = ft.n_best_size;
    post.max_answer_length = ft.max_answer_length;
    post.null_odds_threshold = ft.null_score_threshold;
    XLNET_ASSIGN_OR_RETURN(
        SquadPredictions squad,
        PredictSquad(set.squad, set.squad_features, results, post));
    if (labelled) {
      XLNET_ASSIGN_OR_RETURN(
          SquadEvalResult eval,
          EvaluateSquad(set.squad, squad.predictions, &squad.null_odds, {}));
      metrics = eval.metrics;
      if (has_targets) metrics["loss"] = loss_sum / std::max<int64_t>(1, n);
    }
    if (predictions) predictions->squad = std::move(squad);
  } else {
    std::vector<torch::Tensor> all_logits;
    for (int64_t begin = 0; begin < n; begin += batch) {
      const int64_t end = std::min(n, begin + batch);
      const TensorRows rows = set.rows.Select(torch::arange(begin, end));
      AutocastGuard autocast(device_, dtype_);
      const torch::Tensor logits = Logits(rows).to(torch::kFloat);
      if (labelled) {
        loss_sum +=
            LabelLosses(logits, rows.targets.at("labels")).sum().item<double>();
      }
      all_logits.push_back(logits.to(torch::kCPU));
    }
    // Multiple choice: the options of the set ([N, C, L] inputs).
    const int64_t columns = !choice_ ? classifier_->num_labels()
                            : n > 0  ? set.rows.input_ids.size(1)
                                     : 0;
    const torch::Tensor logits = all_logits.empty() ? torch::zeros({0, columns})
                                                    : torch::cat(all_logits);
    if (labelled && n > 0) {
      metrics = choice_ ? ScoreChoices(logits, set.rows.targets.at("labels"),
                                       set.levels)
                        : ScoreLabels(options_.task, logits,
                                      set.rows.targets.at("labels"));
      metrics["loss"] = loss_sum / n;
    }
    if (predictions) {
      predictions->ids = set.example_ids;
      predictions->logits = logits;
      predictions->values.clear();
      predictions->labels.clear();
      const bool regression = classifier_ && classifier_->is_regression();
      if (choice_) {
        for (int64_t c = 0; c < columns; ++c) {
          predictions->labels.push_back(OptionName(c));
        }
      } else if (!regression) {
        predictions->labels = classifier_->config().id2label;
      }
      for (int64_t i = 0; i < logits.size(0); ++i) {
        if (regression) {
          predictions->values.push_back(
              absl::StrFormat("%.6g", logits[i][0].item<double>()));
        } else {
          const int64_t id = logits[i].argmax().item<int64_t>();
          const auto& names = predictions->labels;
          predictions->values.push_back(id < static_cast<int64_t>(names.size())
                                            ? names[id]
                                            : std::to_string(id));
        }
      }
    }
  }
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

std::string PredictionsTsv(const Predictions& predictions, bool regression) {
  auto clean = [](std::string text) {
    std::replace_if(
        text.begin(), text.end(),
        [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return text;
  };
  std::string text = "id\tprediction";
  const int64_t n = static_cast<int64_t>(predictions.values.size());
  TORCH_CHECK(static_cast<int64_t>(predictions.ids.size()) == n,
              "predictions: ", predictions.ids.size(), " ids for ", n,
              " values");
  torch::Tensor probs;
  if (!regression) {
    for (const std::string& label : predictions.labels) {
      absl::StrAppend(&text, "\tprob_", clean(label));
    }
    TORCH_CHECK(predictions.logits.dim() == 2 &&
                    predictions.logits.size(0) == n &&
                    predictions.logits.size(1) ==
                        static_cast<int64_t>(predictions.labels.size()),
                "predictions: logits ", predictions.logits.sizes(), " for ", n,
                " rows of ", predictions.labels.size(), " classes");
    probs =
        torch::softmax(predictions.logits.to(torch::kFloat64), 1).contiguous();
  }
  text += "\n";
  for (int64_t i = 0; i < n; ++i) {
    absl::StrAppend(&text, clean(predictions.ids[i]), "\t",
                    clean(predictions.values[i]));
    if (probs.defined()) {
      const double* row = probs.data_ptr<double>() + i * probs.size(1);
      for (int64_t c = 0; c < probs.size(1); ++c) {
        absl::StrAppend(&text, "\t", absl::StrFormat("%.6g", row[c]));
      }
    }
    text += "\n";
  }
  return text;
}

}  // namespace xlnet::finetune
