// A random tiny language model and token sequences for the lm tests.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/xlnet.h"

namespace xlnet::testing {

// n_layer 2, d_model 32, no dropout, initialised with a wide normal so the
// predictions depend visibly on the context. attn_type "uni" or "bi".
inline XLNetLMHeadModel TinyLm(const std::string& attn_type,
                               int64_t vocab_size = 50, uint64_t seed = 7) {
  XLNetConfig config;
  config.vocab_size = vocab_size;
  config.d_model = 32;
  config.n_layer = 2;
  config.n_head = 2;
  config.d_head = 16;
  config.d_inner = 64;
  config.attn_type = attn_type;
  config.dropout = 0.0;
  config.initializer_range = 0.3;
  torch::manual_seed(seed);
  XLNetLMHeadModel model(config);
  model->eval();
  return model;
}

// `n` ids in [0, vocab_size), fixed by `seed`.
inline std::vector<int32_t> RandomIds(int64_t n, int64_t vocab_size,
                                      uint64_t seed) {
  torch::manual_seed(seed);
  auto t = torch::randint(vocab_size, {n}, torch::kLong);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(t[i].item<int64_t>());
  return ids;
}

inline torch::Tensor IdsRow(const std::vector<int32_t>& ids) {
  return torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()),
                       torch::kLong)
      .view({1, -1});
}

inline double MaxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble))
      .abs()
      .max()
      .item<double>();
}

}  // namespace xlnet::testing
