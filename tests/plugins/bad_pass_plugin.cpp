// Pass plugins the loader must refuse, one per build flag:
//   WRONG_API  built for another pass plugin API version
//   DUPLICATE  registers a new strategy and then a pass whose name is taken
//   NO_NAME    its info has no name
// and one it must accept:
//   ORDERS     a scheduler that reverses the kernels (an order the schedule
//              pass must refuse on a chain) and a planner with an option
#include <numeric>

#include "core/pass_plugin.h"

namespace {

using namespace lazylab;

class Nothing : public Pass {
 public:
  Expected<bool> run(Module&) override { return false; }
};

[[maybe_unused]] void register_passes(PluginRegistrar& registrar) {
  FusionStrategyInfo fresh;
  fresh.name = "fresh-from-bad-plugin";
  fresh.summary = "never registered: the plugin's other name is taken";
  fresh.create = [](const PassOptions&) -> std::unique_ptr<FusionStrategy> { return nullptr; };
  registrar.add_fusion_strategy(std::move(fresh));
  registrar.add_pass({"cse", "a second cse", {}, [](const PassOptions&) { return std::make_unique<Nothing>(); }});
}

class Reversed : public Scheduler {
 public:
  Expected<std::vector<int>> order(const Program& program) override {
    std::vector<int> order(program.kernels.size());
    std::iota(order.rbegin(), order.rend(), 0);
    return order;
  }
};

class Spaced : public MemoryPlanner {
 public:
  explicit Spaced(int64_t gap) : gap_(static_cast<uint64_t>(gap)) {}
  Status place(Program& program) override {
    uint64_t offset = 0;
    for (const LiveRange& range : arena_live_ranges(program)) {
      program.values[range.value].offset = offset;
      offset += range.bytes + gap_;
    }
    return {};
  }

 private:
  uint64_t gap_;
};

[[maybe_unused]] void register_orders(PluginRegistrar& registrar) {
  registrar.add_scheduler(
      {"reversed", "the kernels backwards", [](const PassOptions&) { return std::make_unique<Reversed>(); }});
  registrar.add_memory_planner({"spaced",
                                "naive, with a gap after each value",
                                [](const PassOptions& o) { return std::make_unique<Spaced>(o.get_int("gap")); },
                                {{"gap", OptionKind::Int, "0", "bytes between values", {}, {}, 0}}});
}

}  // namespace

extern "C" LAZYLAB_PLUGIN_EXPORT PassPluginInfo lazylab_pass_plugin_info() {
#if defined(WRONG_API)
  return {LAZYLAB_PASS_PLUGIN_API_VERSION + 41, "bad", "0.1", register_passes};
#elif defined(ORDERS)
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "orders", "0.1", register_orders};
#elif defined(NO_NAME)
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "", "0.1", register_passes};
#else
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "bad", "0.1", register_passes};
#endif
}
