#include "train/optimizer.h"

#include <cmath>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xlnet {

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
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1.0 - std::pow(beta1_, steps_);
  const double bias2 = 1.0 - std::pow(beta2_, steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    const double step_lr = lr * lr_scale_[i];
    exp_avg_[i].mul_(beta1_).add_(g, 1.0 - beta1_);
    exp_avg_sq_[i].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
    if (weight_decay_[i] != 0.0) p.mul_(1.0 - step_lr * weight_decay_[i]);
    const torch::Tensor denom =
        (exp_avg_sq_[i].sqrt() / std::sqrt(bias2)).add_(eps_);
    p.addcdiv_(exp_avg_[i], denom, -step_lr / bias1);
  }
}

void AdamW::ZeroGrad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
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
  return absl::OkStatus();
}

double GlobalGradNorm(const NamedTensors& params) {
  torch::NoGradGuard no_grad;
  // One host sync for all parameters (matters on CUDA).
  std::vector<torch::Tensor> norms;
  for (const auto& [name, p] : params) {
    if (p.grad().defined())
      norms.push_back(p.grad().to(torch::kFloat64).norm());
  }
  if (norms.empty()) return 0.0;
  return torch::stack(norms).pow(2).sum().sqrt().item<double>();
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

double ClipGradNorm(const NamedTensors& params, double max_norm, double scale) {
  const double norm = GlobalGradNorm(params) * scale;
  double factor = scale;
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    factor *= max_norm / (norm + 1e-6);
  }
  if (factor != 1.0) {
    torch::NoGradGuard no_grad;
    for (const auto& [name, p] : params) {
      if (p.grad().defined()) p.grad().mul_(factor);
    }
  }
  return norm;
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
