// Range and cross-field checks of every section. Each check names the key
// it is about; callers add where the key was set.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"
#include "config/config.h"
#include "config/config_internal.h"

namespace xlnet {
namespace config_internal {
namespace {

class Checker {
 public:
  explicit Checker(std::string section) : section_(std::move(section)) {}
  void Check(bool ok, const char* key, const std::string& message) {
    if (!ok && !problem_) {
      problem_ = Problem{absl::StrCat(section_, ".", key), message};
    }
  }
  template <typename T>
  void OneOf(const char* key, const std::string& value,
             const std::vector<std::string>& allowed) {
    for (const auto& a : allowed) {
      if (a == value) return;
    }
    Check(false, key,
          absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "),
                       " (got '", value, "')", DidYouMean(value, allowed)));
  }
  std::optional<Problem> problem() const { return problem_; }

 private:
  std::string section_;
  std::optional<Problem> problem_;
};

std::string Got(double v) {
  std::ostringstream s;
  s << " (got " << v << ")";
  return s.str();
}

// Model sizes are 32-bit (token ids are int32 in shards and batches); the
// bound also keeps products of two sizes within int64.
constexpr int64_t kMaxModelSize = std::numeric_limits<int32_t>::max();
// train.num_epochs: far beyond any run, and small enough that its product
// with a pass's steps stays an exact int64_t.
constexpr double kMaxNumEpochs = 1e6;

}  // namespace

std::optional<Problem> CheckModel(const XLNetConfig& m) {
  Checker c("model");
  for (auto [key, value] :
       {std::pair<const char*, int64_t>{"vocab_size", m.vocab_size},
        {"d_model", m.d_model},
        {"n_layer", m.n_layer},
        {"n_head", m.n_head},
        {"d_head", m.d_head},
        {"d_inner", m.d_inner}}) {
    c.Check(value > 0 && value <= kMaxModelSize, key,
            absl::StrCat("must be in [1, ", kMaxModelSize, "]") + Got(value));
  }
  c.Check(m.d_model == m.n_head * m.d_head, "d_head",
          absl::StrCat("n_head * d_head must equal d_model (", m.n_head, " * ",
                       m.d_head, " != ", m.d_model, ")"));
  c.OneOf<void>("ff_activation", m.ff_activation, {"gelu", "relu", "gelu_new"});
  c.OneOf<void>("attn_type", m.attn_type, {"bi", "uni"});
  c.Check(m.clamp_len >= -1, "clamp_len",
          "must be -1 (off) or >= 0" + Got(m.clamp_len));
  c.Check(!m.mem_len || *m.mem_len >= 0, "mem_len",
          "must be >= 0 or null" + Got(m.mem_len.value_or(0)));
  c.Check(!m.reuse_len || *m.reuse_len >= 0, "reuse_len",
          "must be >= 0 or null" + Got(m.reuse_len.value_or(0)));
  c.Check(m.dropout >= 0 && m.dropout < 1, "dropout",
          "must be in [0, 1)" + Got(m.dropout));
  c.Check(m.layer_norm_eps > 0, "layer_norm_eps",
          "must be positive" + Got(m.layer_norm_eps));
  c.Check(m.initializer_range > 0, "initializer_range",
          "must be positive" + Got(m.initializer_range));
  c.OneOf<void>("summary_type", m.summary_type,
                {"last", "first", "mean", "cls_index"});
  c.OneOf<void>("summary_activation", m.summary_activation, {"tanh", ""});
  c.Check(m.summary_last_dropout >= 0 && m.summary_last_dropout < 1,
          "summary_last_dropout",
          "must be in [0, 1)" + Got(m.summary_last_dropout));
  c.Check(m.start_n_top > 0, "start_n_top", "must be positive");
  c.Check(m.end_n_top > 0, "end_n_top", "must be positive");
  for (auto [key, id] :
       {std::pair<const char*, int64_t>{"pad_token_id", m.pad_token_id},
        {"bos_token_id", m.bos_token_id},
        {"eos_token_id", m.eos_token_id}}) {
    c.Check(id >= 0 && id < m.vocab_size, key,
            absl::StrCat("must be a token id in [0, vocab_size=", m.vocab_size,
                         ")", Got(id)));
  }
  c.Check(!m.id2label.empty(), "id2label", "must name at least one label");
  return c.problem();
}

// The permutation-LM sample's keys.
void CheckPlmSample(const DataConfig& d, Checker& c) {
  c.Check(d.reuse_len >= 0 && d.reuse_len < d.seq_len, "reuse_len",
          absl::StrCat("must be in [0, seq_len=", d.seq_len, ")",
                       Got(d.reuse_len)));
  c.Check(d.seq_len - d.reuse_len >= 5, "seq_len",
          absl::StrCat("seq_len - reuse_len must leave room for A <sep> B "
                       "<sep> <cls> (at least 5 tokens; got ",
                       d.seq_len - d.reuse_len, ")"));
  c.Check(d.perm_size > 0, "perm_size", "must be positive" + Got(d.perm_size));
  if (d.perm_size > 0) {
    c.Check(
        d.reuse_len % d.perm_size == 0, "perm_size",
        absl::StrCat("must divide reuse_len=", d.reuse_len, Got(d.perm_size)));
    c.Check((d.seq_len - d.reuse_len) % d.perm_size == 0, "perm_size",
            absl::StrCat("must divide seq_len - reuse_len = ",
                         d.seq_len - d.reuse_len, Got(d.perm_size)));
  }
  c.Check(d.num_predict > 0 && d.num_predict <= d.seq_len, "num_predict",
          absl::StrCat("must be in [1, seq_len=", d.seq_len, "]",
                       Got(d.num_predict)));
  c.Check(d.mask_alpha > 0, "mask_alpha",
          "must be positive" + Got(d.mask_alpha));
  c.Check(d.mask_beta > 0, "mask_beta", "must be positive" + Got(d.mask_beta));
  c.Check(d.max_gram >= 1, "max_gram", "must be >= 1" + Got(d.max_gram));
}

// The data section's checks; the permutation-LM sample's keys only under
// `objective` plm (clm reads none of them).
std::optional<Problem> CheckData(const DataConfig& d, Objective objective) {
  Checker c("data");
  c.Check(d.seq_len > 0, "seq_len", "must be positive" + Got(d.seq_len));
  if (objective == Objective::kPlm) CheckPlmSample(d, c);
  c.Check(d.prefetch_batches >= 0 && d.prefetch_batches <= 256,
          "prefetch_batches", "must be in [0, 256]" + Got(d.prefetch_batches));
  c.Check(d.loader_threads >= 1, "loader_threads", "must be >= 1");
  c.Check(d.eval_fraction >= 0 && d.eval_fraction < 1, "eval_fraction",
          "must be in [0, 1)" + Got(d.eval_fraction));
  c.Check(d.source_block_steps >= 1, "source_block_steps",
          "must be >= 1" + Got(d.source_block_steps));
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < d.sources.size(); ++i) {
    const DataSource& s = d.sources[i];
    const std::string entry = absl::StrCat("sources[", i, "]");
    const std::string name = DataSourceName(s);
    c.Check(!s.path.empty(), (entry + ".path").c_str(),
            "must name a prepared directory (xlnet-data prepare)");
    c.Check(s.weight > 0 && std::isfinite(s.weight),
            (entry + ".weight").c_str(),
            "must be a finite number > 0" + Got(s.weight));
    const bool name_ok =
        !name.empty() && name.find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                             "UVWXYZ0123456789_-.") == std::string::npos;
    c.Check(name_ok, (entry + ".name").c_str(),
            absl::StrCat("'", name,
                         "' must be letters, digits, '_', '-' or '.' (it "
                         "names the metric tokens_<name>); set name"));
    const auto [it, inserted] = names.emplace(name, i);
    c.Check(inserted, (entry + ".name").c_str(),
            absl::StrCat("'", name, "' is also the name of data.sources[",
                         it->second,
                         "]; names must be unique (set name to tell them "
                         "apart)"));
  }
  return c.problem();
}

std::optional<Problem> CheckTrain(const TrainConfig& t) {
  Checker c("train");
  c.Check(
      t.batch_size_per_device >= 0, "batch_size_per_device",
      "must be >= 0 (0 = use train.batch_size)" + Got(t.batch_size_per_device));
  c.Check(t.batch_size > 0 || t.batch_size_per_device > 0, "batch_size",
          "must be positive (or set train.batch_size_per_device)" +
              Got(t.batch_size));
  c.Check(t.max_steps >= 0, "max_steps", "must be >= 0" + Got(t.max_steps));
  c.Check(t.num_epochs >= 0 && t.num_epochs <= kMaxNumEpochs, "num_epochs",
          absl::StrCat("must be in [0, ", kMaxNumEpochs, "] (0 = off)") +
              Got(t.num_epochs));
  c.Check(t.lr >= 0 && std::isfinite(t.lr), "lr",
          "must be a finite number >= 0" + Got(t.lr));
  c.Check(t.warmup_steps >= 0, "warmup_steps", "must be >= 0");
  c.Check(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "min_lr_ratio",
          "must be in [0, 1]" + Got(t.min_lr_ratio));
  c.Check(t.weight_decay >= 0 && std::isfinite(t.weight_decay), "weight_decay",
          "must be a finite number >= 0" + Got(t.weight_decay));
  c.Check(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "adam_beta1",
          "must be in [0, 1)" + Got(t.adam_beta1));
  c.Check(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "adam_beta2",
          "must be in [0, 1)" + Got(t.adam_beta2));
  c.Check(t.adam_epsilon > 0 && std::isfinite(t.adam_epsilon), "adam_epsilon",
          "must be a finite number > 0" + Got(t.adam_epsilon));
  c.Check(t.clip >= 0 && std::isfinite(t.clip), "clip",
          "must be a finite number >= 0 (0 disables)" + Got(t.clip));
  c.Check(t.layer_decay > 0 && t.layer_decay <= 1, "layer_decay",
          "must be in (0, 1]" + Got(t.layer_decay));
  c.Check(t.grad_accum_steps >= 1, "grad_accum_steps", "must be >= 1");
  c.Check(t.grad_accum_steps < 1 || t.batch_size_per_device > 0 ||
              t.batch_size % t.grad_accum_steps == 0,
          "grad_accum_steps",
          absl::StrCat("must divide batch_size=", t.batch_size,
                       Got(t.grad_accum_steps)));
  c.Check(t.save_steps >= 0, "save_steps", "must be >= 0");
  c.Check(t.log_steps >= 1, "log_steps", "must be >= 1" + Got(t.log_steps));
  c.Check(t.eval_steps >= 0, "eval_steps", "must be >= 0");
  c.Check(t.eval_batches >= 1, "eval_batches", "must be >= 1");
  c.Check(t.patience >= 0, "patience", "must be >= 0 (0 = no early stopping)");
  c.Check(t.patience == 0 || t.eval_steps > 0, "patience",
          "needs train.eval_steps > 0 (early stopping counts evaluations)");
  c.Check(t.patience_min_delta >= 0 && std::isfinite(t.patience_min_delta),
          "patience_min_delta", "must be a finite number >= 0");
  c.Check(t.keep_checkpoints >= 0, "keep_checkpoints", "must be >= 0");
  const absl::StatusOr<DeviceSetting> device = ParseDeviceSetting(t.device);
  c.Check(device.ok(), "device",
          device.ok() ? "" : std::string(device.status().message()));
  const bool cuda = device.ok() && device->is_cuda();
  c.Check(t.dtype != Dtype::kFp16 || cuda, "dtype",
          "fp16 needs device cuda (use bf16 on cpu)");
  c.Check(t.threads >= 0, "threads", "must be >= 0 (0 = all cores)");
  c.Check(t.attention != AttentionImpl::kTiled || !cuda, "attention",
          "'tiled' is the CPU implementation (device cuda: 'cuda' or "
          "'unfused')");
  c.Check(t.attention != AttentionImpl::kCuda || cuda, "attention",
          "'cuda' needs device cuda ('tiled' on cpu)");
  c.Check(t.fused_elementwise != FusedElementwise::kOn || cuda,
          "fused_elementwise",
          "needs device cuda (on cpu the fused ops' C++ loops are slower "
          "than LibTorch's element-wise ops; set it to auto or false)");
  c.Check(t.max_bad_steps >= 1, "max_bad_steps", "must be >= 1");
  c.Check(t.dist_timeout_s >= 1, "dist_timeout_s", "must be >= 1");
  c.Check(t.io_timeout_s >= 1, "io_timeout_s", "must be >= 1");
  c.Check(t.startup_timeout_s >= 1, "startup_timeout_s", "must be >= 1");
  c.Check(t.grad_reduce_dtype != Dtype::kFp16, "grad_reduce_dtype",
          "must be fp32 or bf16 (fp16's range can overflow a sum of "
          "gradients)");
  c.Check(t.grad_bucket_mb > 0 && t.grad_bucket_mb <= 4096, "grad_bucket_mb",
          "must be in (0, 4096]" + Got(t.grad_bucket_mb));
  c.Check(
      t.first_grad_bucket_mb > 0 && t.first_grad_bucket_mb <= t.grad_bucket_mb,
      "first_grad_bucket_mb",
      "must be in (0, grad_bucket_mb]" + Got(t.first_grad_bucket_mb));
  c.Check(t.ranks_per_device >= 1 && t.ranks_per_device <= 64,
          "ranks_per_device", "must be in [1, 64]" + Got(t.ranks_per_device));
  c.Check(t.ranks_per_device == 1 || (cuda && device->index < 0),
          "ranks_per_device",
          "above 1 applies to device cuda (got '" + t.device + "')");
  return c.problem();
}

std::optional<Problem> CheckFinetune(const FinetuneConfig& f) {
  Checker c("finetune");
  c.Check(f.eval_batch_size > 0, "eval_batch_size", "must be positive");
  c.Check(f.max_seq_length >= 4, "max_seq_length",
          "must be >= 4" + Got(f.max_seq_length));
  c.Check(f.max_chunks >= 1, "max_chunks", "must be >= 1" + Got(f.max_chunks));
  c.Check(f.mem_len >= -1, "mem_len",
          "must be -1 (the model's mem_len), 0 (every earlier chunk) or a "
          "number of tokens" +
              Got(f.mem_len));
  c.Check(f.text_b_column.empty() || !f.text_column.empty(), "text_b_column",
          "needs finetune.text_column (the first text) set too");
  c.Check(f.doc_stride > 0, "doc_stride", "must be positive");
  c.Check(f.max_query_length > 0, "max_query_length", "must be positive");
  c.Check(f.max_qa_length > 0, "max_qa_length", "must be positive");
  c.Check(f.max_answer_length > 0, "max_answer_length", "must be positive");
  c.Check(f.n_best_size > 0, "n_best_size", "must be positive");
  return c.problem();
}

std::optional<Problem> CheckAll(const Config& config) {
  if (auto p = CheckModel(config.model)) return p;
  if (auto p = CheckData(config.data, config.train.objective)) return p;
  if (auto p = CheckTrain(config.train)) return p;
  if (config.train.objective == Objective::kClm &&
      config.model.attn_type != "uni") {
    return Problem{"train.objective",
                   absl::StrCat("clm (causal LM) needs model.attn_type: uni "
                                "(got '",
                                config.model.attn_type,
                                "'); set model.attn_type: uni, or "
                                "train.objective: plm")};
  }
  return CheckFinetune(config.finetune);
}

absl::Status ProblemToStatus(const Problem& p, const Locations& locations,
                             const std::string& source) {
  auto it = locations.find(p.key);
  const std::string where = it != locations.end() ? it->second : source;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", p.key, ": ", p.message));
}

}  // namespace config_internal

using config_internal::CheckAll;
using config_internal::CheckModel;
using config_internal::ProblemToStatus;

absl::Status ValidateConfig(const Config& config) {
  if (auto problem = CheckAll(config)) {
    return ProblemToStatus(*problem, {}, "config");
  }
  return absl::OkStatus();
}

absl::Status CheckSameArchitecture(const XLNetConfig& stored,
                                   const XLNetConfig& configured,
                                   const std::string& source) {
  std::vector<std::string> diffs;
  auto compare = [&](const char* key, const auto& a, const auto& b) {
    if (a != b) diffs.push_back(absl::StrCat(key, " ", a, " vs ", b));
  };
  compare("vocab_size", stored.vocab_size, configured.vocab_size);
  compare("d_model", stored.d_model, configured.d_model);
  compare("n_layer", stored.n_layer, configured.n_layer);
  compare("n_head", stored.n_head, configured.n_head);
  compare("d_head", stored.d_head, configured.d_head);
  compare("d_inner", stored.d_inner, configured.d_inner);
  compare("untie_r", std::string(stored.untie_r ? "true" : "false"),
          std::string(configured.untie_r ? "true" : "false"));
  compare("ff_activation", stored.ff_activation, configured.ff_activation);
  if (diffs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": its architecture differs from the config's model section (",
      absl::StrJoin(diffs, ", "), "; stored vs configured)"));
}

absl::Status ValidateModelConfig(const XLNetConfig& config) {
  if (auto problem = CheckModel(config)) {
    return ProblemToStatus(*problem, {}, "config");
  }
  return absl::OkStatus();
}

}  // namespace xlnet
