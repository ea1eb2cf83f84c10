// Saving our modules as HuggingFace model directories (through
// WriteModelDir, model_dir.h): config.json with the HF class in
// `architectures`, model.safetensors under HF names, written atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "model/multiple_choice.h"
#include "model/question_answering.h"
#include "model/sequence_classification.h"
#include "model/xlnet.h"

namespace xlnet {

// The HF state dict of `model`: its named_parameters (for XLNetLMHeadModel
// no lm_loss.weight, which is tied), CPU, contiguous.
NamedTensors HfStateDict(torch::nn::Module& model);

// ModelConfigToJson(config) with the keys of `extra` added: HF keys that
// XLNetConfig does not hold (problem_type, torch_dtype). Validates `config`.
absl::StatusOr<std::string> ModelConfigJsonWith(const XLNetConfig& config,
                                                const nlohmann::json& extra);

// HF problem_type of a classifier with `num_labels` outputs: "regression"
// for 1, else "single_label_classification".
const char* ProblemType(int64_t num_labels);

// config.json + model.safetensors of the LM (architectures as configured).
absl::Status SavePretrained(XLNetLMHeadModelImpl& model,
                            const std::string& dir);
// architectures ["XLNetForSequenceClassification"], id2label/label2id,
// problem_type.
absl::Status SavePretrained(XLNetForSequenceClassificationImpl& model,
                            const std::string& dir);
// architectures ["XLNetForQuestionAnswering"].
absl::Status SavePretrained(XLNetForQuestionAnsweringImpl& model,
                            const std::string& dir);
// architectures ["XLNetForMultipleChoice"] (id2label as HF's default: the
// head has one output per option, labels are not used).
absl::Status SavePretrained(XLNetForMultipleChoiceImpl& model,
                            const std::string& dir);
// The config.json text of a multiple-choice model with `config`'s backbone.
absl::StatusOr<std::string> MultipleChoiceConfigJson(XLNetConfig config);

}  // namespace xlnet
