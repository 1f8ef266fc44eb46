// A pass: a name, a one-line summary, typed options with defaults, and a run
// function that rewrites the module and says whether it changed anything.
// Passes register themselves by name (see LAZYLAB_REGISTER_PASS); core never
// includes a concrete pass.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "expected.h"
#include "module.h"
#include "registry.h"

namespace lazylab {

// The kinds of lazylab_option_kind (backend_abi.h), in its order: a pass's
// option and a backend's are one kind of fact (pass_registry.cpp ties them).
enum class OptionKind { Int, Bool, Enum, String };

struct PassOptionSpec {
  std::string name;
  OptionKind kind = OptionKind::String;
  std::string default_value;
  std::string help;
  std::vector<std::string> choices;  // OptionKind::Enum
  // For enums whose choices come from a registry filled at start-up.
  std::function<std::vector<std::string>()> dynamic_choices;
  int64_t min_value = INT64_MIN;  // OptionKind::Int

  std::vector<std::string> allowed() const { return dynamic_choices ? dynamic_choices() : choices; }
};

// One option's value, parsed once from the pipeline text into its kind's
// type: Int -> int64_t, Bool -> bool, Enum and String -> std::string.
using OptionValue = std::variant<int64_t, bool, std::string>;

// The canonical spelling of a value, as it appears in a pipeline.
std::string option_text(const OptionValue& value);

// Option values after validation against the pass's specs; every option has
// a value (its default when the pipeline does not set it). Asking for an
// option under another kind than its spec's is a programming error and
// throws std::bad_variant_access.
class PassOptions {
 public:
  PassOptions() = default;
  explicit PassOptions(std::map<std::string, OptionValue> values) : values_(std::move(values)) {}
  const std::string& get(const std::string& name) const { return std::get<std::string>(values_.at(name)); }
  int64_t get_int(const std::string& name) const { return std::get<int64_t>(values_.at(name)); }
  bool get_bool(const std::string& name) const { return std::get<bool>(values_.at(name)); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  std::map<std::string, OptionValue> values_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Returns whether the module changed.
  virtual Expected<bool> run(Module& module) = 0;
};

// Which IR a pass works on: the graph, the graph turned into a Program (the
// lowering), or the Program. A pipeline keeps this order.
enum class PassStage { Graph, Lowering, Program };

// What one option value brings with it: `fuse{strategy=capped}` takes the
// `capped` strategy's own options, and where that strategy came from.
struct OptionExtension {
  std::vector<PassOptionSpec> options;
  std::string provenance;  // "plugin NAME VERSION"; empty for built-ins
};

struct PassInfo {
  std::string name;
  std::string summary;
  std::vector<PassOptionSpec> options;
  std::function<std::unique_ptr<Pass>(const PassOptions&)> create;
  PassStage stage = PassStage::Graph;
  // Given the values of `options`, further options the invocation accepts
  // (and their provenance); null for none.
  std::function<OptionExtension(const PassOptions&)> extend = {};
  // "plugin NAME VERSION" for a pass a plugin registered; empty for built-ins.
  std::string provenance = {};
  // A combinator (fix): set, the pass takes passes in parentheses,
  // `fix(canonicalize,cse)`, and is made around them, not by `create`.
  std::function<std::unique_ptr<Pass>(const PassOptions&, std::vector<std::unique_ptr<Pass>>)> create_around = {};
};

using PassRegistry = Registry<PassInfo>;
extern template class Registry<PassInfo>;

// An enum option whose choices are a registry's names (fuse's strategy,
// schedule's order, plan-memory's algo) ...
template <class Info>
PassOptionSpec registry_option(std::string name, std::string default_value, std::string help) {
  return {std::move(name), OptionKind::Enum, std::move(default_value), std::move(help), {}, [] {
            return Registry<Info>::global().names();
          }};
}

// ... and the chosen entry's own options, with its provenance.
template <class Info>
std::function<OptionExtension(const PassOptions&)> registry_extension(std::string option) {
  return [option](const PassOptions& values) -> OptionExtension {
    const Info* info = values.has(option) ? Registry<Info>::global().find(values.get(option)) : nullptr;
    if (!info) return {};
    return {info->options, info->provenance};
  };
}

// A pass that hands the module to the registry entry its one option names
// (fuse's strategy, schedule's order, plan-memory's algo): the option, with
// the entry's own options; the entry created with the invocation's options;
// `apply(module, entry)` says whether the module changed, its errors
// prefixed with the entry's `kind` and name ("scheduler 'memory': ...").
template <class Info, class Apply>
PassInfo registry_pass(std::string name, std::string summary, PassStage stage, std::string option,
                       std::string default_entry, std::string kind, Apply apply) {
  class RegistryPass : public Pass {
   public:
    RegistryPass(PassOptions options, std::string option, std::string kind, Apply apply)
        : options_(std::move(options)), option_(std::move(option)), kind_(std::move(kind)), apply_(std::move(apply)) {}
    Expected<bool> run(Module& module) override {
      const std::string& entry_name = options_.get(option_);
      const Info* info = Registry<Info>::global().find(entry_name);
      if (!info) return make_error("unknown " + kind_ + " '" + entry_name + "'");
      Expected<bool> changed = apply_(module, *info->create(options_));
      if (!changed) return make_error(kind_ + " '" + entry_name + "': " + changed.error().message);
      return changed;
    }

   private:
    PassOptions options_;
    std::string option_, kind_;
    Apply apply_;
  };
  std::string help = "the " + kind;
  return PassInfo{std::move(name),
                  std::move(summary),
                  {registry_option<Info>(option, std::move(default_entry), std::move(help))},
                  [option, kind, apply](const PassOptions& options) -> std::unique_ptr<Pass> {
                    return std::make_unique<RegistryPass>(options, option, kind, apply);
                  },
                  stage,
                  registry_extension<Info>(option)};
}

// Parses `text` as `spec`'s kind and checks it against the spec's limits.
Expected<OptionValue> parse_option_value(const PassOptionSpec& spec, const std::string& text);

using PassRegistrar = Registrar<PassInfo>;

}  // namespace lazylab

#define LAZYLAB_PASS_CONCAT_(a, b) a##b
#define LAZYLAB_PASS_CONCAT(a, b) LAZYLAB_PASS_CONCAT_(a, b)
// Registers a pass at static-initialisation time; libraries holding passes
// are linked whole so the registrars are kept.
#define LAZYLAB_REGISTER_PASS(...) \
  static const ::lazylab::PassRegistrar LAZYLAB_PASS_CONCAT(lazylab_pass_registrar_, __LINE__) { __VA_ARGS__ }
