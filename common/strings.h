// Small string helpers shared by the config and flag parsers.
#pragma once

#include <string>
#include <vector>

namespace xlnet {

// Levenshtein distance between `a` and `b`.
int EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `word` if it is close enough to be a likely typo
// (distance <= max(2, |word|/3)), else "".
std::string ClosestMatch(const std::string& word,
                         const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" when ClosestMatch finds one, else "".
std::string DidYouMean(const std::string& word,
                       const std::vector<std::string>& candidates);

// Human-readable byte count: "1.5 MiB".
std::string HumanBytes(double bytes);

// Integer with thousands separators: "117,309,440".
std::string WithCommas(int64_t value);

}  // namespace xlnet
