#include "lm/text_ids.h"

#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data_pipeline/input_reader.h"
#include "data_pipeline/sentence_splitter.h"
#include "data_pipeline/text.h"

namespace xlnet {

absl::StatusOr<TextIds> TokenizeTextFile(const std::string& path,
                                         const data::Tokenizer& tokenizer,
                                         const TextIdsOptions& options) {
  if (options.max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens ", options.max_tokens, ": must be >= 0"));
  }
  const int64_t limit =
      options.max_tokens > 0 ? options.max_tokens : kMaxTextTokens;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<data::LineReader> reader,
                         data::LineReader::Open(path, options.max_line_bytes));
  const bool json =
      data::KindOfInput(path).format == data::TextFormat::kJsonLines;
  TextIds out;
  int64_t doc_begin = 0;
  std::vector<int32_t> ids;
  std::string record;
  std::vector<std::string_view> sentences;
  // Whether more than `limit` tokens were seen (one past the limit is kept
  // to tell a file that ends exactly there from a longer one).
  auto full = [&]() { return static_cast<int64_t>(out.ids.size()) > limit; };
  auto end_document = [&]() {
    if (static_cast<int64_t>(out.ids.size()) == doc_begin) return;
    if (options.use_eod) out.ids.push_back(data::kEodId);
    doc_begin = static_cast<int64_t>(out.ids.size());
  };
  auto add_sentence = [&](std::string_view sentence,
                          int64_t line_no) -> absl::Status {
    XLNET_RETURN_IF_ERROR(
        Annotate(tokenizer.EncodeIds(sentence, &ids), path, ":", line_no));
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    return absl::OkStatus();
  };
  data::Line line;
  bool at_end = true;
  while (true) {
    if (full()) {
      at_end = false;
      break;
    }
    XLNET_ASSIGN_OR_RETURN(const bool more, reader->Next(&line));
    if (!more) break;
    ++out.lines;
    if (line.overlong || !data::IsValidUtf8(line.text)) {
      ++out.skipped_lines;
      continue;
    }
    if (data::IsPythonBlank(line.text)) {
      if (!json) end_document();
      continue;
    }
    if (!json) {
      XLNET_RETURN_IF_ERROR(add_sentence(line.text, line.number));
      continue;
    }
    if (!data::RecordText(line.text, options.json_key, &record).ok()) {
      ++out.skipped_lines;
      continue;
    }
    sentences.clear();
    data::SplitSentences(record, &sentences);
    for (std::string_view sentence : sentences) {
      XLNET_RETURN_IF_ERROR(add_sentence(sentence, line.number));
    }
    end_document();
  }
  if (at_end) end_document();
  if (out.ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": no tokens (the file is empty or every line was "
                     "blank or skipped)"));
  }
  if (static_cast<int64_t>(out.ids.size()) > limit) {
    if (options.max_tokens == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": more than ", kMaxTextTokens,
          " tokens; pass --max_tokens N to read only its first N tokens"));
    }
    out.ids.resize(limit);
    out.truncated = true;
  }
  return out;
}

}  // namespace xlnet
