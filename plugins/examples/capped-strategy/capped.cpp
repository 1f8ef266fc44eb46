// An out-of-tree fusion strategy plugin: `capped` fuses vertical chains of
// elementwise ops of one shape, as greedy-elementwise does, but stops a
// kernel at `max-ops` ops, so a researcher can ask how much of fusion's gain
// short kernels keep:  fuse{strategy=capped,max-ops=8}
//   g++ -std=c++20 -shared -fPIC capped.cpp $(pkg-config --cflags --libs lazylab) -o capped.so
// Load it with `plugins: [capped.so]` in an experiment or --load-plugin.
#include <lazylab/lazylab.h>

#include <string>

namespace {

using namespace lazylab;

bool elementwise(OpId op) { return fuses_as_elementwise(op); }

class Capped : public FusionStrategy {
 public:
  explicit Capped(int64_t max_ops) : max_ops_(max_ops) {}

  Status partition(Module& module) override {
    partition_pairwise(module, [this](Module& m, KernelGroups& groups, NodeId producer, NodeId consumer) {
      const Node &p = m.graph.node(producer), &c = m.graph.node(consumer);
      if (!elementwise(p.op) || !elementwise(c.op))
        return FusionDecision::no(RefusalCode::OpKind, "not an elementwise pair");
      if (p.type.shape != c.type.shape) return FusionDecision::no(RefusalCode::IterationSpace, "different shapes");
      auto merged = static_cast<int64_t>(groups.size_of(producer) + groups.size_of(consumer));
      if (merged > max_ops_)
        return FusionDecision::no(RefusalCode::Cost,
                                  "the kernel would hold " + std::to_string(merged) + " ops, over max-ops");
      if (FusionDecision backend = check_backend(m, groups, producer, consumer); !backend) return backend;
      if (groups.would_create_cycle(producer, consumer))
        return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
      return FusionDecision::yes();
    });
    return {};
  }

 private:
  int64_t max_ops_;
};

void register_strategies(PluginRegistrar& registrar) {
  FusionStrategyInfo info;
  info.name = "capped";
  info.summary = "Vertical elementwise chains of one shape, cut at max-ops ops per kernel";
  info.legality = "elementwise ops, broadcasts and constants of one shape; backend support; size limit; no cycle";
  info.profitability = "whenever legal, until a kernel holds max-ops ops";
  info.options = {{"max-ops", OptionKind::Int, "8", "the most ops one kernel may hold", {}, {}, 1}};
  info.create = [](const PassOptions& options) { return std::make_unique<Capped>(options.get_int("max-ops")); };
  registrar.add_fusion_strategy(std::move(info));
}

}  // namespace

extern "C" LAZYLAB_PLUGIN_EXPORT lazylab::PassPluginInfo lazylab_pass_plugin_info() {
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "capped-strategy", "1.0", register_strategies};
}
