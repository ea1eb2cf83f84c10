// Fuzz target: the SQuAD JSON reader (finetune/squad.h, ParseSquad). The
// first byte picks require_answers, check_answer_spans and the bad-row
// policy; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "finetune/squad.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  namespace ft = xlnet::finetune;
  ft::SquadReadOptions options;
  options.require_answers = (mode & 1) == 0;
  options.check_answer_spans = (mode & 2) == 0;
  options.bad_rows =
      (mode & 4) != 0 ? ft::BadRowPolicy::kSkip : ft::BadRowPolicy::kError;
  (void)ft::ParseSquad(
      std::string(reinterpret_cast<const char*>(data + 1), size - 1),
      "fuzz.json", options);
  return 0;
}
