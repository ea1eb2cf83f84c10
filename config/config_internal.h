// Internal to config/: the field lists and the checks that the YAML side
// (config.cc), config.json (model_json.cc) and validation (validate.cc)
// share. Each struct's fields are listed once, in a Visit* function; every
// reader, writer and key list is a visitor over that list.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/config.h"

namespace xlnet::config_internal {

template <typename S, typename V>
void VisitModel(S& c, V& v) {
  v("vocab_size", c.vocab_size);
  v("d_model", c.d_model);
  v("n_layer", c.n_layer);
  v("n_head", c.n_head);
  v("d_head", c.d_head);
  v("d_inner", c.d_inner);
  v("ff_activation", c.ff_activation);
  v("untie_r", c.untie_r);
  v("attn_type", c.attn_type);
  v("bi_data", c.bi_data);
  v("clamp_len", c.clamp_len);
  v("same_length", c.same_length);
  v("mem_len", c.mem_len);
  v("reuse_len", c.reuse_len);
  v("use_mems_eval", c.use_mems_eval);
  v("use_mems_train", c.use_mems_train);
  v("dropout", c.dropout);
  v("layer_norm_eps", c.layer_norm_eps);
  v("initializer_range", c.initializer_range);
  v("summary_type", c.summary_type);
  v("summary_use_proj", c.summary_use_proj);
  v("summary_activation", c.summary_activation);
  v("summary_last_dropout", c.summary_last_dropout);
  v("start_n_top", c.start_n_top);
  v("end_n_top", c.end_n_top);
  v("pad_token_id", c.pad_token_id);
  v("bos_token_id", c.bos_token_id);
  v("eos_token_id", c.eos_token_id);
  v("tie_word_embeddings", c.tie_word_embeddings);
  v("id2label", c.id2label);
  v("architectures", c.architectures);
}

template <typename S, typename V>
void VisitData(S& c, V& v) {
  v("tokenizer", c.tokenizer);
  v("uncased", c.uncased);
  v("keep_accents", c.keep_accents);
  v("use_eod", c.use_eod);
  v("seq_len", c.seq_len);
  v("reuse_len", c.reuse_len);
  v("perm_size", c.perm_size);
  v("num_predict", c.num_predict);
  v("mask_alpha", c.mask_alpha);
  v("mask_beta", c.mask_beta);
  v("max_gram", c.max_gram);
  v("bi_data", c.bi_data);
  v("official_span_quirks", c.official_span_quirks);
  v("prefetch_batches", c.prefetch_batches);
  v("loader_threads", c.loader_threads);
  v("eval_fraction", c.eval_fraction);
  v("sources", c.sources);
  v("source_block_steps", c.source_block_steps);
}

template <typename S, typename V>
void VisitTrain(S& c, V& v) {
  v("objective", c.objective);
  v("batch_size", c.batch_size);
  v("batch_size_per_device", c.batch_size_per_device);
  v("seed", c.seed);
  v("max_steps", c.max_steps);
  v("num_epochs", c.num_epochs);
  v("lr", c.lr);
  v("warmup_steps", c.warmup_steps);
  v("decay", c.decay);
  v("min_lr_ratio", c.min_lr_ratio);
  v("weight_decay", c.weight_decay);
  v("adam_beta1", c.adam_beta1);
  v("adam_beta2", c.adam_beta2);
  v("adam_epsilon", c.adam_epsilon);
  v("clip", c.clip);
  v("layer_decay", c.layer_decay);
  v("grad_accum_steps", c.grad_accum_steps);
  v("save_steps", c.save_steps);
  v("log_steps", c.log_steps);
  v("tensorboard", c.tensorboard);
  v("eval_steps", c.eval_steps);
  v("eval_batches", c.eval_batches);
  v("patience", c.patience);
  v("patience_min_delta", c.patience_min_delta);
  v("keep_checkpoints", c.keep_checkpoints);
  v("save_memory", c.save_memory);
  v("background_save", c.background_save);
  v("step_reads", c.step_reads);
  v("device", c.device);
  v("dtype", c.dtype);
  v("threads", c.threads);
  v("activation_checkpointing", c.activation_checkpointing);
  v("attention", c.attention);
  v("fused_elementwise", c.fused_elementwise);
  v("max_bad_steps", c.max_bad_steps);
  v("dist_timeout_s", c.dist_timeout_s);
  v("io_timeout_s", c.io_timeout_s);
  v("startup_timeout_s", c.startup_timeout_s);
  v("grad_reduce_dtype", c.grad_reduce_dtype);
  v("grad_bucket_mb", c.grad_bucket_mb);
  v("first_grad_bucket_mb", c.first_grad_bucket_mb);
  v("ranks_per_device", c.ranks_per_device);
}

template <typename S, typename V>
void VisitFinetune(S& c, V& v) {
  v("eval_batch_size", c.eval_batch_size);
  v("max_seq_length", c.max_seq_length);
  v("long_inputs", c.long_inputs);
  v("max_chunks", c.max_chunks);
  v("mem_len", c.mem_len);
  v("metric", c.metric);
  v("bad_rows", c.bad_rows);
  v("text_column", c.text_column);
  v("text_b_column", c.text_b_column);
  v("label_column", c.label_column);
  v("id_column", c.id_column);
  v("doc_stride", c.doc_stride);
  v("max_query_length", c.max_query_length);
  v("max_qa_length", c.max_qa_length);
  v("max_answer_length", c.max_answer_length);
  v("n_best_size", c.n_best_size);
  v("null_score_threshold", c.null_score_threshold);
  v("answer_class_start", c.answer_class_start);
}

// What a value of each field type looks like, for "expected ..." errors.
inline std::string TypeName(const int64_t*) { return "an integer"; }
inline std::string TypeName(const double*) { return "a number"; }
inline std::string TypeName(const bool*) { return "true or false"; }
inline std::string TypeName(const std::string*) { return "a string"; }
inline std::string TypeName(const std::optional<int64_t>*) {
  return "an integer or null";
}
inline std::string TypeName(const std::optional<double>*) {
  return "a number or null";
}
inline std::string TypeName(const std::vector<std::string>*) {
  return "a list of strings";
}

// Where each "section.key" came from ("file:line" or "--set ...").
using Locations = std::map<std::string, std::string>;

// A failed check: the key it is about and what is wrong.
struct Problem {
  std::string key;  // "section.key"
  std::string message;
};

// The model section's checks (also for config.json) and every section's.
std::optional<Problem> CheckModel(const XLNetConfig& m);
std::optional<Problem> CheckAll(const Config& config);

// `p` as an InvalidArgument at the place `locations` records for its key
// (else `source`).
absl::Status ProblemToStatus(const Problem& p, const Locations& locations,
                             const std::string& source);

}  // namespace xlnet::config_internal
