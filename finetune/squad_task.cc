#include "finetune/squad_task.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "finetune/examples.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"
#include "model/precision.h"
#include "model_io/load.h"

namespace xlnet::finetune {
namespace {

// The windows of a set as model inputs with their targets.
TensorRows SquadRows(const SquadFeatures& f) {
  TensorRows rows;
  rows.input_ids = f.input_ids;
  rows.token_type_ids = f.token_type_ids;
  rows.attention_mask = f.attention_mask;
  rows.targets["p_mask"] = f.p_mask;
  rows.targets["cls_index"] = f.cls_index;
  if (f.start_positions.defined()) {
    rows.targets["start_positions"] = f.start_positions;
    rows.targets["end_positions"] = f.end_positions;
    rows.targets["is_impossible"] = f.is_impossible;
  }
  return rows;
}

}  // namespace

absl::StatusOr<TaskData> ReadSquadTask(const FinetuneConfig& ft,
                                       const data::Tokenizer& tokenizer,
                                       const std::string& train_path,
                                       const std::string& dev_path,
                                       const std::string& test_path,
                                       bool do_predict) {
  TaskData data;
  SquadReadOptions read;
  read.bad_rows = ft.bad_rows;
  // A window holds the question, 3 special tokens and some context.
  if (ft.max_query_length + 3 >= ft.max_seq_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_query_length=", ft.max_query_length,
        " leaves no room for context in finetune.max_seq_length=",
        ft.max_seq_length,
        " (a SQuAD window holds the question, 3 special tokens and at least "
        "one context token): lower the first or raise the second"));
  }
  SquadFeatureOptions features;
  features.max_seq_length = ft.max_seq_length;
  features.doc_stride = ft.doc_stride;
  features.max_query_length = ft.max_query_length;
  if (!train_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(SquadDataset train, ReadSquad(train_path, read));
    LogSkippedRows(train_path, train.skipped, train.problems);
    features.is_training = true;
    XLNET_ASSIGN_OR_RETURN(SquadFeatures f,
                           BuildSquadFeatures(train, tokenizer, features));
    XLOG(INFO) << train_path << ": " << train.examples.size() << " questions, "
               << f.windows.size() << " windows, " << f.truncated_questions
               << " questions truncated";
    if (f.windows.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(train_path, ": no usable training questions"));
    }
    data.train = SquadRows(f);
  }
  auto read_eval = [&](const std::string& path, const std::string& name,
                       bool labelled) -> absl::StatusOr<EvalSet> {
    SquadReadOptions r = read;
    r.require_answers = labelled;
    if (name == "test") {
      r.unlabeled_hint =
          "to write predictions for an unlabeled --test, add --do_predict";
    }
    EvalSet out;
    out.name = name;
    XLNET_ASSIGN_OR_RETURN(out.squad, ReadSquad(path, r));
    LogSkippedRows(path, out.squad.skipped, out.squad.problems);
    bool has_answers = false;
    for (const auto& e : out.squad.examples) {
      has_answers |= !e.answers.empty() || e.is_impossible;
    }
    out.labelled = labelled || has_answers;
    SquadFeatureOptions f = features;
    // Labelled sets get training targets too, for a dev loss.
    f.is_training = labelled;
    XLNET_ASSIGN_OR_RETURN(out.squad_features,
                           BuildSquadFeatures(out.squad, tokenizer, f));
    out.rows = SquadRows(out.squad_features);
    return out;
  };
  XLNET_RETURN_IF_ERROR(
      ReadEvalSets(read_eval, dev_path, test_path, do_predict, &data));
  return data;
}

// ---------------------------------------------------------------------------
// SquadHead

SquadHead::SquadHead(const TaskHeadOptions& options, torch::Device device,
                     torch::ScalarType dtype)
    : TaskHead(device, dtype, options.config.finetune.eval_batch_size) {
  const FinetuneConfig& ft = options.config.finetune;
  post_.n_best_size = ft.n_best_size;
  post_.max_answer_length = ft.max_answer_length;
  post_.null_odds_threshold = ft.null_score_threshold;
}

absl::StatusOr<std::unique_ptr<SquadHead>> SquadHead::Create(
    const TaskHeadOptions& options, torch::Device device,
    torch::ScalarType dtype) {
  std::unique_ptr<SquadHead> head(new SquadHead(options, device, dtype));
  XLNET_ASSIGN_OR_RETURN(
      head->model_,
      LoadForQuestionAnswering(options.init_dir, HeadLoadOptionsOf(options)));
  StartFrom(head->model_, options, device);
  head->model_->answer_class_start = options.config.finetune.answer_class_start;
  return head;
}

std::string SquadHead::ModelConfigJson() {
  XLNetConfig config = model_->config();
  config.architectures = {"XLNetForQuestionAnswering"};
  return ModelConfigToJson(config);
}

torch::Tensor SquadHead::Losses(const TensorRows& batch) {
  AutocastGuard autocast(device(), dtype());
  const XLNetInputs in = Inputs(batch);
  QuestionAnsweringLabels labels;
  labels.start_positions = batch.targets.at("start_positions").to(device());
  labels.end_positions = batch.targets.at("end_positions").to(device());
  labels.cls_index = batch.targets.at("cls_index").to(device());
  labels.is_impossible = batch.targets.at("is_impossible").to(device());
  return model_->Loss(in, batch.targets.at("p_mask").to(device()), labels)
      .loss.to(torch::kFloat);
}

std::vector<SquadWindowResult> SquadHead::Beams(const TensorRows& windows,
                                                double* loss_sum) {
  // Windows built with training targets also give a loss.
  const bool has_targets = windows.targets.count("start_positions") > 0;
  std::vector<torch::Tensor> stl, sti, etl, eti, cls;
  ForEachEvalBatch(windows, [&](const TensorRows& rows) {
    if (has_targets) *loss_sum += Losses(rows).sum().item<double>();
    AutocastGuard autocast(device(), dtype());
    const QuestionAnsweringBeam beam =
        model_->Predict(Inputs(rows), rows.targets.at("p_mask").to(device()),
                        rows.targets.at("cls_index").to(device()));
    stl.push_back(beam.start_top_log_probs.to(torch::kCPU, torch::kFloat));
    sti.push_back(beam.start_top_index.to(torch::kCPU));
    etl.push_back(beam.end_top_log_probs.to(torch::kCPU, torch::kFloat));
    eti.push_back(beam.end_top_index.to(torch::kCPU));
    cls.push_back(beam.cls_logits.to(torch::kCPU, torch::kFloat));
  });
  if (windows.size() == 0) return {};
  return SquadResultsFromTensors(torch::cat(stl), torch::cat(sti),
                                 torch::cat(etl), torch::cat(eti),
                                 torch::cat(cls), EndTopLayout::kStartMajor);
}

absl::StatusOr<std::map<std::string, double>> SquadHead::Score(
    const EvalSet& set, Predictions* predictions) {
  const int64_t n = set.rows.size();
  const bool has_targets = set.rows.targets.count("start_positions") > 0;
  double loss_sum = 0;
  const std::vector<SquadWindowResult> results = Beams(set.rows, &loss_sum);
  XLNET_ASSIGN_OR_RETURN(
      SquadPredictions squad,
      PredictSquad(set.squad, set.squad_features, results, post_));
  std::map<std::string, double> metrics;
  if (set.labelled) {
    XLNET_ASSIGN_OR_RETURN(
        SquadEvalResult eval,
        EvaluateSquad(set.squad, squad.predictions, &squad.null_odds, {}));
    metrics = eval.metrics;
    if (has_targets) metrics["loss"] = loss_sum / std::max<int64_t>(1, n);
  }
  if (predictions) predictions->squad = std::move(squad);
  return metrics;
}

absl::Status SquadHead::WritePredictions(const Predictions& predictions,
                                         const std::string& path) const {
  // RUN/predictions_dev/{predictions,null_odds,nbest_predictions}.json
  return WriteSquadPredictions(predictions.squad, path);
}

}  // namespace xlnet::finetune
