#include "core/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/hash.h"
#include "core/suggest.h"

namespace lazylab {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// Splits on `separator` outside braces.
Expected<std::vector<std::string_view>> split_top_level(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth < 0) return make_error(fmt::format("unbalanced '}}' at column {}", i + 1));
    if (text[i] == separator && depth == 0) {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return make_error("unbalanced '{'");
  parts.push_back(trim(text.substr(start)));
  return parts;
}

std::vector<std::string> known_names(const PassRegistry& registry) {
  std::vector<std::string> names;
  for (const PassInfo* info : registry.list()) names.push_back(info->name);
  return names;
}

Expected<std::map<std::string, std::string>> parse_option_text(const PassInfo& info, std::string_view body) {
  std::map<std::string, std::string> values, given;
  for (const PassOptionSpec& spec : info.options) values[spec.name] = spec.default_value;
  if (trim(body).empty()) return values;
  auto items = split_top_level(body, ',');
  if (!items) return make_error(fmt::format("pass '{}': {}", info.name, items.error().message));
  for (std::string_view item : *items) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return make_error(fmt::format("pass '{}': option '{}' needs the form name=value", info.name, item));
    std::string name(trim(item.substr(0, eq)));
    auto spec =
        std::find_if(info.options.begin(), info.options.end(), [&](const PassOptionSpec& s) { return s.name == name; });
    if (spec == info.options.end()) {
      std::vector<std::string> known;
      for (const PassOptionSpec& s : info.options) known.push_back(s.name);
      return make_error(fmt::format("pass '{}' has no option '{}'{} (options: {})", info.name, name,
                                    did_you_mean(name, known),
                                    known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
    }
    auto value = check_option_value(*spec, std::string(trim(item.substr(eq + 1))));
    if (!value) return make_error(fmt::format("pass '{}': {}", info.name, value.error().message));
    if (!given.emplace(name, *value).second)
      return make_error(fmt::format("pass '{}': option '{}' is given twice", info.name, name));
    values[name] = *value;
  }
  return values;
}

Expected<PassInvocation> parse_invocation(std::string_view item, const PassRegistry& registry) {
  size_t brace = item.find('{');
  std::string name(trim(item.substr(0, brace)));
  const PassInfo* info = registry.find(name);
  if (!info)
    return make_error(fmt::format("unknown pass '{}'{} (known: {})", name, did_you_mean(name, known_names(registry)),
                                  fmt::join(known_names(registry), ", ")));
  std::string_view body;
  if (brace != std::string_view::npos) {
    if (item.back() != '}') return make_error(fmt::format("pass '{}': text after its options", name));
    body = item.substr(brace + 1, item.size() - brace - 2);
  }
  auto values = parse_option_text(*info, body);
  if (!values) return values.error();
  std::vector<std::string> spelled;
  for (auto& [key, value] : *values) spelled.push_back(key + "=" + value);
  std::string canonical = spelled.empty() ? name : fmt::format("{}{{{}}}", name, fmt::join(spelled, ","));
  return PassInvocation{info, PassOptions(std::move(*values)), std::move(canonical)};
}

// The first pass out of stage order, named with the pass that it follows or
// needs.
Status check_stage_order(const std::vector<PassInvocation>& passes) {
  const PassInvocation* lowering = nullptr;
  for (const PassInvocation& pass : passes) {
    PassStage stage = pass.info->stage;
    if (stage == PassStage::Graph && lowering)
      return make_error(fmt::format("pass '{}' works on the graph, but comes after '{}' turned it into a Program",
                                    pass.info->name, lowering->info->name));
    if (stage == PassStage::Lowering && lowering)
      return make_error(
          fmt::format("pass '{}' comes after '{}' already lowered the graph", pass.info->name, lowering->info->name));
    if (stage == PassStage::Program && !lowering)
      return make_error(
          fmt::format("pass '{}' works on a Program; put it after a lowering pass such as 'lower'", pass.info->name));
    if (stage == PassStage::Lowering) lowering = &pass;
  }
  return {};
}

}  // namespace

Expected<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry) {
  auto items = split_top_level(text, ',');
  if (!items) return make_error(fmt::format("pipeline '{}': {}", text, items.error().message));
  Pipeline pipeline;
  std::vector<std::string> canonical;
  for (std::string_view item : *items) {
    if (item.empty()) return make_error(fmt::format("pipeline '{}': empty pass name", text));
    auto invocation = parse_invocation(item, registry);
    if (!invocation) return make_error(fmt::format("pipeline '{}': {}", text, invocation.error().message));
    canonical.push_back(invocation->canonical);
    pipeline.passes.push_back(std::move(*invocation));
  }
  if (Status order = check_stage_order(pipeline.passes); !order)
    return make_error(fmt::format("pipeline '{}': {}", text, order.error().message));
  pipeline.lowers = std::any_of(pipeline.passes.begin(), pipeline.passes.end(),
                                [](const PassInvocation& p) { return p.info->stage == PassStage::Lowering; });
  pipeline.canonical = fmt::format("{}", fmt::join(canonical, ","));
  pipeline.fingerprint = hash_bytes(pipeline.canonical.data(), pipeline.canonical.size());
  return pipeline;
}

}  // namespace lazylab
