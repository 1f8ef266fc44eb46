// min-cut: AOTAutograd's partitioner. The forward keeps the fewest bytes
// from which the backward can compute every forward value it reads, found
// as a minimum cut: each forward value a pair of vertices joined by an edge
// of its size in bytes, its readers after it (unbounded edges). Fed from
// the source: values only the forward can make (products, reductions,
// gathers: not cheap to recompute) and values the backward reads with a
// product or a gather (materialized_in_backward); drained to the sink:
// values the backward reads. Cutting a value's edge keeps it; what lies
// past the cut the backward computes again from the kept values and the
// parameters (always at hand). Boost.Graph's push-relabel finds the
// maximum flow; of the minimum cuts, the one nearest the backward is taken.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <deque>

#include "core/op_info.h"
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

  // The vertices on the sink's side of the minimum cut nearest the sink:
  // those that still reach the sink through edges with capacity left once
  // the flow is maximal. Of the cuts of least bytes it keeps the latest
  // values, so the backward computes the fewest again (gpt2-block-train's
  // q, k and v in bf16, or the product they are cut from: the same bytes).
  std::vector<bool> sink_side() {
    boost::push_relabel_max_flow(graph_, kSource, kSink);
    auto residual = boost::get(boost::edge_residual_capacity, graph_);
    auto reverse = boost::get(boost::edge_reverse, graph_);
    std::vector<bool> reaches(boost::num_vertices(graph_), false);
    std::deque<size_t> queue{kSink};
    reaches[kSink] = true;
    while (!queue.empty()) {
      size_t at = queue.front();
      queue.pop_front();
      // Every edge into `at` is the reverse of one out of it.
      for (auto [edge, end] = boost::out_edges(at, graph_); edge != end; ++edge) {
        size_t from = boost::target(*edge, graph_);
        if (!reaches[from] && residual[reverse[*edge]] > 0) {
          reaches[from] = true;
          queue.push_back(from);
        }
      }
    }
    return reaches;
  }

 private:
  FlowGraph graph_;
};

// Whether an op reads its operands from memory whole, fusing no producer:
// products and gathers. A convolution's operands are left to the cut: kept
// as well, ResNet-18's and MobileNetV2's training steps on the cpu kept
// more than save-all's arena (47.2 and 11.9 MiB against 46.9 and 11.2),
// their forward and backward fused apart for little computed again;
// computed again before the convolutions, 46.8 and 10.8.
bool reads_from_memory(const Node& node) {
  return op_info(node.op).category == OpCategory::Contraction || node.op == OpId::Gather || node.op == OpId::ScatterAdd;
}

// The forward values the backward reads, directly or through layout ops,
// with an op that fuses no producer (a matmul's operand: gelu's output for
// its weight's gradient, the probabilities for v's). Computed again, such a
// value is written out in full in the backward anyway: keeping it costs the
// same bytes of memory traffic and no computation (AOTAutograd's partitioner
// bans recomputing them too). mlp-train's step on an H200 took 7.115 ms
// computing gelu again against 7.037 keeping it (f32).
std::vector<bool> materialized_in_backward(const Graph& graph, const JointSplit& split) {
  std::vector<std::vector<NodeId>> users(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id)
    if (split.live[id] && !split.forward[id])
      for (NodeId operand : graph.node(id).operands) users[operand].push_back(id);
  std::vector<bool> materialized(graph.size(), false);
  std::vector<NodeId> visited_from(graph.size(), kNoNode);  // each layout user once per value
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!split.forward[id]) continue;
    std::vector<NodeId> work{id};
    while (!work.empty() && !materialized[id]) {
      NodeId value = work.back();
      work.pop_back();
      for (NodeId user : users[value]) {
        const Node& node = graph.node(user);
        if (reads_from_memory(node))
          materialized[id] = true;
        else if (op_info(node.op).category == OpCategory::Layout && visited_from[user] != id)
          visited_from[user] = id, work.push_back(user);
      }
    }
  }
  return materialized;
}

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
    std::vector<bool> materialized = materialized_in_backward(graph, split);
    FlowNetwork network(2 + 2 * values);
    for (NodeId id = 0; id < graph.size(); ++id) {
      if (index[id] < 0) continue;
      const Node& node = graph.node(id);
      // A constant costs nothing to keep: fusion folds it into its readers
      // as a literal, no memory holds it (a copy only splits the kernels).
      network.add(computed(id), result(id), node.op == OpId::Constant ? 0 : static_cast<int64_t>(node.type.bytes()));
      if (!cheap_to_recompute(node) || materialized[id]) network.add(kSource, computed(id), unbounded);
      for (NodeId operand : node.operands)
        if (index[operand] >= 0) network.add(result(operand), computed(id), unbounded);
    }
    for (NodeId id : split.saved) network.add(result(id), kSink, unbounded);
    std::vector<bool> sink_side = network.sink_side();
    std::vector<bool> again(graph.size(), false);
    for (NodeId id = 0; id < graph.size(); ++id) again[id] = index[id] >= 0 && sink_side[computed(id)];
    return again;
  }
};

const RematStrategyRegistrar kRegistrar{
    {"min-cut", "Keep the fewest bytes the backward can recompute the rest from (a minimum cut, as AOTAutograd's)",
     [](const PassOptions&) { return std::make_unique<MinCut>(); }}};

}  // namespace
}  // namespace lazylab
