// Counter-based dropout: keep decisions that are a pure function of
// (seed, offset, position), drawn from Philox (model/philox.h), so that a
// replay (activation checkpointing, a resumed run) or another device draws
// the same masks without storing them. The fused attention op (tiled and
// cuda), the fused element-wise kernels and, with attention 'tiled', every
// other dropout of the backbone use it.
//
// LibTorch's CPU dropout draws its Bernoulli mask serially from a mutexed
// generator, which on a few cores costs about as much as a matmul of the
// layer; these masks are built in parallel (AVX2 where the CPU has it).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "model/attention_types.h"

namespace xlnet {

// One draw from the default CPU generator: the seed of a counter-based
// dropout (the fused attention op's, CounterDropout's, the fused
// element-wise ops'). Activation checkpointing replays it (it restores the
// generator) and the trainer saves the generator with every checkpoint.
uint64_t DrawCpuSeed();

// keep[c] = 1 iff key j0 + c of attention row (bh, i) survives dropout `d`
// (bh = batch * H + head), for c < m: AttentionKeepBits8's decisions
// (philox.h) with `threshold` = AttentionKeepThreshold(d.p). Vectorised
// (AVX2) where the CPU has it; KeepRowPortable is the scalar version, and
// both give the same bytes.
void KeepRow(const AttentionDropout& d, uint32_t threshold, int64_t bh,
             int64_t i, int64_t j0, int64_t m, uint8_t* keep);
void KeepRowPortable(const AttentionDropout& d, uint32_t threshold, int64_t bh,
                     int64_t i, int64_t j0, int64_t m, uint8_t* keep);

// Dropout of any tensor from the same generator: x * keep / (1 - p), keep
// drawn for x's flat index from one seed per call (DrawCpuSeed), the mask
// built in parallel. Identity when !training or p == 0. CPU tensors.
torch::Tensor CounterDropout(const torch::Tensor& x, double p, bool training);

// torch::dropout, or CounterDropout when `counter`.
torch::Tensor BackboneDropout(const torch::Tensor& x, double p, bool training,
                              bool counter);

// The keep decisions of AttentionDropout as a [B, H, Lq, K] bool tensor
// (true = kept), from the scalar reference in philox.h: what tests compare
// the op's and the kernels' masks against; the ops never materialise it.
torch::Tensor AttentionDropoutKeepMask(int64_t b, int64_t h, int64_t lq,
                                       int64_t k, const AttentionDropout& d);

}  // namespace xlnet
