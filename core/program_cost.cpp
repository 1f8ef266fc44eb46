#include "core/program_cost.h"

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

}  // namespace

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
      const Node& node = graph.node(id);
      auto elements = static_cast<uint64_t>(node.type.num_elements());
      OpCategory category = op_info(node.op).category;
      if (category == OpCategory::Elementwise) elementwise += elements;
      if (category == OpCategory::Reduction)
        elementwise += static_cast<uint64_t>(graph.node(node.operands[0]).type.num_elements());
      flops += contraction_flops(graph, node);
    }
    cost.flops += flops;
    cost.elementwise_ops += elementwise;
    cost.kernel_operations.push_back(flops + elementwise);
    cost.kernel_flops.push_back(flops);
  }
  for (NodeId id : program.parameters) cost.minimum_bytes += graph.node(id).type.bytes();
  for (NodeId id : program.outputs) cost.minimum_bytes += graph.node(id).type.bytes();
  return cost;
}

}  // namespace lazylab
