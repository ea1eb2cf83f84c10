#include "finetune/chunks.h"

#include <vector>

namespace xlnet::finetune {

bool UsesChunks(const FinetuneConfig& finetune) {
  return finetune.long_inputs == LongInputs::kChunks;
}

ChunkOptions ChunkOptionsFromConfig(const FinetuneConfig& finetune,
                                    const XLNetConfig& model) {
  ChunkOptions options;
  options.chunk_len = finetune.max_seq_length;
  options.mem_len =
      finetune.mem_len >= 0 ? finetune.mem_len : model.mem_len.value_or(0);
  return options;
}

int64_t EncodedLength(const FinetuneConfig& finetune) {
  return UsesChunks(finetune) ? finetune.max_chunks * finetune.max_seq_length
                              : finetune.max_seq_length;
}

int64_t FirstUsedChunk(const torch::Tensor& attention_mask, int64_t chunk_len) {
  TORCH_CHECK(attention_mask.dim() == 2 && chunk_len > 0 &&
                  attention_mask.size(1) % chunk_len == 0,
              "attention_mask [N, K*C] with C = ", chunk_len, ", got ",
              attention_mask.sizes());
  const int64_t k = attention_mask.size(1) / chunk_len;
  if (attention_mask.size(0) == 0) return k - 1;
  const torch::Tensor used =
      (attention_mask.reshape({attention_mask.size(0), k, chunk_len}) > 0)
          .any(2)
          .any(0)
          .to(torch::kCPU);  // [K]
  for (int64_t i = 0; i < k; ++i) {
    if (used[i].item<bool>()) return i;
  }
  return k - 1;
}

int64_t DropLeadingPaddingChunks(torch::Tensor* input_ids,
                                 torch::Tensor* token_type_ids,
                                 torch::Tensor* attention_mask,
                                 int64_t chunk_len) {
  const int64_t width = attention_mask->size(-1);
  const int64_t skip =
      FirstUsedChunk(attention_mask->reshape({-1, width}), chunk_len) *
      chunk_len;
  const int64_t dim = attention_mask->dim() - 1;
  for (torch::Tensor* t : {input_ids, token_type_ids, attention_mask}) {
    TORCH_CHECK(t->size(-1) == width, "chunked tensors of widths ", t->size(-1),
                " and ", width);
    *t = t->narrow(dim, skip, width - skip).contiguous();
  }
  return width - skip;
}

XLNetInputs LastChunkWithMemory(XLNetModelImpl& backbone,
                                const XLNetInputs& inputs,
                                const ChunkOptions& options) {
  const torch::Tensor& ids = inputs.input_ids;
  const int64_t c = options.chunk_len;
  TORCH_CHECK(ids.defined() && ids.dim() == 2 && c > 0 && ids.size(1) % c == 0,
              "chunked input_ids must be [B, K*C] with C = ", c, ", got ",
              ids.defined() ? ids.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(inputs.mems.empty() && !inputs.perm_mask.defined() &&
                  !inputs.target_mapping.defined(),
              "chunked inputs take no mems, perm_mask or target_mapping");
  const int64_t b = ids.size(0);
  const int64_t k = ids.size(1) / c;
  if (k == 1) return inputs;
  auto chunk = [&](int64_t i) {
    XLNetInputs x;
    x.input_ids = ids.narrow(1, i * c, c);  // [B, C]
    if (inputs.token_type_ids.defined()) {
      x.token_type_ids = inputs.token_type_ids.narrow(1, i * c, c);
    }
    if (inputs.attention_mask.defined()) {
      x.attention_mask = inputs.attention_mask.narrow(1, i * c, c);
    }
    return x;
  };
  const int64_t first = inputs.attention_mask.defined()
                            ? FirstUsedChunk(inputs.attention_mask, c)
                            : 0;
  std::vector<torch::Tensor> mems;  // n_layer x [M, B, D]
  torch::Tensor mems_mask;          // [B, M]
  torch::Tensor mems_types;         // [B, M] (with token_type_ids)
  {
    torch::NoGradGuard no_grad;  // mems are detached: no gradient is lost
    XLNetForwardOptions forward;
    forward.use_mems = true;
    forward.cache_mem_len = options.mem_len;
    for (int64_t i = first; i < k - 1; ++i) {
      XLNetInputs x = chunk(i);
      x.mems = mems;
      x.mems_attention_mask = mems_mask;
      x.mems_token_type_ids = mems_types;
      mems = backbone.forward(x, forward).new_mems;
      const torch::Tensor real =
          x.attention_mask.defined()
              ? x.attention_mask.to(torch::kFloat)
              : torch::ones({b, c}, ids.options().dtype(torch::kFloat));
      mems_mask = mems_mask.defined() ? torch::cat({mems_mask, real}, 1)
                                      : real;  // [B, M + C]
      if (x.token_type_ids.defined()) {
        mems_types = mems_types.defined()
                         ? torch::cat({mems_types, x.token_type_ids}, 1)
                         : x.token_type_ids;  // [B, M + C]
      }
      const int64_t m = mems_mask.size(1);
      if (options.mem_len > 0 && m > options.mem_len) {
        const int64_t keep = options.mem_len;
        mems_mask = mems_mask.narrow(1, m - keep, keep);
        if (mems_types.defined()) {
          mems_types = mems_types.narrow(1, m - keep, keep);
        }
      }
      TORCH_CHECK(mems.empty() || mems[0].size(0) == mems_mask.size(1),
                  "memory of ", mems[0].size(0), " rows but a mask of ",
                  mems_mask.size(1));
    }
  }
  XLNetInputs last = chunk(k - 1);
  last.mems = std::move(mems);
  last.mems_attention_mask = mems_mask;
  last.mems_token_type_ids = mems_types;
  return last;
}

}  // namespace xlnet::finetune
