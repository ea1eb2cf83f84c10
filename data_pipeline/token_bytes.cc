#include "data_pipeline/token_bytes.h"

#include <string>

namespace xlnet::data {

std::vector<int32_t> TokenTextBytes(const Tokenizer& tokenizer) {
  static const std::string kUnderline = "\xE2\x96\x81";
  std::vector<int32_t> bytes(tokenizer.vocab_size(), 0);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (id == kUnkId) {
      bytes[id] = 1;
      continue;
    }
    if (id <= kEopId) continue;  // special pieces stand for no text
    const std::string& piece = tokenizer.IdToPiece(id);
    int32_t n = 0;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kUnderline.size(), kUnderline) == 0) {
        i += kUnderline.size();
      } else {
        ++i;
      }
      ++n;
    }
    bytes[id] = n;
  }
  return bytes;
}

}  // namespace xlnet::data
