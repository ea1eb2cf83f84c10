// Activation checkpointing: run a function without keeping its
// intermediate activations and recompute them in backward, under the RNG
// and autocast state of the forward, so dropout masks (and so losses,
// gradients and new mems) are bit-identical to a run without it. XLNetModel
// wraps each layer in one such node (train.activation_checkpointing).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace xlnet {

using CheckpointFn = std::function<std::vector<torch::Tensor>(
    const std::vector<torch::Tensor>&)>;

// outputs = fn(inputs), keeping only `inputs`; backward recomputes fn.
// `params` are the tensors fn reads besides its inputs that need gradients:
// they are inputs of the node, so their gradients come back through the
// ordinary engine (hooks, gradient accumulation and the data-parallel
// reducer see nothing special).
std::vector<torch::Tensor> Checkpointed(
    CheckpointFn fn, const std::vector<torch::Tensor>& inputs,
    const std::vector<torch::Tensor>& params);

}  // namespace xlnet
