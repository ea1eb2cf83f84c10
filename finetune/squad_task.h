// The SQuAD task of xlnet-finetune: its reader (SQuAD files -> windows as
// TaskData) and its head, HF XLNetForQuestionAnswering
// (model/question_answering.h): the beam head's loss on the windows'
// targets, and scoring by beam search, the official post-processing
// (PredictSquad) and evaluation (EvaluateSquad).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "data_pipeline/tokenizer.h"
#include "finetune/squad.h"
#include "finetune/task_data.h"
#include "finetune/task_head.h"
#include "model/question_answering.h"

namespace xlnet::finetune {

// The data of an xlnet-finetune SQuAD run: each given file read (ReadSquad,
// finetune.bad_rows; skipped questions logged) and cut into windows
// (finetune.max_seq_length, doc_stride, max_query_length). Training windows
// and those of labelled sets carry training targets (a dev loss); --train
// must give windows; --test may be unlabeled with `do_predict`. A
// max_query_length that leaves no room for context is an error naming both
// keys.
absl::StatusOr<TaskData> ReadSquadTask(const FinetuneConfig& config,
                                       const data::Tokenizer& tokenizer,
                                       const std::string& train_path,
                                       const std::string& dev_path,
                                       const std::string& test_path,
                                       bool do_predict);

// The head of SQuAD. Losses: the beam head's per-window loss;
// finetune.answer_class_start picks the answer class's start feature.
// Score: the EvalSet's windows through beam search, post-processed into
// predictions per question (finetune.n_best_size, max_answer_length,
// null_score_threshold); labelled sets get the official metrics and, when
// their windows carry targets, "loss" (the mean per window). Predictions:
// the official files in RUN/predictions_<set>/. config.json: architectures
// ["XLNetForQuestionAnswering"].
class SquadHead : public TaskHead {
 public:
  static absl::StatusOr<std::unique_ptr<SquadHead>> Create(
      const TaskHeadOptions& options, torch::Device device,
      torch::ScalarType dtype);

  torch::nn::Module& model() override { return *model_; }
  std::string ModelConfigJson() override;
  torch::Tensor Losses(const TensorRows& batch) override;
  absl::StatusOr<std::map<std::string, double>> Score(
      const EvalSet& set, Predictions* predictions) override;
  absl::Status WritePredictions(const Predictions& predictions,
                                const std::string& path) const override;

 private:
  SquadHead(const TaskHeadOptions& options, torch::Device device,
            torch::ScalarType dtype);

  // The beam outputs of every window of `windows` (eval_batch_size at a
  // time); adds the windows' summed loss to `loss_sum` when they carry
  // training targets.
  std::vector<SquadWindowResult> Beams(const TensorRows& windows,
                                       double* loss_sum);

  // Post-processing of the beam outputs (finetune.n_best_size, ...).
  SquadPredictOptions post_;
  XLNetForQuestionAnswering model_{nullptr};
};

}  // namespace xlnet::finetune
