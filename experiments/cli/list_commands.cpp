// lazylab passes | workloads: what is registered (backends: backends_command.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/backend.h"
#include "core/fusion_strategy.h"
#include "core/pass.h"
#include "options.h"
#include "runner/workload.h"

namespace lazylab::cli {
namespace {

std::optional<int> parse_no_args(const Args& args, const char* usage) {
  po::options_description options("options");
  po::positional_options_description positional;
  po::variables_map vm;
  return parse_args(args, usage, options, positional, vm);
}

std::string kind_name(const PassOptionSpec& spec) {
  switch (spec.kind) {
    case OptionKind::Int: return "int";
    case OptionKind::Bool: return "bool";
    case OptionKind::String: return "string";
    case OptionKind::Enum: return fmt::format("{{{}}}", fmt::join(spec.allowed(), "|"));
  }
  return "?";
}

}  // namespace

int passes_command(const Args& args) {
  if (auto exit = parse_no_args(args, "usage: lazylab passes")) return *exit;
  for (const PassInfo* info : PassRegistry::global().list()) {
    std::cout << fmt::format("{:<14} {}\n", info->name, info->summary);
    for (const PassOptionSpec& spec : info->options)
      std::cout << fmt::format("    {}={} (default {}): {}\n", spec.name, kind_name(spec), spec.default_value,
                               spec.help);
    if (info->name != "fuse") continue;
    for (const FusionStrategyInfo* strategy : FusionStrategyRegistry::global().list())
      std::cout << fmt::format("    strategy {}: {}\n        legal: {}\n        fuses: {}\n", strategy->name,
                               strategy->summary, strategy->legality, strategy->profitability);
  }
  return kExitOk;
}

int workloads_command(const Args& args) {
  if (auto exit = parse_no_args(args, "usage: lazylab workloads")) return *exit;
  for (const WorkloadInfo& info : builtin_workloads()) {
    std::vector<std::string> params;
    for (auto& [key, value] : info.defaults) params.push_back(fmt::format("{}={}", key, value));
    std::cout << fmt::format("{:<12} {}\n             defaults: {}\n", info.name, info.summary, fmt::join(params, " "));
  }
  return kExitOk;
}

}  // namespace lazylab::cli
