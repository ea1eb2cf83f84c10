#include "finetune/multiple_choice_task.h"

#include "common/status.h"
#include "finetune/chunks.h"
#include "finetune/race.h"
#include "model_io/load.h"
#include "model_io/save.h"

namespace xlnet::finetune {

std::map<std::string, double> ScoreChoices(
    const torch::Tensor& logits, const torch::Tensor& labels,
    const std::vector<std::string>& levels) {
  const auto [g, p] = GoldAndPredicted(logits, labels);
  std::vector<std::string> l = levels;
  l.resize(g.size());  // a set without levels: all ""
  return MultipleChoiceMetrics(g, p, l);
}

MultipleChoiceHead::MultipleChoiceHead(const TaskHeadOptions& options,
                                       torch::Device device,
                                       torch::ScalarType dtype)
    : LogitsHead(options, device, dtype) {}

absl::StatusOr<std::unique_ptr<MultipleChoiceHead>> MultipleChoiceHead::Create(
    const TaskHeadOptions& options, torch::Device device,
    torch::ScalarType dtype) {
  std::unique_ptr<MultipleChoiceHead> head(
      new MultipleChoiceHead(options, device, dtype));
  XLNET_ASSIGN_OR_RETURN(
      head->model_,
      LoadForMultipleChoice(options.init_dir, HeadLoadOptionsOf(options)));
  StartFrom(head->model_, options, device);
  return head;
}

std::string MultipleChoiceHead::ModelConfigJson() {
  auto json = MultipleChoiceConfigJson(model_->config());
  TORCH_CHECK(json.ok(), json.status().ToString());
  return *json;
}

torch::Tensor MultipleChoiceHead::Logits(const TensorRows& batch) {
  const XLNetInputs in = Inputs(batch);
  if (!chunks()) return model_->forward(in);
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
  return model_->ForwardFlat(
      LastChunkWithMemory(*model_->transformer, flat, *chunks()), choices);
}

torch::Tensor MultipleChoiceHead::LossOfLogits(
    const torch::Tensor& logits, const torch::Tensor& gold) const {
  return MultipleChoiceLoss(logits, gold);
}

int64_t MultipleChoiceHead::Columns(const EvalSet& set) const {
  return set.rows.size() > 0 ? set.rows.input_ids.size(1) : 0;
}

std::map<std::string, double> MultipleChoiceHead::Metrics(
    const torch::Tensor& logits, const EvalSet& set) const {
  return ScoreChoices(logits, set.rows.targets.at("labels"), set.levels);
}

std::vector<std::string> MultipleChoiceHead::ColumnNames(
    int64_t columns) const {
  std::vector<std::string> names;
  for (int64_t c = 0; c < columns; ++c) names.push_back(OptionName(c));
  return names;
}

}  // namespace xlnet::finetune
