#include "finetune/finetune_command.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/status.h"
#include "finetune/bow_baseline.h"
#include "finetune/examples.h"
#include "finetune/finetune_unit.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"
#include "pretrain/run_setup.h"
#include "pretrain/trainer.h"

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

TensorRows RowsOf(const finetune::EncodedExamples& enc) {
  TensorRows rows;
  rows.input_ids = enc.input_ids;
  rows.token_type_ids = enc.token_type_ids;
  rows.attention_mask = enc.attention_mask;
  if (enc.labels.defined()) rows.targets["labels"] = enc.labels;
  return rows;
}

void LogProblems(const std::string& path, int64_t skipped,
                 const std::vector<std::string>& problems) {
  if (skipped == 0) return;
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) {
    XLOG(WARNING) << "skipped " << problems[i];
  }
  XLOG(WARNING) << path << ": skipped " << skipped << " bad rows"
                << (problems.size() > kShown ? " (first 20 shown)" : "")
                << " (finetune.bad_rows=skip)";
}

// Classification/regression files -> tensors.
absl::StatusOr<Data> ReadTextTask(Task task, const Config& config,
                                  const data::Tokenizer& tokenizer,
                                  const XLNetConfig& init_model,
                                  const std::string& labels_flag,
                                  const std::string& train_path,
                                  const std::string& dev_path,
                                  const std::string& test_path,
                                  bool do_predict) {
  Data data;
  finetune::ReadOptions read;
  read.task = task == Task::kRegression ? finetune::TaskKind::kRegression
                                        : finetune::TaskKind::kClassification;
  XLNET_ASSIGN_OR_RETURN(read.bad_rows, finetune::ParseBadRowPolicy(
                                            config.finetune.bad_rows));
  finetune::FeatureOptions features;
  features.max_seq_length = config.finetune.max_seq_length;

  std::optional<finetune::ExampleSet> train;
  if (!train_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(train, finetune::ReadExamples(train_path, read));
    LogProblems(train_path, train->skipped, train->problems);
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
      XLNET_ASSIGN_OR_RETURN(labels,
                             finetune::LabelSet::FromNames(absl::StrSplit(
                                 labels_flag, ',', absl::SkipEmpty())));
    } else if (init_has_head) {
      XLNET_ASSIGN_OR_RETURN(labels, finetune::LabelSet::FromNames(
                                         init_model.id2label));
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
               << enc.truncated << " truncated to "
               << features.max_seq_length << " tokens";
    data.train = RowsOf(enc);
  }
  auto read_eval = [&](const std::string& path, const std::string& name,
                       bool labelled) -> absl::StatusOr<EvalSet> {
    finetune::ReadOptions r = read;
    r.require_label = labelled;
    XLNET_ASSIGN_OR_RETURN(finetune::ExampleSet set,
                           finetune::ReadExamples(path, r));
    LogProblems(path, set.skipped, set.problems);
    bool all_labelled = true;
    for (const auto& e : set.examples) all_labelled &= e.has_label;
    XLNET_ASSIGN_OR_RETURN(
        finetune::EncodedExamples enc,
        finetune::EncodeExamples(set.examples, tokenizer, read.task,
                                 label_ptr, features));
    EvalSet out;
    out.name = name;
    out.rows = RowsOf(enc);
    out.example_ids = enc.example_ids;
    out.labelled = all_labelled && enc.labels.defined() && !set.examples.empty();
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
  XLNET_ASSIGN_OR_RETURN(read.bad_rows, finetune::ParseBadRowPolicy(
                                            config.finetune.bad_rows));
  finetune::SquadFeatureOptions features;
  features.max_seq_length = config.finetune.max_seq_length;
  features.doc_stride = config.finetune.doc_stride;
  features.max_query_length = config.finetune.max_query_length;
  if (!train_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(finetune::SquadDataset train,
                           finetune::ReadSquad(train_path, read));
    LogProblems(train_path, train.skipped, train.problems);
    features.is_training = true;
    XLNET_ASSIGN_OR_RETURN(
        finetune::SquadFeatures f,
        finetune::BuildSquadFeatures(train, tokenizer, features));
    XLOG(INFO) << train_path << ": " << train.examples.size()
               << " questions, " << f.windows.size() << " windows, "
               << f.truncated_questions << " questions truncated";
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
    EvalSet out;
    out.name = name;
    XLNET_ASSIGN_OR_RETURN(out.squad, finetune::ReadSquad(path, r));
    LogProblems(path, out.squad.skipped, out.squad.problems);
    bool has_answers = false;
    for (const auto& e : out.squad.examples) {
      has_answers |= !e.answers.empty() || e.is_impossible;
    }
    out.labelled = labelled || has_answers;
    finetune::SquadFeatureOptions f = features;
    // Labelled sets get training targets too, for a dev loss.
    f.is_training = labelled;
    XLNET_ASSIGN_OR_RETURN(out.squad_features,
                           finetune::BuildSquadFeatures(out.squad, tokenizer, f));
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
        predictions.squad, absl::StrCat(out_dir, "/predictions_", set.name));
  }
  std::string text = "id\tprediction\n";
  for (size_t i = 0; i < predictions.values.size(); ++i) {
    absl::StrAppend(&text, predictions.ids[i], "\t", predictions.values[i],
                    "\n");
  }
  return WriteFileAtomic(
      absl::StrCat(out_dir, "/predictions_", set.name, ".tsv"), text);
}

}  // namespace

absl::Status RunFinetuneCommand(int argc, char** argv) {
  std::string config_path, task_name, init_dir, train_path, dev_path,
      test_path, out_dir, resume, tokenizer_path, labels_flag;
  std::vector<std::string> overrides;
  bool from_scratch = false, do_predict = false;
  int64_t nproc = 1, master_port = 0;
  FlagParser flags(
      "xlnet-finetune",
      "--config CFG.yaml --task classification|regression|squad --init "
      "MODEL_DIR --train F --dev F [--test F] --out RUN_DIR [--set k=v ...]");
  flags.AddConfigFlags(&config_path, &overrides);
  flags.AddString("task", &task_name, "classification, regression or squad");
  flags.AddString("init", &init_dir,
                  "model to start from: a pretraining checkpoint of ours, a "
                  "fine-tuned RUN/best, or a HuggingFace XLNet directory");
  flags.AddString("train", &train_path,
                  "training data (.tsv/.jsonl; SQuAD .json); without it the "
                  "model is only evaluated");
  flags.AddString("dev", &dev_path,
                  "dev data: evaluated every finetune.eval_steps; picks the "
                  "best checkpoint");
  flags.AddString("test", &test_path, "test data: evaluated at the end");
  flags.AddString("out", &out_dir,
                  "run directory: best/, checkpoints/, metrics.jsonl, "
                  "eval_results.json, predictions");
  flags.AddString("resume", &resume,
                  "'latest' (newest valid checkpoint in --out) or a "
                  "checkpoint directory");
  flags.AddString("tokenizer", &tokenizer_path,
                  "spiece.model (default: data.tokenizer, else the one in "
                  "--init)");
  flags.AddString("labels", &labels_flag,
                  "classification: comma-separated class names in id order "
                  "(default: sorted training labels)");
  flags.AddBool("from_scratch", &from_scratch,
                "random weights with --init's architecture (the baseline "
                "without pretraining)");
  flags.AddBool("do_predict", &do_predict,
                "--test may be unlabeled: write its predictions (scored too "
                "when labels are present)");
  flags.AddInt("nproc_per_node", &nproc,
               "start N local ranks (data parallel) unless WORLD_SIZE is set");
  flags.AddInt("master_port", &master_port,
               "rendezvous port for --nproc_per_node (0 = a free port)");
  for (const char* name : {"config", "task", "init", "out"}) {
    flags.Require(name);
  }
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(const Task task, finetune::ParseTask(task_name));
  if (train_path.empty() && dev_path.empty() && test_path.empty()) {
    return absl::InvalidArgumentError(
        "nothing to do: give --train, --dev or --test");
  }
  XLNET_ASSIGN_OR_RETURN(Config config, LoadConfig(config_path, overrides));
  // The architecture comes from the model being fine-tuned; the config's
  // model section is not used.
  XLNET_ASSIGN_OR_RETURN(const XLNetConfig init_model,
                         ReadModelConfigJson(init_dir + "/config.json"));
  config.model = init_model;
  // finetune.* keys drive the shared trainer.
  const FinetuneConfig& ft = config.finetune;
  config.train.max_steps = train_path.empty() ? 0 : ft.max_steps;
  config.train.lr = ft.lr;
  config.train.warmup_steps = ft.warmup_steps;
  config.train.batch_size = ft.batch_size;
  config.train.eval_steps = ft.eval_steps;
  XLNET_RETURN_IF_ERROR(ValidateConfig(config));

  XLNET_ASSIGN_OR_RETURN(
      const bool launched,
      LaunchLocalRanksIfAsked(argc, argv, nproc, master_port));
  if (launched) return absl::OkStatus();  // the local ranks are done
  XLNET_ASSIGN_OR_RETURN(RankSetup setup_value, SetUpRank(&config));
  RankSetup* setup = &setup_value;
  const int rank = setup->env.rank;

  if (tokenizer_path.empty()) tokenizer_path = config.data.tokenizer;
  if (tokenizer_path.empty()) tokenizer_path = init_dir + "/spiece.model";
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                         data::Tokenizer::Load(tokenizer_path));
  if (tokenizer->vocab_size() > config.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        tokenizer_path, " has ", tokenizer->vocab_size(),
        " pieces but the model's vocab_size is ", config.model.vocab_size));
  }

  Data data;
  if (task == Task::kSquad) {
    XLNET_ASSIGN_OR_RETURN(data, ReadSquadTask(config, *tokenizer, train_path,
                                               dev_path, test_path,
                                               do_predict));
  } else {
    XLNET_ASSIGN_OR_RETURN(
        data, ReadTextTask(task, config, *tokenizer, init_model, labels_flag,
                           train_path, dev_path, test_path, do_predict));
  }
  if (task != Task::kSquad) config.model.id2label = data.labels;

  finetune::FinetuneUnitOptions unit_options;
  unit_options.task = task;
  unit_options.config = config;
  unit_options.init_dir = init_dir;
  unit_options.from_scratch = from_scratch;
  unit_options.labels = data.labels;
  unit_options.rank = rank;
  unit_options.world_size = setup->env.world_size;
  XLNET_ASSIGN_OR_RETURN(
      std::unique_ptr<finetune::FinetuneUnit> unit,
      finetune::FinetuneUnit::Create(unit_options, std::move(data.train),
                                     data.dev));

  std::string best_dir;
  if (config.train.max_steps > 0) {
    TrainerOptions options;
    options.train = config.train;
    options.config_yaml = RunConfigYaml(config, *setup);
    options.run_dir = out_dir;
    options.resume = resume;
    options.extra_files["spiece.model"] = tokenizer->model_bytes();
    if (data.dev) {
      options.best_metric =
          ft.metric.empty() ? finetune::DefaultMetric(task) : ft.metric;
      options.best_lower_is_better = finetune::LowerIsBetter(options.best_metric);
    }
    Trainer trainer(options, unit.get(), setup->group.get());
    XLNET_ASSIGN_OR_RETURN(TrainResult result, trainer.Run());
    if (result.interrupted) {
      XLOG(INFO) << "stopped at step " << result.steps
                 << "; resume with --resume latest";
      return absl::OkStatus();
    }
    best_dir = result.best_dir;
    if (rank == 0) {
      XLOG(INFO) << "finished " << result.steps << " steps; "
                 << (best_dir.empty()
                         ? absl::StrCat("last checkpoint ",
                                        result.last_checkpoint)
                         : absl::StrCat("best dev ", options.best_metric, " ",
                                        result.best_value, " in ", best_dir));
    }
    if (!best_dir.empty()) XLNET_RETURN_IF_ERROR(unit->LoadWeights(best_dir));
  }
  if (rank != 0) return absl::OkStatus();

  // Final scores and predictions of the best (or given) model.
  XLNET_RETURN_IF_ERROR(MakeDirs(out_dir));
  nlohmann::json results = nlohmann::json::object();
  for (const std::optional<EvalSet>* set : {&data.dev, &data.test}) {
    if (!set->has_value()) continue;
    Predictions predictions;
    XLNET_ASSIGN_OR_RETURN(auto metrics,
                           unit->Score(**set, &predictions));
    XLNET_RETURN_IF_ERROR(
        WritePredictions(task, out_dir, **set, predictions));
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
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/eval_results.json",
                                        results.dump(2) + "\n"));
  XLOG(INFO) << "wrote " << out_dir << "/eval_results.json";
  return absl::OkStatus();
}

absl::Status RunBaselineCommand(int argc, char** argv) {
  std::string train_path, dev_path, test_path, out_dir, bad_rows = "error";
  int64_t epochs = 300;
  FlagParser flags("xlnet-baseline",
                   "--train F --dev F [--test F] --out DIR [--epochs N]");
  flags.AddString("train", &train_path, "training data (.tsv/.jsonl)");
  flags.AddString("dev", &dev_path, "dev data (picks the L2 penalty)");
  flags.AddString("test", &test_path, "test data (scored at the end)");
  flags.AddString("out", &out_dir, "writes OUT/eval_results.json");
  flags.AddString("bad_rows", &bad_rows, "skip or error");
  flags.AddInt("epochs", &epochs, "full-batch Adam epochs");
  for (const char* name : {"train", "dev", "out"}) flags.Require(name);
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  finetune::ReadOptions read;
  XLNET_ASSIGN_OR_RETURN(read.bad_rows, finetune::ParseBadRowPolicy(bad_rows));
  XLNET_ASSIGN_OR_RETURN(finetune::ExampleSet train,
                         finetune::ReadExamples(train_path, read));
  LogProblems(train_path, train.skipped, train.problems);
  const finetune::LabelSet labels =
      finetune::LabelSet::FromExamples(train.examples);
  read.labels = &labels;
  XLNET_ASSIGN_OR_RETURN(finetune::ExampleSet dev,
                         finetune::ReadExamples(dev_path, read));
  LogProblems(dev_path, dev.skipped, dev.problems);
  finetune::ExampleSet test;
  if (!test_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(test, finetune::ReadExamples(test_path, read));
    LogProblems(test_path, test.skipped, test.problems);
  }
  finetune::BagOfWordsOptions options;
  options.epochs = epochs;
  XLNET_ASSIGN_OR_RETURN(
      finetune::BagOfWordsResult result,
      finetune::RunBagOfWordsBaseline(train.examples, dev.examples,
                                      test.examples, labels, options));
  nlohmann::json json = {{"model", "bag_of_words"},
                         {"features", result.features},
                         {"l2", result.l2}};
  for (const auto& [split, metrics] : result.metrics) {
    std::string line;
    for (const auto& [k, v] : metrics) {
      json[split][k] = v;
      absl::StrAppend(&line, " ", k, " ", v);
    }
    XLOG(INFO) << split << ":" << line;
  }
  XLNET_RETURN_IF_ERROR(MakeDirs(out_dir));
  return WriteFileAtomic(out_dir + "/eval_results.json", json.dump(2) + "\n");
}

namespace {

// A {"qid": value} JSON object file.
template <typename T>
absl::StatusOr<std::map<std::string, T>> ReadJsonMap(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::map<std::string, T> out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected a JSON object {\"id\": ...}"));
    }
    for (const auto& item : j.items()) {
      out[item.key()] = item.value().template get<T>();
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  return out;
}

}  // namespace

absl::Status RunSquadEvalCommand(int argc, char** argv) {
  std::string null_odds_path, out_path;
  double na_prob_thresh = 1.0;
  FlagParser flags("xlnet-squad-eval",
                   "DATA.json PREDICTIONS.json [--null_odds F] "
                   "[--na_prob_thresh T] [--out eval.json]");
  flags.AllowPositional();
  flags.AddString("null_odds", &null_odds_path,
                  "{qid: score} (null_odds.json): adds best_exact/best_f1 and "
                  "their thresholds");
  flags.AddString("out", &out_path, "also write the scores to this file");
  // FlagParser has no float flag: the threshold comes as text.
  std::string thresh_text = "1.0";
  flags.AddString("na_prob_thresh", &thresh_text,
                  "with --null_odds: a question above it counts as \"\"");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  const std::vector<std::string>& args = flags.positional();
  if (args.size() != 2) {
    return absl::InvalidArgumentError(
        "expected DATA.json PREDICTIONS.json (see --help)");
  }
  if (!absl::SimpleAtod(thresh_text, &na_prob_thresh)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--na_prob_thresh: not a number: ", thresh_text));
  }
  finetune::SquadReadOptions read;
  read.check_answer_spans = false;  // score any file the script scores
  XLNET_ASSIGN_OR_RETURN(finetune::SquadDataset data,
                         finetune::ReadSquad(args[0], read));
  XLNET_ASSIGN_OR_RETURN(auto predictions, ReadJsonMap<std::string>(args[1]));
  std::optional<std::map<std::string, double>> null_odds;
  if (!null_odds_path.empty()) {
    XLNET_ASSIGN_OR_RETURN(null_odds, ReadJsonMap<double>(null_odds_path));
  }
  finetune::SquadEvalOptions options;
  options.na_prob_threshold = na_prob_thresh;
  XLNET_ASSIGN_OR_RETURN(
      finetune::SquadEvalResult result,
      finetune::EvaluateSquad(data, predictions,
                              null_odds ? &*null_odds : nullptr, options));
  for (const auto& id : result.missing) {
    XLOG(WARNING) << "missing prediction for " << id;
  }
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : result.metrics) j[k] = v;
  std::cout << j.dump(2) << std::endl;
  if (!out_path.empty()) {
    XLNET_RETURN_IF_ERROR(WriteFileAtomic(out_path, j.dump(2) + "\n"));
  }
  return absl::OkStatus();
}

}  // namespace xlnet
