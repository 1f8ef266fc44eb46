// Pass and strategy plugins: a .so built against liblazylab (pkg-config
// lazylab) that adds passes and fusion strategies to the registries, as
// LLVM's pass plugins do. It exports one entry point,
//
//   extern "C" LAZYLAB_PLUGIN_EXPORT lazylab::PassPluginInfo lazylab_pass_plugin_info();
//
// returning its API version, name, version and a function that registers
// what it provides: passes, fusion strategies, schedulers, memory planners, precision policies, rematerialization
// strategies. The host calls that function only when the API version is this library's: the plugin shares C++ types
// with liblazylab, so another version is refused, naming both. What a plugin registers carries its name and version
// into every pipeline that uses it (Pipeline::provenance and the fingerprint), so the cache and the reports know what
// ran. A plugin stays loaded until the process ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "expected.h"
#include "fusion_strategy.h"
#include "memory_planner.h"
#include "pass.h"
#include "precision_policy.h"
#include "remat_strategy.h"
#include "scheduler.h"

// Version of the C++ interface a pass plugin compiles against (PassInfo,
// FusionStrategyInfo, Module, ...): raised on any change to it. 3: Graph
// keeps the last trace's nodes for reuse (its layout and nodes() changed).
// 4: precision policies (PluginRegistrar::add_precision_policy). 5:
// rematerialization strategies (add_remat_strategy).
#define LAZYLAB_PASS_PLUGIN_API_VERSION 5u
#define LAZYLAB_PASS_PLUGIN_ENTRY "lazylab_pass_plugin_info"
#define LAZYLAB_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace lazylab {

// Collects what a plugin registers; the host adds all of it, or none of it
// when one name is taken already.
class PluginRegistrar {
 public:
  void add_pass(PassInfo info) { passes_.push_back(std::move(info)); }
  void add_fusion_strategy(FusionStrategyInfo info) { strategies_.push_back(std::move(info)); }
  void add_scheduler(SchedulerInfo info) { schedulers_.push_back(std::move(info)); }
  void add_memory_planner(MemoryPlannerInfo info) { planners_.push_back(std::move(info)); }
  void add_precision_policy(PrecisionPolicyInfo info) { policies_.push_back(std::move(info)); }
  void add_remat_strategy(RematStrategyInfo info) { remat_strategies_.push_back(std::move(info)); }

  std::vector<PassInfo>& passes() { return passes_; }
  std::vector<FusionStrategyInfo>& strategies() { return strategies_; }
  std::vector<SchedulerInfo>& schedulers() { return schedulers_; }
  std::vector<MemoryPlannerInfo>& planners() { return planners_; }
  std::vector<PrecisionPolicyInfo>& policies() { return policies_; }
  std::vector<RematStrategyInfo>& remat_strategies() { return remat_strategies_; }

 private:
  std::vector<PassInfo> passes_;
  std::vector<FusionStrategyInfo> strategies_;
  std::vector<SchedulerInfo> schedulers_;
  std::vector<MemoryPlannerInfo> planners_;
  std::vector<PrecisionPolicyInfo> policies_;
  std::vector<RematStrategyInfo> remat_strategies_;
};

struct PassPluginInfo {
  uint32_t api_version;  // LAZYLAB_PASS_PLUGIN_API_VERSION when built
  const char* name;
  const char* version;
  void (*register_with)(PluginRegistrar& registrar);
};

using PassPluginEntry = PassPluginInfo (*)();

struct LoadedPlugin {
  std::string name, version, path;
  // What it registered, by kind ("pass", "fusion strategy", "scheduler",
  // "memory planner"): names.
  std::vector<std::pair<std::string, std::string>> registered;
};

// Loads the plugin at `path` and registers what it provides. Loading the
// same file again does nothing and returns it again.
Expected<LoadedPlugin> load_pass_plugin(const std::string& path);
// The plugins loaded so far, in load order.
const std::vector<LoadedPlugin>& loaded_pass_plugins();

}  // namespace lazylab
