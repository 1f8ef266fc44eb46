// dce: removes nodes no root needs. Parameters stay, because callers bind
// parameters by ordinal whether or not the graph still reads them.
#include "core/graph_builder.h"
#include "core/pass.h"

namespace lazylab {
namespace {

class DeadCodeElimination : public Pass {
 public:
  Expected<bool> run(Module& module) override {
    std::vector<bool> keep = live_nodes(module.graph);
    for (NodeId id = 0; id < module.graph.size(); ++id)
      if (module.graph.node(id).op == OpId::Parameter) keep[id] = true;
    auto keep_all = [](GraphBuilder&, const Node&, const Operands&) -> Expected<std::optional<NodeId>> {
      return std::optional<NodeId>{};
    };
    auto rebuilt = rebuild(module.graph, keep_all, &keep);
    if (!rebuilt) return rebuilt.error();
    if (rebuilt->changed) replace_graph(module, std::move(rebuilt->graph));
    return rebuilt->changed;
  }
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "dce", "Remove nodes that no root depends on (parameters are kept)", {}, [](const PassOptions&) {
      return std::make_unique<DeadCodeElimination>();
    }});

}  // namespace
}  // namespace lazylab
