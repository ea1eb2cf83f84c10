#include "model/weight_casts.h"

#include <torch/version.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "model/precision.h"

#if defined(XLNET_CUDA_ATTENTION) && defined(XLNET_CUDA_PENDING)
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/cuda/fused_elementwise_dtype.h"
#include "model/cuda/fused_elementwise_kernels.h"
#define XLNET_CAST_KERNELS 1
#endif

// The multi-tensor copy (with a dtype conversion) is LibTorch >= 2.1.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define XLNET_HAS_FOREACH_COPY 1
#endif

namespace xlnet {
namespace {

#ifdef XLNET_HAS_FOREACH_COPY
#ifdef XLNET_CAST_KERNELS
namespace fe = fused_elementwise;

// One cast of CastTensors: dst (and dst2) = cast(src [+ src2]).
struct CastJob {
  torch::Tensor src, src2, dst, dst2;
};

// The jobs, on CUDA tensors of one device, contiguous, by CastTensors
// (kMaxCastTensors a launch): the kernel's bits are those of LibTorch's
// casts and fp32 sums.
void RunCastJobs(const std::vector<CastJob>& jobs) {
  if (jobs.empty()) return;
  const c10::cuda::CUDAGuard guard(jobs[0].src.device());
  const cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(jobs[0].src.device().index()).stream();
  for (size_t first = 0; first < jobs.size(); first += fe::kMaxCastTensors) {
    fe::CastList list;
    list.src_dtype = fe::KernelDType(jobs[first].src.scalar_type());
    list.dst_dtype = fe::KernelDType(jobs[first].dst.scalar_type());
    for (size_t i = first; i < jobs.size() && list.count < fe::kMaxCastTensors;
         ++i) {
      const CastJob& j = jobs[i];
      TORCH_CHECK(j.src.scalar_type() == jobs[first].src.scalar_type() &&
                      j.dst.scalar_type() == jobs[first].dst.scalar_type() &&
                      j.src.device() == jobs[first].src.device() &&
                      j.src.is_contiguous() && j.dst.is_contiguous() &&
                      j.dst.numel() == j.src.numel(),
                  "WeightCasts: cast ", i, " is ", j.src.scalar_type(), " ",
                  j.src.sizes(), " -> ", j.dst.scalar_type(), " ",
                  j.dst.sizes(), ", the first ", jobs[first].src.scalar_type(),
                  " -> ", jobs[first].dst.scalar_type());
      const int k = list.count++;
      list.src[k] = j.src.data_ptr();
      list.src2[k] = j.src2.defined() ? j.src2.data_ptr() : nullptr;
      list.dst[k] = j.dst.data_ptr();
      list.dst2[k] = j.dst2.defined() ? j.dst2.data_ptr() : nullptr;
      list.numel[k] = j.src.numel();
    }
    C10_CUDA_CHECK(fe::CastTensors(list, stream));
  }
}
#endif  // XLNET_CAST_KERNELS

// Casts of `weights` to `dtype` by one multi-tensor copy: one output for
// each of the first `once` weights, then `streams` outputs (stream-major)
// for each of the rest. Backward casts the gradients that arrive back to
// the weights' dtype the same way and sums a weight's streams there, in
// stream order; a copy nothing used contributes nothing.
struct CastTogetherFunction
    : public torch::autograd::Function<CastTogetherFunction> {
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, at::TensorList weights,
      int64_t once, int64_t streams, int64_t dtype) {
    ctx->set_materialize_grads(false);
    ctx->saved_data["dtype"] = static_cast<int64_t>(weights[0].scalar_type());
    ctx->saved_data["once"] = once;
    ctx->saved_data["streams"] = streams;
    const auto options =
        weights[0].options().dtype(static_cast<torch::ScalarType>(dtype));
    std::vector<torch::Tensor> out, src;
    for (int64_t s = 0; s < streams; ++s) {
      for (size_t i = s == 0 ? 0 : once; i < weights.size(); ++i) {
        out.push_back(torch::empty(weights[i].sizes(), options));
        src.push_back(weights[i]);
      }
    }
#ifdef XLNET_CAST_KERNELS
    // On CUDA one kernel reads each weight once for all its copies.
    if (weights[0].is_cuda() && streams <= 2) {
      std::vector<CastJob> jobs(weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        jobs[i].src = weights[i].contiguous();
        jobs[i].dst = out[i];
        if (streams == 2 && i >= static_cast<size_t>(once)) {
          jobs[i].dst2 = out[weights.size() + i - once];
        }
      }
      RunCastJobs(jobs);
      return out;
    }
#endif
    torch::_foreach_copy_(out, src);
    return out;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const auto dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const int64_t once = ctx->saved_data["once"].toInt();
    const int64_t streams = ctx->saved_data["streams"].toInt();
    const int64_t n = once + (static_cast<int64_t>(grads.size()) - once) /
                                 streams;  // weights
#ifdef XLNET_CAST_KERNELS
    // On CUDA one kernel casts each weight's stream gradients and sums
    // them in stream order (cast, then an fp32 add: the bits below).
    const bool on_cuda = std::any_of(
        grads.begin(), grads.end(),
        [](const torch::Tensor& g) { return g.defined() && g.is_cuda(); });
    if (on_cuda && streams <= 2) {
      torch::autograd::variable_list result(n + 3);
      std::vector<CastJob> jobs;
      for (int64_t i = 0; i < n; ++i) {
        torch::Tensor a = grads[i];
        torch::Tensor b =
            streams == 2 && i >= once ? grads[n + i - once] : torch::Tensor();
        if (!a.defined()) std::swap(a, b);
        if (!a.defined()) continue;
        CastJob j;
        j.src = a.contiguous();
        if (b.defined()) j.src2 = b.to(a.scalar_type()).contiguous();
        j.dst = torch::empty(a.sizes(), a.options().dtype(dtype));
        result[i] = j.dst;
        jobs.push_back(std::move(j));
      }
      RunCastJobs(jobs);
      return result;
    }
#endif
    // The grads in the weights' dtype, one multi-tensor copy.
    std::vector<torch::Tensor> up(grads.size()), dst, src;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      up[i] = torch::empty(grads[i].sizes(), grads[i].options().dtype(dtype));
      dst.push_back(up[i]);
      src.push_back(grads[i]);
    }
    if (!dst.empty()) torch::_foreach_copy_(dst, src);
    // One gradient a weight (then none for once, streams and dtype): a
    // per-stream weight's streams summed in order, one multi-tensor add a
    // stream after the first.
    torch::autograd::variable_list result(n + 3);
    for (int64_t i = 0; i < n; ++i) result[i] = up[i];
    for (int64_t s = 1; s < streams; ++s) {
      std::vector<torch::Tensor> sums, terms;
      for (int64_t i = once; i < n; ++i) {
        const torch::Tensor& term = up[s * (n - once) + i];
        if (!term.defined()) continue;
        if (!result[i].defined()) {
          result[i] = term;
          continue;
        }
        sums.push_back(result[i]);
        terms.push_back(term);
      }
      if (!sums.empty()) torch::_foreach_add_(sums, terms);
    }
    return result;
  }
};
#endif

}  // namespace

WeightCasts::WeightCasts(std::vector<torch::Tensor*> once,
                         std::vector<torch::Tensor*> per_stream, int streams)
    : once_(std::move(once)),
      per_stream_(std::move(per_stream)),
      streams_(std::max(streams, 1)) {
#ifdef XLNET_HAS_FOREACH_COPY
  std::vector<torch::Tensor> weights;
  for (const auto* list : {&once_, &per_stream_}) {
    for (const torch::Tensor* s : *list) weights.push_back(*s);
  }
  if (weights.empty() || !weights[0].defined()) return;
  for (const torch::Tensor& w : weights) {
    if (!w.defined() || w.scalar_type() != torch::kFloat ||
        w.device() != weights[0].device()) {
      return;
    }
  }
  const std::optional<torch::ScalarType> dtype =
      AutocastDtypeOf(weights[0].device());
  if (!dtype || *dtype == torch::kFloat) return;
  // As a TensorList: a std::vector argument would not count as inputs.
  torch::autograd::variable_list cast = CastTogetherFunction::apply(
      at::TensorList(weights), static_cast<int64_t>(once_.size()),
      static_cast<int64_t>(streams_), static_cast<int64_t>(*dtype));
  saved_ = std::move(weights);
  for (size_t i = 0; i < once_.size(); ++i) *once_[i] = cast[i];
  copies_.assign(cast.begin() + static_cast<int64_t>(once_.size()), cast.end());
  UseStream(0);
#endif
}

void WeightCasts::UseStream(int stream) {
  if (!active()) return;
  TORCH_CHECK(stream >= 0 && stream < streams_, "WeightCasts: stream ", stream,
              " of ", streams_);
  const size_t n = per_stream_.size();
  for (size_t i = 0; i < n; ++i) *per_stream_[i] = copies_[stream * n + i];
}

WeightCasts::~WeightCasts() {
  if (!active()) return;
  for (size_t i = 0; i < once_.size(); ++i) *once_[i] = saved_[i];
  for (size_t i = 0; i < per_stream_.size(); ++i) {
    *per_stream_[i] = saved_[once_.size() + i];
  }
}

}  // namespace xlnet
