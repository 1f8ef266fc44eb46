#include "core/backend_options.h"

#include <fmt/format.h>

#include <cstddef>

#include "core/suggest.h"
#include "lazylab/backend_options.hpp"

namespace lazylab {

std::span<const lazylab_option_spec> declared_options(const lazylab_backend_api& api) {
  if (api.struct_size < offsetof(lazylab_backend_api, num_options) + sizeof(api.num_options) || !api.options) return {};
  return {api.options, api.num_options};
}

Status check_declared_options(const lazylab_backend_api& api) {
  for (const lazylab_option_spec& spec : declared_options(api)) {
    std::string problem;
    if (!spec.name || !*spec.name)
      problem = "an option without a name";
    else if (!spec.default_value || !spec.summary)
      problem = fmt::format("option '{}' has a NULL default or summary", spec.name);
    else if (spec.kind > LAZYLAB_OPTION_STRING)
      problem = fmt::format("option '{}' has an unknown kind {}", spec.name, spec.kind);
    else if (spec.kind == LAZYLAB_OPTION_ENUM && !spec.choices)
      problem = fmt::format("option '{}' is a choice without choices", spec.name);
    else if (std::string error = options::check_value(spec, spec.default_value); !error.empty())
      problem = "the default of " + error;
    if (!problem.empty()) return make_error(fmt::format("backend {} declares a bad option: {}", api.name, problem));
  }
  return {};
}

Expected<std::string> canonical_options(const lazylab_backend_api& api, const std::string& text) {
  std::span<const lazylab_option_spec> specs = declared_options(api);
  if (specs.empty()) return text;  // the plugin reads it itself (plugin::BackendOptions refuses any)
  std::vector<std::pair<std::string, std::string>> items;
  if (std::string error = options::split_items(text, items); !error.empty())
    return make_error(fmt::format("backend '{}': {}", api.name, error));
  std::vector<std::string> values, names;
  for (const lazylab_option_spec& spec : specs) {
    values.push_back(options::canonical_value(spec, spec.default_value));
    names.push_back(spec.name);
  }
  for (const auto& [name, value] : items) {
    const lazylab_option_spec* spec = options::find_spec(specs.data(), static_cast<uint32_t>(specs.size()), name);
    if (!spec)
      return make_error(fmt::format("backend '{}' has no option '{}'{} (options: {})", api.name, name,
                                    did_you_mean(name, names),
                                    options::names(specs.data(), static_cast<uint32_t>(specs.size()))));
    if (std::string error = options::check_value(*spec, value); !error.empty())
      return make_error(fmt::format("backend '{}': {}", api.name, error));
    values[spec - specs.data()] = options::canonical_value(*spec, value);
  }
  std::string canonical;
  for (size_t i = 0; i < specs.size(); ++i) canonical += fmt::format("{}{}={}", i ? "," : "", names[i], values[i]);
  return canonical;
}

std::vector<std::string> describe_options(const lazylab_backend_api& api) {
  std::vector<std::string> lines;
  for (const lazylab_option_spec& spec : declared_options(api)) {
    std::string kind = spec.kind == LAZYLAB_OPTION_ENUM ? spec.choices
                       : spec.kind == LAZYLAB_OPTION_INT && spec.min_value > INT64_MIN
                           ? fmt::format("integer >= {}", spec.min_value)
                           : options::kind_name(spec.kind);
    lines.push_back(fmt::format("{}={}  ({}) {}", spec.name, spec.default_value, kind, spec.summary));
  }
  return lines;
}

}  // namespace lazylab
