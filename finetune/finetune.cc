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
#include "data_pipeline/tokenizer_identity.h"
#include "data_pipeline/tokenizer_rules.h"
#include "finetune/classification_task.h"
#include "finetune/finetune_unit.h"
#include "finetune/race.h"
#include "finetune/squad_task.h"
#include "finetune/task_data.h"
#include "model_io/model_dir.h"
#include "model_io/run_layout.h"
#include "train/run_dir.h"
#include "train/run_length.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace xlnet {
namespace {

using finetune::EvalSet;
using finetune::Predictions;
using finetune::Task;
using finetune::TaskData;

// The task's train, dev and test sets, read and encoded (labels: the
// given ones or those of the training data).
absl::StatusOr<TaskData> ReadTaskData(Task task, const Config& config,
                                      const data::Tokenizer& tokenizer,
                                      const XLNetConfig& init_model,
                                      const FinetuneOptions& options) {
  switch (task) {
    case Task::kMultipleChoice:
      return finetune::ReadMultipleChoiceTask(config.finetune, tokenizer,
                                              options.train, options.dev,
                                              options.test, options.do_predict);
    case Task::kSquad:
      return finetune::ReadSquadTask(config.finetune, tokenizer, options.train,
                                     options.dev, options.test,
                                     options.do_predict);
    case Task::kClassification:
    case Task::kRegression:
      break;
  }
  return finetune::ReadClassificationTask(
      task, config.finetune, tokenizer, init_model, options.labels,
      options.train, options.dev, options.test, options.do_predict);
}

// Rank 0 after training: the dev and test scores and predictions of the
// model `unit` holds (the best one, when training kept one), and
// RUN/eval_results.json.
absl::Status WriteFinalScores(finetune::FinetuneUnit* unit,
                              const TaskData& data, const std::string& out_dir,
                              const std::string& best_dir) {
  XLNET_RETURN_IF_ERROR(MakeDirs(out_dir));
  nlohmann::json results = nlohmann::json::object();
  for (const std::optional<EvalSet>* set : {&data.dev, &data.test}) {
    if (!set->has_value()) continue;
    Predictions predictions;
    XLNET_ASSIGN_OR_RETURN(auto metrics, unit->Score(**set, &predictions));
    XLNET_RETURN_IF_ERROR(unit->WritePredictions(out_dir, **set, predictions));
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
  scope.unread_keys.push_back({"train.fused_elementwise",
                               "fine-tuning runs LibTorch's element-wise ops"});
  scope.unread_keys.push_back(
      {"train.objective", "it picks the pretraining objective"});
  scope.unread_keys.push_back(
      {"train.save_memory",
       "fine-tuning carries no memory from one batch to the next"});
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
  // The text rules: those the tokenizer records (chosen when it was
  // trained), else those the model was pretrained with as --init records
  // them, else the config's. Any of these that is given must agree with the
  // ones before it.
  const std::string init_yaml = absl::StrCat(init_dir, "/", kRunConfigFile);
  const std::string init_tokenizer =
      absl::StrCat(init_dir, "/", kTokenizerFile);
  const std::string tokenizer =
      PathExists(init_tokenizer) ? init_tokenizer : config.data.tokenizer;
  std::optional<data::TextRules> recorded;
  if (!tokenizer.empty()) {
    XLNET_ASSIGN_OR_RETURN(recorded, data::ReadRecordedTextRules(tokenizer));
  }
  std::vector<data::TextRuleSetting> settings;
  std::string rules_source =
      recorded
          ? tokenizer
          : absl::StrCat(config_path.empty() ? "the defaults" : config_path,
                         overrides.empty() ? "" : " and --set");
  const auto add_model_rules = [&](const std::string& source, bool uncased,
                                   bool keep_accents) {
    settings.push_back({source, "uncased", uncased});
    settings.push_back({source, "keep_accents", keep_accents});
    if (!recorded) rules_source = source;
  };
  if (PathExists(init_yaml)) {
    XLNET_ASSIGN_OR_RETURN(const Config init_config, LoadConfig(init_yaml));
    add_model_rules(init_yaml, init_config.data.uncased,
                    init_config.data.keep_accents);
  } else {
    // A HuggingFace directory (ours from xlnet-export included) records the
    // rules as XLNetTokenizer's do_lower_case / keep_accents.
    XLNET_ASSIGN_OR_RETURN(std::optional<HfTokenizerConfig> tok,
                           ReadTokenizerConfig(init_dir));
    if (tok) add_model_rules(tok->path, tok->do_lower_case, tok->keep_accents);
  }
  XLNET_ASSIGN_OR_RETURN(
      const std::vector<data::TextRuleSetting> from_config,
      data::ConfigTextRuleSettings(config.data, config_path, overrides));
  settings.insert(settings.end(), from_config.begin(), from_config.end());
  XLNET_ASSIGN_OR_RETURN(
      const data::TextRules rules,
      data::ResolveTextRules(
          tokenizer.empty() ? absl::StrCat("of ", init_dir) : tokenizer,
          recorded, settings));
  config.data.uncased = rules.uncased;
  config.data.keep_accents = rules.keep_accents;
  XLOG(INFO) << "text rules: " << data::TextRulesString(rules) << " (from "
             << rules_source << ")";
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
  // --tokenizer or data.tokenizer beside a model that carries its own: the
  // same file, or the model's ids would name other pieces (a vocabulary of
  // the same size says nothing of which).
  const std::string init_tokenizer =
      absl::StrCat(init_dir, "/", kTokenizerFile);
  if (path != init_tokenizer && PathExists(init_tokenizer)) {
    XLNET_RETURN_IF_ERROR(
        data::CheckSameTokenizer(*tokenizer, path, init_tokenizer));
  }
  // A tokenizer that records its casing (one chosen when it was trained)
  // must have been trained with the rules the config resolved to.
  XLNET_ASSIGN_OR_RETURN(
      const std::optional<data::TextRules> recorded,
      data::RecordedTextRules(tokenizer->model_bytes(), path));
  const std::string resolved = absl::StrCat(
      "the fine-tuning text rules (from --init ", init_dir, " and the config)");
  XLNET_RETURN_IF_ERROR(
      data::ResolveTextRules(path, recorded,
                             {{resolved, "uncased", rules.uncased},
                              {resolved, "keep_accents", rules.keep_accents}})
          .status());
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

  XLNET_ASSIGN_OR_RETURN(
      const bool launched,
      LaunchLocalRanksIfAsked(options.launch, [&](int64_t world_size) {
        return finetune::CheckFinetuneBatchSplit(config.train, world_size);
      }));
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

  XLNET_ASSIGN_OR_RETURN(TaskData data, ReadTaskData(task, config, *tokenizer,
                                                     init_model, options));
  // Classification and regression: the run's labels (the other tasks have
  // none of their own).
  if (!data.labels.empty()) config.model.id2label = data.labels;

  finetune::FinetuneUnitOptions unit_options;
  unit_options.task = task;
  unit_options.config = config;
  unit_options.init_dir = init_dir;
  // LoadFinetuneConfig verified it (ReadModelDirConfig).
  unit_options.init_checksums = Checksums::kAlreadyVerified;
  unit_options.from_scratch = options.from_scratch;
  unit_options.labels = data.labels;
  unit_options.rank = rank;
  unit_options.world_size = setup->env.world_size;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<finetune::FinetuneUnit> unit,
                         finetune::FinetuneUnit::Create(
                             unit_options, std::move(data.train), data.dev));

  if (!train_path.empty()) {
    XLNET_RETURN_IF_ERROR(ApplyNumEpochs(
        *unit, options.config_path, options.overrides, rank, &config.train));
  }
  std::string best_dir;
  if (config.train.max_steps > 0) {
    TrainerOptions trainer_options;
    trainer_options.train = config.train;
    trainer_options.config_yaml = RunConfigYaml(config, *setup);
    trainer_options.run_dir = out_dir;
    trainer_options.resume = options.resume;
    trainer_options.allow_changed_settings = options.allow_changed_settings;
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
    // The trainer printed the end-of-run summary (steps, tokens, time,
    // skipped steps, the best dev metric and where it is) on rank 0.
    if (result.interrupted) {
      XLOG(INFO) << "to go on from step " << result.steps
                 << ": --resume latest";
      return absl::OkStatus();
    }
    best_dir = result.best_dir;
    if (!best_dir.empty()) XLNET_RETURN_IF_ERROR(unit->LoadWeights(best_dir));
  }
  if (rank != 0) return absl::OkStatus();

  return WriteFinalScores(unit.get(), data, out_dir, best_dir);
}

}  // namespace xlnet
