// Fuzz target: the fine-tuning example readers (finetune/examples.h,
// ParseExamples) for TSV and JSON Lines. The first byte picks the format,
// task, whether labels are required and the bad-row policy; the rest is the
// file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "finetune/examples.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view contents(reinterpret_cast<const char*>(data + 1),
                                  size - 1);
  namespace ft = xlnet::finetune;
  ft::ReadOptions options;
  options.task = (mode & 2) != 0 ? ft::TaskKind::kRegression
                                 : ft::TaskKind::kClassification;
  options.require_label = (mode & 4) == 0;
  options.bad_rows =
      (mode & 8) != 0 ? ft::BadRowPolicy::kSkip : ft::BadRowPolicy::kError;
  const ft::ExampleFormat format =
      (mode & 1) != 0 ? ft::ExampleFormat::kJsonl : ft::ExampleFormat::kTsv;
  (void)ft::ParseExamples(
      contents, format == ft::ExampleFormat::kJsonl ? "fuzz.jsonl" : "fuzz.tsv",
      format, options);
  return 0;
}
