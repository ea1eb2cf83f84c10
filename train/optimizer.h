// AdamW with XLNet's weight-decay rule and optional layer-wise learning-rate
// decay, plus the learning-rate schedule. Pure functions of (config, step) and
// of tensors the optimizer owns, so a resumed run continues bit-exactly.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/safetensors.h"
#include "config/config.h"

namespace xlnet {

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

// Whether every element of every floating-point tensor is finite. One host
// sync for all of them (each tensor reduced on its device first).
bool AllFinite(const NamedTensors& tensors);

// Multiplies gradients by `scale` and then clips their global norm to
// `max_norm` (0 = no clip), in one pass over the gradients. Returns the norm
// after scaling, before clipping.
double ClipGradNorm(const NamedTensors& params, double max_norm,
                    double scale = 1.0);

// Dynamic loss scaling for fp16 training (the rule of PyTorch's GradScaler).
// fp16 gradients underflow below ~6e-8; the loss is multiplied by scale()
// before backward so they stay representable, and the gradients are divided
// by it again (Trainer: in ClipGradNorm's multiplier, i.e. before clipping).
// After every optimizer step, Update(finite) with whether all gradients
// (and the loss) were finite:
//   - non-finite: the step is skipped, the scale is multiplied by
//     backoff_factor (never below min_scale) and the growth count restarts;
//   - finite: after growth_interval finite steps in a row the scale is
//     multiplied by growth_factor.
// Which skipped steps are "bad" (train.max_bad_steps) is the Trainer's rule;
// see CountsAsBadStep.
struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // Below 1 a scale no longer protects small gradients, so overflows that
  // persist there are failures, not calibration.
  double min_scale = 1.0;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  // Finite steps since the last growth or backoff.
  int64_t growth_tracker() const { return growth_tracker_; }
  // loss * scale().
  torch::Tensor Scale(const torch::Tensor& loss) const;
  // Whether a non-finite step now is still calibration: the scale can back
  // off further. A skipped step counts as bad (towards train.max_bad_steps)
  // when the loss itself is non-finite (scaling cannot help the forward) or
  // when the scale is already at min_scale.
  bool CountsAsBadStep(bool loss_finite) const;
  // Records one step's outcome (see above); returns `finite`, i.e. whether
  // the optimizer step should be taken.
  bool Update(bool finite);
  // State for checkpoints; Restore rejects a non-positive or non-finite scale.
  absl::Status Restore(double scale, int64_t growth_tracker);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace xlnet
