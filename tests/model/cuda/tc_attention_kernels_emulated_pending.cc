// The tensor-core kernels with XLNET_CUDA_PENDING compiled for the CPU
// (tc_emulated.h), in their own namespace (tc_attention_pending), as the
// default variant is in tc_attention_emulated.
#include <torch/torch.h>

#include "tests/model/cuda/tc_emulated.h"

#define XLNET_CUDA_EMULATION 1
#define XLNET_CUDA_PENDING 1
#define tc_attention tc_attention_pending
#include "model/cuda/tc_attention_kernels.cu"
#include "tests/model/cuda/tc_emulated_run.h"

namespace xlnet::testing {

TcOutputs RunEmulatedTcKernelsPending(const TcInputs& in) {
  return RunKernels(in);
}

}  // namespace xlnet::testing
