#include "finetune/finetune.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "config/config.h"
#include "finetune/chunks.h"
#include "finetune/examples.h"
#include "finetune/finetune_unit.h"
#include "finetune/race.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"
#include "model_io/model_dir.h"
#include "model_io/run_layout.h"
#include "train/run_dir.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace xlnet {
namespace {

using finetune::EvalSet;
using finetune::Predictions;
using finetune::Task;
using finetune::TensorRows;

struct Data {
  TensorRows train;
  std::optional<EvalSet> dev;
  std::optional<EvalSet> test;
  std::vector<std::string> labels;  // id2label (classification/regression)
};

TensorRows RowsOf(const finetune::EncodedExamples& enc,
                  const FinetuneConfig& ft) {
  TensorRows rows = TensorRows::Labelled(enc.input_ids, enc.token_type_ids,
                                         enc.attention_mask, enc.labels);
  if (finetune::UsesChunks(ft)) {
    // Leading chunks that are padding in every row are never run: drop them.
    const int64_t c = ft.max_seq_length;
    const int64_t width = finetune::DropLeadingPaddingChunks(
        &rows.input_ids, &rows.token_type_ids, &rows.attention_mask, c);
    XLOG(INFO) << rows.size() << " rows of up to " << width / c << " chunks of "
               << c << " tokens; "
               << (rows.attention_mask.sum(1) > c).sum().item<int64_t>()
               << " longer than one chunk";
  }
  return rows;
}

// Classification/regression files -> tensors.
absl::StatusOr<Data> ReadTextTask(
    Task task, const Config& config, const data::Tokenizer& tokenizer,
    const XLNetConfig& init_model, const std::string& labels_flag,
    const std::string& train_path, const std::string& dev_path,
    const std::string& test_path, bool do_predict) {
  Data data;
  XLNET_ASSIGN_OR_RETURN(
      finetune::ReadOptions read,
      finetune::ReadOptionsFromConfig(
          config.finetune, task == Task::kRegression
                               ? finetune::TaskKind::kRegression
                               : finetune::TaskKind::kClassification));
  finetune::FeatureOptions features;
  // With long_inputs "chunks", max_chunks chunks side by side.
  features.max_seq_length = finetune::EncodedLength(config.finetune);

  std::optional<finetune::ExampleSet> train;
  if (!train_path.empty()) {
    finetune::ReadOptions r = read;
    r.unlabeled_hint =
        "--train must be labelled (unlabeled data: --test with --do_predict)";
    XLNET_ASSIGN_OR_RETURN(train, finetune::ReadExamples(train_path, r));
    finetune::LogSkippedRows(train_path, train->skipped, train->problems);
    if (train->examples.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(train_path, ": no usable training rows"));
    }
  }
  // The label set: --labels, else a fine-tuned model's own labels, else the
  // training file's labels in sorted order.
  finetune::LabelSet labels;
  if (task == Task::kRegression) {
    data.labels = {"score"};
  } else {
    const bool init_has_head =
        !init_model.architectures.empty() &&
        init_model.architectures[0] == "XLNetForSequenceClassification";
    if (!labels_flag.empty()) {
      XLNET_ASSIGN_OR_RETURN(
          labels, finetune::LabelSet::FromNames(
                      absl::StrSplit(labels_flag, ',', absl::SkipEmpty())));
    } else if (init_has_head) {
      XLNET_ASSIGN_OR_RETURN(
          labels, finetune::LabelSet::FromNames(init_model.id2label));
    } else if (train) {
      labels = finetune::LabelSet::FromExamples(train->examples);
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
    data.labels = labels.names();
    read.labels = &labels;
  }
  const finetune::LabelSet* label_ptr =
      task == Task::kRegression ? nullptr : &labels;
  if (train) {
    XLNET_ASSIGN_OR_RETURN(
        finetune::EncodedExamples enc,
        finetune::EncodeExamples(train->examples, tokenizer, read.task,
                                 label_ptr, features));
    XLOG(INFO) << train_path << ": " << enc.input_ids.size(0) << " rows, "
               << enc.truncated << " truncated to " << features.max_seq_length
               << " tokens";
    data.train = RowsOf(enc, config.finetune);
  }
  auto read_eval = [&](const std::string& path, const std::string& name,
                       bool labelled) -> absl::StatusOr<EvalSet> {
    finetune::ReadOptions r = read;
    r.require_label = labelled;
    r.unlabeled_hint =
        name == "test"
            ? "to write predictions for an unlabeled --test, add --do_predict"
            : "--dev must be labelled (unlabeled data: --test with "
              "--do_predict)";
    XLNET_ASSIGN_OR_RETURN(finetune::ExampleSet set,
                           finetune::ReadExamples(path, r));
    finetune::LogSkippedRows(path, set.skipped, set.problems);
    bool all_labelled = true;
    for (const auto& e : set.examples) all_labelled &= e.has_label;
    XLNET_ASSIGN_OR_RETURN(
        finetune::EncodedExamples enc,
        finetune::EncodeExamples(set.examples, tokenizer, read.task, label_ptr,
                                 features));
    EvalSet out;
    out.name = name;
    out.rows = RowsOf(enc, config.finetune);
    out.example_ids = enc.example_ids;
    out.labelled =
        all_labelled && enc.labels.defined() && !set.examples.empty();
    return out;
  };
  if (!dev_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data.dev, read_eval(dev_path, "dev", true));
  }
  if (!test_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data.test,
                           read_eval(test_path, "test", !do_predict));
  }
  return data;
}

TensorRows SquadRows(const finetune::SquadFeatures& f) {
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

// SQuAD files -> windows.
absl::StatusOr<Data> ReadSquadTask(const Config& config,
                                   const data::Tokenizer& tokenizer,
                                   const std::string& train_path,
                                   const std::string& dev_path,
                                   const std::string& test_path,
                                   bool do_predict) {
  Data data;
  finetune::SquadReadOptions read;
  read.bad_rows = config.finetune.bad_rows;
  const FinetuneConfig& ft = config.finetune;
  // A window holds the question, 3 special tokens and some context.
  if (ft.max_query_length + 3 >= ft.max_seq_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_query_length=", ft.max_query_length,
        " leaves no room for context in finetune.max_seq_length=",
        ft.max_seq_length,
        " (a SQuAD window holds the question, 3 special tokens and at least "
        "one context token): lower the first or raise the second"));
  }
  finetune::SquadFeatureOptions features;
  features.max_seq_length = config.finetune.max_seq_length;
  features.doc_stride = config.finetune.doc_stride;
  features.max_query_length = config.finetune.max_query_length;
  if (!train_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(finetune::SquadDataset train,
                           finetune::ReadSquad(train_path, read));
    finetune::LogSkippedRows(train_path, train.skipped, train.problems);
    features.is_training = true;
    XLNET_ASSIGN_OR_RETURN(
        finetune::SquadFeatures f,
        finetune::BuildSquadFeatures(train, tokenizer, features));
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
    finetune::SquadReadOptions r = read;
    r.require_answers = labelled;
    if (name == "test") {
      r.unlabeled_hint =
          "to write predictions for an unlabeled --test, add --do_predict";
    }
    EvalSet out;
    out.name = name;
    XLNET_ASSIGN_OR_RETURN(out.squad, finetune::ReadSquad(path, r));
    finetune::LogSkippedRows(path, out.squad.skipped, out.squad.problems);
    bool has_answers = false;
    for (const auto& e : out.squad.examples) {
      has_answers |= !e.answers.empty() || e.is_impossible;
    }
    out.labelled = labelled || has_answers;
    finetune::SquadFeatureOptions f = features;
    // Labelled sets get training targets too, for a dev loss.
    f.is_training = labelled;
    XLNET_ASSIGN_OR_RETURN(out.squad_features, finetune::BuildSquadFeatures(
                                                   out.squad, tokenizer, f));
    out.rows = SquadRows(out.squad_features);
    return out;
  };
  if (!dev_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data.dev, read_eval(dev_path, "dev", true));
  }
  if (!test_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(data.test,
                           read_eval(test_path, "test", !do_predict));
  }
  return data;
}

absl::Status WritePredictions(Task task, const std::string& out_dir,
                              const EvalSet& set,
                              const Predictions& predictions) {
  if (task == Task::kSquad) {
    // RUN/predictions_dev/{predictions,null_odds,nbest_predictions}.json
    return finetune::WriteSquadPredictions(
        predictions.squad,
        RunPath(out_dir, absl::StrCat(kPredictionsPrefix, set.name)));
  }
  return WriteFileAtomic(
      RunPath(out_dir, absl::StrCat(kPredictionsPrefix, set.name, ".tsv")),
      finetune::PredictionsTsv(predictions, task == Task::kRegression));
}

// The task's train, dev and test sets, read and encoded (labels: the
// given ones or those of the training data).
absl::StatusOr<Data> ReadTaskData(Task task, const Config& config,
                                  const data::Tokenizer& tokenizer,
                                  const XLNetConfig& init_model,
                                  const FinetuneOptions& options) {
  if (task == Task::kMultipleChoice) {
    XLNET_ASSIGN_OR_RETURN(
        finetune::MultipleChoiceData choice,
        finetune::ReadMultipleChoiceTask(config.finetune, tokenizer,
                                         options.train, options.dev,
                                         options.test, options.do_predict));
    Data data;
    data.train = std::move(choice.train);
    data.dev = std::move(choice.dev);
    data.test = std::move(choice.test);
    return data;
  }
  if (task == Task::kSquad) {
    return ReadSquadTask(config, tokenizer, options.train, options.dev,
                         options.test, options.do_predict);
  }
  return ReadTextTask(task, config, tokenizer, init_model, options.labels,
                      options.train, options.dev, options.test,
                      options.do_predict);
}

// Rank 0 after training: the dev and test scores and predictions of the
// model `unit` holds (the best one, when training kept one), and
// RUN/eval_results.json.
absl::Status WriteFinalScores(Task task, finetune::FinetuneUnit* unit,
                              const Data& data, const std::string& out_dir,
                              const std::string& best_dir) {
  XLNET_RETURN_IF_ERROR(MakeDirs(out_dir));
  nlohmann::json results = nlohmann::json::object();
  for (const std::optional<EvalSet>* set : {&data.dev, &data.test}) {
    if (!set->has_value()) continue;
    Predictions predictions;
    XLNET_ASSIGN_OR_RETURN(auto metrics, unit->Score(**set, &predictions));
    XLNET_RETURN_IF_ERROR(WritePredictions(task, out_dir, **set, predictions));
    if (!metrics.empty()) {
      std::string line;
      for (const auto& [k, v] : metrics) {
        results[(*set)->name][k] = v;
        absl::StrAppend(&line, " ", k, " ", v);
      }
      XLOG(INFO) << (*set)->name << ":" << line;
    }
  }
  if (!best_dir.empty()) results["best_dir"] = best_dir;
  const std::string results_path = RunPath(out_dir, kEvalResultsFile);
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(results_path, results.dump(2) + "\n"));
  XLOG(INFO) << "wrote " << results_path;
  return absl::OkStatus();
}

}  // namespace

ConfigScope FinetuneConfigScope() {
  ConfigScope scope;
  scope.command = "xlnet-finetune";
  scope.sections = {"data", "train", "finetune"};
  // Of data, fine-tuning reads the tokenizer and its text rules; the rest
  // shapes pretraining batches.
  for (const std::string& key : ConfigKeys("data")) {
    if (key == "tokenizer" || key == "uncased" || key == "keep_accents") {
      continue;
    }
    scope.unread_keys.push_back(
        {"data." + key,
         "fine-tuning reads only data.tokenizer, data.uncased and "
         "data.keep_accents; the other data keys shape pretraining batches"});
  }
  scope.unread_keys.push_back(
      {"train.attention", "fine-tuning runs the unfused attention core"});
  scope.unread_keys.push_back({"train.activation_checkpointing",
                               "fine-tuning keeps every layer's activations"});
  return scope;
}

absl::StatusOr<Config> LoadFinetuneConfig(
    const std::string& config_path, const std::vector<std::string>& overrides,
    const std::string& init_dir) {
  const ConfigScope scope = FinetuneConfigScope();
  XLNET_ASSIGN_OR_RETURN(
      Config config, config_path.empty()
                         ? ParseConfigFor(scope, "", "<defaults>", overrides)
                         : LoadConfigFor(scope, config_path, overrides));
  XLNET_ASSIGN_OR_RETURN(config.model, ReadModelDirConfig(init_dir));
  // bi_data is a layout of pretraining batches (forward and backward halves);
  // fine-tuning batches are ordinary, as in the official code and HF.
  config.model.bi_data = false;
  // The text rules the model was pretrained with, when --init records them.
  const std::string init_yaml = absl::StrCat(init_dir, "/", kRunConfigFile);
  DataConfig& data = config.data;
  auto rules_text = [](const DataConfig& d) {
    return absl::StrCat("uncased=", d.uncased ? "true" : "false",
                        " keep_accents=", d.keep_accents ? "true" : "false");
  };
  std::string rules_source =
      absl::StrCat(config_path.empty() ? "the defaults" : config_path,
                   overrides.empty() ? "" : " and --set");
  if (PathExists(init_yaml)) {
    XLNET_ASSIGN_OR_RETURN(const Config init_config, LoadConfig(init_yaml));
    const DataConfig& model_data = init_config.data;
    if (model_data.uncased != data.uncased ||
        model_data.keep_accents != data.keep_accents) {
      XLOG(WARNING) << "the run config's data " << rules_text(data)
                    << " is not used: the model in " << init_dir
                    << " was trained on text with " << rules_text(model_data)
                    << " (" << init_yaml
                    << ") and fine-tuning normalizes text the same way";
    }
    data.uncased = model_data.uncased;
    data.keep_accents = model_data.keep_accents;
    rules_source = init_yaml;
  } else {
    // A HuggingFace directory (ours from xlnet-export included) records the
    // rules as XLNetTokenizer's do_lower_case / keep_accents.
    XLNET_ASSIGN_OR_RETURN(std::optional<HfTokenizerConfig> tok,
                           ReadTokenizerConfig(init_dir));
    if (tok) {
      DataConfig model_data = data;
      model_data.uncased = tok->do_lower_case;
      model_data.keep_accents = tok->keep_accents;
      if (model_data.uncased != data.uncased ||
          model_data.keep_accents != data.keep_accents) {
        XLOG(WARNING) << "the run config's data " << rules_text(data)
                      << " is not used: " << tok->path << " says "
                      << rules_text(model_data);
      }
      data.uncased = model_data.uncased;
      data.keep_accents = model_data.keep_accents;
      rules_source = tok->path;
    }
  }
  XLOG(INFO) << "text rules: " << rules_text(data) << " (from " << rules_source
             << ")";
  XLNET_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

absl::StatusOr<std::unique_ptr<data::Tokenizer>> LoadFinetuneTokenizer(
    const Config& config, const std::string& tokenizer_path,
    const std::string& init_dir) {
  std::string path = tokenizer_path;
  if (path.empty()) path = config.data.tokenizer;
  if (path.empty()) path = absl::StrCat(init_dir, "/", kTokenizerFile);
  data::TextRules rules;
  rules.uncased = config.data.uncased;
  rules.keep_accents = config.data.keep_accents;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                         data::Tokenizer::Load(path, rules));
  if (tokenizer->vocab_size() > config.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", tokenizer->vocab_size(),
        " pieces but the model's vocab_size is ", config.model.vocab_size));
  }
  return tokenizer;
}

absl::Status RunFinetuning(const FinetuneOptions& options) {
  // First: SIGTERM/SIGINT from now on end the run cleanly (exit 0).
  InstallStopSignalHandlers();
  const std::string& train_path = options.train;
  const std::string& dev_path = options.dev;
  const std::string& test_path = options.test;
  const std::string& out_dir = options.out_dir;
  const std::string& init_dir = options.init_dir;
  XLNET_ASSIGN_OR_RETURN(const Task task, finetune::ParseTask(options.task));
  if (train_path.empty() && dev_path.empty() && test_path.empty()) {
    return absl::InvalidArgumentError(
        "nothing to do: give --train, --dev or --test");
  }
  XLNET_ASSIGN_OR_RETURN(
      Config config,
      LoadFinetuneConfig(options.config_path, options.overrides, init_dir));
  const XLNetConfig init_model = config.model;
  // Without training data the model is only evaluated.
  if (train_path.empty()) config.train.max_steps = 0;
  const FinetuneConfig& ft = config.finetune;

  XLNET_ASSIGN_OR_RETURN(const bool launched,
                         LaunchLocalRanksIfAsked(options.launch));
  if (launched) return absl::OkStatus();  // the local ranks are done
  XLNET_ASSIGN_OR_RETURN(RankSetup setup_value, SetUpRank(&config));
  RankSetup* setup = &setup_value;
  const int rank = setup->env.rank;
  // Held until the run ends (predictions and eval_results.json included).
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<RunDirectory> run_dir,
                         RunDirectory::Open({out_dir, "fine-tuning",
                                             options.resume, options.overwrite},
                                            setup->group.get()));

  XLNET_ASSIGN_OR_RETURN(
      std::unique_ptr<data::Tokenizer> tokenizer,
      LoadFinetuneTokenizer(config, options.tokenizer, init_dir));

  XLNET_ASSIGN_OR_RETURN(
      Data data, ReadTaskData(task, config, *tokenizer, init_model, options));
  if (task != Task::kSquad && task != Task::kMultipleChoice) {
    config.model.id2label = data.labels;
  }

  finetune::FinetuneUnitOptions unit_options;
  unit_options.task = task;
  unit_options.config = config;
  unit_options.init_dir = init_dir;
  unit_options.from_scratch = options.from_scratch;
  unit_options.labels = data.labels;
  unit_options.rank = rank;
  unit_options.world_size = setup->env.world_size;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<finetune::FinetuneUnit> unit,
                         finetune::FinetuneUnit::Create(
                             unit_options, std::move(data.train), data.dev));

  std::string best_dir;
  if (config.train.max_steps > 0) {
    TrainerOptions trainer_options;
    trainer_options.train = config.train;
    trainer_options.config_yaml = RunConfigYaml(config, *setup);
    trainer_options.run_dir = out_dir;
    trainer_options.resume = options.resume;
    trainer_options.check_run_lock = [&run_dir]() {
      return run_dir->CheckLock();
    };
    trainer_options.extra_files[kTokenizerFile] = tokenizer->model_bytes();
    if (data.dev) {
      trainer_options.best_metric =
          ft.metric.empty() ? finetune::DefaultMetric(task) : ft.metric;
      trainer_options.best_lower_is_better =
          finetune::LowerIsBetter(trainer_options.best_metric);
    }
    Trainer trainer(trainer_options, unit.get(), setup->group.get());
    XLNET_ASSIGN_OR_RETURN(TrainResult result, trainer.Run());
    if (result.interrupted) {
      XLOG(INFO) << "stopped at step " << result.steps
                 << "; resume with --resume latest";
      return absl::OkStatus();
    }
    best_dir = result.best_dir;
    if (rank == 0) {
      XLOG(INFO) << "finished " << result.steps << " steps"
                 << (result.early_stopped ? " (early stopping)" : "")
                 << (result.skipped_steps > 0
                         ? absl::StrCat(", ", result.skipped_steps,
                                        " skipped as non-finite")
                         : "")
                 << "; "
                 << (best_dir.empty()
                         ? absl::StrCat("last checkpoint ",
                                        result.last_checkpoint)
                         : absl::StrCat("best dev ",
                                        trainer_options.best_metric, " ",
                                        result.best_value, " in ", best_dir));
    }
    if (!best_dir.empty()) XLNET_RETURN_IF_ERROR(unit->LoadWeights(best_dir));
  }
  if (rank != 0) return absl::OkStatus();

  return WriteFinalScores(task, unit.get(), data, out_dir, best_dir);
}

}  // namespace xlnet
