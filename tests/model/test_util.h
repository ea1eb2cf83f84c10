// Helpers shared by the model tests: fixture paths, tensor files, diffs.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/safetensors.h"
#include "model/xlnet.h"
#include "model_io/load.h"
#include "model_io/save.h"

namespace xlnet::testing {

inline std::string GoldenDir() {
  return std::string(XLNET_SOURCE_DIR) + "/tests/fixtures/golden_tiny";
}

// All tensors of a safetensors file by name (test aborts on error).
inline std::map<std::string, torch::Tensor> ReadTensors(
    const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::map<std::string, torch::Tensor> out;
  if (!file.ok()) return out;
  auto all = file->LoadAll();
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return out;
  for (auto& [name, t] : *all) out[name] = t;
  return out;
}

// Pearson correlation of two equally shaped masks (0/1 or bool): ~0 for
// independent ones, with a standard error of ~1/sqrt(numel).
inline double MaskCorrelation(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kDouble).flatten();
  const torch::Tensor y = b.to(torch::kDouble).flatten();
  const torch::Tensor dx = x - x.mean(), dy = y - y.mean();
  return (dx * dy).sum().item<double>() /
         std::sqrt((dx * dx).sum().item<double>() *
                   (dy * dy).sum().item<double>());
}

// The fused element-wise kernels' test shapes {rows, LayerNorm columns,
// BiasAct columns}: vectorised (the base preset's 768 and 3072), scalar
// (10; 1026, whose LayerNorm backward opts into more shared memory) and
// the widest rows (2048).
inline std::vector<std::tuple<int64_t, int64_t, int64_t>>
ElementwiseKernelShapes() {
  return {{517, 768, 3072}, {37, 10, 18}, {45, 1026, 40}, {20, 2048, 8}};
}

inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (!a.sizes().equals(b.sizes())) return 1e30;
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble))
      .abs()
      .max()
      .item<double>();
}

// MaxAbsDiff, also printed as "[ diff ] name: value" for the test log.
inline double ReportDiff(const std::string& name, const torch::Tensor& a,
                         const torch::Tensor& b) {
  const double d = MaxAbsDiff(a, b);
  std::printf("[ diff     ] %s max_abs_diff=%.3g\n", name.c_str(), d);
  return d;
}

// The device the HF comparisons run on: XLNET_TEST_DEVICE ("cpu" by
// default; "cuda" on a GPU machine, see scripts/gpu_check.sh).
inline torch::Device TestDevice() {
  const char* d = std::getenv("XLNET_TEST_DEVICE");
  return torch::Device(d && *d ? d : "cpu");
}

// The attention core the HF comparisons and the activation-checkpoint
// tests run: XLNET_TEST_ATTENTION = "unfused" (default), "tiled" or
// "tiled:Q,K" (Q query rows x K keys per tile). CTest runs them a second
// time with "tiled:3,5" (tests/model/CMakeLists.txt).
inline AttentionOptions TestAttention() {
  AttentionOptions options;
  const char* env = std::getenv("XLNET_TEST_ATTENTION");
  const std::string spec = env ? env : "";
  if (spec.empty()) return options;
  const auto colon = spec.find(':');
  const auto impl = ParseEnum<AttentionImpl>(spec.substr(0, colon));
  EXPECT_TRUE(impl.has_value()) << "XLNET_TEST_ATTENTION=" << spec;
  if (impl) options.impl = *impl;
  if (colon != std::string::npos) {
    const auto comma = spec.find(',', colon);
    EXPECT_NE(comma, std::string::npos) << "XLNET_TEST_ATTENTION=" << spec;
    if (comma == std::string::npos) return options;
    options.tiles.query = std::stoll(spec.substr(colon + 1, comma - colon - 1));
    options.tiles.key = std::stoll(spec.substr(comma + 1));
  }
  return options;
}

// The golden tiny model (fp32, eval mode, TestAttention()).
inline XLNetLMHeadModel LoadGoldenModel(
    const std::string& config = "config.json") {
  auto model = LoadPretrained(GoldenDir());
  EXPECT_TRUE(model.ok()) << model.status();
  if (config != "config.json") {
    auto cfg = ReadModelConfigJson(GoldenDir() + "/" + config);
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    XLNetLMHeadModel other(*cfg);
    auto status = LoadStateDict(*other, HfStateDict(**model), "golden");
    EXPECT_TRUE(status.ok()) << status;
    other->eval();
    other->to(TestDevice());
    other->transformer->SetAttention(TestAttention());
    return other;
  }
  (*model)->eval();
  (*model)->to(TestDevice());
  (*model)->transformer->SetAttention(TestAttention());
  return *model;
}

// The golden permutation-LM inputs (inputs.safetensors): ids, segments,
// padding, perm_mask and target_mapping, no mems.
inline XLNetInputs GoldenLmInputs(
    const std::map<std::string, torch::Tensor>& in) {
  XLNetInputs x;
  x.input_ids = in.at("input_ids");
  x.token_type_ids = in.at("token_type_ids");
  x.attention_mask = in.at("attention_mask");
  x.perm_mask = in.at("perm_mask");
  x.target_mapping = in.at("target_mapping");
  return x;
}

// A small random model (seeded), weights N(0, 0.3) so attention is far from
// uniform, dropout 0, eval mode.
inline XLNetLMHeadModel MakeRandomModel(XLNetConfig config, uint64_t seed) {
  torch::manual_seed(seed);
  config.initializer_range = 0.3;
  XLNetLMHeadModel model(config);
  model->eval();
  return model;
}

inline XLNetConfig TinyConfig() {
  XLNetConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.n_layer = 2;
  c.n_head = 4;
  c.d_head = 8;
  c.d_inner = 64;
  c.dropout = 0.0;
  c.mem_len = 6;
  return c;
}

// Permutation-LM inputs like the golden ones: `pad[b]` left-padded positions,
// the last position a functional <cls> (id 3, segment 2), a random
// factorisation order over the real positions, the last `p` non-functional
// positions of the order are the targets (target_mapping sorted by position).
inline XLNetInputs MakePlmInputs(int64_t b, int64_t l, int64_t p, int64_t vocab,
                                 std::vector<int64_t> pad, uint64_t seed) {
  torch::manual_seed(seed);
  XLNetInputs x;
  x.input_ids = torch::randint(10, vocab, {b, l}, torch::kLong);
  x.token_type_ids = torch::zeros({b, l}, torch::kLong);
  x.attention_mask = torch::ones({b, l});
  x.perm_mask = torch::zeros({b, l, l});
  x.target_mapping = torch::zeros({b, p, l});
  for (int64_t r = 0; r < b; ++r) {
    const int64_t npad = pad.empty() ? 0 : pad[r];
    x.input_ids[r][l - 1] = 3;
    for (int64_t i = 0; i < l; ++i) {
      if (i < npad) {
        x.input_ids[r][i] = 5;
        x.token_type_ids[r][i] = 3;
        x.attention_mask[r][i] = 0;
      } else if (i >= (npad + l - 1) / 2) {
        x.token_type_ids[r][i] = 1;
      }
    }
    x.token_type_ids[r][l - 1] = 2;
    auto order =
        torch::randperm(l - npad, torch::kLong) + npad;  // real positions
    std::vector<int64_t> rank(l, -1), self_rank(l, 0);
    std::vector<bool> target(l, false), functional(l, false);
    functional[l - 1] = true;
    int64_t found = 0;
    for (int64_t k = l - npad - 1; k >= 0 && found < p; --k) {
      int64_t pos = order[k].item<int64_t>();
      if (!functional[pos]) {
        target[pos] = true;
        ++found;
      }
    }
    for (int64_t k = 0; k < l - npad; ++k) {
      int64_t pos = order[k].item<int64_t>();
      if (target[pos] || functional[pos]) rank[pos] = k;
    }
    for (int64_t i = 0; i < l; ++i)
      self_rank[i] = target[i] ? rank[i] : rank[i] + 1;
    int64_t t = 0;
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = 0; j < l; ++j) {
        if ((target[j] || functional[j]) && self_rank[i] <= rank[j])
          x.perm_mask[r][i][j] = 1;
      }
      if (target[i]) x.target_mapping[r][t++][i] = 1;
    }
  }
  return x;
}

inline  // Compares autograd's gradient of f with central finite differences for
        // each
    // of `inputs` (double tensors with requires_grad). Returns the largest
    // absolute difference.
    double
    GradCheck(const std::function<
                  torch::Tensor(const std::vector<torch::Tensor>&)>& f,
              std::vector<torch::Tensor> inputs, double eps = 1e-6) {
  for (auto& t : inputs) t = t.detach().clone().requires_grad_(true);
  auto grads = torch::autograd::grad({f(inputs)}, inputs);
  double worst = 0;
  torch::NoGradGuard no_grad;
  for (size_t n = 0; n < inputs.size(); ++n) {
    auto flat = inputs[n].view({-1});
    auto g = grads[n].reshape({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double orig = flat[i].item<double>();
      flat[i] = orig + eps;
      const double up = f(inputs).item<double>();
      flat[i] = orig - eps;
      const double down = f(inputs).item<double>();
      flat[i] = orig;
      worst = std::max(worst,
                       std::abs((up - down) / (2 * eps) - g[i].item<double>()));
    }
  }
  return worst;
}

}  // namespace xlnet::testing
