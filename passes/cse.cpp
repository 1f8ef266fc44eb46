// cse: merges nodes with the same op, attributes, type and operands. Node
// hashes already capture that structure, so candidates are found by hash
// and confirmed field by field.
#include <unordered_map>

#include "core/graph_builder.h"
#include "core/hash.h"
#include "core/pass.h"

namespace lazylab {
namespace {

bool same_node(const Node& a, const Node& b) {
  return a.op == b.op && a.type == b.type && a.attrs == b.attrs && a.operands == b.operands;
}

class CommonSubexpressionElimination : public Pass {
 public:
  Expected<bool> run(Module& module) override {
    std::unordered_multimap<uint64_t, NodeId> seen;
    auto merge = [&](GraphBuilder& builder, const Node& node,
                     const Operands& operands) -> Expected<std::optional<NodeId>> {
      Node candidate(node.op, TensorType(node.type), Operands(operands), Attrs(node.attrs));
      candidate.hash = hash_node(candidate, builder.graph().nodes());
      auto [begin, end] = seen.equal_range(candidate.hash);
      for (auto it = begin; it != end; ++it)
        if (same_node(builder.node(it->second), candidate)) return std::optional<NodeId>(it->second);
      NodeId id = builder.add_typed(node.op, node.type, operands, node.attrs);
      seen.emplace(candidate.hash, id);
      return std::optional<NodeId>(id);
    };
    auto rebuilt = rebuild(module.graph, merge);
    if (!rebuilt) return rebuilt.error();
    bool changed = rebuilt->graph.size() != module.graph.size();
    if (changed) replace_graph(module, std::move(rebuilt->graph));
    return changed;
  }
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "cse", "Merge structurally identical nodes (common subexpressions)", {}, [](const PassOptions&) {
      return std::make_unique<CommonSubexpressionElimination>();
    }});

}  // namespace
}  // namespace lazylab
