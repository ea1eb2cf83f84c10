#include "data_pipeline/tokenizer_identity.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"

namespace xlnet::data {

absl::StatusOr<std::string> TokenizerFileHash(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(const std::string bytes,
                         ReadFile(path, kMaxTokenizerBytes));
  return HexU64(Fnv1a64(bytes.data(), bytes.size()));
}

absl::Status CheckSameTokenizer(const Tokenizer& used,
                                const std::string& used_name,
                                const std::string& other_path) {
  XLNET_ASSIGN_OR_RETURN(const std::string other_hash,
                         TokenizerFileHash(other_path));
  if (other_hash == used.hash()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      used_name, " (hash ", used.hash(), ") is not the tokenizer ", other_path,
      " (hash ", other_hash,
      "): the model's ids would name other pieces; use the model's own "
      "tokenizer"));
}

}  // namespace xlnet::data
