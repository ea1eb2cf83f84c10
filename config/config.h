// Typed configuration for every tool, parsed from YAML in one place
// (config.cc). A config file has up to four sections:
//
//   model:    XLNetConfig   - HuggingFace XLNetConfig keys (also config.json)
//   data:     DataConfig    - tokenizer, shards and the permutation-LM sampler
//   train:    TrainConfig   - the trainer (pretraining and fine-tuning)
//   finetune: FinetuneConfig - fine-tuning tasks
//
// Every key is optional (the defaults below apply); unknown keys, wrong types
// and out-of-range values are errors naming the file, line and key, with a
// close-match suggestion. `--set section.key=value` overrides apply on top.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "config/settings.h"

namespace xlnet {

// The model hyperparameters, with HuggingFace's `XLNetConfig` key names and
// defaults so `config.json` round-trips with `transformers`.
struct XLNetConfig {
  // Vocabulary size (number of SentencePiece pieces).
  int64_t vocab_size = 32000;
  // Hidden size of every layer.
  int64_t d_model = 1024;
  // Number of transformer layers.
  int64_t n_layer = 24;
  // Number of attention heads; d_model must equal n_head * d_head.
  int64_t n_head = 16;
  // Size of each attention head (HuggingFace derives d_model / n_head).
  int64_t d_head = 64;
  // Inner size of the position-wise feed-forward network.
  int64_t d_inner = 4096;
  // FFN activation: "gelu" (exact erf form) or "relu".
  std::string ff_activation = "gelu";
  // Per-layer r_w_bias/r_r_bias/r_s_bias (true) or one set shared by all.
  bool untie_r = true;
  // "bi" (bidirectional, XLNet) or "uni" (causal, Transformer-XL).
  std::string attn_type = "bi";
  // Half the batch is read backwards (negated relative positions). Not a
  // YAML key: set from data.bi_data.
  bool bi_data = false;
  // Clamp relative distances to +-clamp_len; -1 disables clamping.
  int64_t clamp_len = -1;
  // Every position attends over the same number of keys (uni only).
  bool same_length = false;
  // Memory length in tokens cached per layer. Null or 0: HuggingFace keeps
  // every past state when mems are requested; our pretraining then runs
  // without memory.
  std::optional<int64_t> mem_len = 512;
  // Tokens of each segment cached as memory; unset means the whole segment.
  // Not a YAML key: set from data.reuse_len.
  std::optional<int64_t> reuse_len;
  // Whether evaluation uses memory (HuggingFace key).
  bool use_mems_eval = true;
  // Whether training uses memory (HuggingFace key; our trainer follows
  // data.reuse_len/model.mem_len and records this for HF).
  bool use_mems_train = false;
  // Dropout on embeddings, attention output and FFN, in [0, 1).
  double dropout = 0.1;
  // LayerNorm epsilon.
  double layer_norm_eps = 1e-12;
  // Standard deviation of the normal initialiser.
  double initializer_range = 0.02;
  // Sequence summary for classification: "last", "first", "mean", "cls_index".
  std::string summary_type = "last";
  // Whether the sequence summary has a d_model x d_model projection.
  bool summary_use_proj = true;
  // Activation after the summary projection: "tanh" or "" (none).
  std::string summary_activation = "tanh";
  // Dropout after the sequence summary, in [0, 1).
  double summary_last_dropout = 0.1;
  // SQuAD beam: start positions kept.
  int64_t start_n_top = 5;
  // SQuAD beam: end positions kept per start.
  int64_t end_n_top = 5;
  // Special token ids.
  int64_t pad_token_id = 5;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  // The LM head shares the word embedding matrix.
  bool tie_word_embeddings = true;
  // Class names of a classification head, index = label id (HF id2label).
  std::vector<std::string> id2label = {"LABEL_0", "LABEL_1"};
  // HuggingFace class names this directory loads as (config.json only).
  std::vector<std::string> architectures = {"XLNetLMHeadModel"};
};

// One prepared corpus of a blend (an entry of data.sources).
struct DataSource {
  // Directory made by `xlnet-data prepare` (relative paths are relative to
  // the working directory, as --data is).
  std::string path;
  // Relative weight, > 0; the weights are normalised over the sources.
  double weight = 1.0;
  // Name in metrics (tokens_<name>) and errors: letters, digits, '_', '-',
  // '.'. Empty = the directory's basename (DataSourceName); ParseConfig
  // fills it in, so RUN/config.yaml records it.
  std::string name;

  bool operator==(const DataSource& o) const {
    return path == o.path && weight == o.weight && name == o.name;
  }
  bool operator!=(const DataSource& o) const { return !(*this == o); }
};

// `source.name`, or when empty the basename of `source.path` ("a/wiki/"
// -> "wiki").
std::string DataSourceName(const DataSource& source);

// Tokenizer, corpus shards and the permutation-LM sampler. Key names follow
// the official XLNet flags.
struct DataConfig {
  // SentencePiece model file (spiece.model); empty = the one beside the data.
  std::string tokenizer;
  // Lowercase text before tokenizing (official `uncased`).
  bool uncased = false;
  // Keep accents (skip NFKD + combining-mark removal).
  bool keep_accents = false;
  // Append <eod> at every document end (official `use_eod`).
  bool use_eod = true;
  // Tokens per sample, including <sep>, <sep>, <cls>.
  int64_t seq_len = 512;
  // Tokens of each sample carried over as the next step's memory (also the
  // model's reuse_len in config.json).
  int64_t reuse_len = 256;
  // Permutation block size of `_local_perm` (divides both halves).
  int64_t perm_size = 256;
  // Prediction targets per sample (`num_predict`).
  int64_t num_predict = 85;
  // Span context: a span of n tokens sits in n*mask_alpha/mask_beta context.
  int64_t mask_alpha = 6;
  int64_t mask_beta = 1;
  // Longest n-gram span, in words.
  int64_t max_gram = 5;
  // Half of each batch reads the streams backwards (also the model's
  // bi_data in config.json: the backward half's positions are negated).
  bool bi_data = true;
  // Reproduce the official span sampler's quirks (span end tested at its
  // start, spans counted in pieces) instead of the fixed behaviour.
  bool official_span_quirks = false;
  // Batches built ahead of time on background threads.
  int64_t prefetch_batches = 4;
  // Background threads that build batches.
  int64_t loader_threads = 1;
  // Fraction of documents held out for evaluation (by document hash).
  double eval_fraction = 0.01;
  // Corpora blended by weight (xlnet-pretrain; data_pipeline/README.md,
  // "Blending corpora"). Empty: the one directory of --data. In YAML a list
  // of maps {path: DIR, weight: W, name: NAME}; with --set the same list in
  // YAML flow syntax: data.sources=[{path: a, weight: 3}, {path: b}].
  std::vector<DataSource> sources;
  // Steps of one blend block: for a block of this many steps each batch row
  // reads one source, drawn by weight (BlendSampler).
  int64_t source_block_steps = 100;
};

// The trainer, shared by pretraining and fine-tuning.
struct TrainConfig {
  // What pretraining predicts: plm (XLNet's permutation LM) or clm
  // (Transformer-XL's causal LM over ordered streams; needs
  // model.attn_type uni; the PLM-only data keys reuse_len, perm_size,
  // num_predict, mask_alpha, mask_beta, max_gram, official_span_quirks and
  // bi_data: true are then refused by xlnet-pretrain, and data.bi_data is
  // false). Fine-tuning does not read it.
  Objective objective = Objective::kPlm;
  // Global batch size: rows of one optimizer step over all ranks and
  // accumulation micro-steps together. Set this or batch_size_per_device,
  // not both; with batch_size_per_device the config reads 0 here and the
  // global batch follows from the world size (GlobalBatchSize).
  int64_t batch_size = 16;
  // Rows one rank runs in one forward, one accumulation micro-step (HF's
  // per_device_train_batch_size, Megatron's micro_batch_size); 0 = not set
  // (batch_size is the global batch). The global batch is then
  // batch_size_per_device x ranks x grad_accum_steps.
  int64_t batch_size_per_device = 0;
  // Seed of every random stream (data, dropout, initialisation).
  int64_t seed = 1234;
  // Optimizer steps to run.
  int64_t max_steps = 100000;
  // The run's length in passes over the training data instead (HF's
  // num_train_epochs; fractions allowed); 0 = off. When > 0, max_steps is
  // ceil(num_epochs x the steps of one pass) (train/run_length.h): --set
  // train.num_epochs replaces a config file's max_steps; one set beside it
  // must equal that. Needs data with one epoch (not a blend of
  // data.sources).
  double num_epochs = 0;
  // Peak learning rate.
  double lr = 1e-4;
  // Linear warmup steps from 0 to lr.
  int64_t warmup_steps = 0;
  // Decay after warmup: linear (official poly, power 1) or cos.
  LrDecay decay = LrDecay::kLinear;
  // Final learning rate as a fraction of lr.
  double min_lr_ratio = 0.001;
  // Decoupled weight decay (not on LayerNorm and biases; on r_*_bias).
  double weight_decay = 0.0;
  // Adam hyperparameters.
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  // Global gradient-norm clip; 0 disables.
  double clip = 1.0;
  // Layer-wise learning-rate decay: layer l's rate is scaled by
  // layer_decay^(n_layer-1-l); 1 disables.
  double layer_decay = 1.0;
  // Micro-batches accumulated per optimizer step.
  int64_t grad_accum_steps = 1;
  // Save a checkpoint every N steps; 0 saves only at the end.
  int64_t save_steps = 1000;
  // Log a progress line and metrics every N steps.
  int64_t log_steps = 10;
  // Rank 0 also writes the logged metrics (and the config as text) as
  // TensorBoard events under RUN/tb/ (a new events file per run/resume).
  bool tensorboard = true;
  // Evaluate on held-out data every N steps; 0 disables.
  int64_t eval_steps = 0;
  // Batches per evaluation.
  int64_t eval_batches = 10;
  // Early stopping (fine-tuning; needs eval_steps > 0): stop after this many
  // evaluations in a row without the best metric (finetune.metric)
  // improving by more than patience_min_delta; 0 disables.
  int64_t patience = 0;
  // How much better than the best so far an evaluation must be to reset the
  // patience count (in the metric's units).
  double patience_min_delta = 0.0;
  // Checkpoints kept (oldest removed first); 0 keeps all.
  int64_t keep_checkpoints = 3;
  // Pretraining: each rank's memory in checkpoints (the largest per-rank
  // state: n_layer x mem_len x rows x d_model floats): fp32 (resume is
  // exact), bf16 (half the bytes; resume continues from rounded memory) or
  // none (resume starts with empty memory; the data continues exactly).
  SaveMemory save_memory = SaveMemory::kFp32;
  // Write the periodic checkpoints (every save_steps) on a background
  // thread while training goes on (train/background_save.h): the training
  // thread only copies the state (on CUDA a device-side clone, moved to the
  // host on a side stream), and the checkpoint is committed at a later
  // step, once every rank has written its files. The run's last save and a
  // save at a stop are written before the run ends. Costs host memory for
  // one copy of this rank's state (and, on CUDA, device memory for it until
  // it reaches the host).
  bool background_save = false;
  // When a step's numbers (loss, gradient norm, the stop flag, the save
  // progress) reach the host: each_step (at the end of every step, which
  // on a GPU drains the device's queue) or deferred (one step late, after
  // the next step is queued, so the GPU never waits for the host; at once
  // on log, evaluation, save and last steps; skipped steps decided on the
  // device). The trained weights are the same (train/trainer.h).
  StepReads step_reads = StepReads::kEachStep;
  // "cpu" or "cuda" (or "cuda:N").
  std::string device = "cpu";
  // fp32, bf16 (autocast) or fp16 (CUDA only, with loss scaling).
  Dtype dtype = Dtype::kFp32;
  // Intra-op CPU threads; 0 = all cores.
  int64_t threads = 0;
  // Recompute each layer's activations in backward to save memory.
  bool activation_checkpointing = false;
  // Attention core: auto (cuda where its tensor-core kernels take the
  // model: device cuda, dtype bf16/fp16, head size 64, a build with them;
  // else unfused), unfused, tiled (fused op, CPU), cuda (fused op's
  // kernels, needs -DXLNET_CUDA_ATTENTION=ON; tensor cores for bf16/fp16
  // with head size 64, slow SIMT kernels otherwise) or sdpa (LibTorch's
  // scaled_dot_product_attention with the position and segment terms as
  // its bias; LibTorch >= 2.1; not deterministic); model/README.md.
  AttentionImpl attention = AttentionImpl::kAuto;
  // Run the feed-forward's bias + activation + dropout and the dropout +
  // residual + LayerNorm after the attention output and the feed-forward
  // as fused CUDA kernels (model/fused_elementwise.h): auto (on for device
  // cuda in builds with our CUDA kernels, XLNET_CUDA_ATTENTION), true
  // (needs both) or false. Dropout masks then come from the counter-based
  // generator seeded from the CPU generator.
  FusedElementwise fused_elementwise = FusedElementwise::kAuto;
  // Stop after this many non-finite steps in a row.
  int64_t max_bad_steps = 20;
  // Seconds a training step's collectives may take before a stuck rank is
  // reported.
  int64_t dist_timeout_s = 300;
  // Seconds the collectives of a checkpoint save may take (every rank
  // writing and checksumming its files, rank 0 merging): a slow file system
  // is not a stuck step.
  int64_t io_timeout_s = 1800;
  // Seconds the rendezvous and start-up may take (every rank joining,
  // choosing and verifying the checkpoint to resume, agreeing on the
  // config and rank 0's weights).
  int64_t startup_timeout_s = 1800;
  // Precision of the gradient all-reduce over ranks: fp32 (each bucket is
  // reduced in place: the gradients are views of it, nothing is copied) or
  // bf16 (each bucket is cast to bf16 for the all-reduce and back: half the
  // bytes on the wire, about 3 significant digits per rank's summand).
  Dtype grad_reduce_dtype = Dtype::kFp32;
  // Gradient bytes per all-reduce bucket, in MiB; a bucket is sent as soon
  // as backward has produced all of its gradients.
  double grad_bucket_mb = 25;
  // MiB of the first bucket (the last layers' gradients, ready first):
  // small, so that communication starts early in backward.
  double first_grad_bucket_mb = 1;
  // With device "cuda": local ranks per GPU (a rank uses cuda:(LOCAL_RANK /
  // ranks_per_device)). 1: NCCL between the ranks; above 1 (for testing
  // multi-rank code on one GPU): Gloo over CUDA tensors, staged through the
  // host, since NCCL refuses two ranks on one GPU. Needs gloo headers.
  int64_t ranks_per_device = 1;
};

// Fine-tuning tasks (classification, regression, SQuAD-style QA).
// The schedule, batch size and evaluation cadence of fine-tuning are the
// train.* keys, as for pretraining.
struct FinetuneConfig {
  // Batch size for evaluation and prediction.
  int64_t eval_batch_size = 32;
  // Longest input in tokens (including <sep>/<cls>); with long_inputs
  // chunks, the length of one chunk.
  int64_t max_seq_length = 128;
  // Classification/regression inputs (multiple choice: option sequences)
  // longer than max_seq_length:
  // truncate (official) or chunks: up to max_chunks * max_seq_length
  // tokens run as chunks of max_seq_length in order, each over the memory
  // of the earlier ones; the head reads the last chunk (finetune/chunks.h).
  LongInputs long_inputs = LongInputs::kTruncate;
  // long_inputs chunks: most chunks per input (longer inputs are
  // truncated as the official code truncates to max_chunks * max_seq_length).
  int64_t max_chunks = 8;
  // long_inputs chunks: memory carried to the next chunk, in tokens per
  // layer; 0 keeps every earlier chunk; -1 (default) = the model's mem_len
  // (config.json; null or 0 there keeps every earlier chunk).
  int64_t mem_len = -1;
  // Metric that picks the best checkpoint ("" = the task's default).
  std::string metric;
  // Bad input rows: skip (report and continue) or error (fail).
  BadRowPolicy bad_rows = BadRowPolicy::kError;
  // Classification/regression input columns: the TSV/CSV header name or the
  // JSON Lines key. Empty: detected (finetune/README.md). The first text;
  // detected as the first pair present (sentence1+sentence2,
  // question+sentence, question1+question2, text_a+text_b,
  // premise+hypothesis), else sentence, text or text_a.
  std::string text_column;
  // The second text of a pair task. With text_column set and this empty,
  // the task is single-text; set alone it is an error.
  std::string text_b_column;
  // The label; detected: label, gold_label, is_duplicate, score.
  std::string label_column;
  // The example id (optional; written to the predictions); detected: id,
  // idx, index, guid, else the 0-based row number.
  std::string id_column;
  // SQuAD: window stride over long contexts, in tokens.
  int64_t doc_stride = 128;
  // SQuAD: longest question, in tokens.
  int64_t max_query_length = 64;
  // Multiple choice (RACE): longest question + option, in tokens (the
  // official run_race.py's max_qa_length; longer ones keep their end).
  int64_t max_qa_length = 128;
  // SQuAD: longest answer, in tokens.
  int64_t max_answer_length = 64;
  // SQuAD: n-best list size.
  int64_t n_best_size = 5;
  // SQuAD v2: predict "" for a question whose null odds (the lowest
  // answer-class logit over its windows) exceed this; null always predicts
  // the best span and leaves the threshold to the evaluation, which reports
  // best_exact/best_f1 and their thresholds (official XLNet).
  std::optional<double> null_score_threshold;
  // SQuAD: the answer-class head's start feature in training: official
  // (softmax-weighted start, official XLNet) or hf (gold start, HF).
  AnswerClassStart answer_class_start = AnswerClassStart::kOfficial;
};

// A whole config file.
struct Config {
  XLNetConfig model;
  DataConfig data;
  TrainConfig train;
  FinetuneConfig finetune;
};

// "model", "data", "train", "finetune".
const std::vector<std::string>& AllConfigSections();

// Parses YAML text. `source` names it in errors (a path). `overrides` are
// "section.key=value" strings applied on top, in order. A command that reads
// only some `sections` rejects the others (in the file and in overrides).
// Keys that have moved (model.reuse_len -> data.reuse_len, model.bi_data ->
// data.bi_data, finetune.{max_steps,lr,warmup_steps,batch_size,eval_steps}
// -> train.*) are errors naming the new key. model.reuse_len and
// model.bi_data (config.json keys) are set from data.*.
absl::StatusOr<Config> ParseConfig(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::string>& overrides = {},
    const std::vector<std::string>& sections = AllConfigSections());

// Reads and parses a YAML file.
absl::StatusOr<Config> LoadConfig(
    const std::string& path, const std::vector<std::string>& overrides = {},
    const std::vector<std::string>& sections = AllConfigSections());

// A key of a section a command reads that the command itself has no use
// for, with the reason.
struct UnreadKey {
  // "section.key".
  std::string key;
  // Why the command does not read it ("fine-tuning runs the unfused core").
  std::string why;
  // Unset: the command never reads the key. Set: it does not read the key
  // in a config for which this holds (e.g. the permutation-LM keys under
  // train.objective clm); checked on the parsed config, before defaults
  // are derived, so the message can name the setting that decides.
  std::function<bool(const Config&)> unread_when = nullptr;
};

// What one command reads of a config: setting a key of `unread_keys` (in the
// file or with --set) is an error naming `command` and the key, so that no
// setting is accepted and silently ignored.
struct ConfigScope {
  // The command, for errors ("xlnet-finetune").
  std::string command;
  // The sections it reads; any other is an error.
  std::vector<std::string> sections = AllConfigSections();
  // Keys of those sections it does not read.
  std::vector<UnreadKey> unread_keys;
};

// ParseConfig / LoadConfig for one command's scope.
absl::StatusOr<Config> ParseConfigFor(
    const ConfigScope& scope, const std::string& yaml_text,
    const std::string& source, const std::vector<std::string>& overrides = {});
absl::StatusOr<Config> LoadConfigFor(
    const ConfigScope& scope, const std::string& path,
    const std::vector<std::string>& overrides = {});

// The fully resolved config as YAML (every key, defaults included).
std::string ConfigToYaml(const Config& config);

// Every key of the YAML sections as "section.key" with its value as one
// line of text (as config.yaml writes it: strings quoted, lists in YAML flow
// syntax), in config.yaml's order. Two configs have equal texts for a key
// exactly when its values are equal; messages show them.
std::vector<std::pair<std::string, std::string>> ConfigValueTexts(
    const Config& config);

// What a run writes as config.yaml: a first comment line naming the build,
// "# written by xlnet.cpp 0.1.0 (commit d3ac391)" (common/version.h; YAML
// parsing ignores it), then ConfigToYaml.
std::string ConfigFileText(const Config& config);

// Writes ConfigFileText to `path` atomically; every run directory gets one
// as config.yaml.
absl::Status WriteConfigYaml(const Config& config, const std::string& path);

// Checks ranges and cross-field constraints; errors name the key.
// The global batch of a run with `world_size` ranks: train.batch_size, or
// train.batch_size_per_device x world_size x train.grad_accum_steps when
// that is set.
int64_t GlobalBatchSize(const TrainConfig& train, int64_t world_size);

absl::Status ValidateConfig(const Config& config);

// HuggingFace config.json <-> XLNetConfig. Reading ignores keys that
// `transformers` adds for every model (return_dict, torch_dtype, ...) but
// rejects known keys with the wrong type.
absl::StatusOr<XLNetConfig> ParseModelConfigJson(const std::string& json_text,
                                                 const std::string& source);
absl::StatusOr<XLNetConfig> ReadModelConfigJson(const std::string& path);
std::string ModelConfigToJson(const XLNetConfig& config);

// Checks the model section alone (used for config.json too).
absl::Status ValidateModelConfig(const XLNetConfig& config);

// OK when a model stored with `stored` (e.g. an --init directory's
// config.json) has the architecture `configured` asks for: the same
// parameter shapes (vocab_size, d_model, n_layer, n_head, d_head, d_inner,
// untie_r) and the same layer maths (ff_activation). Otherwise an
// InvalidArgument naming `source` and every differing key with both values.
absl::Status CheckSameArchitecture(const XLNetConfig& stored,
                                   const XLNetConfig& configured,
                                   const std::string& source);

// The known keys of a section ("model", "data", "train", "finetune").
std::vector<std::string> ConfigKeys(const std::string& section);

}  // namespace xlnet
