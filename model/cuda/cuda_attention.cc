#include "model/cuda/cuda_attention.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <vector>

#include "model/cuda/attention_kernels.h"
#include "model/relative_attention.h"
#ifdef XLNET_CUDA_TC_ATTENTION
#include "model/cuda/tc_attention_kernels.h"
#endif

namespace xlnet {
namespace {

namespace ca = cuda_attention;

struct CudaState : torch::CustomClassHolder {
  AttentionBias bias;
  torch::Tensor pos;  // [B, Lq] int64 contiguous, or undefined
  int64_t qlen = 0;
  double scale = 1;
  AttentionDropout dropout;
  bool has_seg = false;
  int64_t band = 0;
};

ca::DType KernelDType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return ca::DType::kFloat;
    case torch::kHalf:
      return ca::DType::kHalf;
    case torch::kBFloat16:
      return ca::DType::kBFloat16;
    default:
      TORCH_CHECK(false, "cuda attention: fp32, fp16 or bf16 inputs, got ", t);
  }
  return ca::DType::kFloat;
}

// Rows of k_r one key tile needs: the key tile plus the largest spread
// (max - min) of query positions within one block of kQueryTile rows.
int64_t BandRows(const torch::Tensor& pos, int64_t b, int64_t lq) {
  const int64_t tile = ca::kQueryTile;
  if (lq == 0) return ca::kKeyTile;
  if (!pos.defined()) return ca::kKeyTile + std::min(tile, lq) - 1;
  const int64_t tiles = (lq + tile - 1) / tile;
  auto p = pos;  // [B, Lq]
  if (tiles * tile > lq) {
    // Pad with the last position: it adds no spread.
    p = torch::cat({p, p.narrow(1, lq - 1, 1).expand({b, tiles * tile - lq})},
                   1);  // [B, tiles * tile]
  }
  auto blocks = p.view({b, tiles, tile});  // [B, tiles, tile]
  const int64_t spread =
      (std::get<0>(blocks.max(2)) - std::get<0>(blocks.min(2)))
          .max()
          .item<int64_t>();
  return ca::kKeyTile + spread;
}

const uint8_t* BoolData(const torch::Tensor& t) {
  return reinterpret_cast<const uint8_t*>(t.data_ptr<bool>());
}

// The kernels' view of the inputs (contiguous, one dtype) and state.
ca::Params MakeParams(const std::vector<torch::Tensor>& in,
                      const CudaState& st) {
  const auto& qw = in[0];
  ca::Params p;
  p.dtype = KernelDType(qw.scalar_type());
  p.b = qw.size(0);
  p.h = qw.size(1);
  p.lq = qw.size(2);
  p.dh = qw.size(3);
  p.klen = in[2].size(2);
  p.rlen = in[4].size(2);
  p.kr_batch = in[4].size(0);
  p.qlen = st.qlen;
  p.qw = in[0].data_ptr();
  p.qr = in[1].data_ptr();
  p.k = in[2].data_ptr();
  p.v = in[3].data_ptr();
  p.kr = in[4].data_ptr();
  if (st.has_seg) {
    p.seg = in[5].data_ptr();
    const auto& d = st.bias.seg_diff;  // [B, 1, Lq, K]
    p.diff = BoolData(d);
    p.diff_sb = d.stride(0);
    p.diff_si = d.stride(2);
    p.diff_sj = d.stride(3);
  }
  if (st.bias.mask.defined()) {
    const auto& m = st.bias.mask;  // [B|1, 1, Lq, K]
    p.mask = BoolData(m);
    p.mask_sb = m.size(0) == 1 ? 0 : m.stride(0);
    p.mask_si = m.stride(2);
    p.mask_sj = m.stride(3);
  }
  if (st.pos.defined()) p.pos = st.pos.data_ptr<int64_t>();
  p.scale = static_cast<float>(st.scale);
  p.dropout = st.dropout.p;
  p.seed = st.dropout.seed;
  p.offset = st.dropout.offset;
  p.band = st.band;
  return p;
}

void CheckSharedMemory(const ca::Params& p, torch::Device device) {
  int limit = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.index()));
  const size_t need = ca::SharedBytes(p, /*backward=*/true);
  TORCH_CHECK(need <= static_cast<size_t>(limit), "cuda attention: ", need,
              " bytes of shared memory per block (head size ", p.dh,
              ", k_r band of ", p.band, " rows) exceed the device's ", limit,
              "; query positions within a block of ", ca::kQueryTile,
              " rows are too far apart (sort target_mapping by position) or "
              "use attention 'unfused'");
}

// What a forward keeps for its backward: the state, the contiguous inputs
// (qw, qr, k, v, k_r[, seg]), the output, the per-row log-sum-exp and,
// from the tensor-core kernels with dropout, the keep bits (else
// undefined).
struct Saved {
  c10::intrusive_ptr<CudaState> st;
  std::vector<torch::Tensor> in;
  torch::Tensor out, lse, keep;
};

void SaveForBackward(torch::autograd::AutogradContext* ctx,
                     const c10::intrusive_ptr<CudaState>& st,
                     std::vector<torch::Tensor> in, const torch::Tensor& out,
                     const torch::Tensor& lse,
                     const torch::Tensor& keep = torch::Tensor()) {
  in.push_back(out);
  in.push_back(lse);
  in.push_back(keep);
  ctx->save_for_backward(in);
  ctx->saved_data["state"] = c10::IValue::make_capsule(st);
}

Saved LoadSaved(torch::autograd::AutogradContext* ctx) {
  Saved saved;
  saved.st = c10::static_intrusive_pointer_cast<CudaState>(
      ctx->saved_data["state"].toCapsule());
  std::vector<torch::Tensor> all = ctx->get_saved_variables();
  const size_t n_in = saved.st->has_seg ? 6 : 5;
  saved.in.assign(all.begin(), all.begin() + n_in);
  saved.out = all[n_in];
  saved.lse = all[n_in + 1];
  saved.keep = all[n_in + 2];
  return saved;
}

struct CudaAttentionFunction
    : public torch::autograd::Function<CudaAttentionFunction> {
  // inputs: qw, qr, k, v, k_r[, seg]
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<CudaState> st,
      at::TensorList inputs) {
    std::vector<torch::Tensor> in;
    for (const auto& t : inputs) in.push_back(t.contiguous());
    const c10::cuda::CUDAGuard guard(in[0].device());
    ca::Params p = MakeParams(in, *st);
    CheckSharedMemory(p, in[0].device());
    auto out = torch::empty_like(in[0]);  // [B, H, Lq, Dh]
    auto lse =
        torch::empty({p.b, p.h, p.lq},
                     in[0].options().dtype(torch::kFloat));  // [B, H, Lq]
    p.out = out.data_ptr();
    p.lse = lse.data_ptr<float>();
    C10_CUDA_CHECK(ca::Forward(
        p, c10::cuda::getCurrentCUDAStream(in[0].device().index()).stream()));
    SaveForBackward(ctx, st, std::move(in), out, lse);
    return {out};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const Saved saved = LoadSaved(ctx);
    const auto& st = saved.st;
    const auto& in = saved.in;
    const auto& out = saved.out;
    const auto& lse = saved.lse;
    const size_t n_in = in.size();
    torch::autograd::variable_list result(1 + n_in);
    if (!grad_outputs[0].defined()) return result;
    const c10::cuda::CUDAGuard guard(in[0].device());
    ca::Params p = MakeParams(in, *st);
    const auto dout = grad_outputs[0].to(out.scalar_type()).contiguous();
    const auto f32 = in[0].options().dtype(torch::kFloat);
    auto dqw = torch::empty(in[0].sizes(), f32);
    auto dqr = torch::empty(in[1].sizes(), f32);
    auto dk = torch::zeros(in[2].sizes(), f32);  // atomics: start at zero
    auto dv = torch::zeros(in[3].sizes(), f32);
    auto dkr = torch::zeros(in[4].sizes(), f32);
    torch::Tensor dseg;
    if (st->has_seg) dseg = torch::empty(in[5].sizes(), f32);
    p.out = out.data_ptr();
    p.lse = lse.data_ptr<float>();
    p.dout = dout.data_ptr();
    p.dqw = dqw.data_ptr<float>();
    p.dqr = dqr.data_ptr<float>();
    p.dk = dk.data_ptr<float>();
    p.dv = dv.data_ptr<float>();
    p.dkr = dkr.data_ptr<float>();
    if (st->has_seg) p.dseg = dseg.data_ptr<float>();
    C10_CUDA_CHECK(ca::Backward(
        p, c10::cuda::getCurrentCUDAStream(in[0].device().index()).stream()));
    const torch::Tensor* grads[] = {&dqw, &dqr, &dk, &dv, &dkr, &dseg};
    for (size_t i = 0; i < n_in; ++i) {
      result[1 + i] = grads[i]->to(in[i].scalar_type());
    }
    return result;
  }
};

#ifdef XLNET_CUDA_TC_ATTENTION
namespace tc = tc_attention;

// Whether the tensor-core kernels take this call: fp16/bf16, a head size
// they have.
bool UsesTensorCores(const std::vector<torch::Tensor>& inputs) {
  const auto dtype = inputs[0].scalar_type();
  return (dtype == torch::kHalf || dtype == torch::kBFloat16) &&
         tc::SupportsHeadSize(inputs[0].size(3));
}

// The element strides of a [B, H, T, Dh] tensor.
tc::Layout LayoutOf(const torch::Tensor& t) {
  return tc::Layout{t.stride(0), t.stride(1), t.stride(2)};
}

// Whether the kernels can read t in place: rows of Dh contiguous elements,
// 16-byte aligned (e.g. the head-split view [B, T, H, Dh] -> [B, H, T, Dh]
// of a projection).
bool InPlace(const torch::Tensor& t) {
  return t.stride(3) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 &&
         t.stride(2) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// t itself where InPlace, else a contiguous copy.
torch::Tensor ForKernels(const torch::Tensor& t) {
  return InPlace(t) ? t : t.contiguous();
}

// An uninitialised [B, H, T, Dh] tensor stored as [B, T, H, Dh], the
// layout in which the output projection (and the projections' backward)
// read it as [B, T, H * Dh] without a transposing copy.
torch::Tensor EmptyHeadsLast(int64_t b, int64_t h, int64_t t, int64_t dh,
                             const torch::TensorOptions& options) {
  return torch::empty({b, t, h, dh}, options).transpose(1, 2);
}

// Samples [g n, (g + 1) n) of a [B, H, T, C] tensor as [H, n T, C]: a view
// where each sample's rows follow the previous sample's (the heads-last
// layouts), else a copy.
torch::Tensor GroupRows(const torch::Tensor& x, int64_t g, int64_t n) {
  const auto s = x.narrow(0, g * n, n).transpose(0, 1);     // [H, n, T, C]
  return s.reshape({s.size(0), n * s.size(2), s.size(3)});  // [H, n T, C]
}

// bd = qr . k_r^T for k_r [G, H, R, Dh] (G groups of n = B / G samples),
// stored [G, H, n Lq, R] (Params::bd_group): per sample one batched
// product; otherwise one per group, over its heads, reading qr in place.
torch::Tensor PositionProducts(const torch::Tensor& qr,
                               const torch::Tensor& k_r) {
  const int64_t groups = k_r.size(0), n = qr.size(0) / groups;
  if (n == 1) {
    // [B, H, Lq, Dh] x [B, H, Dh, R] -> [B, H, Lq, R]
    return torch::matmul(qr, k_r.transpose(2, 3)).contiguous();
  }
  auto bd = torch::empty({groups, qr.size(1), n * qr.size(2), k_r.size(2)},
                         qr.options());
  for (int64_t g = 0; g < groups; ++g) {
    auto out = bd[g];  // [H, n Lq, R]
    torch::bmm_out(out, GroupRows(qr, g, n), k_r[g].transpose(1, 2));
  }
  return bd;
}

// The kernels' view of inputs qw, qr, k, v, k_r[, seg] (qw, k, v as
// ForKernels gives them, seg contiguous): the position products
// q_r . k_r^T from cuBLAS, masks and segment relations as bit words;
// outputs and gradients are the caller's.
struct TcCall {
  tc::Params p;
  torch::Tensor bd, blocked, other;  // kept alive while the kernels run
};

// A bool mask [rows | 1, 1, Lq, K] (undefined: none set) as bit words
// [rows, Lq, kw] (keys at or past K set when pad_blocked).
torch::Tensor PackMask(const torch::Tensor& m, int64_t rows, int64_t lq,
                       int64_t klen, bool pad_blocked,
                       const torch::Device& device, cudaStream_t stream) {
  auto words = torch::empty({rows, lq, tc::BitWords(klen)},
                            torch::TensorOptions(device).dtype(torch::kInt));
  const bool each_row = m.defined() && m.size(0) == rows && rows > 1;
  C10_CUDA_CHECK(tc::PackBits(
      m.defined() ? BoolData(m) : nullptr, each_row ? m.stride(0) : 0,
      m.defined() ? m.stride(2) : 0, m.defined() ? m.stride(3) : 0, rows, lq,
      klen, pad_blocked, reinterpret_cast<uint32_t*>(words.data_ptr<int32_t>()),
      stream));
  return words;
}

// Whether packed words have the shape a call needs.
bool Fits(const torch::Tensor& words, int64_t rows, int64_t lq, int64_t klen) {
  return words.defined() && words.dim() == 3 && words.size(0) == rows &&
         words.size(1) == lq && words.size(2) == tc::BitWords(klen);
}

// Whether the kernels compute the position products themselves (from qr
// and k_r in place) instead of reading cuBLAS's bd: the content stream
// (query i at position i) in builds whose kernels do that.
bool KernelProducts(const std::vector<torch::Tensor>& in, const CudaState& st) {
  const auto& qr = in[1];
  const auto& k_r = in[4];
  return tc::KernelsComputePositionProducts() && !st.pos.defined() &&
         InPlace(qr) && InPlace(k_r);
}

// Without bd where KernelProducts.
TcCall MakeTcCall(const std::vector<torch::Tensor>& in, const CudaState& st,
                  cudaStream_t stream) {
  TcCall call;
  const auto& qw = in[0];
  tc::Params& p = call.p;
  if (KernelProducts(in, st)) {
    p.qr = in[1].data_ptr();
    p.qr_layout = LayoutOf(in[1]);
    p.k_r = in[4].data_ptr();
    p.k_r_layout = LayoutOf(in[4]);
  } else {
    call.bd = PositionProducts(in[1], in[4]);
  }
  p.dtype = qw.scalar_type() == torch::kHalf ? tc::DType::kHalf
                                             : tc::DType::kBFloat16;
  p.b = qw.size(0);
  p.h = qw.size(1);
  p.lq = qw.size(2);
  p.dh = qw.size(3);
  p.klen = in[2].size(2);
  p.rlen = in[4].size(2);
  p.bd_group = p.b / in[4].size(0);
  p.qlen = st.qlen;
  p.qw = qw.data_ptr();
  p.k = in[2].data_ptr();
  p.v = in[3].data_ptr();
  p.qw_layout = LayoutOf(qw);
  p.k_layout = LayoutOf(in[2]);
  p.v_layout = LayoutOf(in[3]);
  p.bd = call.bd.defined() ? call.bd.data_ptr() : nullptr;
  auto word_ptr = [](const torch::Tensor& t) {
    return reinterpret_cast<uint32_t*>(t.data_ptr<int32_t>());
  };
  // Blocked keys (masked, or past K), [B|1, Lq, kw]: packed once per
  // forward (PackTensorCoreBits) or here.
  const auto& m = st.bias.mask;  // [B|1, 1, Lq, K] or undefined
  p.blocked_b = m.defined() ? m.size(0) : 1;
  call.blocked = Fits(st.bias.blocked_bits, p.blocked_b, p.lq, p.klen)
                     ? st.bias.blocked_bits
                     : PackMask(m, p.blocked_b, p.lq, p.klen,
                                /*pad_blocked=*/true, qw.device(), stream);
  p.blocked = word_ptr(call.blocked);
  if (st.has_seg) {
    // Keys of the other segment, [B, Lq, kw].
    p.seg = in[5].data_ptr();
    call.other = Fits(st.bias.other_bits, p.b, p.lq, p.klen)
                     ? st.bias.other_bits
                     : PackMask(st.bias.seg_diff, p.b, p.lq, p.klen,
                                /*pad_blocked=*/false, qw.device(), stream);
    p.other = word_ptr(call.other);
  }
  if (st.pos.defined()) p.pos = st.pos.data_ptr<int64_t>();
  p.scale = static_cast<float>(st.scale);
  p.dropout = st.dropout.p;
  p.seed = st.dropout.seed;
  p.offset = st.dropout.offset;
  return call;
}

cudaStream_t StreamOf(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// The autograd node around the tensor-core kernels. Backward recomputes the
// position products (PositionProducts) rather than keeping them from the
// forward, and turns their gradient into those of q_r and k_r with two
// more products a k_r group. In builds whose kernels compute the content
// stream's products themselves (KernelProducts), neither direction calls
// PositionProducts.
struct TcAttentionFunction
    : public torch::autograd::Function<TcAttentionFunction> {
  // inputs: qw, qr, k, v, k_r[, seg]. qw, k and v are read in place where
  // their rows allow (the projections' head-split views), and the output
  // is written as [B, Lq, H, Dh], so that neither direction copies them.
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<CudaState> st,
      at::TensorList inputs) {
    std::vector<torch::Tensor> in(inputs.begin(), inputs.end());
    for (int i : {0, 2, 3}) in[i] = ForKernels(in[i]);
    if (in.size() > 5) in[5] = in[5].contiguous();
    const c10::cuda::CUDAGuard guard(in[0].device());
    const auto stream = StreamOf(in[0]);
    TcCall call = MakeTcCall(in, *st, stream);
    const auto& qw = in[0];
    auto out = EmptyHeadsLast(qw.size(0), qw.size(1), qw.size(2), qw.size(3),
                              qw.options());  // [B, H, Lq, Dh]
    call.p.out_layout = LayoutOf(out);
    auto lse = torch::empty({call.p.b, call.p.h, call.p.lq},
                            in[0].options().dtype(torch::kFloat));
    call.p.out = out.data_ptr();
    call.p.lse = lse.data_ptr<float>();
    torch::Tensor keep;  // [B, H, Lq, kw] dropout bits for the backward
    if (call.p.dropout > 0) {
      keep = torch::empty(
          {call.p.b, call.p.h, call.p.lq, tc::BitWords(call.p.klen)},
          in[0].options().dtype(torch::kInt));
      call.p.keep = reinterpret_cast<uint32_t*>(keep.data_ptr<int32_t>());
    }
    C10_CUDA_CHECK(tc::Forward(call.p, stream));
    // The backward reads the same bits.
    st->bias.blocked_bits = call.blocked;
    st->bias.other_bits = call.other;
    SaveForBackward(ctx, st, std::move(in), out, lse, keep);
    return {out};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const Saved saved = LoadSaved(ctx);
    const auto& st = saved.st;
    const auto& in = saved.in;
    const auto& out = saved.out;
    const auto& lse = saved.lse;
    const size_t n_in = in.size();
    torch::autograd::variable_list result(1 + n_in);
    if (!grad_outputs[0].defined()) return result;
    const c10::cuda::CUDAGuard guard(in[0].device());
    const auto stream = StreamOf(in[0]);
    TcCall call = MakeTcCall(in, *st, stream);
    tc::Params& p = call.p;
    const auto dout = ForKernels(grad_outputs[0].to(out.scalar_type()));
    p.dout = dout.data_ptr();
    p.dout_layout = LayoutOf(dout);
    p.out = out.data_ptr();
    p.out_layout = LayoutOf(out);
    // [B, H, Lq]: rowsum(dout * out), the softmax backward's correction.
    auto dd =
        torch::empty({p.b, p.h, p.lq}, out.options().dtype(torch::kFloat));
    C10_CUDA_CHECK(tc::RowDots(p, dd.data_ptr<float>(), stream));
    // dk and dv as [B, K, H, Dh], the layout the key/value projection's
    // backward reads without a copy; dqw as qr's gradient (below) is:
    // [B, Lq, H, Dh] too unless per-sample products make that contiguous.
    auto dqw = p.bd_group > 1
                   ? EmptyHeadsLast(p.b, p.h, p.lq, p.dh, in[0].options())
                   : torch::empty(in[0].sizes(), in[0].options());
    const auto& k = in[2];
    auto dk =
        EmptyHeadsLast(k.size(0), k.size(1), k.size(2), k.size(3), k.options());
    auto dv =
        EmptyHeadsLast(k.size(0), k.size(1), k.size(2), k.size(3), k.options());
    // [G, H, n Lq, R], as bd is stored; the kernels write all of it.
    auto dbd = torch::empty({in[4].size(0), p.h, p.bd_group * p.lq, p.rlen},
                            in[1].options());
    torch::Tensor dseg;
    if (st->has_seg) dseg = torch::empty_like(in[5]);
    p.lse_in = lse.data_ptr<float>();
    if (saved.keep.defined()) {
      p.keep = reinterpret_cast<uint32_t*>(saved.keep.data_ptr<int32_t>());
    }
    p.dd = dd.data_ptr<float>();
    p.dqw = dqw.data_ptr();
    p.dk = dk.data_ptr();
    p.dv = dv.data_ptr();
    p.dqw_layout = LayoutOf(dqw);
    p.dk_layout = LayoutOf(dk);
    p.dv_layout = LayoutOf(dv);
    p.dbd = dbd.data_ptr();
    if (st->has_seg) p.dseg = dseg.data_ptr();
    C10_CUDA_CHECK(tc::Backward(p, stream));
    // bd = qr . k_r^T: dqr = dbd . k_r, dk_r = dbd^T . qr, per k_r group
    // (its samples' rows summed by the product).
    const auto& qr = in[1];
    const auto& k_r = in[4];
    const int64_t groups = k_r.size(0), n = p.bd_group;
    torch::Tensor dqr, dkr;
    if (n == 1) {
      dqr = torch::matmul(dbd, k_r);                 // [B, H, Lq, Dh]
      dkr = torch::matmul(dbd.transpose(2, 3), qr);  // [B, H, R, Dh]
    } else {
      dqr = EmptyHeadsLast(p.b, p.h, p.lq, p.dh, qr.options());
      dkr = torch::empty(k_r.sizes(), k_r.options());  // [G, H, R, Dh]
      for (int64_t g = 0; g < groups; ++g) {
        const auto d = dbd[g];  // [H, n Lq, R]
        auto dq_rows = dqr.narrow(0, g * n, n)
                           .transpose(0, 1)
                           .view({p.h, n * p.lq, p.dh});  // [H, n Lq, Dh]
        torch::bmm_out(dq_rows, d, k_r[g]);
        auto dkr_g = dkr[g];  // [H, R, Dh]
        torch::bmm_out(dkr_g, d.transpose(1, 2), GroupRows(qr, g, n));
      }
    }
    result[1] = dqw;
    result[2] = dqr;
    result[3] = dk;
    result[4] = dv;
    result[5] = dkr;
    if (st->has_seg) result[6] = dseg;
    return result;
  }
};
#endif

}  // namespace

#ifdef XLNET_CUDA_TC_ATTENTION
void PackTensorCoreBits(AttentionBias* bias) {
  const torch::Tensor& ref =
      bias->mask.defined() ? bias->mask : bias->seg_diff;  // [B|1, 1, Lq, K]
  if (!ref.defined() || !ref.is_cuda() || ref.dim() != 4) return;
  const int64_t lq = ref.size(2), klen = ref.size(3);
  const c10::cuda::CUDAGuard guard(ref.device());
  const auto stream = StreamOf(ref);
  const auto& m = bias->mask;
  bias->blocked_bits = PackMask(m, m.defined() ? m.size(0) : 1, lq, klen,
                                /*pad_blocked=*/true, ref.device(), stream);
  const auto& d = bias->seg_diff;
  if (d.defined()) {
    bias->other_bits = PackMask(d, d.size(0), lq, klen,
                                /*pad_blocked=*/false, ref.device(), stream);
  }
}
#endif

torch::Tensor CudaFusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout) {
  TORCH_CHECK(qw.size(3) <= ca::kMaxHeadSize, "cuda attention: head size ",
              qw.size(3), " > ", ca::kMaxHeadSize);
  for (const auto* t : {&bias.mask, &bias.seg_diff, &bias.query_pos}) {
    TORCH_CHECK(!t->defined() || t->device() == qw.device(),
                "cuda attention: masks and positions must be on ", qw.device(),
                ", got ", t->device());
  }
  auto st = c10::make_intrusive<CudaState>();
  st->bias = bias;
  if (bias.query_pos.defined()) {
    st->pos = bias.query_pos.to(torch::kLong).contiguous();
  }
  st->qlen = qlen;
  st->scale = scale;
  st->dropout = dropout;
  st->has_seg = seg.defined();
  std::vector<torch::Tensor> inputs = {qw, qr, k, v, k_r};
  if (seg.defined()) inputs.push_back(seg);
#ifdef XLNET_CUDA_TC_ATTENTION
  if (UsesTensorCores(inputs)) {
    return TcAttentionFunction::apply(st, at::TensorList(inputs))[0];
  }
#endif
  inputs[4] = PositionsPerSample(k_r, qw.size(0));  // [B|1, H, R, Dh]
  st->band = BandRows(st->pos, qw.size(0), qw.size(2));
  return CudaAttentionFunction::apply(st, at::TensorList(inputs))[0];
}

}  // namespace xlnet
