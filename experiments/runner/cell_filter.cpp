#include "cell_filter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <sstream>

#include "core/suggest.h"

namespace lazylab {
namespace {

const std::vector<std::string>& filter_keys() {
  static const std::vector<std::string> kKeys = {"workload", "pipeline", "backend", "label"};
  return kKeys;
}

bool matches(const std::string& glob, std::initializer_list<const std::string*> values) {
  return std::any_of(values.begin(), values.end(),
                     [&](const std::string* value) { return fnmatch(glob.c_str(), value->c_str(), 0) == 0; });
}

}  // namespace

Expected<CellFilter> CellFilter::parse(const std::vector<std::string>& filters) {
  CellFilter filter;
  for (const std::string& text : filters) {
    std::vector<Condition> conditions;
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) {
      size_t eq = item.find('=');
      std::string key = item.substr(0, eq);
      if (eq == std::string::npos || eq + 1 == item.size())
        return make_error(fmt::format("--filter '{}': '{}' needs the form KEY=GLOB (keys: {})", text, item,
                                      fmt::join(filter_keys(), ", ")));
      if (std::find(filter_keys().begin(), filter_keys().end(), key) == filter_keys().end())
        return make_error(fmt::format("--filter '{}': unknown key '{}'{} (keys: {})", text, key,
                                      did_you_mean(key, filter_keys()), fmt::join(filter_keys(), ", ")));
      conditions.push_back({key, item.substr(eq + 1)});
    }
    filter.alternatives_.push_back(std::move(conditions));
  }
  return filter;
}

bool CellFilter::selects(const CellIdentity& cell) const {
  if (alternatives_.empty()) return true;
  auto holds = [&](const Condition& c) {
    if (c.key == "workload") return matches(c.glob, {&cell.workload, &cell.workload_shown, &cell.label});
    if (c.key == "pipeline") return matches(c.glob, {&cell.pipeline});
    if (c.key == "backend") return matches(c.glob, {&cell.backend, &cell.backend_shown});
    return matches(c.glob, {&cell.label});
  };
  return std::any_of(alternatives_.begin(), alternatives_.end(), [&](const std::vector<Condition>& conditions) {
    return std::all_of(conditions.begin(), conditions.end(), holds);
  });
}

}  // namespace lazylab
