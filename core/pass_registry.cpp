#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/pass.h"
#include "core/suggest.h"
#include "lazylab/backend_options.hpp"

namespace lazylab {

static_assert(static_cast<uint32_t>(OptionKind::Int) == LAZYLAB_OPTION_INT &&
              static_cast<uint32_t>(OptionKind::Bool) == LAZYLAB_OPTION_BOOL &&
              static_cast<uint32_t>(OptionKind::Enum) == LAZYLAB_OPTION_ENUM &&
              static_cast<uint32_t>(OptionKind::String) == LAZYLAB_OPTION_STRING);

std::string option_text(const OptionValue& value) {
  if (const auto* number = std::get_if<int64_t>(&value)) return std::to_string(*number);
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  return std::get<std::string>(value);
}

Expected<OptionValue> parse_option_value(const PassOptionSpec& spec, const std::string& text) {
  switch (spec.kind) {
    case OptionKind::Int: {
      int64_t value = 0;
      if (!options::parse_int(text, value))
        return make_error(fmt::format("option '{}' expects an integer, got '{}'", spec.name, text));
      if (value < spec.min_value)
        return make_error(fmt::format("option '{}' must be at least {}, got {}", spec.name, spec.min_value, value));
      return OptionValue(value);
    }
    case OptionKind::Bool:
      if (bool flag = false; options::parse_bool(text, flag)) return OptionValue(flag);
      return make_error(fmt::format("option '{}' expects true or false, got '{}'", spec.name, text));
    case OptionKind::Enum: {
      std::vector<std::string> allowed = spec.allowed();
      for (const std::string& choice : allowed)
        if (choice == text) return OptionValue(text);
      return make_error(fmt::format("option '{}' expects one of {{{}}}, got '{}'{}", spec.name,
                                    fmt::join(allowed, ", "), text, did_you_mean(text, allowed)));
    }
    case OptionKind::String: return OptionValue(text);
  }
  return OptionValue(text);
}

}  // namespace lazylab
