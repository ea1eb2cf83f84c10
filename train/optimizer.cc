#include "train/optimizer.h"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xlnet {

namespace {

// The gradients of `params` that are defined, in runs of one device and
// dtype (in order of first appearance).
std::vector<std::vector<torch::Tensor>> GradsByDeviceAndDtype(
    const NamedTensors& params) {
  std::vector<std::vector<torch::Tensor>> runs;
  for (const auto& [name, p] : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& run) {
      return run[0].device() == g.device() &&
             run[0].scalar_type() == g.scalar_type();
    });
    if (it == runs.end()) {
      runs.push_back({g});
    } else {
      it->push_back(g);
    }
  }
  return runs;
}

}  // namespace

double ScheduledLearningRate(const TrainConfig& train, int64_t step) {
  const double lr = train.lr;
  if (train.warmup_steps > 0 && step < train.warmup_steps) {
    return lr * static_cast<double>(step) /
           static_cast<double>(train.warmup_steps);
  }
  const int64_t decay_steps = train.max_steps - train.warmup_steps;
  if (decay_steps <= 0) return lr;
  const double t = std::min(
      1.0, static_cast<double>(step - train.warmup_steps) / decay_steps);
  const double end = lr * train.min_lr_ratio;
  if (train.decay == LrDecay::kCos) {
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * t));
    return lr * ((1.0 - train.min_lr_ratio) * cosine + train.min_lr_ratio);
  }
  return (lr - end) * (1.0 - t) + end;
}

bool UsesWeightDecay(const std::string& name) {
  if (absl::StrContains(name, "r_w_bias") ||
      absl::StrContains(name, "r_r_bias") ||
      absl::StrContains(name, "r_s_bias")) {
    return true;
  }
  return !(absl::StrContains(name, "LayerNorm") ||
           absl::StrContains(name, "layer_norm") ||
           absl::StrContains(name, "bias"));
}

int LayerIndexOf(const std::string& name) {
  static const std::regex kLayer(R"((^|\.)layer\.(\d+)\.)");
  std::smatch match;
  if (std::regex_search(name, match, kLayer)) return std::stoi(match[2]);
  return -1;
}

AdamW::AdamW(NamedTensors params, const TrainConfig& train)
    : params_(std::move(params)),
      beta1_(train.adam_beta1),
      beta2_(train.adam_beta2),
      eps_(train.adam_epsilon) {
  int n_layer = 0;
  for (const auto& [name, p] : params_)
    n_layer = std::max(n_layer, LayerIndexOf(name) + 1);
  for (const auto& [name, p] : params_) {
    TORCH_CHECK(p.is_floating_point(), "AdamW: parameter ", name,
                " is not floating point");
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(
        torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    const int layer = LayerIndexOf(name);
    lr_scale_.push_back(
        layer >= 0 ? std::pow(train.layer_decay, n_layer - 1 - layer) : 1.0);
    weight_decay_.push_back(UsesWeightDecay(name) ? train.weight_decay : 0.0);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i].second;
    auto same = [&](const Group& g) {
      return g.lr_scale == lr_scale_[i] && g.weight_decay == weight_decay_[i] &&
             g.device == p.device() && g.dtype == p.scalar_type();
    };
    auto it = std::find_if(groups_.begin(), groups_.end(), same);
    if (it == groups_.end()) {
      Group g;
      g.lr_scale = lr_scale_[i];
      g.weight_decay = weight_decay_[i];
      g.device = p.device();
      g.dtype = p.scalar_type();
      groups_.push_back(std::move(g));
      it = std::prev(groups_.end());
    }
    it->members.push_back(i);
  }
}

std::vector<size_t> AdamW::WithGrad(const Group& group) const {
  std::vector<size_t> index;
  for (size_t i : group.members) {
    if (params_[i].second.grad().defined()) index.push_back(i);
  }
  return index;
}

bool AdamW::Fused(const Group& group, const std::vector<size_t>& index) const {
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernel walks each tensor as a flat array and refuses (throws
  // for) tensors that differ in dtype, sizes or strides, and empty ones:
  // such a group takes the multi-tensor ops instead.
  if (!group.device.is_cuda()) return false;
  for (size_t i : index) {
    const torch::Tensor& p = params_[i].second;
    const torch::Tensor g = p.grad();
    if (p.numel() == 0 || !p.is_contiguous() ||
        g.scalar_type() != group.dtype || g.strides() != p.strides() ||
        exp_avg_[i].strides() != p.strides() ||
        exp_avg_sq_[i].strides() != p.strides()) {
      return false;
    }
  }
  return true;
#else
  (void)group;
  (void)index;
  return false;
#endif
}

std::vector<std::vector<size_t>> AdamW::WithGradByGroup() const {
  std::vector<std::vector<size_t>> index;
  for (const Group& group : groups_) index.push_back(WithGrad(group));
  return index;
}

bool AdamW::DecidesOnDevice() const {
  return DecidesOnDevice(WithGradByGroup());
}

bool AdamW::DecidesOnDevice(
    const std::vector<std::vector<size_t>>& index) const {
  bool any = false;
  for (size_t k = 0; k < groups_.size(); ++k) {
    if (index[k].empty()) continue;
    if (!Fused(groups_[k], index[k])) return false;
    any = true;
  }
  return any;
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  for (Group& group : groups_) {
    const std::vector<size_t> index = WithGrad(group);
    if (!index.empty()) StepGroup(group, index, lr * group.lr_scale);
  }
}

void AdamW::Step(double lr, const torch::Tensor& skip) {
  TORCH_CHECK(skip.numel() == 1, "AdamW::Step: skip must hold one number, got ",
              skip.sizes());
  torch::NoGradGuard no_grad;
  const std::vector<std::vector<size_t>> index = WithGradByGroup();
  if (!DecidesOnDevice(index)) {
    unsettled_.push_back(false);
    if (skip.item<double>() == 0) Step(lr);
    return;
  }
  TORCH_CHECK(std::none_of(unsettled_.begin(), unsettled_.end(),
                           [](bool device) { return !device; }),
              "AdamW::Step: a host-decided step is still unsettled");
  ++steps_;
  unsettled_.push_back(true);
  for (size_t k = 0; k < groups_.size(); ++k) {
    if (index[k].empty()) continue;
    Group& group = groups_[k];
    // The kernel reads found_inf as one fp32 number on its device.
    const torch::Tensor found_inf =
        skip.detach().reshape({}).to(group.device, torch::kFloat);
    StepGroup(group, index[k], lr * group.lr_scale, &found_inf);
  }
}

void AdamW::Settle(bool skipped) {
  TORCH_CHECK(!unsettled_.empty(), "AdamW::Settle without an unsettled Step");
  const bool on_device = unsettled_.front();
  unsettled_.pop_front();
  if (on_device && skipped) --steps_;
}

void AdamW::StepGroup(Group& group, const std::vector<size_t>& index,
                      double step_lr, const torch::Tensor* found_inf) {
  std::vector<torch::Tensor> p, g, m, v;
  for (size_t i : index) {
    p.push_back(params_[i].second);
    g.push_back(params_[i].second.grad());
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
  }
  const double wd = group.weight_decay;
#if TORCH_VERSION_MAJOR >= 2
  if (Fused(group, index)) {
    if (found_inf == nullptr) {
      if (!group.step_count.defined()) {
        group.step_count = torch::zeros(
            {}, torch::TensorOptions(torch::kFloat).device(group.device));
      }
      // A fill kernel, not a host-to-device copy (which would sync).
      group.step_count.fill_(static_cast<double>(steps_));
    } else {
      if (!group.step_count.defined()) {
        // The count before this step: every earlier device decision is
        // settled when the count is new (first step, or after LoadState).
        group.step_count = torch::full(
            {}, static_cast<double>(steps_ - 1),
            torch::TensorOptions(torch::kFloat).device(group.device));
      }
      // Advances by 1 - found_inf; a skipped step leaves the moments and
      // weights as they are (the kernel returns early on found_inf).
      group.step_count.add_(1).sub_(*found_inf);
    }
    const std::vector<torch::Tensor> steps(p.size(), group.step_count);
    std::optional<torch::Tensor> inf;
    if (found_inf != nullptr) inf = *found_inf;
    at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, steps, step_lr,
                      beta1_, beta2_, wd, eps_, /*amsgrad=*/false,
                      /*maximize=*/false, /*grad_scale=*/std::nullopt,
                      /*found_inf=*/inf);
    return;
  }
#else
  TORCH_CHECK(found_inf == nullptr,
              "AdamW: a device-side skip needs LibTorch >= 2");
#endif
  const double bias1 = 1.0 - std::pow(beta1_, steps_);
  const double bias2 = 1.0 - std::pow(beta2_, steps_);
  torch::_foreach_mul_(m, beta1_);
  torch::_foreach_add_(m, g, 1.0 - beta1_);
  torch::_foreach_mul_(v, beta2_);
  torch::_foreach_addcmul_(v, g, g, 1.0 - beta2_);
  if (wd != 0.0) torch::_foreach_mul_(p, 1.0 - step_lr * wd);
  std::vector<torch::Tensor> denom = torch::_foreach_sqrt(v);
  torch::_foreach_div_(denom, std::sqrt(bias2));
  torch::_foreach_add_(denom, eps_);
  torch::_foreach_addcdiv_(p, m, denom, -step_lr / bias1);
}

void AdamW::ZeroGrad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad().detach_();
  }
  // One multi-tensor zero per device and dtype instead of one per tensor.
  for (const std::vector<torch::Tensor>& run : GradsByDeviceAndDtype(params_)) {
    torch::_foreach_zero_(run);
  }
}

NamedTensors AdamW::StateTensors() const {
  NamedTensors out;
  out.emplace_back("step", torch::tensor(steps_, torch::kInt64));
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("exp_avg." + params_[i].first, exp_avg_[i]);
    out.emplace_back("exp_avg_sq." + params_[i].first, exp_avg_sq_[i]);
  }
  return out;
}

absl::Status AdamW::LoadState(const SafetensorsFile& file) {
  std::vector<std::string> problems;
  std::vector<torch::Tensor> avg(params_.size()), sq(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    for (auto [prefix, out] :
         {std::pair<const char*, torch::Tensor*>{"exp_avg.", &avg[i]},
          {"exp_avg_sq.", &sq[i]}}) {
      auto t = file.Load(prefix + name);
      if (!t.ok()) {
        problems.push_back(absl::StrCat("missing ", prefix, name));
      } else if (t->sizes() != params_[i].second.sizes()) {
        problems.push_back(absl::StrCat(
            prefix, name, " has shape ", c10::str(t->sizes()),
            ", parameter has ", c10::str(params_[i].second.sizes())));
      } else {
        *out = *t;
      }
    }
  }
  auto step = file.Load("step");
  if (!step.ok() || step->numel() != 1) {
    problems.push_back("missing step");
  } else if (step->scalar_type() != torch::kInt64) {
    // item<int64_t>() would convert an F64 (or any) step silently.
    problems.push_back(absl::StrCat("step must be an I64 scalar, found ",
                                    c10::toString(step->scalar_type())));
  } else if (step->item<int64_t>() < 0) {
    problems.push_back(
        absl::StrCat("step ", step->item<int64_t>(), " is negative"));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": optimizer state does not match the model: ",
        absl::StrJoin(problems, "; ")));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i].copy_(avg[i]);
    exp_avg_sq_[i].copy_(sq[i]);
  }
  steps_ = step->item<int64_t>();
  unsettled_.clear();
  for (Group& group : groups_) group.step_count = torch::Tensor();
  return absl::OkStatus();
}

torch::Tensor GradNormTensor(const NamedTensors& params) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> squares;
  for (const std::vector<torch::Tensor>& run : GradsByDeviceAndDtype(params)) {
    const torch::ScalarType dtype = run[0].scalar_type();
    std::vector<torch::Tensor> norms;
    if (dtype == torch::kFloat || dtype == torch::kDouble) {
      norms = torch::_foreach_norm(run);
    } else {
#if TORCH_VERSION_MAJOR >= 2
      norms = torch::_foreach_norm(run, 2, torch::kFloat);
#else
      // No dtype argument before LibTorch 2: an fp16/bf16 norm would be
      // rounded to 8-11 bits, so each is taken in fp32.
      for (const torch::Tensor& g : run) {
        norms.push_back(g.to(torch::kFloat).norm());
      }
#endif
    }
    torch::Tensor sum = torch::stack(norms).to(torch::kFloat64).square().sum();
    if (!squares.empty()) sum = sum.to(squares[0].device());
    squares.push_back(sum);
  }
  if (squares.empty()) return torch::zeros({}, torch::kFloat64);
  return torch::stack(squares).sum().sqrt();
}

double GlobalGradNorm(const NamedTensors& params) {
  return GradNormTensor(params).item<double>();
}

bool AllFinite(const NamedTensors& tensors) {
  torch::NoGradGuard no_grad;
  // Combined on the device (a no-op .to for tensors on the first one's
  // device), so only the final item() waits for it.
  torch::Tensor all;
  for (const auto& [name, t] : tensors) {
    if (!t.defined() || !t.is_floating_point()) continue;
    torch::Tensor finite = torch::isfinite(t).all();
    all = all.defined() ? all.logical_and(finite.to(all.device())) : finite;
  }
  return !all.defined() || all.item<bool>();
}

torch::Tensor ClipFactor(const torch::Tensor& scaled_norm,
                         const torch::Tensor& scale, double max_norm) {
  if (max_norm <= 0) return scale;
  const torch::Tensor clip =
      torch::isfinite(scaled_norm).logical_and(scaled_norm > max_norm);
  // Divisions written as such (not a reciprocal times), as the host form.
  const torch::Tensor ratio =
      torch::full_like(scaled_norm, max_norm).div_(scaled_norm + 1e-6);
  return torch::where(clip, scale * ratio, scale);
}

void MultiplyGrads(const NamedTensors& params, const torch::Tensor& factor) {
  torch::NoGradGuard no_grad;
  for (const std::vector<torch::Tensor>& run : GradsByDeviceAndDtype(params)) {
    // The factor in the gradients' dtype, as a double scalar would be cast.
    const torch::Tensor f = factor.to(run[0].device(), run[0].scalar_type());
#if TORCH_VERSION_MAJOR >= 2
    torch::_foreach_mul_(run, f);
#else
    for (const torch::Tensor& g : run) g.mul_(f);
#endif
  }
}

torch::Tensor ScaleAndClipGrads(const NamedTensors& params, double max_norm,
                                const torch::Tensor& scale) {
  torch::NoGradGuard no_grad;
  const torch::Tensor raw = GradNormTensor(params);
  const torch::Tensor s = scale.to(raw.device(), torch::kFloat64);
  const torch::Tensor norm = raw * s;
  MultiplyGrads(params, ClipFactor(norm, s, max_norm));
  return norm;
}

double ClipGradNorm(const NamedTensors& params, double max_norm, double scale) {
  return ScaleAndClipGrads(params, max_norm,
                           torch::full({}, scale, torch::kFloat64))
      .item<double>();
}

LossScaler::LossScaler(LossScalerOptions options)
    : options_(options), scale_(options.init_scale) {
  TORCH_CHECK(options_.init_scale > 0 && options_.growth_factor > 1 &&
                  options_.backoff_factor > 0 && options_.backoff_factor < 1 &&
                  options_.growth_interval > 0 && options_.min_scale > 0,
              "LossScaler: bad options (init ", options_.init_scale,
              ", growth ", options_.growth_factor, ", backoff ",
              options_.backoff_factor, ", interval ", options_.growth_interval,
              ", min ", options_.min_scale, ")");
}

torch::Tensor LossScaler::Scale(const torch::Tensor& loss) const {
  return loss * scale_;
}

bool LossScaler::CountsAsBadStep(bool loss_finite) const {
  return !loss_finite || scale_ <= options_.min_scale;
}

bool LossScaler::Update(bool finite) {
  if (!finite) {
    scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
    growth_tracker_ = 0;
    return false;
  }
  if (++growth_tracker_ >= options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    // As GradScaler: never grow into inf (fp32 holds any sane scale).
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  return true;
}

absl::Status LossScaler::Restore(double scale, int64_t growth_tracker) {
  if (!std::isfinite(scale) || scale <= 0 || growth_tracker < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scale ", scale, " with growth tracker ",
                     growth_tracker, " is not a valid loss-scaler state"));
  }
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  return absl::OkStatus();
}

}  // namespace xlnet
