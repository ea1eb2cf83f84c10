// The tensor-core kernels' default source compiled for the CPU
// (tc_emulated.h), in their own namespace (tc_attention_emulated): a
// CUDA build links the real kernels, in xlnet::tc_attention, into the same
// test. LibTorch comes first: the emulation's keyword macros are for the
// kernel source only.
#include <torch/torch.h>

#include "tests/model/cuda/tc_emulated.h"

#define XLNET_CUDA_EMULATION 1
#define tc_attention tc_attention_emulated
#include "model/cuda/tc_attention_kernels.cu"
#include "tests/model/cuda/tc_emulated_run.h"

namespace xlnet::testing {

TcOutputs RunEmulatedTcKernels(const TcInputs& in) { return RunKernels(in); }

}  // namespace xlnet::testing
