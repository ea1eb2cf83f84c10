#include "model_io/save.h"

#include "common/status.h"
#include "model_io/model_dir.h"

namespace xlnet {
namespace {

absl::Status SaveWithArchitecture(torch::nn::Module& model, XLNetConfig config,
                                  const std::string& architecture,
                                  const nlohmann::json& extra,
                                  const std::string& dir) {
  config.architectures = {architecture};
  XLNET_ASSIGN_OR_RETURN(std::string json, ModelConfigJsonWith(config, extra));
  return WriteModelDir(dir, json, HfStateDict(model));
}

}  // namespace

NamedTensors HfStateDict(torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(),
                     item.value().detach().to(torch::kCPU).contiguous());
  }
  return out;
}

absl::StatusOr<std::string> ModelConfigJsonWith(const XLNetConfig& config,
                                                const nlohmann::json& extra) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(config));
  TORCH_CHECK(extra.is_object(),
              "ModelConfigJsonWith: extra must be a JSON object");
  nlohmann::json out = nlohmann::json::parse(ModelConfigToJson(config));
  for (const auto& [key, value] : extra.items()) out[key] = value;
  return out.dump(2) + "\n";
}

const char* ProblemType(int64_t num_labels) {
  return num_labels == 1 ? "regression" : "single_label_classification";
}

absl::Status SavePretrained(XLNetLMHeadModelImpl& model,
                            const std::string& dir) {
  return WriteModelDir(dir, model.config(), HfStateDict(model));
}

absl::Status SavePretrained(XLNetForSequenceClassificationImpl& model,
                            const std::string& dir) {
  return SaveWithArchitecture(
      model, model.config(), "XLNetForSequenceClassification",
      {{"problem_type", ProblemType(model.num_labels())}}, dir);
}

absl::Status SavePretrained(XLNetForQuestionAnsweringImpl& model,
                            const std::string& dir) {
  return SaveWithArchitecture(model, model.config(),
                              "XLNetForQuestionAnswering",
                              nlohmann::json::object(), dir);
}

absl::StatusOr<std::string> MultipleChoiceConfigJson(XLNetConfig config) {
  config.architectures = {"XLNetForMultipleChoice"};
  config.id2label = XLNetConfig().id2label;
  return ModelConfigJsonWith(config, nlohmann::json::object());
}

absl::Status SavePretrained(XLNetForMultipleChoiceImpl& model,
                            const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(std::string json,
                         MultipleChoiceConfigJson(model.config()));
  return WriteModelDir(dir, json, HfStateDict(model));
}

}  // namespace xlnet
