#include "finetune/classification_task.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"
#include "finetune/chunks.h"
#include "finetune/examples.h"
#include "finetune/metrics.h"
#include "model_io/load.h"
#include "model_io/save.h"

namespace xlnet::finetune {
namespace {

TensorRows RowsOf(const EncodedExamples& enc, const FinetuneConfig& ft) {
  TensorRows rows = TensorRows::Labelled(enc.input_ids, enc.token_type_ids,
                                         enc.attention_mask, enc.labels);
  if (UsesChunks(ft)) {
    // Leading chunks that are padding in every row are never run: drop them.
    const int64_t c = ft.max_seq_length;
    const int64_t width = DropLeadingPaddingChunks(
        &rows.input_ids, &rows.token_type_ids, &rows.attention_mask, c);
    XLOG(INFO) << rows.size() << " rows of up to " << width / c << " chunks of "
               << c << " tokens; "
               << (rows.attention_mask.sum(1) > c).sum().item<int64_t>()
               << " longer than one chunk";
  }
  return rows;
}

// The label set of a classification run: --labels, else a fine-tuned
// model's own labels, else the training file's labels in sorted order.
absl::StatusOr<LabelSet> ChooseLabels(const XLNetConfig& init_model,
                                      const std::string& labels_flag,
                                      const std::optional<ExampleSet>& train,
                                      const std::string& train_path) {
  LabelSet labels;
  const bool init_has_head =
      !init_model.architectures.empty() &&
      init_model.architectures[0] == "XLNetForSequenceClassification";
  if (!labels_flag.empty()) {
    XLNET_ASSIGN_OR_RETURN(labels, LabelSet::FromNames(absl::StrSplit(
                                       labels_flag, ',', absl::SkipEmpty())));
  } else if (init_has_head) {
    XLNET_ASSIGN_OR_RETURN(labels, LabelSet::FromNames(init_model.id2label));
  } else if (train) {
    labels = LabelSet::FromExamples(train->examples);
  } else {
    return absl::InvalidArgumentError(
        "no labels: give --train, --labels, or an --init model that was "
        "fine-tuned for classification");
  }
  if (labels.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "classification needs at least 2 labels, found ", labels.size(),
        train_path.empty() ? "" : absl::StrCat(" in ", train_path)));
  }
  return labels;
}

}  // namespace

absl::StatusOr<TaskData> ReadClassificationTask(
    Task task, const FinetuneConfig& config, const data::Tokenizer& tokenizer,
    const XLNetConfig& init_model, const std::string& labels_flag,
    const std::string& train_path, const std::string& dev_path,
    const std::string& test_path, bool do_predict) {
  TaskData data;
  XLNET_ASSIGN_OR_RETURN(
      ReadOptions read,
      ReadOptionsFromConfig(config, task == Task::kRegression
                                        ? TaskKind::kRegression
                                        : TaskKind::kClassification));
  FeatureOptions features;
  // With long_inputs "chunks", max_chunks chunks side by side.
  features.max_seq_length = EncodedLength(config);

  std::optional<ExampleSet> train;
  if (!train_path.empty()) {
    ReadOptions r = read;
    r.unlabeled_hint =
        "--train must be labelled (unlabeled data: --test with --do_predict)";
    XLNET_ASSIGN_OR_RETURN(train, ReadExamples(train_path, r));
    LogSkippedRows(train_path, train->skipped, train->problems);
    if (train->examples.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(train_path, ": no usable training rows"));
    }
  }
  LabelSet labels;
  if (task == Task::kRegression) {
    data.labels = {"score"};
  } else {
    XLNET_ASSIGN_OR_RETURN(
        labels, ChooseLabels(init_model, labels_flag, train, train_path));
    data.labels = labels.names();
    read.labels = &labels;
  }
  const LabelSet* label_ptr = task == Task::kRegression ? nullptr : &labels;
  if (train) {
    XLNET_ASSIGN_OR_RETURN(EncodedExamples enc,
                           EncodeExamples(train->examples, tokenizer, read.task,
                                          label_ptr, features));
    XLOG(INFO) << train_path << ": " << enc.input_ids.size(0) << " rows, "
               << enc.truncated << " truncated to " << features.max_seq_length
               << " tokens";
    data.train = RowsOf(enc, config);
  }
  auto read_eval = [&](const std::string& path, const std::string& name,
                       bool labelled) -> absl::StatusOr<EvalSet> {
    ReadOptions r = read;
    r.require_label = labelled;
    r.unlabeled_hint =
        name == "test"
            ? "to write predictions for an unlabeled --test, add --do_predict"
            : "--dev must be labelled (unlabeled data: --test with "
              "--do_predict)";
    XLNET_ASSIGN_OR_RETURN(ExampleSet set, ReadExamples(path, r));
    LogSkippedRows(path, set.skipped, set.problems);
    bool all_labelled = true;
    for (const auto& e : set.examples) all_labelled &= e.has_label;
    XLNET_ASSIGN_OR_RETURN(EncodedExamples enc,
                           EncodeExamples(set.examples, tokenizer, read.task,
                                          label_ptr, features));
    EvalSet out;
    out.name = name;
    out.rows = RowsOf(enc, config);
    out.example_ids = enc.example_ids;
    out.labelled =
        all_labelled && enc.labels.defined() && !set.examples.empty();
    return out;
  };
  XLNET_RETURN_IF_ERROR(
      ReadEvalSets(read_eval, dev_path, test_path, do_predict, &data));
  return data;
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

// ---------------------------------------------------------------------------
// ClassificationHead

ClassificationHead::ClassificationHead(const TaskHeadOptions& options,
                                       torch::Device device,
                                       torch::ScalarType dtype)
    : LogitsHead(options, device, dtype),
      task_(options.task),
      labels_(options.labels) {}

absl::StatusOr<std::unique_ptr<ClassificationHead>> ClassificationHead::Create(
    const TaskHeadOptions& options, torch::Device device,
    torch::ScalarType dtype) {
  std::unique_ptr<ClassificationHead> head(
      new ClassificationHead(options, device, dtype));
  XLNET_ASSIGN_OR_RETURN(
      head->model_, LoadForSequenceClassification(options.init_dir,
                                                  HeadLoadOptionsOf(options)));
  if (head->model_->is_regression() != (options.task == Task::kRegression)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.init_dir, ": the model has ", head->model_->num_labels(),
        " outputs, which does not fit --task ", TaskName(options.task)));
  }
  StartFrom(head->model_, options, device);
  return head;
}

std::string ClassificationHead::ModelConfigJson() {
  XLNetConfig config = model_->config();
  config.architectures = {"XLNetForSequenceClassification"};
  config.id2label = labels_.empty() ? config.id2label : labels_;
  auto json = ModelConfigJsonWith(
      config, {{"problem_type",
                ProblemType(static_cast<int64_t>(config.id2label.size()))}});
  TORCH_CHECK(json.ok(), json.status().ToString());
  return *json;
}

torch::Tensor ClassificationHead::Logits(const TensorRows& batch) {
  const XLNetInputs in = Inputs(batch);
  if (!chunks()) return model_->forward(in).logits;
  return model_
      ->forward(LastChunkWithMemory(*model_->transformer, in, *chunks()))
      .logits;
}

torch::Tensor ClassificationHead::LossOfLogits(
    const torch::Tensor& logits, const torch::Tensor& gold) const {
  return model_->is_regression() ? RegressionLoss(logits, gold)
                                 : ClassificationLoss(logits, gold);
}

int64_t ClassificationHead::Columns(const EvalSet& set) const {
  return model_->num_labels();
}

std::map<std::string, double> ClassificationHead::Metrics(
    const torch::Tensor& logits, const EvalSet& set) const {
  return ScoreLabels(task_, logits, set.rows.targets.at("labels"));
}

std::vector<std::string> ClassificationHead::ColumnNames(
    int64_t columns) const {
  return model_->config().id2label;
}

}  // namespace xlnet::finetune
