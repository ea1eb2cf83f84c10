// The one table of what each config key's change does to a resumed run, and
// the key-by-key comparison of a checkpoint's config with a resumed run's.
#include "config/resume_changes.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xlnet {
namespace {

// A key ("train.lr") or a whole section ("model.*") and its class.
struct ResumeKeyRule {
  const char* key;
  ResumeChange change;
};

constexpr ResumeChange kBook = ResumeChange::kBookkeeping;
constexpr ResumeChange kTrain = ResumeChange::kTraining;
constexpr ResumeChange kExact = ResumeChange::kBreaksExactness;

constexpr ResumeKeyRule kResumeKeyRules[] = {
    // The model: the checkpoint's weights were trained as this network.
    // Every key changes its shapes (which then do not load), its maths
    // (activation, attention type, memory, dropout, tied embeddings) or what
    // its saved config.json says the model is.
    {"model.*", kExact},

    // Which tokens: the tokenizer and its text rules decide every id.
    {"data.tokenizer", kExact},
    {"data.uncased", kExact},
    {"data.keep_accents", kExact},
    {"data.use_eod", kExact},
    // Which batches: the sample layout, the permutation and span sampler,
    // and the held-out split and blend that decide which documents feed
    // training (the sampler's fingerprint covers the same keys).
    {"data.seq_len", kExact},
    {"data.reuse_len", kExact},
    {"data.perm_size", kExact},
    {"data.num_predict", kExact},
    {"data.mask_alpha", kExact},
    {"data.mask_beta", kExact},
    {"data.max_gram", kExact},
    {"data.bi_data", kExact},
    {"data.official_span_quirks", kExact},
    {"data.eval_fraction", kExact},
    {"data.sources", kExact},
    {"data.source_block_steps", kExact},
    // How batches are built ahead: a batch is a pure function of its step
    // and rows, whatever the threads and the queue depth.
    {"data.prefetch_batches", kBook},
    {"data.loader_threads", kBook},

    // What the model learns to predict, the global batch and the seed of
    // every random stream (data order, masking, dropout): another value
    // makes other batches and streams from the resumed step on.
    {"train.objective", kExact},
    {"train.batch_size", kExact},
    {"train.batch_size_per_device", kExact},
    {"train.seed", kExact},
    // The learning-rate schedule (max_steps is where the decay ends) and
    // the optimizer's terms: a deliberate change of course from the
    // resumed step; the steps before keep theirs.
    {"train.max_steps", kTrain},
    {"train.num_epochs", kTrain},
    {"train.lr", kTrain},
    {"train.warmup_steps", kTrain},
    {"train.decay", kTrain},
    {"train.min_lr_ratio", kTrain},
    {"train.weight_decay", kTrain},
    {"train.adam_beta1", kTrain},
    {"train.adam_beta2", kTrain},
    {"train.adam_epsilon", kTrain},
    {"train.clip", kTrain},
    {"train.layer_decay", kTrain},
    // Where and how the same steps are computed: the batches and streams
    // stay; the rounding may differ (device, precision, CPU threads,
    // attention core, recomputation, rank placement), and a new
    // accumulation split starts the memory empty (pretrain/plm_unit.cc).
    {"train.grad_accum_steps", kTrain},
    {"train.device", kTrain},
    {"train.dtype", kTrain},
    {"train.threads", kTrain},
    {"train.attention", kTrain},
    {"train.fused_elementwise", kTrain},
    {"train.activation_checkpointing", kTrain},
    {"train.ranks_per_device", kTrain},
    // The reduction's precision and, beyond 2 ranks, its summation order.
    {"train.grad_reduce_dtype", kTrain},
    {"train.grad_bucket_mb", kTrain},
    {"train.first_grad_bucket_mb", kTrain},
    // When to log, save, evaluate and stop: nothing trained differs.
    {"train.save_steps", kBook},
    {"train.log_steps", kBook},
    {"train.tensorboard", kBook},
    {"train.eval_steps", kBook},
    {"train.eval_batches", kBook},
    {"train.patience", kBook},
    {"train.patience_min_delta", kBook},
    {"train.keep_checkpoints", kBook},
    {"train.save_memory", kBook},
    {"train.background_save", kBook},
    {"train.step_reads", kBook},
    {"train.max_bad_steps", kBook},
    {"train.dist_timeout_s", kBook},
    {"train.io_timeout_s", kBook},
    {"train.startup_timeout_s", kBook},

    // Which inputs and labels a fine-tuning example is made of, and the
    // head's training maths: another value trains on other examples.
    {"finetune.max_seq_length", kExact},
    {"finetune.long_inputs", kExact},
    {"finetune.max_chunks", kExact},
    {"finetune.mem_len", kExact},
    {"finetune.text_column", kExact},
    {"finetune.text_b_column", kExact},
    {"finetune.label_column", kExact},
    {"finetune.doc_stride", kExact},
    {"finetune.max_query_length", kExact},
    {"finetune.max_qa_length", kExact},
    {"finetune.answer_class_start", kExact},
    // Evaluation and predictions only: how dev/test are batched, scored and
    // written, and which metric picks RUN/best. finetune.bad_rows cannot
    // change the training rows of a run that trained: under `error` a bad
    // row fails the run, and the resumed data must have the same row count
    // (finetune/finetune_unit.cc).
    {"finetune.eval_batch_size", kBook},
    {"finetune.metric", kBook},
    {"finetune.bad_rows", kBook},
    {"finetune.id_column", kBook},
    {"finetune.max_answer_length", kBook},
    {"finetune.n_best_size", kBook},
    {"finetune.null_score_threshold", kBook},
};

}  // namespace

std::optional<ResumeChange> ResumeChangeOf(const std::string& key) {
  for (const ResumeKeyRule& rule : kResumeKeyRules) {
    const std::string rule_key = rule.key;
    if (rule_key == key) return rule.change;
    if (absl::EndsWith(rule_key, ".*") &&
        absl::StartsWith(key, rule_key.substr(0, rule_key.size() - 1))) {
      return rule.change;
    }
  }
  return std::nullopt;
}

std::vector<SettingChange> ChangedSettings(const Config& before,
                                           const Config& after) {
  const auto old_values = ConfigValueTexts(before);
  const auto new_values = ConfigValueTexts(after);
  std::vector<SettingChange> changes;
  // Both lists hold every key in the same order.
  for (size_t i = 0; i < old_values.size() && i < new_values.size(); ++i) {
    if (old_values[i].second == new_values[i].second) continue;
    const std::string& key = old_values[i].first;
    changes.push_back({key, old_values[i].second, new_values[i].second,
                       ResumeChangeOf(key).value_or(kExact)});
  }
  return changes;
}

std::string DescribeChange(const SettingChange& change) {
  return absl::StrCat(change.key, " ", change.old_value, " -> ",
                      change.new_value);
}

}  // namespace xlnet
