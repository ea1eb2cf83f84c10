// What an emulated kernel run gave (the harnesses of tests/model/cuda/):
// its tensors, the output first, then the gradients; `error` is empty
// unless a launch failed.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace xlnet::testing {

struct EmulatedOutputs {
  std::vector<torch::Tensor> tensors;
  std::string error;
};

}  // namespace xlnet::testing
