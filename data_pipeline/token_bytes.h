// How many bytes of text each token stands for: the denominator of bits per
// byte, the language-modelling metric that compares models across
// tokenizers (a model with a larger vocabulary predicts fewer, longer
// tokens, so per-token perplexities do not compare; per-byte ones do).
//
//   std::vector<int32_t> bytes = TokenTextBytes(tokenizer);
//   double bits_per_byte = nll_nats / std::log(2.0) / total_bytes;
//
// A piece's bytes are its UTF-8 length with the word-boundary mark "▁"
// (3 bytes) counted as the one space it replaces; a line's first piece
// carries that mark too, so the space stands for the line break. XLNet's
// special pieces (<s>, </s>, <cls>, <sep>, <pad>, <mask>, <eod>, <eop>)
// stand for no text and count 0; <unk> counts 1 (it replaced at least one
// character). Text rules applied before SentencePiece (whitespace
// collapsed, `` and '' as ") make this the size of the normalised text,
// within a few percent of the raw file.
#pragma once

#include <cstdint>
#include <vector>

#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// Bytes of text of every id in [0, vocab_size).
std::vector<int32_t> TokenTextBytes(const Tokenizer& tokenizer);

}  // namespace xlnet::data
