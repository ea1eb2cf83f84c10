// The step's low-precision weight copies in one multi-tensor cast.
//
// Under autocast every matrix product casts its fp32 weight to the compute
// dtype, one cast kernel per weight and use, and backward casts each
// gradient back, one kernel more: at the base preset some 250 small
// kernels each way a step. WeightCasts casts a chosen set of weights
// together instead (one multi-tensor copy forward, one copy and one add
// backward) and puts the copies in the modules' members for its lifetime,
// so that the products find them already in the compute dtype and
// autocast casts nothing. Backward hands the gradients over once every
// copy's gradient has arrived, so the model makes one WeightCasts a layer:
// gradients still reach the reducer's buckets layer by layer.
//
// With -DXLNET_CUDA_PENDING=ON, on CUDA, one kernel of our own does each
// direction instead (fused_elementwise_kernels.h, CastTensors: a weight read
// once for both streams' copies; backward casts and adds the streams in one
// pass), as LibTorch >= 2.1's multi-tensor copy takes a kernel a tensor
// when the dtype changes.
//
// The values and gradients are the ones autocast's separate casts give. A
// weight that both XLNet streams read gets a copy per stream (UseStream
// switches the members between them), so that each stream's gradient is
// cast to fp32 before the two are summed, as with a cast per use; one
// shared copy would sum them in the compute dtype.
//
//   WeightCasts casts({&attn->k}, {&attn->q}, /*streams=*/2);
//   casts.UseStream(0);  // content stream: attn->q is its copy
//   ...
//   casts.UseStream(1);  // query stream: attn->q is the other copy
//
// Only weights that autocast would cast anyway belong in the sets (those
// read by matrix products, or cast explicitly to the activations' dtype):
// a weight an fp32 op reads (LayerNorm, a bias added in fp32) would change
// that op's numbers.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace xlnet {

class WeightCasts {
 public:
  // Replaces each slot by its cast to the autocast dtype of its device
  // when autocast is on for that device, every slot holds an fp32 tensor
  // on one device, and this LibTorch has the multi-tensor copy (>= 2.1);
  // otherwise does nothing, and autocast casts as usual. `once`: slots read
  // once a forward; `per_stream`: slots read once by each of `streams`
  // streams, holding stream 0's copies at first. The slots must outlive
  // this object.
  WeightCasts(std::vector<torch::Tensor*> once,
              std::vector<torch::Tensor*> per_stream, int streams);
  // Puts the original tensors back.
  ~WeightCasts();
  WeightCasts(const WeightCasts&) = delete;
  WeightCasts& operator=(const WeightCasts&) = delete;

  // Whether the slots hold cast copies.
  bool active() const { return !saved_.empty(); }
  // Puts stream `stream`'s copies in the per-stream slots (nothing when
  // inactive).
  void UseStream(int stream);

 private:
  std::vector<torch::Tensor*> once_, per_stream_;
  int streams_ = 1;
  std::vector<torch::Tensor> saved_;   // the originals while active: once_,
                                       // then per_stream_
  std::vector<torch::Tensor> copies_;  // per_stream_'s, stream-major
};

}  // namespace xlnet
