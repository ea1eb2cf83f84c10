// AdamW with XLNet's weight-decay rule and optional layer-wise learning-rate
// decay, plus the learning-rate schedule. Pure functions of (config, step) and
// of tensors the optimizer owns, so a resumed run continues bit-exactly.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/config.h"
#include "common/safetensors.h"

namespace xlnet {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Learning rate for optimizer step `step` (0-based; the official schedule):
// linear warmup lr*step/warmup_steps, then "linear" (poly, power 1) or "cos"
// decay from lr to lr*min_lr_ratio at max_steps.
double ScheduledLearningRate(const TrainConfig& train, int64_t step);

// XLNet's rule: no decay on LayerNorm parameters and biases, but decay on
// r_w_bias, r_r_bias and r_s_bias (official AdamWeightDecayOptimizer).
bool UsesWeightDecay(const std::string& param_name);

// The layer index in a parameter name ("transformer.layer.3.ff..." -> 3), or
// -1 for parameters outside the layers (embeddings, heads).
int LayerIndexOf(const std::string& param_name);

// Decoupled-weight-decay Adam (bias-corrected, as torch.optim.AdamW):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr_p * (wd_p * p + m_hat / (sqrt(v_hat) + eps))
// with lr_p = lr * layer_decay^(n_layer-1-l) for layer l (1 elsewhere) and
// wd_p = weight_decay where UsesWeightDecay(name), else 0.
//
// Note: the official code applies layer-wise decay to the *gradients*, which
// Adam's normalisation nearly cancels; we scale the learning rate, the effect
// the option is meant to have.
class AdamW {
 public:
  AdamW(NamedTensors params, const TrainConfig& train);

  // One update with peak-scaled rate `lr` (from ScheduledLearningRate).
  // Parameters whose .grad() is undefined are skipped.
  void Step(double lr);
  void ZeroGrad();
  // Optimizer steps taken so far.
  int64_t steps() const { return steps_; }
  const NamedTensors& params() const { return params_; }
  // Per-parameter learning-rate scale and weight decay (for tests and logs).
  double LrScale(size_t index) const { return lr_scale_[index]; }
  double WeightDecay(size_t index) const { return weight_decay_[index]; }

  // State as tensors "exp_avg.<name>", "exp_avg_sq.<name>", "step".
  NamedTensors StateTensors() const;
  // Restores state written by StateTensors; every parameter must be present
  // with its shape (all problems reported in one error).
  absl::Status LoadState(const SafetensorsFile& file);

 private:
  NamedTensors params_;
  std::vector<torch::Tensor> exp_avg_;
  std::vector<torch::Tensor> exp_avg_sq_;
  std::vector<double> lr_scale_;
  std::vector<double> weight_decay_;
  double beta1_, beta2_, eps_;
  int64_t steps_ = 0;
};

// sqrt(sum of squared gradients) over all parameters with a gradient (each
// tensor's norm in its own dtype, summed in fp64).
double GlobalGradNorm(const NamedTensors& params);

// Multiplies gradients by `scale` and then clips their global norm to
// `max_norm` (0 = no clip), in one pass over the gradients. Returns the norm
// after scaling, before clipping.
double ClipGradNorm(const NamedTensors& params, double max_norm,
                    double scale = 1.0);

}  // namespace xlnet
