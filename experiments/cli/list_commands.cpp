// lazylab passes | workloads: what is registered (backends: backends_command.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/backend.h"
#include "core/fusion_strategy.h"
#include "core/memory_planner.h"
#include "core/pass.h"
#include "core/precision_policy.h"
#include "core/remat_strategy.h"
#include "core/scheduler.h"
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
  auto from = [](const std::string& provenance) { return provenance.empty() ? "" : " [" + provenance + "]"; };
  auto print_options = [](const std::vector<PassOptionSpec>& options, const char* indent) {
    for (const PassOptionSpec& spec : options)
      std::cout << fmt::format("{}{}={} (default {}): {}\n", indent, spec.name, kind_name(spec), spec.default_value,
                               spec.help);
  };
  for (const PassInfo* info : PassRegistry::global().list()) {
    std::cout << fmt::format("{:<14} {}{}\n", info->name, info->summary, from(info->provenance));
    print_options(info->options, "    ");
    if (info->name == "fuse")
      for (const FusionStrategyInfo* strategy : FusionStrategyRegistry::global().list()) {
        std::cout << fmt::format("    strategy {}: {}{}\n        legal: {}\n        fuses: {}\n", strategy->name,
                                 strategy->summary, from(strategy->provenance), strategy->legality,
                                 strategy->profitability);
        print_options(strategy->options, "        option ");
      }
    auto print_entries = [&](const auto& registry, const char* label) {
      for (const auto* entry : registry.list()) {
        std::cout << fmt::format("    {} {}: {}{}\n", label, entry->name, entry->summary, from(entry->provenance));
        print_options(entry->options, "        option ");
      }
    };
    if (info->name == "schedule") print_entries(SchedulerRegistry::global(), "scheduler");
    if (info->name == "plan-memory") print_entries(MemoryPlannerRegistry::global(), "planner");
    if (info->name == "autocast") print_entries(PrecisionPolicyRegistry::global(), "policy");
    if (info->name == "remat") print_entries(RematStrategyRegistry::global(), "strategy");
  }
  return kExitOk;
}

int workloads_command(const Args& args) {
  if (auto exit = parse_no_args(args, "usage: lazylab workloads")) return *exit;
  size_t width = 0;
  for (const WorkloadInfo& info : builtin_workloads()) width = std::max(width, info.name.size());
  for (const WorkloadInfo& info : builtin_workloads()) {
    std::vector<std::string> params;
    for (auto& [key, value] : info.defaults) params.push_back(fmt::format("{}={}", key, value));
    std::cout << fmt::format("{:<{}} {}\n{:{}} defaults: {}\n", info.name, width, info.summary, "", width,
                             fmt::join(params, " "));
  }
  return kExitOk;
}

}  // namespace lazylab::cli
