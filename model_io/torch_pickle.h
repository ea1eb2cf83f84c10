// A reader for state dicts written by Python's torch.save (zip format,
// pickle protocol 2, tensors in persistent storages), e.g. HF's
// pytorch_model.bin. LibTorch's own torch::pickle_load cannot read them before
// 2.6: it turns the OrderedDict of a state_dict into None (pytorch#100741).
//
// Only the pickle subset torch.save uses for a (possibly nested-free) dict of
// tensors is understood: dicts, OrderedDicts (their _metadata is dropped),
// tuples, lists, numbers, strings, `torch._utils._rebuild_tensor_v2`,
// `_rebuild_tensor`, `_rebuild_parameter` and `torch.*Storage` persistent ids.
// Anything else is an error naming the opcode or global. Never executes code.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"

namespace xlnet {

// The str -> Tensor entries of the top-level dict in `path`, in file order.
// Tensors are CPU copies (views of one storage share it).
absl::StatusOr<NamedTensors> ReadTorchSaveStateDict(const std::string& path);

}  // namespace xlnet
