// AdamW with XLNet's weight-decay rule and optional layer-wise learning-rate
// decay, plus the learning-rate schedule. Pure functions of (config, step) and
// of tensors the optimizer owns, so a resumed run continues bit-exactly.
#pragma once

#include <torch/torch.h>

#include <deque>
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
//
// Step updates a group of parameters at a time: parameters with the same
// lr scale, weight decay, device and dtype. A group on CUDA with LibTorch
// >= 2 (contiguous parameters, gradients of their dtype) takes one
// at::_fused_adamw_ call (a few kernels for all of its tensors, rounding
// slightly differently from the formula below); every other group runs the
// formula above as multi-tensor torch::_foreach_* ops, bit-identical to
// the same ops applied tensor by tensor.
class AdamW {
 public:
  AdamW(NamedTensors params, const TrainConfig& train);

  // One update with peak-scaled rate `lr` (from ScheduledLearningRate).
  // Parameters whose .grad() is undefined are skipped.
  void Step(double lr);
  // The same update unless `skip` (one number on the parameters' device,
  // nonzero: a non-finite step) says to leave everything as it is. When
  // every group takes the fused kernel the decision stays on the device
  // (the kernel's found_inf; the step counts advance by 1 - skip there), so
  // the host need not wait for the step; otherwise skip is read here. Each
  // call must be followed, in order, by one Settle once the caller knows
  // the outcome.
  void Step(double lr, const torch::Tensor& skip);
  // Whether the oldest unsettled Step(lr, skip) was skipped: the host step
  // count catches up with a decision taken on the device.
  void Settle(bool skipped);
  // Whether Step(lr, skip) decides on the device (every group fused).
  bool DecidesOnDevice() const;
  void ZeroGrad();
  // Optimizer steps taken so far.
  int64_t steps() const { return steps_; }
  const NamedTensors& params() const { return params_; }
  // Per-parameter learning-rate scale and weight decay (for tests and logs).
  double LrScale(size_t index) const { return lr_scale_[index]; }
  double WeightDecay(size_t index) const { return weight_decay_[index]; }
  // How many groups Step updates with one multi-tensor call each.
  size_t num_groups() const { return groups_.size(); }

  // State as tensors "exp_avg.<name>", "exp_avg_sq.<name>", "step".
  NamedTensors StateTensors() const;
  // Restores state written by StateTensors; every parameter must be present
  // with its shape (all problems reported in one error).
  absl::Status LoadState(const SafetensorsFile& file);

 private:
  // Parameters updated together (see the class comment).
  struct Group {
    // Indices into params_, in order.
    std::vector<size_t> members;
    double lr_scale = 1;
    double weight_decay = 0;
    torch::Device device = torch::kCPU;
    torch::ScalarType dtype = torch::kFloat;
    // The fused kernel's step count (fp32 on the device, shared by the
    // group's tensors): set to steps_ by host-decided steps, advanced by
    // 1 - skip on the device by device-decided ones. Created at the first
    // fused step, cleared by LoadState.
    torch::Tensor step_count;
  };
  // Whether `group`'s parameters in `index` take at::_fused_adamw_.
  bool Fused(const Group& group, const std::vector<size_t>& index) const;
  // The indices of `group`'s parameters that have a gradient.
  std::vector<size_t> WithGrad(const Group& group) const;
  // WithGrad of every group, in groups_' order.
  std::vector<std::vector<size_t>> WithGradByGroup() const;
  // DecidesOnDevice for the groups' parameters `index` (WithGradByGroup).
  bool DecidesOnDevice(const std::vector<std::vector<size_t>>& index) const;
  // The multi-tensor update of `index`'s parameters (all with a gradient)
  // of group `group` at rate `step_lr`; with `found_inf` (fused groups
  // only) the kernel skips itself when it is nonzero.
  void StepGroup(Group& group, const std::vector<size_t>& index, double step_lr,
                 const torch::Tensor* found_inf = nullptr);

  NamedTensors params_;
  std::vector<torch::Tensor> exp_avg_;
  std::vector<torch::Tensor> exp_avg_sq_;
  std::vector<double> lr_scale_;
  std::vector<double> weight_decay_;
  std::vector<Group> groups_;
  double beta1_, beta2_, eps_;
  int64_t steps_ = 0;
  // Per unsettled Step(lr, skip), oldest first: whether it was decided on
  // the device (steps_ then counted it as applied until Settle).
  std::deque<bool> unsettled_;
};

// sqrt(sum of squared gradients) over all parameters with a gradient, as a
// 0-dim fp64 tensor on the first gradient's device (a CPU zero when no
// parameter has one), without a host sync. Per run of gradients on one
// device and dtype, torch::_foreach_norm gives each tensor's norm (fp32
// and fp64 gradients in their dtype; fp16/bf16 ones in fp32); the squares
// of those norms are summed in fp64 on the device: ~150 numbers, so the
// precision costs nothing, and a tensor norm above 1.8e19 (fp16 loss
// scaling can get there) would overflow when squared in fp32, while fp64
// keeps it finite as the per-tensor fp64 norms summed before did.
torch::Tensor GradNormTensor(const NamedTensors& params);
// GradNormTensor read on the host.
double GlobalGradNorm(const NamedTensors& params);

// The factor that ScaleAndClipGrads multiplies the gradients by: `scale`
// times, when max_norm > 0 and the scaled norm `scaled_norm` is finite and
// above max_norm, max_norm / (scaled_norm + 1e-6); 0-dim fp64 tensors on the
// device (no host read).
torch::Tensor ClipFactor(const torch::Tensor& scaled_norm,
                         const torch::Tensor& scale, double max_norm);

// Multiplies every gradient by `factor` (a 0-dim tensor on the gradients'
// device, cast to each gradient's dtype): torch::_foreach_mul_ per run of
// one device and dtype on LibTorch >= 2, tensor by tensor before (no host
// read either way).
void MultiplyGrads(const NamedTensors& params, const torch::Tensor& factor);

// Multiplies the gradients by `scale` (a 0-dim tensor on their device)
// and then clips their global norm to `max_norm` (0 = no clip), in one pass
// over the gradients, with no host read. Returns the norm after scaling,
// before clipping (a 0-dim fp64 tensor on the device).
torch::Tensor ScaleAndClipGrads(const NamedTensors& params, double max_norm,
                                const torch::Tensor& scale);
// The same with a host scale, returning the norm read on the host.
double ClipGradNorm(const NamedTensors& params, double max_norm,
                    double scale = 1.0);

// Whether every element of every floating-point tensor is finite. One host
// sync for all of them (each tensor reduced on its device first).
bool AllFinite(const NamedTensors& tensors);

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
