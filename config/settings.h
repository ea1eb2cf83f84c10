// The enumerated settings of a config, each an enum with one name table.
//
// A setting's names are written here once; the config visitors (YAML in and
// out, errors with the allowed names), the command-line flags that take the
// same values and every consumer use this table, so no other file spells
// "sdpa", "bf16" or "chunks" as a value:
//
//   EnumName(Dtype::kBf16)             -> "bf16"
//   ParseEnum<Dtype>("bf16")           -> Dtype::kBf16 (nullopt otherwise)
//   EnumNameList<Dtype>()              -> "fp32, bf16, fp16"
//
// Adding a setting: an enum below, an EnumTable specialisation listing every
// value with its name, and the field in config.h (its visitors then read,
// write and check it).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace xlnet {

// train.dtype: the compute precision.
enum class Dtype {
  kFp32,  // fp32 everywhere
  kBf16,  // bf16 autocast (CPU and CUDA), fp32 parameters
  kFp16,  // fp16 autocast with dynamic loss scaling (CUDA only)
};

// train.save_memory: how checkpoints hold each rank's Transformer-XL memory.
enum class SaveMemory {
  kFp32,  // as computed: resume continues exactly
  kBf16,  // rounded to bf16: half the bytes, resume continues approximately
  kNone,  // not saved: resume starts with empty memory (the data continues)
};

// train.objective: what xlnet-pretrain trains the model to predict.
enum class Objective {
  kPlm,  // XLNet's permutation language modelling (two streams, partial
         // prediction; pretrain/plm_unit.h)
  kClm,  // Transformer-XL's causal language modelling: every next token of
         // ordered streams, content stream only (pretrain/clm_unit.h)
};

// train.decay: the learning-rate decay after warmup.
enum class LrDecay {
  kLinear,  // the official poly decay with power 1
  kCos,     // half a cosine from lr to lr * min_lr_ratio
};

// train.attention: which attention core the model runs (model/README.md).
enum class AttentionImpl {
  kAuto,     // cuda where its tensor-core kernels take the model (device
             // cuda, dtype bf16 or fp16, head size 64, a build with them):
             // the fastest deterministic core there; unfused elsewhere
             // (ResolveAttention, model/attention.h)
  kUnfused,  // RelativeAttentionCore: LibTorch ops on [B, H, Lq, K] scores
  kTiled,    // the fused op's CPU implementation (CPU tensors only)
  kCuda,     // the fused op's CUDA kernel (CUDA tensors, XLNET_WITH_CUDA)
  kSdpa,     // LibTorch's scaled_dot_product_attention with the position
             // and segment terms as its bias (LibTorch >= 2.1;
             // model/sdpa_attention.h)
};

// train.fused_elementwise: whether the model runs its feed-forward and
// residual tails as the fused ops of model/fused_elementwise.h.
enum class FusedElementwise {
  kAuto,  // on for device cuda in builds with our CUDA kernels, else off
  kOn,    // on; needs device cuda and a build with the kernels
  kOff,   // LibTorch's element-wise ops
};

// train.step_reads: when the trainer reads a step's numbers (loss, gradient
// norm, the stop flag) from the device (train/trainer.h).
enum class StepReads {
  kEachStep,  // at the end of every step: the device drains its queue
  kDeferred,  // one step late, once the next step is queued, and at once
              // only on log, evaluation, save and last steps
};

// finetune.bad_rows: what a reader does with a malformed input row.
enum class BadRowPolicy {
  kError,  // fail with the first one
  kSkip,   // report it, count it, go on
};

// finetune.long_inputs: inputs longer than max_seq_length.
enum class LongInputs {
  kTruncate,  // keep the first max_seq_length tokens (official)
  kChunks,    // run as chunks with memory (finetune/chunks.h)
};

// finetune.answer_class_start: the SQuAD answer-class head's start feature
// in training (model/question_answering.h).
enum class AnswerClassStart {
  kOfficial,  // softmax-weighted start, as the official XLNet
  kHf,        // the gold start's hidden state, as HF
};

// train.device's kind: "cpu" or "cuda" (DeviceSetting adds "cuda:N").
enum class DeviceKind {
  kCpu,   // the host
  kCuda,  // a CUDA GPU
};

// One name table per enum: every value once, with its name in configs,
// flags and messages.
template <typename E>
struct EnumTable;

template <>
struct EnumTable<Dtype> {
  static constexpr std::array<std::pair<Dtype, const char*>, 3> kNames{{
      {Dtype::kFp32, "fp32"},
      {Dtype::kBf16, "bf16"},
      {Dtype::kFp16, "fp16"},
  }};
};

template <>
struct EnumTable<Objective> {
  static constexpr std::array<std::pair<Objective, const char*>, 2> kNames{{
      {Objective::kPlm, "plm"},
      {Objective::kClm, "clm"},
  }};
};

template <>
struct EnumTable<SaveMemory> {
  static constexpr std::array<std::pair<SaveMemory, const char*>, 3> kNames{{
      {SaveMemory::kFp32, "fp32"},
      {SaveMemory::kBf16, "bf16"},
      {SaveMemory::kNone, "none"},
  }};
};

template <>
struct EnumTable<LrDecay> {
  static constexpr std::array<std::pair<LrDecay, const char*>, 2> kNames{{
      {LrDecay::kLinear, "linear"},
      {LrDecay::kCos, "cos"},
  }};
};

template <>
struct EnumTable<AttentionImpl> {
  static constexpr std::array<std::pair<AttentionImpl, const char*>, 5> kNames{{
      {AttentionImpl::kAuto, "auto"},
      {AttentionImpl::kUnfused, "unfused"},
      {AttentionImpl::kTiled, "tiled"},
      {AttentionImpl::kCuda, "cuda"},
      {AttentionImpl::kSdpa, "sdpa"},
  }};
};

// "true" and "false" are the names the setting had as a bool, so configs
// and checkpoints that wrote it then still read.
template <>
struct EnumTable<FusedElementwise> {
  static constexpr std::array<std::pair<FusedElementwise, const char*>, 3>
      kNames{{
          {FusedElementwise::kAuto, "auto"},
          {FusedElementwise::kOn, "true"},
          {FusedElementwise::kOff, "false"},
      }};
};

template <>
struct EnumTable<StepReads> {
  static constexpr std::array<std::pair<StepReads, const char*>, 2> kNames{{
      {StepReads::kEachStep, "each_step"},
      {StepReads::kDeferred, "deferred"},
  }};
};

template <>
struct EnumTable<BadRowPolicy> {
  static constexpr std::array<std::pair<BadRowPolicy, const char*>, 2> kNames{{
      {BadRowPolicy::kSkip, "skip"},
      {BadRowPolicy::kError, "error"},
  }};
};

template <>
struct EnumTable<LongInputs> {
  static constexpr std::array<std::pair<LongInputs, const char*>, 2> kNames{{
      {LongInputs::kTruncate, "truncate"},
      {LongInputs::kChunks, "chunks"},
  }};
};

template <>
struct EnumTable<AnswerClassStart> {
  static constexpr std::array<std::pair<AnswerClassStart, const char*>, 2>
      kNames{{
          {AnswerClassStart::kOfficial, "official"},
          {AnswerClassStart::kHf, "hf"},
      }};
};

template <>
struct EnumTable<DeviceKind> {
  static constexpr std::array<std::pair<DeviceKind, const char*>, 2> kNames{{
      {DeviceKind::kCpu, "cpu"},
      {DeviceKind::kCuda, "cuda"},
  }};
};

// Whether E is an enumerated setting (has an EnumTable).
template <typename E, typename = void>
inline constexpr bool kIsEnumSetting = false;
template <typename E>
inline constexpr bool
    kIsEnumSetting<E, std::void_t<decltype(EnumTable<E>::kNames)>> = true;

// The name of `value` ("" for a value missing from the table, which the
// table's test rules out).
template <typename E>
constexpr const char* EnumName(E value) {
  for (const auto& [v, name] : EnumTable<E>::kNames) {
    if (v == value) return name;
  }
  return "";
}

// The value named `name`; nullopt for any other text.
template <typename E>
constexpr std::optional<E> ParseEnum(std::string_view name) {
  for (const auto& [v, n] : EnumTable<E>::kNames) {
    if (std::string_view(n) == name) return v;
  }
  return std::nullopt;
}

// Every name, in table order.
template <typename E>
std::vector<std::string> EnumNames() {
  std::vector<std::string> names;
  for (const auto& entry : EnumTable<E>::kNames) {
    names.emplace_back(entry.second);
  }
  return names;
}

// "fp32, bf16, fp16": the names for messages and --help.
template <typename E>
std::string EnumNameList() {
  std::string out;
  for (const auto& entry : EnumTable<E>::kNames) {
    if (!out.empty()) out += ", ";
    out += entry.second;
  }
  return out;
}

// The value named `name`, or an InvalidArgument "WHAT: must be one of a, b
// (got 'x') (did you mean 'a'?)"; `what` names the key or flag.
template <typename E>
absl::StatusOr<E> ParseEnumSetting(std::string_view what,
                                   std::string_view name) {
  if (const std::optional<E> value = ParseEnum<E>(name)) return *value;
  const std::string got(name);
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), ": must be one of ", EnumNameList<E>(),
                   " (got '", got, "')", DidYouMean(got, EnumNames<E>())));
}

// train.device (and the tools' --device) parsed: a DeviceKind and, for
// "cuda:N", the index. Whether the device exists is the runtime's question
// (ParseDevice, model/precision.h).
struct DeviceSetting {
  DeviceKind kind = DeviceKind::kCpu;
  // N of "cuda:N"; -1 = no index ("cuda": one GPU per local rank).
  int index = -1;

  bool is_cuda() const { return kind == DeviceKind::kCuda; }
};

// "cpu", "cuda" or "cuda:N" as a DeviceSetting, or an InvalidArgument
// "must be cpu, cuda or cuda:N (got 'x')" (the caller names the key or
// flag).
inline absl::StatusOr<DeviceSetting> ParseDeviceSetting(std::string_view text) {
  DeviceSetting setting;
  const std::string_view cuda = EnumName(DeviceKind::kCuda);
  if (const std::optional<DeviceKind> kind = ParseEnum<DeviceKind>(text)) {
    setting.kind = *kind;
    return setting;
  }
  const bool indexed =
      text.size() > cuda.size() + 1 && text.size() <= cuda.size() + 4 &&
      text.substr(0, cuda.size()) == cuda && text[cuda.size()] == ':';
  bool digits = indexed;
  for (size_t i = cuda.size() + 1; indexed && i < text.size(); ++i) {
    digits = digits && text[i] >= '0' && text[i] <= '9';
  }
  if (!digits) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be ", EnumNameList<DeviceKind>(), " or ",
                     std::string(cuda), ":N (got '", std::string(text), "')"));
  }
  setting.kind = DeviceKind::kCuda;
  setting.index = 0;
  for (size_t i = cuda.size() + 1; i < text.size(); ++i) {
    setting.index = setting.index * 10 + (text[i] - '0');
  }
  return setting;
}

}  // namespace xlnet
