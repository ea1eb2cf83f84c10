#include "model_io/run.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/runtime.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "model/precision.h"
#include "model_io/load.h"

namespace xlnet {
namespace {

std::string Shape(const torch::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

bool IsInteger(const torch::Tensor& t) {
  return !t.is_floating_point() && !t.is_complex() &&
         t.scalar_type() != torch::kBool;
}

absl::Status Bad(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", what));
}

// Checks `t` has `shape` (-1 = any) and returns the problem if not.
absl::Status CheckShape(const std::string& name, const torch::Tensor& t,
                        const std::vector<int64_t>& shape,
                        const std::string& letters) {
  bool ok = t.dim() == static_cast<int64_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    ok = shape[i] < 0 || t.size(i) == shape[i];
  }
  if (ok) return absl::OkStatus();
  std::vector<std::string> want;
  for (int64_t s : shape) want.push_back(s < 0 ? "?" : std::to_string(s));
  return Bad(name, absl::StrCat("shape ", Shape(t), ", expected ", letters,
                                " = [", absl::StrJoin(want, ", "), "]"));
}

absl::Status CheckZeroOne(const std::string& name, const torch::Tensor& t) {
  if (t.numel() == 0) return absl::OkStatus();
  auto f = t.to(torch::kFloat);
  if (!((f == 0) | (f == 1)).all().item<bool>()) {
    return Bad(name, "values must be 0 or 1");
  }
  return absl::OkStatus();
}

absl::Status CheckMaskDtype(const std::string& name, const torch::Tensor& t) {
  if (!t.is_floating_point() && !IsInteger(t) &&
      t.scalar_type() != torch::kBool) {
    return Bad(name, absl::StrCat("dtype ", c10::toString(t.scalar_type()),
                                  " (expected float, integer or bool)"));
  }
  return CheckZeroOne(name, t);
}

// Levenshtein distance of `a` and `b`, stopping early past `limit`.
size_t EditDistance(const std::string& a, const std::string& b, size_t limit) {
  const size_t gap =
      a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (gap > limit) return limit + 1;
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Names in `tensors` the model does not read are skipped with a warning (an
// inputs file may carry labels or other tensors), except a misspelling of an
// input (within two edits, "attention_masks") or a mems.N past the layers:
// those were once skipped too, so the run went on without them.
absl::Status CheckInputNames(
    const std::map<std::string, torch::Tensor>& tensors,
    const XLNetConfig& config) {
  const std::vector<std::string> names = {"input_ids",      "token_type_ids",
                                          "attention_mask", "perm_mask",
                                          "target_mapping", "mems.0"};
  for (const auto& [name, t] : tensors) {
    int64_t layer = -1;
    if (name.rfind("mems.", 0) == 0 &&
        absl::SimpleAtoi(name.substr(5), &layer) &&
        name == absl::StrCat("mems.", layer)) {
      if (layer >= 0 && layer < config.n_layer) continue;
      return Bad(name, absl::StrCat("the model has mems.0 .. mems.",
                                    config.n_layer - 1));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    for (const std::string& known : names) {
      if (EditDistance(name, known, 2) <= 2) {
        return Bad(name, absl::StrCat("not an input of the model; did you "
                                      "mean '",
                                      known, "'?"));
      }
    }
    XLOG(WARNING) << "ignoring input '" << name << "'";
  }
  return absl::OkStatus();
}

// The attention of one layer holds a few [B, n_head, L, M + L] float
// tensors; with more than the memory available to this process (an input
// of a million tokens) the pass would only fail in the allocator, or swap
// for hours. The bound is the model's: n_head and the memory length scale
// it with L.
absl::Status CheckInputLength(int64_t b, int64_t l, int64_t m,
                              const XLNetConfig& config) {
  constexpr double kScoreTensors = 4;  // content, position, softmax, stream
  const double bytes = kScoreTensors * sizeof(float) * static_cast<double>(b) *
                       static_cast<double>(config.n_head) *
                       static_cast<double>(l) * static_cast<double>(l + m);
  const double available = static_cast<double>(AvailableMemoryBytes());
  if (available > 0 && bytes > available) {
    return Bad(
        "input_ids",
        absl::StrFormat("[%d, %d] with %d memory positions needs about %.0f "
                        "MiB of attention scores per layer (n_head %d), more "
                        "than the %.0f MiB available; give shorter or fewer "
                        "rows",
                        b, l, m, bytes / (1 << 20), config.n_head,
                        available / (1 << 20)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<XLNetInputs> InputsFromTensors(
    const std::map<std::string, torch::Tensor>& tensors,
    const XLNetConfig& config, torch::Device device) {
  auto find = [&](const std::string& name) -> torch::Tensor {
    auto it = tensors.find(name);
    return it == tensors.end() ? torch::Tensor() : it->second;
  };
  XLNET_RETURN_IF_ERROR(CheckInputNames(tensors, config));
  XLNetInputs in;
  in.input_ids = find("input_ids");
  if (!in.input_ids.defined()) {
    return absl::InvalidArgumentError(
        "missing required input 'input_ids' [B, L] int64");
  }
  if (!IsInteger(in.input_ids)) {
    return Bad("input_ids",
               absl::StrCat("dtype ", c10::toString(in.input_ids.scalar_type()),
                            " (expected int64)"));
  }
  if (in.input_ids.dim() != 2 || in.input_ids.numel() == 0) {
    return Bad("input_ids", absl::StrCat("shape ", Shape(in.input_ids),
                                         ", expected [B, L] non-empty"));
  }
  const int64_t b = in.input_ids.size(0), l = in.input_ids.size(1);
  in.input_ids = in.input_ids.to(torch::kLong);
  const int64_t lo = in.input_ids.min().item<int64_t>();
  const int64_t hi = in.input_ids.max().item<int64_t>();
  if (lo < 0 || hi >= config.vocab_size) {
    return Bad("input_ids",
               absl::StrCat("ids must be in [0, ", config.vocab_size,
                            "), found [", lo, ", ", hi, "]"));
  }
  if (config.bi_data && b % 2 != 0) {
    return Bad("input_ids",
               absl::StrCat("bi_data needs an even batch size, got ", b));
  }
  in.token_type_ids = find("token_type_ids");
  if (in.token_type_ids.defined()) {
    if (!IsInteger(in.token_type_ids))
      return Bad("token_type_ids", "must be an integer tensor");
    XLNET_RETURN_IF_ERROR(
        CheckShape("token_type_ids", in.token_type_ids, {b, l}, "[B, L]"));
  }
  in.attention_mask = find("attention_mask");
  if (in.attention_mask.defined()) {
    XLNET_RETURN_IF_ERROR(
        CheckShape("attention_mask", in.attention_mask, {b, l}, "[B, L]"));
    XLNET_RETURN_IF_ERROR(CheckMaskDtype("attention_mask", in.attention_mask));
  }
  in.perm_mask = find("perm_mask");
  if (in.perm_mask.defined()) {
    XLNET_RETURN_IF_ERROR(
        CheckShape("perm_mask", in.perm_mask, {b, l, l}, "[B, L, L]"));
    XLNET_RETURN_IF_ERROR(CheckMaskDtype("perm_mask", in.perm_mask));
  }
  in.target_mapping = find("target_mapping");
  if (in.target_mapping.defined()) {
    XLNET_RETURN_IF_ERROR(CheckShape("target_mapping", in.target_mapping,
                                     {b, -1, l}, "[B, P, L]"));
    XLNET_RETURN_IF_ERROR(CheckMaskDtype("target_mapping", in.target_mapping));
    if (in.target_mapping.numel() > 0 &&
        (in.target_mapping.to(torch::kFloat).sum(2) > 1).any().item<bool>()) {
      return Bad("target_mapping",
                 "each row must be one-hot (or all zero for a padding target)");
    }
    in.target_mapping = in.target_mapping.to(torch::kFloat);
  }
  std::vector<int> mem_ids;
  for (int64_t n = 0; n < config.n_layer; ++n) {
    auto m = find(absl::StrCat("mems.", n));
    if (m.defined()) mem_ids.push_back(n);
    in.mems.push_back(m);
  }
  if (mem_ids.empty()) {
    in.mems.clear();
  } else {
    if (static_cast<int64_t>(mem_ids.size()) != config.n_layer) {
      return Bad("mems",
                 absl::StrCat("give all of mems.0 .. mems.", config.n_layer - 1,
                              " or none; got ", mem_ids.size()));
    }
    const int64_t mlen = in.mems[0].dim() > 0 ? in.mems[0].size(0) : -1;
    for (int64_t n = 0; n < config.n_layer; ++n) {
      const std::string name = absl::StrCat("mems.", n);
      if (!in.mems[n].is_floating_point())
        return Bad(name, "must be a float tensor");
      XLNET_RETURN_IF_ERROR(
          CheckShape(name, in.mems[n], {mlen, b, config.d_model}, "[M, B, D]"));
      in.mems[n] = in.mems[n].to(torch::kFloat).to(device);
    }
  }
  XLNET_RETURN_IF_ERROR(
      CheckInputLength(b, l, in.mems.empty() ? 0 : in.mems[0].size(0), config));
  in.input_ids = in.input_ids.to(device);
  for (auto* t : {&in.token_type_ids, &in.attention_mask, &in.perm_mask,
                  &in.target_mapping}) {
    if (t->defined()) *t = t->to(device);
  }
  return in;
}

absl::Status RunModel(const RunOptions& options) {
  XLNET_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(options.device));
  const torch::ScalarType dtype = ScalarTypeOf(options.dtype);
  XLNET_RETURN_IF_ERROR(CheckPrecision(device, dtype));
  LoadOptions load;
  load.ignore_prefixes = FineTuningHeadPrefixes();
  XLNET_ASSIGN_OR_RETURN(XLNetLMHeadModel model,
                         LoadPretrained(options.model_dir, load));
  const XLNetConfig& config = model->config();
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                         SafetensorsFile::Open(options.inputs_path));
  XLNET_ASSIGN_OR_RETURN(auto all, file.LoadAll());
  std::map<std::string, torch::Tensor> tensors(all.begin(), all.end());
  auto parsed = InputsFromTensors(tensors, config, device);
  if (!parsed.ok()) return Annotate(parsed.status(), options.inputs_path);
  XLNetInputs inputs = std::move(parsed).value();
  NamedTensors outputs;
  XLNET_RETURN_IF_ERROR(CatchExceptions("forward", [&]() -> absl::Status {
    model->to(device);
    model->eval();
    torch::NoGradGuard no_grad;
    AutocastGuard autocast(device, dtype);
    XLNetForwardOptions fwd;
    fwd.use_mems = config.use_mems_eval;
    fwd.query_all_positions = options.query_all_positions;
    auto out = model->forward(inputs, fwd);
    auto f32 = [](const torch::Tensor& t) {
      return t.to(torch::kCPU, torch::kFloat).contiguous();
    };
    outputs.emplace_back("last_hidden_state", f32(out.last_hidden_state));
    if (out.query_hidden_state.defined()) {
      outputs.emplace_back("query_hidden_state", f32(out.query_hidden_state));
    }
    outputs.emplace_back("logits", f32(out.logits));
    for (size_t n = 0; n < out.new_mems.size(); ++n) {
      outputs.emplace_back(absl::StrCat("mems.", n), f32(out.new_mems[n]));
    }
    return absl::OkStatus();
  }));
  XLNET_RETURN_IF_ERROR(WriteSafetensors(options.outputs_path, outputs));
  XLOG(INFO) << "wrote " << outputs.size() << " tensors to "
             << options.outputs_path << " (" << EnumName(options.dtype) << ", "
             << device.str() << ")";
  return absl::OkStatus();
}

}  // namespace xlnet
