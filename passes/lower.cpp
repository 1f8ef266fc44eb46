// lower: turns the kernel partition into a Program: kernels in a
// topological order of the kernel graph, each with its description
// (core/kernel_description.h), the buffer table, and a naive memory plan (every arena value gets its own aligned slot;
// the plan-memory strategies reuse space). Without a partition it lowers with fusion strategy `none`.
#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <set>

#include "core/fusion_strategy.h"
#include "core/pass.h"

namespace lazylab {
namespace {

Status check_partition(const Graph& graph, const std::vector<int>& kernel_of) {
  std::vector<bool> live = live_nodes(graph);
  for (NodeId id = 0; id < graph.size(); ++id) {
    bool parameter = graph.node(id).op == OpId::Parameter;
    if (parameter && kernel_of[id] >= 0) return make_error(fmt::format("partition puts parameter %{} in a kernel", id));
    if (!parameter && live[id] && kernel_of[id] < 0)
      return make_error(fmt::format("partition leaves %{} out of every kernel", id));
  }
  return {};
}

// Kernel execution order: a topological order of the kernel graph that
// prefers the kernel holding the earliest node (Kahn's algorithm with a
// min-heap), so programs read in program order; an error if the partition
// makes kernels depend on each other in a cycle.
Expected<std::vector<int>> order_kernels(const Graph& graph, const std::vector<int>& kernel_of, int num_kernels) {
  std::vector<std::set<int>> successors(num_kernels);
  std::vector<int> indegree(num_kernels, 0);
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands) {
      int from = kernel_of[operand], to = kernel_of[id];
      if (from >= 0 && to >= 0 && from != to && successors[from].insert(to).second) ++indegree[to];
    }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int k = 0; k < num_kernels; ++k)
    if (indegree[k] == 0) ready.push(k);
  std::vector<int> order;
  while (!ready.empty()) {
    int k = ready.top();
    ready.pop();
    order.push_back(k);
    for (int next : successors[k])
      if (--indegree[next] == 0) ready.push(next);
  }
  if (static_cast<int>(order.size()) != num_kernels)
    return make_error("the kernel partition has a cycle between kernels");
  return order;
}

void assign_values(const Graph& graph, const std::vector<int>& kernel_of, Program& program) {
  std::vector<bool> live = live_nodes(graph);
  std::vector<bool> escapes(graph.size());
  for (NodeId root : graph.roots()) escapes[root] = true;
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands)
      if (live[id] && kernel_of[operand] != kernel_of[id]) escapes[operand] = true;
  program.values.resize(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id) {
    ValueInfo& value = program.values[id];
    value.bytes = graph.node(id).type.bytes();
    value.kernel = kernel_of[id];
    if (graph.node(id).op == OpId::Parameter) {
      value.kind = ValueKind::Parameter;
      value.ordinal = graph.node(id).attrs[0].i;
    } else if (live[id]) {
      value.kind = escapes[id] ? ValueKind::Arena : ValueKind::KernelLocal;
    }
  }
  // Roots go straight to the caller's buffers (the first time they appear).
  for (size_t i = 0; i < graph.roots().size(); ++i) {
    ValueInfo& value = program.values[graph.roots()[i]];
    if (value.kind == ValueKind::Arena) {
      value.kind = ValueKind::Output;
      value.ordinal = static_cast<int64_t>(i);
    }
  }
}

void build_kernels(const Graph& graph, const std::vector<int>& kernel_of, const std::vector<int>& order,
                   Program& program) {
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  program.kernels.resize(order.size());
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (kernel_of[id] < 0 || program.values[id].kind == ValueKind::Unused) continue;
    int k = position[kernel_of[id]];
    program.values[id].kernel = k;
    Kernel& kernel = program.kernels[k];
    kernel.ops.push_back(id);
    for (NodeId operand : graph.node(id).operands)
      if (kernel_of[operand] != kernel_of[id] &&
          std::find(kernel.inputs.begin(), kernel.inputs.end(), operand) == kernel.inputs.end())
        kernel.inputs.push_back(operand);
    if (program.values[id].kind == ValueKind::Arena || program.values[id].kind == ValueKind::Output)
      kernel.outputs.push_back(id);
  }
}

void plan_naive(Program& program) {
  uint64_t offset = 0;
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.outputs) {
      if (program.values[id].kind != ValueKind::Arena) continue;
      program.values[id].offset = offset;
      offset += (program.values[id].bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    }
  program.arena_bytes = program.naive_arena_bytes = offset;
}

class Lower : public Pass {
 public:
  Expected<bool> run(Module& module) override {
    const Graph& graph = module.graph;
    if (module.kernel_of.empty())
      LAZYLAB_TRY(FusionStrategyRegistry::global().find("none")->create(PassOptions())->partition(module));
    LAZYLAB_TRY(check_partition(graph, module.kernel_of));
    auto order = order_kernels(graph, module.kernel_of, static_cast<int>(module.num_kernels()));
    if (!order) return order.error();
    Program program;
    program.parameters = graph.parameters();
    program.outputs = graph.roots();
    assign_values(graph, module.kernel_of, program);
    build_kernels(graph, module.kernel_of, *order, program);
    DescribeOptions options = describe_options(module.capabilities);
    for (Kernel& kernel : program.kernels) kernel.description = describe_kernel(graph, kernel.ops, options);
    plan_naive(program);
    module.program = std::move(program);
    return true;
  }
};

LAZYLAB_REGISTER_PASS(PassInfo{"lower",
                               "Lower the kernel partition to a Program: kernel order, buffers, naive memory plan",
                               {},
                               [](const PassOptions&) { return std::make_unique<Lower>(); },
                               PassStage::Lowering});

}  // namespace
}  // namespace lazylab
