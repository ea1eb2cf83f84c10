// What our .cu files need beyond standard C++: CUDA's headers and two
// macros, the block's dynamic shared memory and a kernel launch. Compiled
// as C++ with XLNET_CUDA_EMULATION (the tests), the same names come from
// the CPU emulation instead (emulation.h).
#pragma once

#ifdef XLNET_CUDA_EMULATION
#include "model/cuda/emulation.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// The block's dynamic shared memory as bytes.
#define XLNET_DYNAMIC_SHARED(name) \
  extern __shared__ __align__(16) unsigned char name[]
// kernel<<<grid, block, bytes, stream>>>(args...)
#define XLNET_LAUNCH(kernel, grid, block, bytes, stream, ...) \
  (kernel)<<<(grid), (block), (bytes), (stream)>>>(__VA_ARGS__)
#endif
