// HuggingFace's fast-tokenizer file (`tokenizer.json`, the `tokenizers`
// library's format) for a SentencePiece XLNet tokenizer, so that
// transformers' default AutoTokenizer (XLNetTokenizerFast) gives the ids
// that SentencePiece, the official code and xlnet.cpp give.
//
// Without this file transformers converts spiece.model itself
// (convert_slow_tokenizer.XLNetConverter) and makes SentencePiece's
// user-defined pieces (. ( ) " - – £ € in XLNet's recipe) added tokens: it
// cuts the text at them and starts the next fragment with '▁', where
// SentencePiece matches them inside the text (`well-known`: converted
// `▁well - ▁ known`, SentencePiece `▁well - known`). Here they stay plain
// vocabulary entries of the Unigram model: no other piece contains them
// (SentencePiece's trainer never builds one across a user-defined symbol),
// so the lattice splits at them exactly as SentencePiece's matcher does.
// Everything else is what the converter writes for XLNet: the text rules
// as normalizers (quotes, NFKD + accent stripping unless keep_accents,
// lowercasing when uncased, the model's own precompiled normalization,
// collapsed spaces), a Metaspace pre-tokenizer, `A <sep> <cls>` /
// `A <sep> B <sep> <cls>` templates with segment ids 0, 1 and 2, and the
// digit-comma rule as a score penalty (a piece `9,` costs 100 more, so
// `9` `,` wins, as XLNet's encode_pieces re-splits it).
//
// Remaining difference, measured on the bundled Brown sample: where two
// segmentations score exactly the same (`0` `00` and `00` `0` of `1000`
// in one of 2,825 lines) the two Viterbi implementations may pick
// differently (docs/hf-migration.md).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// The tokenizer.json text for the SentencePiece model `model_bytes`
// (`source` names it in errors) with the text rules `rules`. Pieces named
// in `special_tokens` become special added tokens (matched before
// normalization, as the slow tokenizer's special tokens are); every one
// must be in the vocabulary. A model this format cannot express (no
// <unk>, whitespace handling other than SentencePiece's defaults) is
// InvalidArgument saying why.
absl::StatusOr<std::string> HfTokenizerJson(
    const std::string& model_bytes, const TextRules& rules,
    const std::vector<std::string>& special_tokens, const std::string& source);

}  // namespace xlnet::data
