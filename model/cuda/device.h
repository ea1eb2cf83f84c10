// What our .cu files need beyond standard C++: CUDA's headers and three
// macros: the block's dynamic shared memory, a kernel launch and a vector
// access (checked for alignment on the CPU). Compiled
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

// XLNET_VECTOR_AT(V, p): p as a V* for one access of sizeof(V) bytes (two
// 16-bit elements as 32 bits, uint2, uint4, float4, ...) of global or shared
// memory. The GPU faults on one whose address is not a multiple of its size;
// compiled for the CPU the macro checks that (EmulatedCheckAligned), so the
// tests see a misaligned access. Write it where the access happens: making
// the pointer is what is checked. On the GPU it is the plain cast (a macro,
// not a function, so that the kernels' code is exactly the cast's).
#ifdef XLNET_CUDA_EMULATION
namespace xlnet {
template <typename V, typename P>
V* CheckedVectorAt(P* p) {
  cuda_emulation::EmulatedCheckAligned(p, static_cast<int>(sizeof(V)));
  return reinterpret_cast<V*>(p);
}
}  // namespace xlnet
#define XLNET_VECTOR_AT(V, p) (::xlnet::CheckedVectorAt<V>(p))
#else
#define XLNET_VECTOR_AT(V, p) (reinterpret_cast<V*>(p))
#endif
