#include "model/weight_casts.h"

#include <torch/version.h>

#include <optional>

#include "model/precision.h"

// The multi-tensor copy (with a dtype conversion) is LibTorch >= 2.1.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define XLNET_HAS_FOREACH_COPY 1
#endif

namespace xlnet {
namespace {

#ifdef XLNET_HAS_FOREACH_COPY
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
