// Uses an installed xlnet.cpp as a C++ user would: parses a tiny model
// config with the config library, builds an XLNet LM and runs one forward.
// Prints the logits' shape; exits 1 on any error.
#include <iostream>

#include "config/config.h"
#include "model/xlnet.h"

int main() {
  const std::string yaml =
      "model:\n  vocab_size: 32\n  d_model: 16\n  n_layer: 2\n  n_head: 2\n"
      "  d_head: 8\n  d_inner: 32\n";
  absl::StatusOr<xlnet::Config> config =
      xlnet::ParseConfig(yaml, "consumer.yaml", {}, {"model"});
  if (!config.ok()) {
    std::cerr << "consumer: " << config.status().message() << "\n";
    return 1;
  }
  torch::manual_seed(0);
  xlnet::XLNetLMHeadModel model(config->model);
  model->eval();
  torch::NoGradGuard no_grad;
  xlnet::XLNetInputs inputs;
  inputs.input_ids = torch::randint(0, 32, {2, 7}, torch::kLong);
  const torch::Tensor logits = model->forward(inputs).logits;
  if (logits.sizes() != torch::IntArrayRef({2, 7, 32}) ||
      !torch::isfinite(logits).all().item<bool>()) {
    std::cerr << "consumer: unexpected logits " << logits.sizes() << "\n";
    return 1;
  }
  std::cout << "consumer: logits " << logits.sizes() << ", n_layer "
            << config->model.n_layer << "\n";
  return 0;
}
