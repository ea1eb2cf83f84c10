#include "pretrain/pretrain.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/status.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/tokenizer_rules.h"
#include "model/model_size.h"
#include "model_io/model_dir.h"
#include "pretrain/clm_unit.h"
#include "pretrain/plm_unit.h"
#include "train/distributed.h"
#include "train/run_dir.h"
#include "train/run_length.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace xlnet {

ConfigScope PretrainConfigScope() {
  ConfigScope scope;
  scope.command = "xlnet-pretrain";
  scope.sections = {"model", "data", "train"};
  for (const char* key : {"train.patience", "train.patience_min_delta"}) {
    scope.unread_keys.push_back(
        {key, "early stopping watches a fine-tuning metric"});
  }
  // The permutation-LM sample's keys, which the causal LM does not read.
  const auto clm = [](const Config& c) {
    return c.train.objective == Objective::kClm;
  };
  for (const char* key :
       {"data.reuse_len", "data.perm_size", "data.num_predict",
        "data.mask_alpha", "data.mask_beta", "data.max_gram",
        "data.official_span_quirks"}) {
    scope.unread_keys.push_back(
        {key,
         "train.objective clm predicts every next token: no permutation, "
         "span masks or partial prediction; memory is model.mem_len",
         clm});
  }
  scope.unread_keys.push_back(
      {"data.bi_data",
       "train.objective clm reads its streams forwards only; set it to false "
       "or leave it out",
       [](const Config& c) {
         return c.train.objective == Objective::kClm && c.data.bi_data;
       }});
  for (const char* key : {"data.sources", "data.source_block_steps"}) {
    scope.unread_keys.push_back(
        {key,
         "train.objective clm reads one prepared directory, --data; blends "
         "are for plm",
         clm});
  }
  return scope;
}

absl::Status RunPretraining(const PretrainOptions& options) {
  // First: SIGTERM/SIGINT from now on end the run cleanly (exit 0).
  InstallStopSignalHandlers();
  XLNET_ASSIGN_OR_RETURN(
      Config config, LoadConfigFor(PretrainConfigScope(), options.config_path,
                                   options.overrides));
  XLNET_RETURN_IF_ERROR(
      CheckModelFitsInMemory(config.model, options.config_path, "model."));
  // The data: one prepared directory (--data) or a blend (data.sources).
  if (config.data.sources.empty() && options.data_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data is required unless ", options.config_path,
        " sets data.sources; see xlnet-pretrain --help"));
  }
  if (!config.data.sources.empty() && !options.data_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data ", options.data_dir, " and data.sources (",
        options.config_path,
        ") both name training data; use one or the other"));
  }
  XLNET_ASSIGN_OR_RETURN(
      const bool launched,
      LaunchLocalRanksIfAsked(options.launch, [&](int64_t world_size) {
        return CheckBatchSplit(config, world_size);
      }));
  if (launched) return absl::OkStatus();

  XLNET_ASSIGN_OR_RETURN(RankSetup rank, SetUpRank(&config));
  const DistEnv& env = rank.env;
  std::unique_ptr<ProcessGroup> group = std::move(rank.group);
  // Held until the run ends: the lock, and no existing run replaced unless
  // asked.
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<RunDirectory> run_dir,
                         RunDirectory::Open({options.out_dir, "pretraining",
                                             options.resume, options.overwrite},
                                            group.get()));
  PretrainUnitOptions unit_options;
  unit_options.config = config;
  unit_options.data_dir = options.data_dir;
  unit_options.init_dir = options.init_dir;
  unit_options.rank = env.rank;
  unit_options.world_size = env.world_size;
  unit_options.allow_changed_settings = options.allow_changed_settings;
  // The unit of train.objective, and the tokenizer of its data.
  std::unique_ptr<TrainUnit> unit;
  const data::Tokenizer* data_tokenizer = nullptr;
  if (config.train.objective == Objective::kClm) {
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<ClmUnit> clm,
                           ClmUnit::Create(unit_options));
    data_tokenizer = &clm->source().tokenizer();
    unit = std::move(clm);
  } else {
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<PlmUnit> plm,
                           PlmUnit::Create(unit_options));
    data_tokenizer = &plm->sampler().tokenizer();
    unit = std::move(plm);
  }
  if (env.rank == 0) {
    int64_t params = 0;
    for (const auto& [name, p] : unit->Parameters()) params += p.numel();
    XLOG(INFO) << "objective " << EnumName(config.train.objective) << " ("
               << (config.train.objective == Objective::kClm
                       ? "causal LM, ClmUnit"
                       : "permutation LM, PlmUnit")
               << "); model: " << config.model.n_layer << " layers, d_model "
               << config.model.d_model << ", " << params
               << " parameters; batch: "
               << BatchSummary(config.train, env.world_size,
                               config.data.seq_len);
  }
  // The text rules are the shards' (the sampler checked them against the
  // tokenizer's record); a data.uncased or data.keep_accents the config sets
  // must agree. config.yaml records them, so that fine-tuning from a
  // checkpoint normalizes text the same way.
  const data::Tokenizer& tokenizer = *data_tokenizer;
  const data::TextRules& rules = tokenizer.rules();
  {
    const std::string shards =
        options.data_dir.empty()
            ? std::string("the manifests of data.sources")
            : absl::StrCat(options.data_dir, "/", data::kManifestName);
    const std::string tokenizer_name =
        config.data.tokenizer.empty()
            ? absl::StrCat("spiece.model beside ", options.data_dir.empty()
                                                       ? "data.sources"
                                                       : options.data_dir)
            : config.data.tokenizer;
    XLNET_ASSIGN_OR_RETURN(
        const std::optional<data::TextRules> recorded,
        data::RecordedTextRules(tokenizer.model_bytes(), tokenizer_name));
    std::vector<data::TextRuleSetting> settings = {
        {shards, "uncased", rules.uncased},
        {shards, "keep_accents", rules.keep_accents}};
    XLNET_ASSIGN_OR_RETURN(
        const std::vector<data::TextRuleSetting> from_config,
        data::ConfigTextRuleSettings(config.data, options.config_path,
                                     options.overrides));
    settings.insert(settings.end(), from_config.begin(), from_config.end());
    XLNET_RETURN_IF_ERROR(
        data::ResolveTextRules(tokenizer_name, recorded, settings).status());
  }
  unit_options.config.data.uncased = rules.uncased;
  unit_options.config.data.keep_accents = rules.keep_accents;
  XLNET_RETURN_IF_ERROR(ApplyNumEpochs(
      *unit, options.config_path, options.overrides, env.rank, &config.train));
  unit_options.config.train.max_steps = config.train.max_steps;
  TrainerOptions trainer_options;
  trainer_options.train = config.train;
  trainer_options.config_yaml = RunConfigYaml(unit_options.config, rank);
  trainer_options.run_dir = options.out_dir;
  trainer_options.resume = options.resume;
  trainer_options.allow_changed_settings = options.allow_changed_settings;
  trainer_options.check_run_lock = [&run_dir]() {
    return run_dir->CheckLock();
  };
  // Checkpoints carry the tokenizer so fine-tuning and export need only them.
  trainer_options.extra_files[kTokenizerFile] = tokenizer.model_bytes();
  Trainer trainer(trainer_options, unit.get(), group.get());
  // The trainer prints the end-of-run summary (steps, tokens, time, loss,
  // skipped steps, checkpoint) on rank 0.
  XLNET_RETURN_IF_ERROR(trainer.Run().status());
  return absl::OkStatus();
}

}  // namespace xlnet
