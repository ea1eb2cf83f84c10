#include "model/activation_checkpoint.h"

#include <mutex>

#include "model/precision.h"

namespace xlnet {
namespace {

// The default generators' states that dropout draws from: the CPU one, and
// the CUDA one of `device` when the work runs there.
struct RngSnapshot {
  torch::Tensor cpu;
  torch::Tensor cuda;
  torch::Device cuda_device = torch::kCPU;
};

torch::Tensor GeneratorState(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetGeneratorState(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

RngSnapshot TakeRngSnapshot(torch::Device device) {
  RngSnapshot s;
  s.cpu = GeneratorState(at::globalContext().defaultGenerator(torch::kCPU));
  if (device.is_cuda()) {
    // Runtime check instead of #ifdef: a CPU-only LibTorch never has CUDA
    // tensors, and defaultGenerator(cuda) exists in every build's API.
    s.cuda_device = device;
    s.cuda = GeneratorState(at::globalContext().defaultGenerator(device));
  }
  return s;
}

void RestoreRngSnapshot(const RngSnapshot& s) {
  SetGeneratorState(at::globalContext().defaultGenerator(torch::kCPU), s.cpu);
  if (s.cuda.defined()) {
    SetGeneratorState(at::globalContext().defaultGenerator(s.cuda_device),
                      s.cuda);
  }
}

// What backward needs to recompute: held by the autograd node as a capsule.
struct CheckpointState : torch::CustomClassHolder {
  CheckpointFn fn;
  std::vector<torch::Tensor> params;
  RngSnapshot rng;
  AutocastState autocast;
};

// outputs = fn(inputs), keeping only the inputs. `params` are the tensors fn
// reads besides its inputs that need gradients: they are inputs of the node
// so their gradients come back through the ordinary engine (hooks, gradient
// accumulation and the data-parallel reducer see nothing special).
struct CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx,
      c10::intrusive_ptr<CheckpointState> state, at::TensorList inputs,
      at::TensorList params) {
    state->rng = TakeRngSnapshot(inputs[0].device());
    state->autocast = CurrentAutocastState();
    std::vector<torch::Tensor> in(inputs.begin(), inputs.end());
    // Function::apply runs forward with grad mode off: nothing is recorded.
    std::vector<torch::Tensor> out = state->fn(in);
    ctx->save_for_backward(in);
    state->params.assign(params.begin(), params.end());
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return out;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        ctx->saved_data["state"].toCapsule());
    const std::vector<torch::Tensor>& params = state->params;
    std::vector<torch::Tensor> inputs;
    for (const auto& t : ctx->get_saved_variables()) {
      inputs.push_back(t.detach().requires_grad_(t.requires_grad()));
    }
    std::vector<torch::Tensor> outputs;
    {
      // Recompute under the forward's RNG and autocast state, then put the
      // current RNG back, so the run continues as without checkpointing.
      const RngSnapshot now = TakeRngSnapshot(state->rng.cuda_device);
      RestoreRngSnapshot(state->rng);
      {
        AutocastStateGuard autocast(state->autocast);
        torch::AutoGradMode grad_mode(true);
        outputs = state->fn(inputs);
      }
      RestoreRngSnapshot(now);
    }
    TORCH_CHECK(outputs.size() == grad_outputs.size(),
                "checkpoint: recomputation gave ", outputs.size(),
                " outputs, forward ", grad_outputs.size());
    std::vector<torch::Tensor> roots, root_grads, wrt;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (grad_outputs[i].defined() && outputs[i].requires_grad()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    std::vector<size_t> slot;  // index into the returned list (after state)
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].requires_grad()) {
        wrt.push_back(inputs[i]);
        slot.push_back(i);
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].requires_grad()) {
        wrt.push_back(params[i]);
        slot.push_back(inputs.size() + i);
      }
    }
    // One gradient per forward argument: the state, each input, each param.
    torch::autograd::variable_list result(1 + inputs.size() + params.size());
    if (roots.empty() || wrt.empty()) return result;
    torch::autograd::variable_list grads =
        torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i) result[1 + slot[i]] = grads[i];
    return result;
  }
};

}  // namespace

std::vector<torch::Tensor> Checkpointed(
    CheckpointFn fn, const std::vector<torch::Tensor>& inputs,
    const std::vector<torch::Tensor>& params) {
  TORCH_CHECK(!inputs.empty() && inputs[0].defined(),
              "checkpoint: needs at least one defined input");
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = std::move(fn);
  return CheckpointFunction::apply(state, at::TensorList(inputs),
                                   at::TensorList(params));
}

}  // namespace xlnet
