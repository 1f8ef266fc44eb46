#include "core/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace lazylab {
namespace {

// Levenshtein distance with case-insensitive letters, one row at a time.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      bool same =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  // A typo is in a name people type; beyond this length a suggestion helps
  // no one, and a sweep's thousands of long names would cost quadratic time
  // each (found by the experiment-loader libFuzzer target).
  constexpr size_t kLongestSuggested = 64;
  if (name.size() > kLongestSuggested) return "";
  size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    // The distance is at least the difference in length: skip the quadratic
    // work where it cannot be close (a long mistyped text, say).
    size_t length_gap = std::max(name.size(), candidate.size()) - std::min(name.size(), candidate.size());
    if (length_gap >= best_distance || candidate.size() > kLongestSuggested) continue;
    size_t distance = edit_distance(name, candidate);
    if (distance < best_distance && candidate != name) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best = closest_name(name, candidates);
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

}  // namespace lazylab
