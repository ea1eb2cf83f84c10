// What TcAttentionFunction (model/cuda/cuda_attention.cc) does around the
// tensor-core kernels, on CPU tensors with the emulated kernels: included
// by the two files that compile the kernels for the CPU, after the kernel
// source, so that `tc_attention` names that file's variant.
#pragma once

#include <string>
#include <vector>

#include "tests/model/cuda/tc_emulated.h"

namespace xlnet::testing {
namespace {

namespace tc = ::xlnet::tc_attention;

tc::Layout LayoutOf(const torch::Tensor& t) {  // [B, H, T, Dh]
  return tc::Layout{t.stride(0), t.stride(1), t.stride(2)};
}

// Samples [g n, (g + 1) n) of [B, H, T, C] as [H, n T, C].
torch::Tensor GroupRows(const torch::Tensor& x, int64_t g, int64_t n) {
  const auto s = x.narrow(0, g * n, n).transpose(0, 1);     // [H, n, T, C]
  return s.reshape({s.size(0), n * s.size(2), s.size(3)});  // [H, n T, C]
}

// a . b with fp32 accumulation, rounded to a's dtype, as cuBLAS gives it
// (and LibTorch 1.13 has no fp16 product on the CPU).
torch::Tensor Product(const torch::Tensor& a, const torch::Tensor& b) {
  return torch::matmul(a.to(torch::kFloat), b.to(torch::kFloat))
      .to(a.scalar_type());
}

// bd = qr . k_r^T stored [G, H, n Lq, R] (PositionProducts).
torch::Tensor PositionProducts(const torch::Tensor& qr,
                               const torch::Tensor& k_r) {
  const int64_t groups = k_r.size(0), n = qr.size(0) / groups;
  if (n == 1) return Product(qr, k_r.transpose(2, 3)).contiguous();
  std::vector<torch::Tensor> parts;
  for (int64_t g = 0; g < groups; ++g) {
    parts.push_back(Product(GroupRows(qr, g, n), k_r[g].transpose(1, 2)));
  }
  return torch::stack(parts).contiguous();  // [G, H, n Lq, R]
}

std::string Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return "";
  return std::string(what) + ": error " + std::to_string(static_cast<int>(e)) +
         " " + cuda_emulation::LastLaunchMessage();
}

// A bool mask [rows | 1, 1, Lq, K] (undefined: none) as bit words.
torch::Tensor PackMask(const torch::Tensor& m, int64_t rows, int64_t lq,
                       int64_t klen, bool pad_blocked, std::string* error) {
  auto words = torch::zeros({rows, lq, tc::BitWords(klen)}, torch::kInt);
  const bool each_row = m.defined() && m.size(0) == rows && rows > 1;
  const auto* src = m.defined()
                        ? reinterpret_cast<const uint8_t*>(m.data_ptr<bool>())
                        : nullptr;
  *error += Check(
      tc::PackBits(
          src, each_row ? m.stride(0) : 0, m.defined() ? m.stride(2) : 0,
          m.defined() ? m.stride(3) : 0, rows, lq, klen, pad_blocked,
          reinterpret_cast<uint32_t*>(words.data_ptr<int32_t>()), nullptr),
      "PackBits");
  return words;
}

TcOutputs RunKernels(const TcInputs& in) {
  cuda_emulation::SetCopyTiming(in.copies_at_issue
                                    ? cuda_emulation::CopyTiming::kAtIssue
                                    : cuda_emulation::CopyTiming::kAtWait);
  const cuda_emulation::Schedule schedules[] = {
      cuda_emulation::Schedule::kLockstep,
      cuda_emulation::Schedule::kWarpsInOrder,
      cuda_emulation::Schedule::kWarpsReversed};
  cuda_emulation::SetSchedule(schedules[in.schedule % 3]);
  TcOutputs r;
  std::string& error = r.error;
  // cuBLAS's bd, unless the kernels compute the products themselves.
  const auto bd =
      in.kernel_products ? torch::Tensor() : PositionProducts(in.qr, in.k_r);
  tc::Params p;
  p.dtype = in.qw.scalar_type() == torch::kHalf ? tc::DType::kHalf
                                                : tc::DType::kBFloat16;
  p.b = in.qw.size(0);
  p.h = in.qw.size(1);
  p.lq = in.qw.size(2);
  p.dh = in.qw.size(3);
  p.klen = in.k.size(2);
  p.rlen = in.k_r.size(2);
  p.bd_group = p.b / in.k_r.size(0);
  p.qlen = in.qlen;
  p.qw = in.qw.data_ptr();
  p.k = in.k.data_ptr();
  p.v = in.v.data_ptr();
  p.qw_layout = LayoutOf(in.qw);
  p.k_layout = LayoutOf(in.k);
  p.v_layout = LayoutOf(in.v);
  if (in.kernel_products) {
    p.qr = in.qr.data_ptr();
    p.qr_layout = LayoutOf(in.qr);
    p.k_r = in.k_r.data_ptr();
    p.k_r_layout = LayoutOf(in.k_r);
  } else {
    p.bd = bd.data_ptr();
  }
  p.blocked_b = in.mask.defined() ? in.mask.size(0) : 1;
  const auto blocked = PackMask(in.mask, p.blocked_b, p.lq, p.klen,
                                /*pad_blocked=*/true, &error);
  p.blocked = reinterpret_cast<const uint32_t*>(blocked.data_ptr<int32_t>());
  torch::Tensor other;
  if (in.seg.defined()) {
    p.seg = in.seg.data_ptr();
    other =
        PackMask(in.seg_diff, p.b, p.lq, p.klen, /*pad_blocked=*/false, &error);
    p.other = reinterpret_cast<const uint32_t*>(other.data_ptr<int32_t>());
  }
  if (in.query_pos.defined()) p.pos = in.query_pos.data_ptr<int64_t>();
  p.scale = in.scale;
  p.dropout = in.dropout;
  p.seed = in.seed;
  p.offset = in.offset;
  const auto options = in.qw.options();
  r.out = torch::empty({p.b, p.h, p.lq, p.dh}, options);
  auto lse = torch::empty({p.b, p.h, p.lq}, options.dtype(torch::kFloat));
  torch::Tensor keep;
  if (p.dropout > 0) {
    keep = torch::empty({p.b, p.h, p.lq, tc::BitWords(p.klen)},
                        options.dtype(torch::kInt));
    p.keep = reinterpret_cast<uint32_t*>(keep.data_ptr<int32_t>());
  }
  p.out = r.out.data_ptr();
  p.out_layout = LayoutOf(r.out);
  p.lse = lse.data_ptr<float>();
  error += Check(tc::Forward(p, nullptr), "Forward");
  if (!error.empty()) return r;

  p.dout = in.dout.data_ptr();
  p.dout_layout = LayoutOf(in.dout);
  auto dd = torch::empty({p.b, p.h, p.lq}, options.dtype(torch::kFloat));
  error += Check(tc::RowDots(p, dd.data_ptr<float>(), nullptr), "RowDots");
  r.dqw = torch::empty_like(in.qw);
  r.dk = torch::empty_like(in.k);
  r.dv = torch::empty_like(in.v);
  // Filled with NaN: the kernels must write every element.
  // [G, H, n Lq, R], as bd is stored.
  auto dbd = torch::full({in.k_r.size(0), p.h, p.bd_group * p.lq, p.rlen},
                         std::nanf(""), options);
  r.dqw.fill_(std::nanf(""));
  r.dk.fill_(std::nanf(""));
  r.dv.fill_(std::nanf(""));
  if (in.seg.defined()) {
    r.dseg = torch::full_like(in.seg, std::nanf(""));
    p.dseg = r.dseg.data_ptr();
  }
  p.lse_in = lse.data_ptr<float>();
  p.dd = dd.data_ptr<float>();
  p.dqw = r.dqw.data_ptr();
  p.dk = r.dk.data_ptr();
  p.dv = r.dv.data_ptr();
  p.dqw_layout = LayoutOf(r.dqw);
  p.dk_layout = LayoutOf(r.dk);
  p.dv_layout = LayoutOf(r.dv);
  p.dbd = dbd.data_ptr();
  error += Check(tc::Backward(p, nullptr), "Backward");
  if (!error.empty()) return r;
  // bd = qr . k_r^T: dqr = dbd . k_r, dk_r = dbd^T . qr, per k_r group.
  const int64_t groups = in.k_r.size(0), n = p.bd_group;
  if (n == 1) {
    r.dqr = Product(dbd, in.k_r);                 // [B, H, Lq, Dh]
    r.dkr = Product(dbd.transpose(2, 3), in.qr);  // [B, H, R, Dh]
  } else {
    std::vector<torch::Tensor> dqr, dkr;
    for (int64_t g = 0; g < groups; ++g) {
      const auto d = dbd[g];  // [H, n Lq, R]
      dqr.push_back(Product(d, in.k_r[g])
                        .view({p.h, n, p.lq, p.dh})
                        .transpose(0, 1));  // [n, H, Lq, Dh]
      dkr.push_back(Product(d.transpose(1, 2), GroupRows(in.qr, g, n)));
    }
    r.dqr = torch::cat(dqr).contiguous();  // [B, H, Lq, Dh]
    r.dkr = torch::stack(dkr);             // [G, H, R, Dh]
  }
  return r;
}

}  // namespace
}  // namespace xlnet::testing
