#include "core/program_cost.h"

#include <algorithm>
#include <set>

#include "core/attention_pattern.h"

namespace lazylab {

namespace {

// Multiply-adds of a contraction, twice: a matmul's k per result element; a
// conv2d's window (its weight's C / groups x KH x KW) per result element.
uint64_t contraction_flops(const Graph& graph, const Node& node) {
  auto elements = static_cast<uint64_t>(node.type.num_elements());
  if (node.op == OpId::Matmul)
    return 2 * elements * static_cast<uint64_t>(graph.node(node.operands[0]).type.shape.back());
  if (node.op != OpId::Conv2d) return 0;
  const Dims& w = graph.node(node.operands[1]).type.shape;
  return 2 * elements * static_cast<uint64_t>(w[1] * w[2] * w[3]);
}

uint64_t elementwise_operations(const Graph& graph, const Node& node) {
  switch (op_info(node.op).category) {
    case OpCategory::Elementwise: return static_cast<uint64_t>(node.type.num_elements());
    case OpCategory::Reduction: return static_cast<uint64_t>(graph.node(node.operands[0]).type.num_elements());
    default: return 0;
  }
}

// An attention kernel's two products over the (query, key) pairs that count:
// with a causal mask, row i sees keys 0..i only, and the masked scores are
// neither needed nor computed (a dense count would put a causal kernel past
// the GEMM ceiling).
uint64_t attention_flops(const Attention& a) {
  auto pairs = static_cast<uint64_t>(a.m * a.n);
  if (a.causal) {
    pairs = 0;
    for (int64_t i = 0; i < a.m; ++i) pairs += static_cast<uint64_t>(std::min(a.n, i + 1));
  }
  return 2 * static_cast<uint64_t>(a.batch) * pairs * static_cast<uint64_t>(a.d + a.dv);
}

// The FLOPs the graph needs however it is fused: every contraction's, but a
// causal attention's two products over the pairs its mask keeps.
uint64_t minimum_flops(const Program& program, const Graph& graph) {
  std::set<NodeId> causal;
  uint64_t flops = 0;
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.ops) {
      if (graph.node(id).op != OpId::Matmul) continue;
      auto pattern = match_attention(graph, id);
      if (!pattern || !pattern->attention.causal) continue;
      flops += attention_flops(pattern->attention);
      causal.insert({pattern->scores, id});
    }
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.ops)
      if (!causal.count(id)) flops += contraction_flops(graph, graph.node(id));
  return flops;
}

}  // namespace

uint64_t node_operations(const Graph& graph, const Node& node) {
  return contraction_flops(graph, node) + elementwise_operations(graph, node);
}

ProgramCost program_cost(const Program& program, const Graph& graph) {
  ProgramCost cost;
  for (const Kernel& kernel : program.kernels) {
    uint64_t bytes = 0;
    for (NodeId id : kernel.inputs) bytes += graph.node(id).type.bytes();
    for (NodeId id : kernel.outputs) bytes += graph.node(id).type.bytes();
    cost.kernel_bytes.push_back(bytes);
    cost.total_bytes += bytes;
    uint64_t flops = 0, elementwise = 0;
    for (NodeId id : kernel.ops) {
      flops += contraction_flops(graph, graph.node(id));
      elementwise += elementwise_operations(graph, graph.node(id));
    }
    if (kernel.description.kind == KernelKind::Attention) flops = attention_flops(kernel.description.attention);
    cost.flops += flops;
    cost.elementwise_ops += elementwise;
    cost.kernel_operations.push_back(flops + elementwise);
    cost.kernel_flops.push_back(flops);
  }
  cost.minimum_flops = minimum_flops(program, graph);
  for (NodeId id : program.parameters) cost.minimum_bytes += graph.node(id).type.bytes();
  for (NodeId id : program.outputs) cost.minimum_bytes += graph.node(id).type.bytes();
  return cost;
}

}  // namespace lazylab
