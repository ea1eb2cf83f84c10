#include "lm/language_model.h"

#include <algorithm>

namespace xlnet {

LmStream ResolveStream(LmStream stream, const XLNetConfig& config) {
  if (stream != LmStream::kAuto) return stream;
  return config.attn_type == "uni" ? LmStream::kContent : LmStream::kQuery;
}

int64_t LmMemory::filled() const {
  if (states.empty()) return 0;
  return valid[0].sum().item<int64_t>();
}

LmMemory EmptyMemory(const XLNetConfig& config, int64_t batch, int64_t m,
                     torch::Device device) {
  LmMemory memory;
  if (m <= 0) return memory;
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  for (int64_t n = 0; n < config.n_layer; ++n) {
    memory.states.push_back(torch::zeros({m, batch, config.d_model}, opts));
  }
  memory.valid = torch::zeros({batch, m}, opts);
  return memory;
}

LmForwardResult LmForward(XLNetLMHeadModelImpl& model, const torch::Tensor& ids,
                          const LmMemory& memory,
                          const torch::Tensor& attention_mask,
                          const LmForwardOptions& options) {
  TORCH_CHECK(options.stream != LmStream::kAuto,
              "LmForward: resolve the stream first (ResolveStream)");
  torch::NoGradGuard no_grad;
  const int64_t b = ids.size(0), l = ids.size(1);
  const auto device = ids.device();
  XLNetInputs inputs;
  inputs.input_ids = ids;
  inputs.attention_mask = attention_mask;
  inputs.mems = memory.states;
  if (!memory.states.empty()) inputs.mems_attention_mask = memory.valid;
  const bool query = options.stream == LmStream::kQuery;
  if (query) {
    // Position i sees j < i in the query stream, j <= i in the content
    // stream (the model clears the content stream's diagonal).
    auto i = torch::arange(l, torch::dtype(torch::kLong).device(device));
    inputs.perm_mask = (i.view({1, l}) >= i.view({l, 1}))
                           .to(torch::kFloat)
                           .unsqueeze(0)
                           .expand({b, l, l});  // [B, L, L]
    if (options.last_only) {
      inputs.target_mapping =
          torch::zeros({b, 1, l}, torch::dtype(torch::kFloat).device(device));
      inputs.target_mapping.select(2, l - 1).fill_(1.0);  // [B, 1, L]
    } else {
      inputs.target_mapping =
          torch::eye(l, torch::dtype(torch::kFloat).device(device))
              .unsqueeze(0)
              .expand({b, l, l});  // [B, L, L]
    }
  }
  XLNetForwardOptions fwd;
  const bool keep = options.keep_memory >= 0;
  const int64_t cached =
      options.cache_positions < 0 ? l : std::min(options.cache_positions, l);
  fwd.use_mems = keep;
  // Keep every row here: the uncached tail is cut below before the memory
  // length is applied.
  if (keep) fwd.cache_mem_len = 0;
  XLNetOutputs out = model.transformer->forward(inputs, fwd);
  LmForwardResult result;
  torch::Tensor h = query ? out.query_hidden_state : out.last_hidden_state;
  if (options.last_only && !query) h = h.narrow(1, l - 1, 1);  // [B, 1, D]
  result.logits = model.Logits(h).to(torch::kFloat);
  if (keep && options.keep_memory > 0) {
    const int64_t m = memory.rows();
    const int64_t total = m + cached;
    const int64_t kept = std::min(options.keep_memory, total);
    for (auto& state : out.new_mems) {  // [M + L, B, D]
      result.memory.states.push_back(
          state.narrow(0, total - kept, kept).contiguous());
    }
    torch::Tensor real =
        attention_mask.defined()
            ? attention_mask.narrow(1, 0, cached).to(torch::kFloat)
            : torch::ones({b, cached},
                          torch::dtype(torch::kFloat).device(device));
    torch::Tensor valid =
        m > 0 ? torch::cat({memory.valid.to(torch::kFloat), real}, 1) : real;
    result.memory.valid = valid.narrow(1, total - kept, kept).contiguous();
  }
  return result;
}

XLNetLMHeadModel WithoutSameLength(const XLNetLMHeadModel& model) {
  if (!model->config().same_length) return model;
  XLNetConfig config = model->config();
  config.same_length = false;
  return CopyWithConfig(model, config);
}

XLNetLMHeadModel CopyWithConfig(const XLNetLMHeadModel& model,
                                const XLNetConfig& config) {
  XLNetLMHeadModel copy(config);
  torch::NoGradGuard no_grad;
  auto target = copy->named_parameters();
  const auto device = model->parameters().front().device();
  copy->to(device);
  for (const auto& item : model->named_parameters()) {
    target[item.key()].copy_(item.value());
  }
  copy->transformer->SetAttention(model->transformer->attention());
  copy->eval();
  return copy;
}

}  // namespace xlnet
