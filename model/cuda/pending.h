// Whether this build has the kernel changes made on a machine without a GPU
// and not yet run on one (-DXLNET_CUDA_PENDING=ON, off by default; see the
// top-level CMakeLists.txt). Kernels branch on it with `if constexpr` or a
// constant condition, so that without it their code is exactly what ran
// before (checked with cuobjdump -sass).
#pragma once

namespace xlnet {

#ifdef XLNET_CUDA_PENDING
inline constexpr bool kPendingKernels = true;
#else
inline constexpr bool kPendingKernels = false;
#endif

}  // namespace xlnet
