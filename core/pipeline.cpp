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

// Splits on `separator` outside braces and parentheses.
Expected<std::vector<std::string_view>> split_top_level(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::string open;  // the brackets open at this point, innermost last
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{' || c == '(') open += c;
    if (c == '}' || c == ')') {
      if (open.empty() || open.back() != (c == '}' ? '{' : '('))
        return make_error(fmt::format("unbalanced '{}' at column {}", c, i + 1));
      open.pop_back();
    }
    if (c == separator && open.empty()) {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!open.empty()) return make_error(fmt::format("unbalanced '{}'", open.back()));
  parts.push_back(trim(text.substr(start)));
  return parts;
}

// Where the bracket opening `text` closes, or npos (split_top_level has
// checked that brackets balance).
size_t closing(std::string_view text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{' || text[i] == '(') ++depth;
    if ((text[i] == '}' || text[i] == ')') && --depth == 0) return i;
  }
  return std::string_view::npos;
}

std::vector<std::string> known_names(const PassRegistry& registry) {
  std::vector<std::string> names;
  for (const PassInfo* info : registry.list()) names.push_back(info->name);
  return names;
}

const PassOptionSpec* find_spec(const std::vector<PassOptionSpec>& specs, const std::string& name) {
  auto it = std::find_if(specs.begin(), specs.end(), [&](const PassOptionSpec& s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

// "name=value" items, each name once, in the order given.
Expected<std::vector<std::pair<std::string, std::string>>> split_options(const PassInfo& info, std::string_view body) {
  std::vector<std::pair<std::string, std::string>> items;
  if (trim(body).empty()) return items;
  auto parts = split_top_level(body, ',');
  if (!parts) return make_error(fmt::format("pass '{}': {}", info.name, parts.error().message));
  for (std::string_view part : *parts) {
    size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      return make_error(fmt::format("pass '{}': option '{}' needs the form name=value", info.name, part));
    std::string name(trim(part.substr(0, eq)));
    for (auto& [seen, value] : items)
      if (seen == name) return make_error(fmt::format("pass '{}': option '{}' is given twice", info.name, name));
    items.emplace_back(std::move(name), std::string(trim(part.substr(eq + 1))));
  }
  return items;
}

struct ParsedOptions {
  std::map<std::string, OptionValue> values;
  std::string extension_provenance;
};

// Checks `items` against the pass's options, then against the options the
// first ones bring (a strategy's own), filling in every default.
Expected<ParsedOptions> parse_option_text(const PassInfo& info, std::string_view body) {
  auto items = split_options(info, body);
  if (!items) return items.error();
  ParsedOptions parsed;
  std::vector<PassOptionSpec> specs = info.options;
  auto apply = [&](const std::vector<PassOptionSpec>& layer, bool last) -> Status {
    for (const PassOptionSpec& spec : layer) {
      auto fallback = parse_option_value(spec, spec.default_value);
      if (!fallback)
        return make_error(fmt::format("pass '{}': the default of {}", info.name, fallback.error().message));
      parsed.values.try_emplace(spec.name, std::move(*fallback));
    }
    for (auto& [name, text] : *items) {
      const PassOptionSpec* spec = find_spec(layer, name);
      if (!spec && !last) continue;
      if (!spec && !find_spec(specs, name)) {
        std::vector<std::string> known;
        for (const PassOptionSpec& s : specs) known.push_back(s.name);
        return make_error(fmt::format("pass '{}' has no option '{}'{} (options: {})", info.name, name,
                                      did_you_mean(name, known),
                                      known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
      }
      if (!spec) continue;
      auto value = parse_option_value(*spec, text);
      if (!value) return make_error(fmt::format("pass '{}': {}", info.name, value.error().message));
      parsed.values[name] = std::move(*value);
    }
    return {};
  };
  LAZYLAB_TRY(apply(info.options, !info.extend));
  if (info.extend) {
    OptionExtension extension = info.extend(PassOptions(parsed.values));
    for (const PassOptionSpec& spec : extension.options)
      if (find_spec(specs, spec.name))
        return make_error(fmt::format("pass '{}': option '{}' of {} clashes with the pass's own", info.name, spec.name,
                                      extension.provenance.empty() ? "a built-in" : extension.provenance));
    specs.insert(specs.end(), extension.options.begin(), extension.options.end());
    LAZYLAB_TRY(apply(extension.options, true));
    parsed.extension_provenance = std::move(extension.provenance);
  }
  return parsed;
}

Expected<std::vector<PassInvocation>> parse_items(std::string_view text, const PassRegistry& registry);

// A pass's text after its name: {options}, then (passes) for a combinator.
struct InvocationText {
  std::string_view options, passes;
  bool has_passes = false;
};

Expected<InvocationText> split_invocation(const std::string& name, std::string_view rest) {
  InvocationText text;
  if (!rest.empty() && rest.front() == '{') {
    size_t close = closing(rest);
    text.options = rest.substr(1, close - 1);
    rest = trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest.front() == '(' && closing(rest) == rest.size() - 1) {
    text.passes = rest.substr(1, rest.size() - 2);
    text.has_passes = true;
  } else if (!rest.empty()) {
    return make_error(fmt::format("pass '{}': text after its {}", name, rest.front() == '(' ? "passes" : "options"));
  }
  return text;
}

// A combinator's passes: graph passes, at least one.
Status parse_body(PassInvocation& invocation, std::string_view text, const PassRegistry& registry) {
  const std::string& name = invocation.info->name;
  if (trim(text).empty()) return make_error(fmt::format("pass '{}' names no pass in its parentheses", name));
  auto body = parse_items(text, registry);
  if (!body) return make_error(fmt::format("pass '{}': {}", name, body.error().message));
  std::vector<std::string> canonical;
  for (PassInvocation& pass : *body) {
    if (pass.info->stage != PassStage::Graph)
      return make_error(fmt::format("pass '{}' repeats graph passes; '{}' is not one", name, pass.info->name));
    canonical.push_back(pass.canonical);
    for (const std::string& source : pass.provenance)
      if (std::find(invocation.provenance.begin(), invocation.provenance.end(), source) == invocation.provenance.end())
        invocation.provenance.push_back(source);
  }
  invocation.canonical += fmt::format("({})", fmt::join(canonical, ","));
  invocation.body = std::move(*body);
  return {};
}

Expected<PassInvocation> parse_invocation(std::string_view item, const PassRegistry& registry) {
  size_t open = item.find_first_of("{(");
  std::string name(trim(item.substr(0, open)));
  const PassInfo* info = registry.find(name);
  if (!info)
    return make_error(fmt::format("unknown pass '{}'{} (known: {})", name, did_you_mean(name, known_names(registry)),
                                  fmt::join(known_names(registry), ", ")));
  auto text = split_invocation(name, open == std::string_view::npos ? std::string_view{} : item.substr(open));
  if (!text) return text.error();
  bool combinator = static_cast<bool>(info->create_around);
  if (combinator && !text->has_passes)
    return make_error(fmt::format("pass '{0}' repeats the passes in its parentheses, as {0}(canonicalize,cse)", name));
  if (!combinator && text->has_passes) return make_error(fmt::format("pass '{}' takes no passes in parentheses", name));
  auto parsed = parse_option_text(*info, text->options);
  if (!parsed) return parsed.error();
  std::vector<std::string> spelled;
  for (auto& [key, value] : parsed->values) spelled.push_back(key + "=" + option_text(value));
  std::string canonical = spelled.empty() ? name : fmt::format("{}{{{}}}", name, fmt::join(spelled, ","));
  std::vector<std::string> provenance;
  for (const std::string* source : {&info->provenance, &std::as_const(parsed->extension_provenance)})
    if (!source->empty()) provenance.push_back(*source);
  PassInvocation invocation{
      info, PassOptions(std::move(parsed->values)), std::move(canonical), std::move(provenance), {}};
  if (combinator) LAZYLAB_TRY(parse_body(invocation, text->passes, registry));
  return invocation;
}

// Comma-separated pass invocations.
Expected<std::vector<PassInvocation>> parse_items(std::string_view text, const PassRegistry& registry) {
  auto items = split_top_level(text, ',');
  if (!items) return items.error();
  std::vector<PassInvocation> passes;
  for (std::string_view item : *items) {
    if (item.empty()) return make_error("empty pass name");
    auto invocation = parse_invocation(item, registry);
    if (!invocation) return invocation.error();
    passes.push_back(std::move(*invocation));
  }
  return passes;
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

std::unique_ptr<Pass> PassInvocation::create() const {
  if (!info->create_around) return info->create(options);
  std::vector<std::unique_ptr<Pass>> passes;
  for (const PassInvocation& pass : body) passes.push_back(pass.create());
  return info->create_around(options, std::move(passes));
}

Expected<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry) {
  // One rule wherever a pipeline is given (an experiment, --pipeline, the
  // API): it names at least one pass.
  if (trim(text).empty()) return make_error(fmt::format("pipeline '{}' names no pass (e.g. 'lower')", text));
  auto passes = parse_items(text, registry);
  if (!passes) return make_error(fmt::format("pipeline '{}': {}", text, passes.error().message));
  Pipeline pipeline;
  pipeline.passes = std::move(*passes);
  std::vector<std::string> canonical;
  for (const PassInvocation& invocation : pipeline.passes) canonical.push_back(invocation.canonical);
  if (Status order = check_stage_order(pipeline.passes); !order)
    return make_error(fmt::format("pipeline '{}': {}", text, order.error().message));
  pipeline.lowers = std::any_of(pipeline.passes.begin(), pipeline.passes.end(),
                                [](const PassInvocation& p) { return p.info->stage == PassStage::Lowering; });
  pipeline.canonical = fmt::format("{}", fmt::join(canonical, ","));
  for (const PassInvocation& pass : pipeline.passes)
    for (const std::string& source : pass.provenance)
      if (std::find(pipeline.provenance.begin(), pipeline.provenance.end(), source) == pipeline.provenance.end())
        pipeline.provenance.push_back(source);
  std::string identity = pipeline.provenance.empty()
                             ? pipeline.canonical
                             : fmt::format("{}|{}", pipeline.canonical, fmt::join(pipeline.provenance, ";"));
  pipeline.fingerprint = hash_bytes(identity.data(), identity.size());
  return pipeline;
}

}  // namespace lazylab
