// Fusion strategy `producer-consumer` (XLA-style): elementwise prologues
// fused into reductions and elementwise epilogues after them, so a softmax
// or a layernorm becomes one kernel.
//
// A kernel lives in one row iteration space S = [..., C]: every value in it
// is full-shaped (S) or has one element per row (S with the last dim 1 or
// dropped). Legality: both ops are elementwise, broadcasts, constants or
// reductions over the last axis only; the merged kernel has one row space
// (reductions reduce S, a broadcast whose input is in the kernel goes from
// one-per-row to S); the backend runs both ops, fuses elementwise kernels
// and, when a reduction is involved, reduction prologues; the size limit
// holds; no cycle between kernels. Profitability: fuse whenever legal. A
// producer with several consumers is fused into the first and written out
// for the others; only constants are duplicated (they cost nothing).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "core/fusion_strategy.h"
#include "core/kernel_description.h"
#include "fusion_decisions.h"

namespace lazylab {
namespace {

bool is_fusible(const Graph& graph, const Node& node) {
  OpCategory category = op_info(node.op).category;
  if (category == OpCategory::Reduction) {
    const Node& input = graph.node(node.operands[0]);
    return node.attrs[0].ints.size() == 1 && node.attrs[0].ints[0] == input.type.rank() - 1;
  }
  if (node.op == OpId::Reshape) return keeps_rows(graph.node(node.operands[0]).type.shape, node.type.shape);
  return fuses_as_elementwise(node.op);
}

// Whether the nodes of both groups would make one row-space kernel: the
// kernel description's own analysis (core/kernel_description.h), so fusion
// accepts exactly what lower will describe and the backends will run.
std::optional<std::string> check_row_space(const Module& module, KernelGroups& groups, NodeId a, NodeId b) {
  const Graph& graph = module.graph;
  if (groups.plain_elementwise_pair(a, b)) return std::nullopt;  // one shape, nothing to analyse
  std::vector<NodeId> members;                                   // both groups, in program order
  const std::vector<NodeId>& of_a = groups.members_of(a);
  if (groups.group_of(a) == groups.group_of(b))
    members = of_a;
  else
    std::merge(of_a.begin(), of_a.end(), groups.members_of(b).begin(), groups.members_of(b).end(),
               std::back_inserter(members));
  auto description = describe_row_space(graph, members, describe_options(module.capabilities));
  if (!description) return description.error().message;
  return std::nullopt;
}

}  // namespace

size_t user_count(const Graph& graph, NodeId id) {
  size_t users = static_cast<size_t>(std::count(graph.roots().begin(), graph.roots().end(), id));
  for (const Node& node : graph.nodes())
    for (NodeId operand : node.operands) users += operand == id;
  return users;
}

namespace {

bool is_row_view(const Graph& graph, const Node& node) {
  return node.op == OpId::Reshape && keeps_rows(graph.node(node.operands[0]).type.shape, node.type.shape);
}

// Transposes, slices and reshapes, each read only by the next, as one
// strided copy (a transformer's split heads: slice, reshape, transpose).
FusionDecision decide_layout_chain(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  const Graph& graph = module.graph;
  if (module.capabilities && !module.capabilities->fuses_layout_views)
    return FusionDecision::no(RefusalCode::Capability, "backend cannot run chains of layout ops");
  std::vector<NodeId> members;
  std::merge(groups.members_of(producer).begin(), groups.members_of(producer).end(),
             groups.members_of(consumer).begin(), groups.members_of(consumer).end(), std::back_inserter(members));
  for (size_t i = 0; i + 1 < members.size(); ++i)
    if (user_count(graph, members[i]) != 1)
      return FusionDecision::no(RefusalCode::SeveralConsumers, "a layout op of the chain is read elsewhere too");
  if (describe_kernel(graph, members, describe_options(module.capabilities)).kind != KernelKind::Layout)
    return FusionDecision::no(RefusalCode::IterationSpace,
                              "not one strided view (a reshape merges dims that are apart in memory)");
  if (FusionDecision backend = check_backend(module, groups, producer, consumer); !backend) return backend;
  if (groups.would_create_cycle(producer, consumer))
    return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
  return FusionDecision::yes();
}

}  // namespace

std::optional<FusionDecision> row_reshape_decision(const Module& module, const Node& node) {
  if (node.op != OpId::Reshape) return std::nullopt;
  if (module.capabilities && !module.capabilities->fuses_layout_views)
    return FusionDecision::no(RefusalCode::Capability, "backend cannot run reshapes inside kernels");
  return FusionDecision::yes();
}

FusionDecision decide_row_space(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  const Graph& graph = module.graph;
  const Node &p = graph.node(producer), &c = graph.node(consumer);
  if (is_chain_layout(p.op) && is_chain_layout(c.op) && !(is_row_view(graph, p) && is_row_view(graph, c)))
    return decide_layout_chain(module, groups, producer, consumer);
  for (const Node* node : {&p, &c}) {
    if (!is_fusible(graph, *node))
      return FusionDecision::no(
          RefusalCode::OpKind,
          op_info(node->op).category == OpCategory::Reduction ? "reduction over a non-last axis"
          : node->op == OpId::Reshape
              ? "reshape that does not keep the last dimension"
              : fmt::format("{} is not elementwise, broadcast, reduction or a reshape of rows", op_name(node->op)));
    if (auto reshape = row_reshape_decision(module, *node); reshape && !*reshape) return *reshape;
  }
  if (c.op == OpId::Broadcast && p.type.shape != c.type.shape && !is_row_shape(p.type.shape, c.type.shape))
    return FusionDecision::no(RefusalCode::IterationSpace, "broadcast from a shape that is not one per row");
  if (auto problem = check_row_space(module, groups, producer, consumer))
    return FusionDecision::no(RefusalCode::IterationSpace, "different iteration spaces: " + *problem);
  if (FusionDecision backend = check_backend(module, groups, producer, consumer); !backend) return backend;
  bool reduction = op_info(p.op).category == OpCategory::Reduction || op_info(c.op).category == OpCategory::Reduction;
  if (reduction && module.capabilities && !module.capabilities->fuses_reduction_prologue)
    return FusionDecision::no(RefusalCode::Capability, "backend cannot fuse into reductions");
  if (groups.would_create_cycle(producer, consumer))
    return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
  return FusionDecision::yes();
}

namespace {

class ProducerConsumer : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    partition_pairwise(module, decide_row_space);
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"producer-consumer", "Elementwise prologues and epilogues fused with last-axis reductions in one row space",
     "elementwise ops, broadcasts, constants and last-axis reductions in one row space; backend runs both, fuses "
     "elementwise kernels and (with a reduction) reduction prologues; size limit; no cycle",
     "whenever legal; a producer with several consumers joins the first and is written out for the others; only "
     "constants are duplicated",
     [](const PassOptions&) { return std::make_unique<ProducerConsumer>(); }}};

}  // namespace
}  // namespace lazylab
