// Whether this build has the tensor-core kernel changes
// (tc_attention_kernels.cu) made on a machine without a GPU and not yet run
// on one (-DXLNET_CUDA_PENDING=ON, off by default; see the top-level
// CMakeLists.txt). Kernels branch on it with `if constexpr` or a constant
// condition, so that without it their code is exactly what ran before
// (checked with cuobjdump -sass). The tests run both variants on the CPU
// (tests/model/cuda/tc_emulated.h).
#pragma once

namespace xlnet::tc_attention {

#ifdef XLNET_CUDA_PENDING
inline constexpr bool kPendingKernels = true;
#else
inline constexpr bool kPendingKernels = false;
#endif

}  // namespace xlnet::tc_attention
