// "Did you mean" for names a user mistypes: passes, options, backends,
// workloads, experiment keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lazylab {

// The candidate closest to `name` by edit distance, if it is close enough to
// be a likely typo (at most a third of the name's length, at least 2);
// empty otherwise.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for the closest candidate, or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace lazylab
