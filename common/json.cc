#include "common/json.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace xlnet {
namespace {

using Json = nlohmann::json;

// A SAX handler that builds the document with nlohmann's own DOM builder
// and notes the first key repeated within one object. nlohmann's
// parser-callback API cannot be used for this: after every nested object
// it scans the whole parent for a discarded value, so a header with n
// tensor entries took O(n^2) time (40k tensors: 13 s). Here each key costs
// one set insertion: O(n log n) in all.
class DuplicateKeySax {
 public:
  explicit DuplicateKeySax(Json* root) : dom_(*root, true) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) {
    return dom_.number_integer(v);
  }
  bool number_unsigned(Json::number_unsigned_t v) {
    return dom_.number_unsigned(v);
  }
  bool number_float(Json::number_float_t v, const Json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(Json::string_t& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open_objects_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(Json::string_t& k) {
    if (!open_objects_.empty() && !open_objects_.back().insert(k).second &&
        duplicate_.empty()) {
      duplicate_ = k;
    }
    return dom_.key(k);
  }
  bool end_object() {
    if (!open_objects_.empty()) open_objects_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token,
                   const Exception& e) {
    // Throws `e` (the builder was made with exceptions allowed).
    return dom_.parse_error(position, token, e);
  }

  // The first key seen twice in one object ("" when none).
  const std::string& duplicate() const { return duplicate_; }

 private:
  // nlohmann's DOM builder, fed every event.
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  // The keys seen so far in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open_objects_;
  // The first repeated key.
  std::string duplicate_;
};

}  // namespace

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text,
                                         const std::string& source) {
  Json root;
  DuplicateKeySax sax(&root);
  try {
    Json::sax_parse(text, &sax);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON (byte ", e.byte, ")"));
  } catch (const Json::exception& e) {
    // A number too big for a double ("1e512") is out_of_range, not a
    // parse_error (found by fuzz/model_config_json_fuzzer.cc).
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON (", e.what(), ")"));
  }
  if (!sax.duplicate().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": duplicate key '", sax.duplicate(), "'"));
  }
  return root;
}
absl::StatusOr<int64_t> JsonInteger(const nlohmann::json& value,
                                    absl::string_view what, int64_t min,
                                    int64_t max) {
  bool in_range = false;
  int64_t n = 0;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    in_range = max >= 0 && u <= static_cast<uint64_t>(max);
    n = in_range ? static_cast<int64_t>(u) : 0;
    in_range = in_range && n >= min;
  } else if (value.is_number_integer()) {
    n = value.get<int64_t>();
    in_range = n >= min && n <= max;
  }
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", value.dump(), " is not an integer in [", min, ", ", max,
        "]"));
  }
  return n;
}

}  // namespace xlnet
