// min-cut: AOTAutograd's partitioner. The forward keeps the fewest bytes
// from which the backward can compute every forward value it reads, found
// as a minimum cut: each forward value a pair of vertices joined by an edge
// of its size in bytes, its readers after it (unbounded edges); values only
// the forward can make (products, reductions, gathers: not cheap to
// recompute) fed from the source, values the backward reads drained to the
// sink. Cutting a value's edge keeps it; what lies past the cut the
// backward computes again from the kept values and the parameters (always
// at hand). Boost.Graph's push-relabel finds the maximum flow.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <deque>

#include "core/remat_strategy.h"

namespace lazylab {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, int64_t,
                    boost::property<boost::edge_residual_capacity_t, int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

constexpr size_t kSource = 0, kSink = 1;

class FlowNetwork {
 public:
  explicit FlowNetwork(size_t vertices) : graph_(vertices) {}

  void add(size_t from, size_t to, int64_t capacity) {
    auto forward = boost::add_edge(from, to, graph_).first, backward = boost::add_edge(to, from, graph_).first;
    auto capacities = boost::get(boost::edge_capacity, graph_);
    auto reverse = boost::get(boost::edge_reverse, graph_);
    capacities[forward] = capacity;
    capacities[backward] = 0;
    reverse[forward] = backward;
    reverse[backward] = forward;
  }

  // The vertices on the source's side of a minimum cut: what the source
  // still reaches through edges with capacity left once the flow is maximal.
  std::vector<bool> source_side() {
    boost::push_relabel_max_flow(graph_, kSource, kSink);
    auto residual = boost::get(boost::edge_residual_capacity, graph_);
    std::vector<bool> reached(boost::num_vertices(graph_), false);
    std::deque<size_t> queue{kSource};
    reached[kSource] = true;
    while (!queue.empty()) {
      size_t at = queue.front();
      queue.pop_front();
      for (auto [edge, end] = boost::out_edges(at, graph_); edge != end; ++edge) {
        size_t next = boost::target(*edge, graph_);
        if (!reached[next] && residual[*edge] > 0) {
          reached[next] = true;
          queue.push_back(next);
        }
      }
    }
    return reached;
  }

 private:
  FlowGraph graph_;
};

class MinCut : public RematStrategy {
 public:
  Expected<std::vector<bool>> recompute(const Graph& graph, const JointSplit& split) override {
    // A value's two vertices: 2 + 2k (its computation) and 3 + 2k (its result).
    std::vector<int64_t> index(graph.size(), -1);
    size_t values = 0;
    for (NodeId id = 0; id < graph.size(); ++id)
      if (split.forward[id] && graph.node(id).op != OpId::Parameter) index[id] = static_cast<int64_t>(values++);
    auto computed = [&](NodeId id) { return 2 + 2 * static_cast<size_t>(index[id]); };
    auto result = [&](NodeId id) { return 3 + 2 * static_cast<size_t>(index[id]); };
    // "Unbounded": more than every value's bytes together, so no minimum cut
    // crosses such an edge; small enough that the flows pushed from the
    // source (every unbounded edge's at most) add up within 64 bits (with
    // 2^60 instead, UBSan caught push-relabel's sums overflowing).
    int64_t bytes = 0, edges = 1;
    for (NodeId id = 0; id < graph.size(); ++id) {
      if (index[id] < 0) continue;
      bytes += static_cast<int64_t>(graph.node(id).type.bytes());
      edges += 2 + static_cast<int64_t>(graph.node(id).operands.size());
    }
    const int64_t unbounded = bytes + 1;
    int64_t most = 0;
    if (__builtin_mul_overflow(unbounded, edges, &most))
      return make_error("min-cut: the forward's bytes are too many for 64-bit flows");
    FlowNetwork network(2 + 2 * values);
    for (NodeId id = 0; id < graph.size(); ++id) {
      if (index[id] < 0) continue;
      const Node& node = graph.node(id);
      network.add(computed(id), result(id), static_cast<int64_t>(node.type.bytes()));
      if (!cheap_to_recompute(node)) network.add(kSource, computed(id), unbounded);
      for (NodeId operand : node.operands)
        if (index[operand] >= 0) network.add(result(operand), computed(id), unbounded);
    }
    for (NodeId id : split.saved) network.add(result(id), kSink, unbounded);
    std::vector<bool> source_side = network.source_side();
    std::vector<bool> again(graph.size(), false);
    for (NodeId id = 0; id < graph.size(); ++id) again[id] = index[id] >= 0 && !source_side[computed(id)];
    return again;
  }
};

const RematStrategyRegistrar kRegistrar{
    {"min-cut", "Keep the fewest bytes the backward can recompute the rest from (a minimum cut, as AOTAutograd's)",
     [](const PassOptions&) { return std::make_unique<MinCut>(); }}};

}  // namespace
}  // namespace lazylab
