#include "core/fusion_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/pending/queue.hpp>
#include <iterator>
#include <numeric>

#include "core/graph_builder.h"

namespace lazylab {

// Group roots as vertices; an edge where a node of one group reads a value of
// another. `colors` stays white between searches.
struct KernelGroups::GroupGraph {
  boost::adjacency_list<boost::setS, boost::vecS, boost::bidirectionalS> graph;
  std::vector<boost::default_color_type> colors;
};

KernelGroups::KernelGroups(const Graph& graph)
    : graph_(graph),
      parent_(graph.size(), -1),
      members_(graph.size()),
      summary_(graph.size()),
      groups_(std::make_unique<GroupGraph>()) {
  std::vector<bool> live = live_nodes(graph);
  for (NodeId id = 0; id < graph.size(); ++id)
    if (live[id] && graph.node(id).op != OpId::Parameter) {
      parent_[id] = static_cast<int>(id);
      members_[id] = {id};
      const Node& node = graph.node(id);
      if (node.op == OpId::Matmul) summary_[id].matmul = id;
      if (node.op == OpId::Conv2d) summary_[id].window = id;
      summary_[id].plain = (op_info(node.op).category == OpCategory::Elementwise || node.op == OpId::Constant) &&
                           node.type.num_elements() > 0;
    }
  groups_->graph = decltype(groups_->graph)(graph.size());
  groups_->colors.assign(graph.size(), boost::white_color);
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands)
      if (in_kernel(id) && in_kernel(operand) && operand != id) boost::add_edge(operand, id, groups_->graph);
}

KernelGroups::KernelGroups(const KernelGroups& other)
    : graph_(other.graph_),
      parent_(other.parent_),
      members_(other.members_),
      summary_(other.summary_),
      groups_(std::make_unique<GroupGraph>(*other.groups_)) {}

KernelGroups::~KernelGroups() = default;

int KernelGroups::group_of(NodeId id) {
  int root = parent_[id];
  if (root < 0) return -1;
  while (parent_[root] != root) root = parent_[root];
  for (int at = static_cast<int>(id); parent_[at] != root;) at = std::exchange(parent_[at], root);
  return root;
}

void KernelGroups::merge(NodeId a, NodeId b) {
  int keep = group_of(a), gone = group_of(b);
  if (keep == gone || keep < 0 || gone < 0) return;
  if (keep > gone) std::swap(keep, gone);
  parent_[gone] = keep;
  Summary& kept = summary_[keep];
  const Summary& other = summary_[gone];
  kept.plain = kept.plain && other.plain &&
               graph_.node(members_[keep].front()).type.shape == graph_.node(members_[gone].front()).type.shape;
  if (!kept.matmul) kept.matmul = other.matmul;
  if (!kept.window) kept.window = other.window;
  std::vector<NodeId>& into = members_[keep];
  std::vector<NodeId>& from = members_[gone];
  if (into.back() < from.front()) {  // fusing in program order: the common case, and linear
    into.insert(into.end(), from.begin(), from.end());
  } else {
    std::vector<NodeId> merged;
    std::merge(into.begin(), into.end(), from.begin(), from.end(), std::back_inserter(merged));
    into = std::move(merged);
  }
  from.clear();
  from.shrink_to_fit();
  auto& g = groups_->graph;
  std::vector<int> successors, predecessors;
  for (auto e : boost::make_iterator_range(boost::out_edges(gone, g))) successors.push_back(boost::target(e, g));
  for (auto e : boost::make_iterator_range(boost::in_edges(gone, g))) predecessors.push_back(boost::source(e, g));
  boost::clear_vertex(gone, g);
  for (int to : successors)
    if (to != keep) boost::add_edge(keep, to, g);
  for (int from : predecessors)
    if (from != keep) boost::add_edge(from, keep, g);
}

namespace {

using GroupAdjacency = boost::adjacency_list<boost::setS, boost::vecS, boost::bidirectionalS>;
using GroupEdge = boost::graph_traits<GroupAdjacency>::edge_descriptor;

// The group graph without the direct edges between the two merging groups.
struct WithoutDirectEdges {
  const GroupAdjacency* graph = nullptr;
  size_t a = 0, b = 0;
  bool operator()(const GroupEdge& e) const {
    size_t from = boost::source(e, *graph), to = boost::target(e, *graph);
    return !((from == a && to == b) || (from == b && to == a));
  }
};

// Stops the search as soon as the target group is discovered; remembers what
// it coloured so the colours can be reset.
struct FoundTarget {};
struct TargetVisitor : boost::default_bfs_visitor {
  size_t target;
  std::vector<size_t>* touched;
  template <class Vertex, class G>
  void discover_vertex(Vertex v, const G&) const {
    touched->push_back(v);
    if (v == target) throw FoundTarget{};
  }
};

}  // namespace

std::optional<NodeId> KernelGroups::matmul_of(NodeId id) {
  int group = group_of(id);
  return group < 0 ? std::nullopt : summary_[group].matmul;
}

std::optional<NodeId> KernelGroups::window_of(NodeId id) {
  int group = group_of(id);
  return group < 0 ? std::nullopt : summary_[group].window;
}

bool KernelGroups::plain_elementwise_pair(NodeId a, NodeId b) {
  int ga = group_of(a), gb = group_of(b);
  if (ga < 0 || gb < 0 || !summary_[ga].plain || !summary_[gb].plain) return false;
  return graph_.node(members_[ga].front()).type.shape == graph_.node(members_[gb].front()).type.shape;
}

bool KernelGroups::would_create_cycle(NodeId a, NodeId b) {
  int ga = group_of(a), gb = group_of(b);
  if (ga == gb) return false;
  // A path that remains without the direct a<->b edges goes through a third
  // group, which would then both feed and consume the merged kernel.
  GroupAdjacency& g = groups_->graph;
  auto view = boost::make_filtered_graph(g, WithoutDirectEdges{&g, static_cast<size_t>(ga), static_cast<size_t>(gb)});
  std::vector<size_t> touched;
  bool found = false;
  std::vector<std::pair<int, int>> directions;
  bool a_feeds_b = boost::edge(ga, gb, g).second, b_feeds_a = boost::edge(gb, ga, g).second;
  if (a_feeds_b || !b_feeds_a) directions.push_back({ga, gb});
  if (b_feeds_a || !a_feeds_b) directions.push_back({gb, ga});
  for (auto [source, target] : directions) {
    boost::queue<size_t> queue;
    try {
      boost::breadth_first_visit(view, source, queue, TargetVisitor{{}, static_cast<size_t>(target), &touched},
                                 groups_->colors.data());
    } catch (const FoundTarget&) {
      found = true;
    }
    for (size_t v : touched) groups_->colors[v] = boost::white_color;
    touched.clear();
    if (found) return true;
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

const std::vector<bool>& KernelGroups::forward_of(size_t loss_root) {
  if (!forward_) {
    NodeId loss = graph_.roots()[loss_root];
    forward_ = live_nodes(graph_, std::span<const NodeId>(&loss, 1));
  }
  return *forward_;
}

FusionDecision check_backend(const Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  if (module.loss_root && *module.loss_root < module.graph.roots().size()) {
    const std::vector<bool>& forward = groups.forward_of(*module.loss_root);
    if (forward[producer] != forward[consumer])
      return FusionDecision::no(RefusalCode::Cost,
                                "a forward op and a backward one (after remat each keeps to its own kernels: a "
                                "backward value made in the forward's kernel would be kept from the forward on)");
  }
  const lazylab_capabilities* caps = module.capabilities;
  if (!caps) return FusionDecision::yes();
  for (NodeId id : {producer, consumer})
    if (!caps->supports_op[static_cast<int>(module.graph.node(id).op)])
      return FusionDecision::no(RefusalCode::Capability,
                                fmt::format("backend cannot run {}", op_name(module.graph.node(id).op)));
  if (!caps->fuses_elementwise) return FusionDecision::no(RefusalCode::Capability, "backend cannot fuse");
  size_t merged = groups.size_of(producer) + groups.size_of(consumer);
  if (caps->max_ops_per_kernel && merged > caps->max_ops_per_kernel)
    return FusionDecision::no(RefusalCode::SizeLimit,
                              fmt::format("size limit: {} ops > {}", merged, caps->max_ops_per_kernel));
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
      operands.push_back(producer.op == OpId::Constant ? builder.constant(producer.attrs[0], producer.type)
                                                       : mapped[operand]);
    }
    mapped[id] = builder.add_typed(node.op, node.type, std::move(operands), node.attrs);
  }
  std::vector<NodeId> roots;
  for (NodeId root : graph.roots())
    roots.push_back(graph.node(root).op == OpId::Constant
                        ? builder.constant(graph.node(root).attrs[0], graph.node(root).type)
                        : mapped[root]);
  builder.graph().set_roots(std::move(roots));
  replace_graph(module, std::move(builder.graph()));
}

}  // namespace lazylab
