#include "model/head_ops.h"

namespace xlnet {
namespace heads {

torch::Tensor AtLeastFloat(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat);
}

torch::Tensor GatherPositions(const torch::Tensor& hidden,
                              const torch::Tensor& index) {
  TORCH_CHECK(index.dim() == 2 && index.size(0) == hidden.size(0),
              "position index must be [B, K] with B = ", hidden.size(0),
              ", got ", index.sizes());
  return hidden.gather(
      1, index.to(hidden.device(), torch::kLong)
             .unsqueeze(-1)
             .expand({index.size(0), index.size(1), hidden.size(2)}));
}

torch::Tensor GatherRows(const torch::Tensor& hidden,
                         const torch::Tensor& positions) {
  TORCH_CHECK(positions.dim() == 1, "positions must be [B], got ",
              positions.sizes());
  return GatherPositions(hidden, positions.unsqueeze(1)).squeeze(1);
}

torch::Tensor ClsIndexOrLast(const torch::Tensor& cls_index,
                             const torch::Tensor& hidden) {
  if (cls_index.defined()) return cls_index;
  return torch::full({hidden.size(0)}, hidden.size(1) - 1,
                     torch::dtype(torch::kLong).device(hidden.device()));
}

void InitLinear(torch::nn::Linear& linear, double std,
                c10::optional<at::Generator> generator) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, generator);
  if (linear->bias.defined()) linear->bias.zero_();
}

void CheckContentStreamOnly(const XLNetInputs& inputs, const char* model) {
  TORCH_CHECK(!inputs.perm_mask.defined() && !inputs.target_mapping.defined(),
              model,
              " runs the content stream only: perm_mask and target_mapping "
              "must be undefined");
}

}  // namespace heads
}  // namespace xlnet
