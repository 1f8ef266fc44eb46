#include "core/donation.h"

#include <algorithm>
#include <map>

#include "core/op_info.h"

namespace lazylab {
namespace {

constexpr int kNoKernel = -1;

// The last kernel (in execution order) that reads each node as an input.
std::vector<int> last_readers(const Program& program, size_t num_nodes) {
  std::vector<int> last(num_nodes, kNoKernel);
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (NodeId input : program.kernels[k].inputs) last[input] = static_cast<int>(k);
  return last;
}

// Whether kernel `kernel` may write `output` over `parameter` in place: it is
// elementwise, reads the parameter element for element (every access whose
// source it is Full, every op reading it elementwise) and only in ops at or
// before the one making the output.
bool updates_in_place(const Kernel& kernel, const Graph& graph, NodeId parameter, NodeId output) {
  if (kernel.description.kind != KernelKind::Elementwise) return false;
  for (const ValueAccess& access : kernel.description.accesses)
    if ((access.source == parameter || access.value == parameter || access.value == output) &&
        access.kind != Access::Full)
      return false;
  auto made_at = std::find(kernel.ops.begin(), kernel.ops.end(), output);
  if (made_at == kernel.ops.end()) return false;
  for (auto op = kernel.ops.begin(); op != kernel.ops.end(); ++op) {
    const Node& node = graph.node(*op);
    bool reads = std::find(node.operands.begin(), node.operands.end(), parameter) != node.operands.end();
    if (!reads) continue;
    if (op > made_at || op_info(node.op).category != OpCategory::Elementwise) return false;
  }
  return true;
}

// How many ops down from `output` each parameter is read inside its kernel
// (1: an operand of the output's own op), so that w' = w - lr v takes w's
// buffer rather than another parameter's read further up.
std::map<NodeId, int> parameter_depths(const Kernel& kernel, const Graph& graph, NodeId output) {
  std::map<NodeId, int> depth{{output, 0}};
  std::vector<NodeId> frontier{output};
  for (int level = 1; !frontier.empty(); ++level) {
    std::vector<NodeId> next;
    for (NodeId node : frontier)
      for (NodeId operand : graph.node(node).operands) {
        if (depth.count(operand)) continue;
        bool inside = std::find(kernel.ops.begin(), kernel.ops.end(), operand) != kernel.ops.end();
        if (!inside && graph.node(operand).op != OpId::Parameter) continue;
        depth[operand] = level;
        if (inside) next.push_back(operand);
      }
    frontier = std::move(next);
  }
  return depth;
}

}  // namespace

std::vector<int64_t> plan_output_donors(const Program& program, const Graph& graph) {
  std::vector<int64_t> donors(program.outputs.size(), -1);
  std::vector<int> last = last_readers(program, graph.size());
  std::vector<bool> returned(graph.size()), taken(program.parameters.size());
  for (NodeId root : program.outputs) returned[root] = true;
  auto same_type = [&](NodeId a, NodeId b) { return graph.node(a).type == graph.node(b).type; };
  for (size_t i = 0; i < program.outputs.size(); ++i) {
    NodeId output = program.outputs[i];
    const ValueInfo& value = program.values[output];
    if (value.kind != ValueKind::Output || value.ordinal != static_cast<int64_t>(i) || value.kernel < 0) continue;
    const Kernel& kernel = program.kernels[value.kernel];
    int64_t chosen = -1;
    int nearest = 0;
    std::map<NodeId, int> depths = parameter_depths(kernel, graph, output);
    for (size_t p = 0; p < program.parameters.size(); ++p) {  // an update in place first, the nearest read
      NodeId parameter = program.parameters[p];
      auto depth = depths.find(parameter);
      if (depth == depths.end() || (chosen >= 0 && depth->second >= nearest)) continue;
      if (!taken[p] && !returned[parameter] && same_type(parameter, output) && last[parameter] == value.kernel &&
          updates_in_place(kernel, graph, parameter, output)) {
        chosen = static_cast<int64_t>(p);
        nearest = depth->second;
      }
    }
    for (size_t p = 0; p < program.parameters.size() && chosen < 0; ++p) {  // else one read only before
      NodeId parameter = program.parameters[p];
      if (!taken[p] && !returned[parameter] && same_type(parameter, output) && last[parameter] < value.kernel)
        chosen = static_cast<int64_t>(p);
    }
    if (chosen >= 0) {
      taken[static_cast<size_t>(chosen)] = true;
      donors[i] = chosen;
    }
  }
  return donors;
}

}  // namespace lazylab
