#include "data_pipeline/plm_batch.h"

namespace xlnet::data {

NamedTensors PlmBatch::Named() const {
  NamedTensors out;
  for (const auto& [name, field] : kPlmBatchFields) {
    out.emplace_back(name, this->*field);
  }
  return out;
}

PlmBatch PlmBatch::Cat(const std::vector<PlmBatch>& parts) {
  PlmBatch out;
  for (const auto& [name, field] : kPlmBatchFields) {
    std::vector<torch::Tensor> pieces;
    pieces.reserve(parts.size());
    for (const PlmBatch& part : parts) pieces.push_back(part.*field);
    out.*field = torch::cat(pieces);
  }
  return out;
}

}  // namespace xlnet::data
