#include "core/fusion_strategy.h"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <numeric>

#include "core/graph_builder.h"

namespace lazylab {

FusionStrategyRegistry& FusionStrategyRegistry::global() {
  static FusionStrategyRegistry registry;
  return registry;
}

const FusionStrategyInfo* FusionStrategyRegistry::find(const std::string& name) const {
  auto it = strategies_.find(name);
  return it == strategies_.end() ? nullptr : &it->second;
}

std::vector<std::string> FusionStrategyRegistry::names() const {
  std::vector<std::string> names;
  for (auto& [name, info] : strategies_) names.push_back(name);
  return names;
}

std::vector<const FusionStrategyInfo*> FusionStrategyRegistry::list() const {
  std::vector<const FusionStrategyInfo*> infos;
  for (auto& [name, info] : strategies_) infos.push_back(&info);
  return infos;
}

KernelGroups::KernelGroups(const Graph& graph) : graph_(graph), parent_(graph.size(), -1), sizes_(graph.size(), 1) {
  std::vector<bool> live = live_nodes(graph);
  for (NodeId id = 0; id < graph.size(); ++id)
    if (live[id] && graph.node(id).op != OpId::Parameter) parent_[id] = static_cast<int>(id);
}

int KernelGroups::group_of(NodeId id) {
  int root = parent_[id];
  if (root < 0) return -1;
  while (parent_[root] != root) root = parent_[root];
  for (int at = static_cast<int>(id); parent_[at] != root;) at = std::exchange(parent_[at], root);
  return root;
}

void KernelGroups::merge(NodeId a, NodeId b) {
  int ga = group_of(a), gb = group_of(b);
  if (ga == gb || ga < 0 || gb < 0) return;
  if (ga > gb) std::swap(ga, gb);
  parent_[gb] = ga;
  sizes_[ga] += sizes_[gb];
}

namespace {

using GroupGraph = boost::adjacency_list<boost::setS, boost::vecS, boost::directedS>;

// Stops the search as soon as the target group is discovered.
struct FoundTarget {};
struct TargetVisitor : boost::default_bfs_visitor {
  size_t target;
  explicit TargetVisitor(size_t t) : target(t) {}
  template <class Vertex, class G>
  void discover_vertex(Vertex v, const G&) const {
    if (v == target) throw FoundTarget{};
  }
};

}  // namespace

bool KernelGroups::would_create_cycle(NodeId a, NodeId b) {
  int ga = group_of(a), gb = group_of(b);
  if (ga == gb) return false;
  // Edges between groups, without the direct a<->b ones: a path that remains
  // goes through a third group, which would then both feed and consume the
  // merged kernel.
  GroupGraph groups(graph_.size());
  for (NodeId id = 0; id < graph_.size(); ++id)
    for (NodeId operand : graph_.node(id).operands) {
      int from = group_of(operand), to = group_of(id);
      if (from < 0 || to < 0 || from == to) continue;
      if ((from == ga && to == gb) || (from == gb && to == ga)) continue;
      boost::add_edge(from, to, groups);
    }
  for (auto [source, target] : {std::pair{ga, gb}, std::pair{gb, ga}}) {
    try {
      std::vector<boost::default_color_type> colors(graph_.size());
      boost::breadth_first_search(groups, source, boost::visitor(TargetVisitor(target)).color_map(colors.data()));
    } catch (const FoundTarget&) {
      return true;
    }
  }
  return false;
}

std::vector<int> KernelGroups::kernel_of() {
  std::vector<int> kernel(graph_.size(), -1);
  std::map<int, int> dense;
  for (NodeId id = 0; id < graph_.size(); ++id) {
    int group = group_of(id);
    if (group < 0) continue;
    auto [it, inserted] = dense.emplace(group, static_cast<int>(dense.size()));
    kernel[id] = it->second;
  }
  return kernel;
}

FusionDecision check_backend(const Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  const lazylab_capabilities* caps = module.capabilities;
  if (!caps) return FusionDecision::yes();
  for (NodeId id : {producer, consumer})
    if (!caps->supports_op[static_cast<int>(module.graph.node(id).op)])
      return FusionDecision::no(fmt::format("backend cannot run {}", op_name(module.graph.node(id).op)));
  if (!caps->fuses_elementwise) return FusionDecision::no("backend cannot fuse");
  size_t merged = groups.size_of(producer) + groups.size_of(consumer);
  if (caps->max_ops_per_kernel && merged > caps->max_ops_per_kernel)
    return FusionDecision::no(fmt::format("size limit: {} ops > {}", merged, caps->max_ops_per_kernel));
  return FusionDecision::yes();
}

void duplicate_constants(Module& module) {
  GraphBuilder builder;
  const Graph& graph = module.graph;
  std::vector<NodeId> mapped(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == OpId::Constant) continue;  // re-created at each use
    Operands operands;
    for (NodeId operand : node.operands) {
      const Node& producer = graph.node(operand);
      operands.push_back(producer.op == OpId::Constant ? builder.constant(producer.attrs[0].f, producer.type)
                                                       : mapped[operand]);
    }
    mapped[id] = builder.add_typed(node.op, node.type, std::move(operands), node.attrs);
  }
  std::vector<NodeId> roots;
  for (NodeId root : graph.roots())
    roots.push_back(graph.node(root).op == OpId::Constant
                        ? builder.constant(graph.node(root).attrs[0].f, graph.node(root).type)
                        : mapped[root]);
  builder.graph().set_roots(std::move(roots));
  replace_graph(module, std::move(builder.graph()));
}

}  // namespace lazylab
