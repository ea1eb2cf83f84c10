// The tensor-core attention kernels' own source, run on the CPU through
// model/cuda/emulation.h (tc_emulated.h), against the fused op's CPU path
// in fp32: the output and every input's gradient, bf16 within 3% and fp16
// within 1% of each tensor's largest value (the bounds the GPU test
// CudaAttentionTest.TensorCoreKernelsMatchTheCpuPath holds the same
// kernels to), both streams, with and without dropout (the same Philox
// decisions), ragged query and key tiles, k_r in groups and per sample,
// fully masked rows (zeros). The kernels built with XLNET_CUDA_PENDING give
// the same bits as the default ones (computing the content stream's
// position products themselves: within the same bounds), and neither
// depends on the order of the warps between barriers or on when cp.async
// lands (at issue or at the wait), which a missing barrier would show;
// the same on problems drawn at random (sizes, streams, masks, layouts),
// every vector access checked for alignment.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model/attention.h"
#include "tests/model/attention_problems.h"
#include "tests/model/cuda/tc_emulated.h"
#include "tests/model/test_util.h"

namespace xlnet::testing {
namespace {

// The CPU path in fp32: the output, then the gradients of sum(out * w)
// w.r.t. qw, qr, k, v, k_r and seg.
std::vector<torch::Tensor> Reference(const AttentionProblem& pr) {
  std::vector<torch::Tensor> x;
  for (const auto& t : pr.x) {
    x.push_back(t.defined() ? t.clone().requires_grad_() : t);
  }
  auto out = FusedRelativeAttention(x[0], x[1], x[2], x[3], x[4], x[5], pr.bias,
                                    pr.qlen, 0.125, pr.dropout);
  std::vector<torch::Tensor> inputs(x.begin(), x.begin() + 5);
  if (x[5].defined()) inputs.push_back(x[5]);
  auto grads = torch::autograd::grad({(out * pr.w).sum()}, inputs);
  std::vector<torch::Tensor> r = {out.detach()};
  for (auto& g : grads) r.push_back(g);
  return r;
}

TcInputs KernelInputs(const AttentionProblem& pr, torch::ScalarType dtype) {
  auto low = [&](const torch::Tensor& t) {
    return t.defined() ? t.to(dtype).contiguous() : t;
  };
  TcInputs in;
  in.qw = low(pr.x[0]);
  in.qr = low(pr.x[1]);
  in.k = low(pr.x[2]);
  in.v = low(pr.x[3]);
  // Heads last, as the position projection's head-split view gives it:
  // [G, R, H, Dh] seen as [G, H, R, Dh].
  in.k_r = low(pr.x[4]).transpose(1, 2).contiguous().transpose(1, 2);
  in.seg = low(pr.x[5]);
  in.mask = pr.bias.mask;
  in.seg_diff = pr.bias.seg_diff;
  in.query_pos = pr.bias.query_pos;
  in.dout = low(pr.w);
  in.qlen = pr.qlen;
  in.dropout = pr.dropout.p;
  in.seed = pr.dropout.seed;
  in.offset = pr.dropout.offset;
  return in;
}

std::vector<torch::Tensor> Flat(const TcOutputs& o) {
  std::vector<torch::Tensor> r = {o.out, o.dqw, o.dqr, o.dk, o.dv, o.dkr};
  if (o.dseg.defined()) r.push_back(o.dseg);
  return r;
}

void ExpectMatchesCpuPath(const AttentionShape& s, uint64_t seed) {
  const AttentionProblem pr = MakeAttentionProblem(s, seed);
  const auto ref = Reference(pr);
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    const char* name = dtype == torch::kHalf ? "fp16" : "bf16";
    const TcInputs in = KernelInputs(pr, dtype);
    const TcOutputs got = RunEmulatedTcKernels(in);
    ASSERT_EQ(got.error, "") << name;
    const auto flat = Flat(got);
    ASSERT_EQ(flat.size(), ref.size());
    const double tol = dtype == torch::kHalf ? 0.01 : 0.03;
    ExpectWithinCpuPath(flat, ref, tol, name);
    // Rows with every key masked are zeros, as on the CPU.
    EXPECT_EQ(got.out[0][0][1].abs().max().item<float>(), 0.f) << name;
    EXPECT_EQ(got.out[s.b - 1][0][s.lq - 1].abs().max().item<float>(), 0.f)
        << name;
    // The XLNET_CUDA_PENDING kernels change where work happens, not the
    // arithmetic: the same bits.
    const TcOutputs pending = RunEmulatedTcKernelsPending(in);
    ASSERT_EQ(pending.error, "") << name;
    const auto pending_flat = Flat(pending);
    for (size_t i = 0; i < flat.size(); ++i) {
      EXPECT_TRUE(torch::equal(pending_flat[i], flat[i]))
          << name << " pending " << kAttentionOutputNames[i];
    }
    // The content stream's kernels computing its position products (the
    // pending kernels): bd rounded as cuBLAS rounds it, but summed in
    // another order, so within the bounds rather than the same bits.
    if (s.query_stream) continue;
    TcInputs fused_in = in;
    fused_in.kernel_products = true;
    const TcOutputs fused = RunEmulatedTcKernelsPending(fused_in);
    ASSERT_EQ(fused.error, "") << name;
    ExpectWithinCpuPath(Flat(fused), ref, tol,
                        std::string(name) + ", kernel products");
    // The default kernels refuse to run without bd.
    EXPECT_NE(RunEmulatedTcKernels(fused_in).error, "") << name;
  }
}

TEST(TcAttentionKernelsTest, ContentStreamMatchesTheCpuPath) {
  AttentionShape s;
  s.l = s.lq = 100;  // query tiles 64 + 36, key tiles 64 + 64 + 12
  s.mlen = 40;
  ExpectMatchesCpuPath(s, 21);
}

TEST(TcAttentionKernelsTest, ContentStreamWithDropoutPerSampleKr) {
  AttentionShape s;
  s.l = s.lq = 70;
  s.mlen = 30;
  s.groups = 2;  // k_r per sample
  s.dropout = 0.2;
  ExpectMatchesCpuPath(s, 22);
}

TEST(TcAttentionKernelsTest, QueryStreamInGroupsWithDropout) {
  AttentionShape s;
  s.b = 4;
  s.h = 1;
  s.l = 80;
  s.lq = 21;  // one partial query tile: rows 21-63 idle
  s.mlen = 50;
  s.groups = 2;  // bi_data: two groups of two samples
  s.query_stream = true;
  s.dropout = 0.2;
  ExpectMatchesCpuPath(s, 23);
}

TEST(TcAttentionKernelsTest, WithoutSegmentTerm) {
  AttentionShape s;
  s.l = s.lq = 64;
  s.mlen = 0;
  s.seg = false;
  ExpectMatchesCpuPath(s, 24);
}

// The base preset's geometry for one sample and head: 512 queries, 384
// memory rows, R = 1,408 positions (8 query tiles, 14 key tiles), dropout.
TEST(TcAttentionKernelsTest, BasePresetGeometry) {
  AttentionShape s;
  s.b = 1;
  s.h = 1;
  s.l = s.lq = 512;
  s.mlen = 384;
  s.dropout = 0.1;
  const AttentionProblem pr = MakeAttentionProblem(s, 26);
  const auto ref = Reference(pr);
  TcInputs in = KernelInputs(pr, torch::kBFloat16);
  const TcOutputs got = RunEmulatedTcKernels(in);
  ASSERT_EQ(got.error, "");
  ExpectWithinCpuPath(Flat(got), ref, 0.03, "bf16");
  const TcOutputs pending = RunEmulatedTcKernelsPending(in);
  ASSERT_EQ(pending.error, "");
  const auto a = Flat(got), b = Flat(pending);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i]))
        << "pending " << kAttentionOutputNames[i];
  }
  in.kernel_products = true;
  const TcOutputs products = RunEmulatedTcKernelsPending(in);
  ASSERT_EQ(products.error, "");
  ExpectWithinCpuPath(Flat(products), ref, 0.03, "bf16, kernel products");
}

// The same bits whatever the order of the warps (each running alone to its
// next barrier, first to last and last to first) and whenever cp.async
// lands (where issued or where waited for): a write into shared memory
// that another warp still reads, or a read before the copy or store it
// needs, without a barrier between, would change the result.
TEST(TcAttentionKernelsTest, ResultsDoNotDependOnWarpOrderOrCopyTiming) {
  AttentionShape s;
  s.b = 1;
  s.l = s.lq = 150;  // three query tiles: the key-tile backward's buffers
  s.mlen = 40;       // are each used twice
  s.dropout = 0.1;
  const AttentionProblem pr = MakeAttentionProblem(s, 25);
  TcInputs in = KernelInputs(pr, torch::kBFloat16);
  const auto ref = Flat(RunEmulatedTcKernels(in));
  TcInputs products_in = in;  // the pending kernels' own position products
  products_in.kernel_products = true;
  const auto products_ref = Flat(RunEmulatedTcKernelsPending(products_in));
  for (int schedule : {1, 2}) {
    for (bool at_issue : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "schedule " << schedule
                                        << ", copies at issue " << at_issue);
      in.schedule = products_in.schedule = schedule;
      in.copies_at_issue = products_in.copies_at_issue = at_issue;
      const TcOutputs got = RunEmulatedTcKernels(in);
      const TcOutputs pending = RunEmulatedTcKernelsPending(in);
      const TcOutputs products = RunEmulatedTcKernelsPending(products_in);
      ASSERT_EQ(got.error, "");
      ASSERT_EQ(pending.error, "");
      ASSERT_EQ(products.error, "");
      const auto a = Flat(got), b = Flat(pending), c = Flat(products);
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(torch::equal(a[i], ref[i])) << kAttentionOutputNames[i];
        EXPECT_TRUE(torch::equal(b[i], ref[i]))
            << "pending " << kAttentionOutputNames[i];
        EXPECT_TRUE(torch::equal(c[i], products_ref[i]))
            << "products " << kAttentionOutputNames[i];
      }
    }
  }
}

// [B, H, T, Dh] as stored: 0 contiguous, 1 heads last ([B, T, H, Dh] seen
// as [B, H, T, Dh], as the projections' head-split views give it).
torch::Tensor InLayout(const torch::Tensor& t, int layout) {
  if (layout == 0) return t.contiguous();
  return t.transpose(1, 2).contiguous().transpose(1, 2);
}

// DrawAttentionProblem's problem and the kernels' inputs in its dtype and
// layouts.
struct RandomProblem {
  DrawnAttentionProblem d;
  TcInputs in;
};

RandomProblem MakeRandomProblem(uint64_t seed) {
  RandomProblem r;
  r.d = DrawAttentionProblem(seed);
  const DrawnAttentionProblem& d = r.d;
  TcInputs& in = r.in;
  in = KernelInputs(d.pr, d.dtype);
  in.qw = InLayout(in.qw, d.q_layout);
  in.qr = InLayout(in.qr, d.q_layout);
  if (d.kv_layout == 2) {
    auto kv = torch::stack({in.k.transpose(1, 2), in.v.transpose(1, 2)}, 2)
                  .contiguous();  // [B, K, 2, H, Dh]
    in.k = kv.select(2, 0).transpose(1, 2);
    in.v = kv.select(2, 1).transpose(1, 2);
  } else {
    in.k = InLayout(in.k, d.kv_layout);
    in.v = InLayout(in.v, d.kv_layout);
  }
  in.dout = InLayout(in.dout, d.out_layout);
  return r;
}

// Problems drawn at random (fixed seeds; XLNET_TC_RANDOM_PROBLEMS sets how
// many, default 24): the default kernels within the bounds of the CPU path,
// fully masked rows zeros, the pending kernels (in a drawn warp order and
// cp.async timing) the same bits, and on the content stream the pending
// kernels' own position products within the bounds too. Every vector
// access is checked for alignment (XLNET_VECTOR_AT).
TEST(TcAttentionKernelsTest, RandomProblemsMatchTheCpuPath) {
  const int n = DrawnProblemCount();
  ASSERT_GT(n, 0) << "XLNET_TC_RANDOM_PROBLEMS";
  for (int i = 0; i < n; ++i) {
    const RandomProblem r = MakeRandomProblem(1000 + i);
    const DrawnAttentionProblem& d = r.d;
    SCOPED_TRACE(d.name);
    std::printf("[ problem  ] %s\n", d.name.c_str());
    const auto ref = Reference(d.pr);
    const double tol = r.in.qw.scalar_type() == torch::kHalf ? 0.01 : 0.03;
    const TcOutputs got = RunEmulatedTcKernels(r.in);
    ASSERT_EQ(got.error, "");
    const auto flat = Flat(got);
    ASSERT_EQ(flat.size(), ref.size());
    ExpectWithinCpuPath(flat, ref, tol, "default");
    ExpectMaskedRowZero(d, got.out);
    TcInputs pending_in = r.in;
    pending_in.schedule = d.schedule;
    pending_in.copies_at_issue = d.copies_at_issue;
    const TcOutputs pending = RunEmulatedTcKernelsPending(pending_in);
    ASSERT_EQ(pending.error, "");
    const auto pending_flat = Flat(pending);
    for (size_t t = 0; t < flat.size(); ++t) {
      EXPECT_TRUE(torch::equal(pending_flat[t], flat[t]))
          << "pending " << kAttentionOutputNames[t];
    }
    if (r.in.query_pos.defined()) continue;
    TcInputs products_in = pending_in;
    products_in.kernel_products = true;
    const TcOutputs products = RunEmulatedTcKernelsPending(products_in);
    ASSERT_EQ(products.error, "");
    ExpectWithinCpuPath(Flat(products), ref, tol, "kernel products");
  }
}

}  // namespace
}  // namespace xlnet::testing
