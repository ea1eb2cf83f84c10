#include "finetune/task_data.h"

#include <utility>

#include "common/status.h"

namespace xlnet::finetune {

TensorRows TensorRows::Labelled(torch::Tensor input_ids,
                                torch::Tensor token_type_ids,
                                torch::Tensor attention_mask,
                                const torch::Tensor& labels) {
  TensorRows rows;
  rows.input_ids = std::move(input_ids);
  rows.token_type_ids = std::move(token_type_ids);
  rows.attention_mask = std::move(attention_mask);
  if (labels.defined()) rows.targets["labels"] = labels;
  return rows;
}

TensorRows TensorRows::Select(const torch::Tensor& index) const {
  TensorRows out;
  out.input_ids = input_ids.index_select(0, index);
  out.token_type_ids = token_type_ids.index_select(0, index);
  out.attention_mask = attention_mask.index_select(0, index);
  for (const auto& [name, t] : targets)
    out.targets[name] = t.index_select(0, index);
  return out;
}

absl::Status ReadEvalSets(const ReadSetFn& read, const std::string& dev_path,
                          const std::string& test_path, bool do_predict,
                          TaskData* data) {
  if (!dev_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data->dev, read(dev_path, "dev", true));
  }
  if (!test_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data->test, read(test_path, "test", !do_predict));
  }
  return absl::OkStatus();
}

}  // namespace xlnet::finetune
