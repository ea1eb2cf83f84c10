// The one loader of model directories into our modules (every caller:
// resume, --init, fine-tuning, export, xlnet-run). It reads a directory with
// ReadModelDir (model_dir.h) and copies the stored tensors by HuggingFace
// name; every problem (missing, unexpected, shape mismatch, non-float data)
// is collected into one error naming the weights file.
//
// Names may be XLNetLMHeadModel's (`transformer.` prefix, `lm_loss.bias`),
// XLNetModel's (no prefix; lm_loss.bias then keeps its zero init), or a
// fine-tuning model's (`transformer.` + its head). `lm_loss.weight`, if
// present, is the tied word embedding and is only shape-checked.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "config/config.h"
#include "model/multiple_choice.h"
#include "model/question_answering.h"
#include "model/sequence_classification.h"
#include "model/xlnet.h"
#include "model_io/model_dir.h"

namespace xlnet {

// ---------------------------------------------------------------------------
// Any module.

// Maps a stored tensor name to the module's parameter name; "" skips it.
using ParameterNameMap = std::function<std::string(const std::string&)>;

// Copies `tensors` into the parameters of any module, `name_map` (null =
// identity) giving the parameter name of each stored name. Parameters named
// in `may_be_missing` keep their values when absent; `extra_problems` are
// reported with the others. Every problem is collected and returned in one
// InvalidArgument error naming `source` and the stored names; nothing is
// copied then.
absl::Status LoadParameters(torch::nn::Module& module,
                            const NamedTensors& tensors,
                            const std::string& source,
                            const ParameterNameMap& name_map,
                            const std::vector<std::string>& may_be_missing,
                            std::vector<std::string> extra_problems = {});

// ---------------------------------------------------------------------------
// The language model (pretraining, xlnet-run).

struct LoadOptions {
  // Names starting with one of these are skipped (e.g. fine-tuning heads
  // when only the backbone and LM head are wanted). Anything else unknown is
  // an error.
  std::vector<std::string> ignore_prefixes;
};

// The heads of HF's fine-tuning models (ours and qa_outputs.).
const std::vector<std::string>& FineTuningHeadPrefixes();

// Copies `tensors` (HF names) into `model`.
absl::Status LoadStateDict(XLNetLMHeadModelImpl& model,
                           const NamedTensors& tensors,
                           const std::string& source,
                           const LoadOptions& options = {});

// Builds the LM from `dir`. fp32 parameters on the CPU.
absl::StatusOr<XLNetLMHeadModel> LoadPretrained(
    const std::string& dir, const LoadOptions& options = {});

// ---------------------------------------------------------------------------
// Fine-tuning models.

// Parameter-name prefixes of each head.
const std::vector<std::string>& SequenceClassificationHeadPrefixes();
const std::vector<std::string>& QuestionAnsweringHeadPrefixes();

// Whether `tensors` hold any tensor of a head (`*HeadPrefixes()`).
bool HasHead(const NamedTensors& tensors,
             const std::vector<std::string>& prefixes);

struct HeadLoadOptions {
  // The task's labels (id2label order; one label = regression). Empty: the
  // directory's config.json id2label. A directory that already has the head
  // must have as many labels, else the load fails.
  std::vector<std::string> labels;
  // Seed of a freshly initialised head.
  uint64_t seed = 0;
  // The loaders that read a directory by name verify it first unless the
  // caller already has (model_dir.h).
  Checksums checksums = Checksums::kVerify;
};

// Builds a fine-tuning model from a model directory. The backbone comes from
// `transformer.*` names (XLNetLMHeadModel, a pretraining checkpoint, a
// fine-tuned model) or bare names (XLNetModel); lm_loss.* is ignored, and
// so, with a warning, are the weights of another task's head. The head is
// loaded when the directory has it (a fine-tuned model), else freshly
// initialised from options.seed. config.json's problem_type must fit the
// number of labels. A multiple-choice directory (below) gives only its
// backbone. fp32, CPU.
absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const ModelDir& dir, const HeadLoadOptions& options = {});
absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const ModelDir& dir, const HeadLoadOptions& options = {});
// The same, reading `dir` first.
absl::StatusOr<XLNetForSequenceClassification> LoadForSequenceClassification(
    const std::string& dir, const HeadLoadOptions& options = {});
absl::StatusOr<XLNetForQuestionAnswering> LoadForQuestionAnswering(
    const std::string& dir, const HeadLoadOptions& options = {});

// HF XLNetForMultipleChoice. Its head has the classification head's names
// (sequence_summary.*, logits_proj.* with one row), so a directory holds a
// multiple-choice head only when config.json's architectures[0] says
// "XLNetForMultipleChoice". From any other directory the backbone is loaded
// and the head is fresh (options.seed); a classification head there is
// ignored with a warning. options.labels is not used. fp32, CPU.
bool IsMultipleChoiceDir(const ModelDir& dir);
absl::StatusOr<XLNetForMultipleChoice> LoadForMultipleChoice(
    const ModelDir& dir, const HeadLoadOptions& options = {});
absl::StatusOr<XLNetForMultipleChoice> LoadForMultipleChoice(
    const std::string& dir, const HeadLoadOptions& options = {});

}  // namespace xlnet
