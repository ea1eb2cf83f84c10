// Segment recurrence in fine-tuning (finetune.long_inputs: chunks): a
// classification/regression input (or a multiple-choice option sequence,
// one row per option) longer than finetune.max_seq_length = C runs as up to
// finetune.max_chunks = K chunks of C tokens, in order, each over the
// memory (mems) of the chunks before it, as Transformer-XL and XLNet
// pretraining carry memory from one segment to the next. The head reads the
// last chunk's summary position (<cls>).
//
// Layout. An input is packed exactly as the official classifier packs it,
// at length K*C instead of C (`A <sep> [B <sep>] <cls>`, left padded,
// `_truncate_seq_pair` when even K*C is too short; finetune/examples.h), and
// the row is cut into K chunks of C columns. So the last chunk ends with
// `... <sep> <cls>`, earlier chunks are plain content with the segment ids
// of the text they hold (A 0, B 1), and a row that needs fewer chunks has
// all-padding chunks in front (and left padding in its first real chunk).
// Chunk i of every row of a batch runs in one forward; every row ends at the
// same last chunk. Chunks that are padding in every row of a batch are
// skipped (an input that fits one chunk costs what truncation costs, and
// gives the same result: see below).
//
// Memory. Each chunk caches its whole input per layer (config reuse_len is
// not used) and keeps the last finetune.mem_len tokens (0: all; -1: the
// model's mem_len). Padding rows of memory are hidden from later chunks by
// XLNetInputs::mems_attention_mask, so padding never influences real tokens
// and a row's result does not depend on the other rows of its batch. Memory
// rows keep their segment ids (XLNetInputs::mems_token_type_ids; pretraining
// and HF count memory as segment 0), so text B relates to the memory of
// text B as to itself. The model's attn_type, same_length and clamp_len
// apply as in any forward.
//
// Gradients stop at memory, as in pretraining (CacheMem detaches): the loss
// reaches only the last chunk's forward. The earlier chunks therefore run
// under NoGradGuard: the same gradients, without keeping their activations.
// In training mode they run with dropout, as pretraining's memory does.
//
// What equals what. With attn_type "uni", memory covering the whole prefix
// (mem_len 0 or >= (K-1)*C), dropout 0 and same_length false, the last
// chunk's hidden states equal those positions of one forward over all K*C
// tokens (causal attention sees the same keys at the same relative
// distances; tested within 1e-5). With "bi" they differ: an earlier chunk
// cannot see later ones (one long forward lets every token see all).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/config.h"
#include "model/xlnet.h"

namespace xlnet::finetune {

struct ChunkOptions {
  // C: tokens per chunk (finetune.max_seq_length).
  int64_t chunk_len = 128;
  // Memory kept per layer between chunks, in tokens; 0 keeps every earlier
  // chunk.
  int64_t mem_len = 0;
};

// Whether finetune.long_inputs asks for chunks.
bool UsesChunks(const FinetuneConfig& finetune);

// The chunking of a run: chunk_len = finetune.max_seq_length; mem_len =
// finetune.mem_len, or with -1 the model's mem_len (null or 0 there: 0).
ChunkOptions ChunkOptionsFromConfig(const FinetuneConfig& finetune,
                                    const XLNetConfig& model);

// Tokens per encoded row: max_seq_length, or max_chunks * max_seq_length
// with long_inputs "chunks" (the row is then K chunks side by side).
int64_t EncodedLength(const FinetuneConfig& finetune);

// Index of the first chunk (of `chunk_len` columns) holding a real token in
// some row of attention_mask [N, K*C]; K - 1 when every chunk is padding
// (or K = 1).
int64_t FirstUsedChunk(const torch::Tensor& attention_mask, int64_t chunk_len);

// Drops the leading chunks (of `chunk_len` columns of the last dimension)
// that are padding in every row of attention_mask ([..., K*C]) from the
// three tensors, which keep their shapes but the last; returns the width
// left. Rows of a set are never run on those chunks (LastChunkWithMemory
// skips them), so they only cost memory.
int64_t DropLeadingPaddingChunks(torch::Tensor* input_ids,
                                 torch::Tensor* token_type_ids,
                                 torch::Tensor* attention_mask,
                                 int64_t chunk_len);

// Runs the chunks of `inputs` ([B, K*C]: input_ids, and token_type_ids and
// attention_mask when defined; no mems, perm_mask or target_mapping) before
// the last one through `backbone` without gradients, skipping leading
// chunks that are padding in every row, and returns the last chunk's inputs
// [B, C] with their mems and mems_attention_mask set. K = 1 returns
// `inputs` unchanged.
XLNetInputs LastChunkWithMemory(XLNetModelImpl& backbone,
                                const XLNetInputs& inputs,
                                const ChunkOptions& options);

}  // namespace xlnet::finetune
