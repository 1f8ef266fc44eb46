#include "remat_strategy.h"

#include <fmt/format.h>

#include <algorithm>

#include "graph_builder.h"
#include "op_info.h"

namespace lazylab {

Expected<JointSplit> split_joint(const Graph& graph, size_t of) {
  if (of >= graph.roots().size())
    return make_error(fmt::format("the loss is root {}, but the graph has {} root{}", of, graph.roots().size(),
                                  graph.roots().size() == 1 ? "" : "s"));
  JointSplit split;
  split.live = live_nodes(graph);
  NodeId loss = graph.roots()[of];
  split.forward = live_nodes(graph, std::span<const NodeId>(&loss, 1));
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!split.live[id] || split.forward[id]) continue;
    for (NodeId operand : graph.node(id).operands)
      if (split.forward[operand] && graph.node(operand).op != OpId::Parameter) split.saved.push_back(operand);
  }
  std::sort(split.saved.begin(), split.saved.end());
  split.saved.erase(std::unique(split.saved.begin(), split.saved.end()), split.saved.end());
  return split;
}

bool cheap_to_recompute(const Node& node) {
  switch (op_info(node.op).category) {
    case OpCategory::Elementwise: return true;
    case OpCategory::Layout: return node.op != OpId::Gather && node.op != OpId::ScatterAdd;
    default: return node.op == OpId::Constant || node.op == OpId::Iota;
  }
}

namespace {

// The rematerialized graph's nodes in order, each handed to `emit(source,
// operands, copy)` (operands: what earlier calls returned), which returns
// what later nodes read for it: forward nodes as they were, each backward
// read of a `recompute` node a copy made before the first backward node
// needing it (its recomputed operands first, without recursion).
template <class Emit>
class Rematerializer {
 public:
  Rematerializer(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute, Emit& emit)
      : graph_(graph),
        split_(split),
        recompute_(recompute),
        emit_(emit),
        mapped_(graph.size(), kNoNode),
        copy_(graph.size(), kNoNode) {}

  // What the roots read.
  std::vector<NodeId> run() {
    for (NodeId id = 0; id < graph_.size(); ++id) {
      const Node& node = graph_.node(id);
      if (!split_.live[id] && node.op != OpId::Parameter) continue;  // parameters keep their ordinals
      bool backward = !split_.forward[id];
      Operands operands;
      for (NodeId operand : node.operands) operands.push_back(backward ? read(operand) : mapped_[operand]);
      mapped_[id] = emit_(id, operands, false);
    }
    std::vector<NodeId> roots;
    for (NodeId root : graph_.roots()) roots.push_back(mapped_[root]);
    return roots;
  }

 private:
  bool recomputed(NodeId id) const { return split_.forward[id] && recompute_[id]; }

  NodeId read(NodeId id) {
    if (!recomputed(id)) return mapped_[id];
    std::vector<std::pair<NodeId, bool>> stack{{id, false}};
    while (!stack.empty()) {
      auto [at, expanded] = stack.back();
      stack.pop_back();
      if (copy_[at] != kNoNode) continue;
      const Node& node = graph_.node(at);
      if (!expanded) {
        stack.push_back({at, true});
        for (NodeId operand : node.operands)
          if (recomputed(operand) && copy_[operand] == kNoNode) stack.push_back({operand, false});
        continue;
      }
      Operands operands;
      for (NodeId operand : node.operands) operands.push_back(recomputed(operand) ? copy_[operand] : mapped_[operand]);
      copy_[at] = emit_(at, operands, true);
    }
    return copy_[id];
  }

  const Graph& graph_;
  const JointSplit& split_;
  const std::vector<bool>& recompute_;
  Emit& emit_;
  std::vector<NodeId> mapped_, copy_;
};

template <class Emit>
std::vector<NodeId> walk_rematerialized(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute,
                                        Emit& emit) {
  return Rematerializer<Emit>(graph, split, recompute, emit).run();
}

// One node of a schedule: its bytes (a parameter's count as none: inputs
// are at hand throughout), the steps it reads, the node it computes.
struct Step {
  uint64_t bytes;
  Operands operands;
  NodeId source;
  bool copy;
};

}  // namespace

Graph rematerialize(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute) {
  GraphBuilder builder;
  auto emit = [&](NodeId source, const Operands& operands, bool) {
    const Node& node = graph.node(source);
    return builder.add_typed(node.op, node.type, operands, node.attrs);
  };
  std::vector<NodeId> roots = walk_rematerialized(graph, split, recompute, emit);
  builder.graph().set_roots(std::move(roots));
  return std::move(builder.graph());
}

namespace {

// Ops fusion takes into the kernels that read them: elementwise ops,
// splats and iotas, broadcasts and reshapes.
bool fuses_into_readers(const Node& node) {
  switch (node.op) {
    case OpId::Constant:
    case OpId::Iota:
    case OpId::Broadcast:
    case OpId::Reshape: return true;
    default: return op_info(node.op).category == OpCategory::Elementwise;
  }
}

// Readers that take such ops in: elementwise kernels and row reductions.
bool takes_in_producers(const Node& node) {
  OpCategory category = op_info(node.op).category;
  return fuses_into_readers(node) || category == OpCategory::Reduction;
}

}  // namespace

RematSchedule remat_schedule(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute) {
  std::vector<Step> steps;
  auto emit = [&](NodeId source, const Operands& operands, bool copy) {
    const Node& node = graph.node(source);
    steps.push_back({node.op == OpId::Parameter ? 0 : node.type.bytes(), operands, source, copy});
    return static_cast<NodeId>(steps.size() - 1);
  };
  std::vector<NodeId> roots = walk_rematerialized(graph, split, recompute, emit);
  RematSchedule schedule{0, std::vector<bool>(graph.size(), false)};
  for (const Step& step : steps) {
    if (!step.copy && split.forward[step.source]) continue;
    for (NodeId operand : step.operands) {  // read for the backward
      const Step& read = steps[operand];
      if (!read.copy && split.forward[read.source] && graph.node(read.source).op != OpId::Parameter)
        schedule.kept[read.source] = true;
    }
  }
  // The arena's share: each value from its node to its last reader; the
  // outputs (roots) and parameters, which live outside it, count nothing,
  // and neither does a value fusion would keep in registers (made by an op
  // fusion takes in, read only by kernels that take it in, not kept).
  std::vector<size_t> last(steps.size());
  std::vector<bool> uncounted(steps.size());
  for (size_t at = 0; at < steps.size(); ++at) {
    const Node& node = graph.node(steps[at].source);
    last[at] = at;
    uncounted[at] = fuses_into_readers(node) && (steps[at].copy || !schedule.kept[steps[at].source]);
    for (NodeId operand : steps[at].operands) {
      last[operand] = at;
      uncounted[operand] = uncounted[operand] && takes_in_producers(node);
    }
  }
  for (NodeId root : roots) uncounted[root] = true;
  std::vector<std::vector<size_t>> dying(steps.size());
  for (size_t at = 0; at < steps.size(); ++at) dying[last[at]].push_back(at);
  auto bytes = [&](size_t at) { return uncounted[at] ? 0 : steps[at].bytes; };
  uint64_t alive = 0;
  for (size_t at = 0; at < steps.size(); ++at) {
    alive += bytes(at);
    schedule.peak_bytes = std::max(schedule.peak_bytes, alive);
    for (size_t value : dying[at]) alive -= bytes(value);
  }
  return schedule;
}

}  // namespace lazylab
