// A backend's options (ABI 3.11's lazylab_option_spec) read from
// "name=value,..." text: the one home of how each kind of value is spelled.
// The host checks a user's text with it and hands create() every option
// canonically; a plugin's create() reads that text back into typed values
// (BackendOptions), checking it again for a host older than 3.11, which
// passes the user's text as written. Header-only, C++17 and later.
#ifndef LAZYLAB_BACKEND_OPTIONS_HPP
#define LAZYLAB_BACKEND_OPTIONS_HPP

#include <charconv>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "lazylab/backend_abi.h"

namespace lazylab::options {

// true, on, 1 / false, off, 0.
inline bool parse_bool(const std::string& text, bool& value) {
  if (text == "true" || text == "on" || text == "1") return value = true, true;
  if (text == "false" || text == "off" || text == "0") return value = false, true;
  return false;
}

inline bool parse_int(const std::string& text, int64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

inline std::vector<std::string> enum_choices(const lazylab_option_spec& spec) {
  std::vector<std::string> choices;
  std::string all = spec.choices ? spec.choices : "";
  for (size_t start = 0; start <= all.size();) {
    size_t bar = all.find('|', start);
    if (bar == std::string::npos) bar = all.size();
    if (bar > start) choices.push_back(all.substr(start, bar - start));
    start = bar + 1;
  }
  return choices;
}

inline const char* kind_name(uint32_t kind) {
  switch (kind) {
    case LAZYLAB_OPTION_INT: return "integer";
    case LAZYLAB_OPTION_BOOL: return "on|off";
    case LAZYLAB_OPTION_ENUM: return "choice";
    default: return "text";
  }
}

// Empty when `text` is a value of the spec's kind, else why not, as
// "option 'NAME' expects ..., got 'TEXT'".
inline std::string check_value(const lazylab_option_spec& spec, const std::string& text) {
  std::string got = ", got '" + text + "'";
  switch (spec.kind) {
    case LAZYLAB_OPTION_INT: {
      int64_t value = 0;
      if (!parse_int(text, value)) return "option '" + std::string(spec.name) + "' expects an integer" + got;
      if (value < spec.min_value)
        return "option '" + std::string(spec.name) + "' must be at least " + std::to_string(spec.min_value) + got;
      return {};
    }
    case LAZYLAB_OPTION_BOOL: {
      bool value = false;
      return parse_bool(text, value) ? std::string()
                                     : "option '" + std::string(spec.name) + "' expects on or off" + got;
    }
    case LAZYLAB_OPTION_ENUM: {
      std::string listed;
      for (const std::string& choice : enum_choices(spec)) {
        if (choice == text) return {};
        listed += (listed.empty() ? "" : ", ") + choice;
      }
      return "option '" + std::string(spec.name) + "' expects one of {" + listed + "}" + got;
    }
    case LAZYLAB_OPTION_STRING: return {};
    default: return "option '" + std::string(spec.name) + "' has an unknown kind " + std::to_string(spec.kind);
  }
}

// A checked value in one spelling: on/off for a switch, an integer's
// decimal digits; other kinds as written.
inline std::string canonical_value(const lazylab_option_spec& spec, const std::string& text) {
  bool flag = false;
  int64_t number = 0;
  if (spec.kind == LAZYLAB_OPTION_BOOL && parse_bool(text, flag)) return flag ? "on" : "off";
  if (spec.kind == LAZYLAB_OPTION_INT && parse_int(text, number)) return std::to_string(number);
  return text;
}

// "name=value,..." into its items in order; empty, or what is wrong (an item
// without '=', a name given twice).
inline std::string split_items(const std::string& text, std::vector<std::pair<std::string, std::string>>& items) {
  for (size_t start = 0; start < text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return "option '" + item + "' is not name=value";
    std::string name = item.substr(0, eq);
    for (const auto& [seen, value] : items)
      if (seen == name) return "option '" + name + "' is given twice";
    items.emplace_back(std::move(name), item.substr(eq + 1));
  }
  return {};
}

inline const lazylab_option_spec* find_spec(const lazylab_option_spec* specs, uint32_t count, const std::string& name) {
  for (uint32_t i = 0; i < count; ++i)
    if (name == specs[i].name) return &specs[i];
  return nullptr;
}

inline std::string names(const lazylab_option_spec* specs, uint32_t count) {
  std::string listed;
  for (uint32_t i = 0; i < count; ++i) listed += (i ? ", " : "") + std::string(specs[i].name);
  return count ? listed : "none";
}

// Every option's value as text, checked: the given ones, the defaults for
// the rest. Throws std::invalid_argument naming `backend` and what is wrong,
// worded as the host words it.
inline std::map<std::string, std::string> read(const char* backend, const lazylab_option_spec* specs, uint32_t count,
                                               const std::string& text) {
  std::string who = "backend '" + std::string(backend) + "'";
  std::vector<std::pair<std::string, std::string>> items;
  if (std::string error = split_items(text, items); !error.empty()) throw std::invalid_argument(who + ": " + error);
  std::map<std::string, std::string> values;
  for (uint32_t i = 0; i < count; ++i) values[specs[i].name] = specs[i].default_value ? specs[i].default_value : "";
  for (const auto& [name, value] : items) {
    const lazylab_option_spec* spec = find_spec(specs, count, name);
    if (!spec)
      throw std::invalid_argument(who + " has no option '" + name + "' (options: " + names(specs, count) + ")");
    if (std::string error = check_value(*spec, value); !error.empty()) throw std::invalid_argument(who + ": " + error);
    values[name] = value;
  }
  return values;
}

}  // namespace lazylab::options

namespace lazylab::plugin {

// A backend's options as typed values, for its constructor: declared once
// as a lazylab_option_spec array, read once here. Asking for an option that
// is not declared, or under another kind, is a programming error
// (std::logic_error).
class BackendOptions {
 public:
  BackendOptions(const char* backend, const lazylab_option_spec* specs, uint32_t count, const std::string& text)
      : specs_(specs), count_(count), values_(options::read(backend, specs, count, text)) {}

  int64_t integer(const char* name) const {
    int64_t value = 0;
    options::parse_int(value_of(name, LAZYLAB_OPTION_INT), value);
    return value;
  }
  bool flag(const char* name) const {
    bool value = false;
    options::parse_bool(value_of(name, LAZYLAB_OPTION_BOOL), value);
    return value;
  }
  // An ENUM's choice or a STRING's text.
  const std::string& text(const char* name) const {
    const lazylab_option_spec* spec = options::find_spec(specs_, count_, name);
    if (spec && spec->kind == LAZYLAB_OPTION_ENUM) return value_of(name, LAZYLAB_OPTION_ENUM);
    return value_of(name, LAZYLAB_OPTION_STRING);
  }

 private:
  const std::string& value_of(const char* name, uint32_t kind) const {
    const lazylab_option_spec* spec = options::find_spec(specs_, count_, name);
    if (!spec || spec->kind != kind)
      throw std::logic_error(std::string("backend option '") + name + "' is not declared as a " +
                             options::kind_name(kind));
    return values_.at(name);
  }

  const lazylab_option_spec* specs_;
  uint32_t count_;
  std::map<std::string, std::string> values_;
};

}  // namespace lazylab::plugin

#endif
