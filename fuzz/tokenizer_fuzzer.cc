// Fuzz target: SentencePiece model loading (data_pipeline/tokenizer.h,
// Tokenizer::FromBytes, which checks XLNet's special pieces); an accepted
// model encodes one fixed sentence. SentencePiece itself (a module loaded
// at run time) is not instrumented: this covers our checks around it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data_pipeline/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tokenizer = xlnet::data::Tokenizer::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "spiece.model");
  if (tokenizer.ok()) {
    (void)(*tokenizer)->Encode("Hello, world: 1,000 \xc3\xa9t\xc3\xa9s.");
  }
  return 0;
}
