#include "common/json.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace xlnet {

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text,
                                         const std::string& source) {
  using Json = nlohmann::json;
  // The keys seen so far in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event,
                                            Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, check);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON (byte ", e.byte, ")"));
  } catch (const Json::exception& e) {
    // A number too big for a double ("1e512") is out_of_range, not a
    // parse_error (found by fuzz/model_config_json_fuzzer.cc).
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON (", e.what(), ")"));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": duplicate key '", duplicate, "'"));
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
