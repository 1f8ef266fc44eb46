// Fusion strategy `gemm-epilogue`: producer-consumer's row-space fusion, plus
// contractions. A transpose of the last two dimensions feeding a matmul folds
// in as a transposed operand, and elementwise epilogues over the matmul's
// output (bias, activation, scale) fold into the matmul's kernel, so the
// product is not written out and read back between them.
//
// Legality for a kernel holding a matmul: one matmul; its prologue only
// transposes of the last two dimensions used by nothing else; its epilogue
// only elementwise ops, broadcasts and constants with the matmul's output
// shape (no reductions); the backend fuses GEMM epilogues; the size limit
// holds; no cycle between kernels. A convolution is a contraction too: it
// takes the same kind of epilogue (bias, batch norm as per-channel
// arithmetic, ReLU, a residual add) where the backend fuses window epilogues
// and the merged ops still form a window kernel (kernel_description.h), and
// no prologue. Pairs without either follow producer-consumer.
// Profitability: fuse whenever legal, but where the backend's epilogue is a
// pass that reads the product back (ABI 3.14's gemm_epilogue_rereads: cuda),
// an epilogue whose values reach a reduction through elementwise ops alone
// (a softmax's scaled, masked scores; a residual a layernorm reads) is left
// to the reduction's kernel, as its prologue: the product is written once
// either way, and the epilogue's result is never written. Where the
// epilogue is applied as the product is computed (cpu), it costs nothing
// and stays.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/fusion_strategy.h"
#include "core/kernel_description.h"
#include "fusion_decisions.h"

namespace lazylab {
namespace {

bool is_epilogue_op(OpId op) { return fuses_as_elementwise(op); }

// Whether `id`'s value reaches a reduction through epilogue ops alone.
bool reaches_reduction(const Graph& graph, NodeId id) {
  std::vector<NodeId> work{id};
  std::set<NodeId> seen{id};
  while (!work.empty()) {
    NodeId value = work.back();
    work.pop_back();
    for (NodeId user = value + 1; user < graph.size(); ++user) {  // users come after their operands
      const Node& node = graph.node(user);
      if (std::find(node.operands.begin(), node.operands.end(), value) == node.operands.end()) continue;
      if (op_info(node.op).category == OpCategory::Reduction) return true;
      if (is_epilogue_op(node.op) && seen.insert(user).second) work.push_back(user);
    }
  }
  return false;
}

// Why the nodes of `id`'s group cannot all be epilogue ops of `matmul`, or
// nothing when they can.
std::optional<FusionDecision> epilogue_problem(const Module& module, KernelGroups& groups, NodeId id,
                                               const Node& matmul) {
  const Graph& graph = module.graph;
  for (NodeId other : groups.members_of(id)) {
    const Node& node = graph.node(other);
    bool row_reshape = node.op == OpId::Reshape && keeps_rows(graph.node(node.operands[0]).type.shape, node.type.shape);
    if (!is_epilogue_op(node.op) && !row_reshape)
      return FusionDecision::no(RefusalCode::OpKind, fmt::format("{} cannot be a GEMM epilogue", op_name(node.op)));
    if (auto reshape = row_reshape_decision(module, node); reshape && !*reshape) return *reshape;
    // The product's rows, in its shape or reshaped.
    if (!keeps_rows(node.type.shape, matmul.type.shape))
      return FusionDecision::no(RefusalCode::IterationSpace,
                                fmt::format("epilogue shape {} differs from the product's {}",
                                            to_string(node.type.shape), to_string(matmul.type.shape)));
  }
  return std::nullopt;
}

FusionDecision decide_with_matmul(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer,
                                  std::optional<NodeId> producer_matmul, std::optional<NodeId> consumer_matmul) {
  const Graph& graph = module.graph;
  const Node &p = graph.node(producer), &c = graph.node(consumer);
  if (producer_matmul && consumer_matmul) return FusionDecision::no(RefusalCode::OpKind, "both kernels hold a matmul");
  if (module.capabilities && !module.capabilities->fuses_gemm_epilogue)
    return FusionDecision::no(RefusalCode::Capability, "backend cannot fuse into GEMMs");
  if (c.op == OpId::Matmul) {  // prologue: a transposed operand
    if (p.op != OpId::Transpose || !swaps_last_two(p) || groups.size_of(producer) != 1)
      return FusionDecision::no(RefusalCode::OpKind,
                                "a matmul takes only a transpose of its last two dimensions as a prologue");
    if (user_count(graph, producer) != 1)
      return FusionDecision::no(RefusalCode::SeveralConsumers, "the transpose has other users");
  } else {  // the group without the matmul must be all epilogue
    NodeId other = producer_matmul ? consumer : producer;
    const Node& matmul = graph.node(producer_matmul ? *producer_matmul : *consumer_matmul);
    // An epilogue follows the product: a group computing one of its
    // operands would be a prologue (found by lazylab fuzz: a gelu feeding a
    // matmul and its epilogue both was fused in, and read as if from memory).
    for (NodeId operand : matmul.operands)
      if (groups.group_of(operand) == groups.group_of(other))
        return FusionDecision::no(RefusalCode::OpKind, "the other kernel computes an operand of the matmul");
    if (auto problem = epilogue_problem(module, groups, other, matmul)) return *problem;
    bool rereads = module.capabilities && module.capabilities->gemm_epilogue_rereads;
    if (producer_matmul && rereads)  // an epilogue, read back by a pass: a reduction's prologue is cheaper
      for (NodeId member : groups.members_of(other))
        if (reaches_reduction(graph, member))
          return FusionDecision::no(RefusalCode::Cost, fmt::format("{} reaches a reduction: left to be its prologue",
                                                                   op_name(graph.node(member).op)));
  }
  if (FusionDecision backend = check_backend(module, groups, producer, consumer); !backend) return backend;
  if (groups.would_create_cycle(producer, consumer))
    return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
  return FusionDecision::yes();
}

FusionDecision decide_with_window(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  const Graph& graph = module.graph;
  if (groups.window_of(producer) && groups.window_of(consumer))
    return FusionDecision::no(RefusalCode::OpKind, "both kernels hold a convolution");
  if (groups.matmul_of(producer) || groups.matmul_of(consumer))
    return FusionDecision::no(RefusalCode::OpKind, "a convolution and a matmul are two kernels");
  if (module.capabilities && !module.capabilities->fuses_window_epilogue)
    return FusionDecision::no(RefusalCode::Capability, "backend cannot fuse into convolutions");
  if (graph.node(consumer).op == OpId::Conv2d)
    return FusionDecision::no(RefusalCode::OpKind, "a convolution takes no prologue");
  std::vector<NodeId> merged;
  std::merge(groups.members_of(producer).begin(), groups.members_of(producer).end(),
             groups.members_of(consumer).begin(), groups.members_of(consumer).end(), std::back_inserter(merged));
  if (auto window = describe_window(graph, merged, describe_options(module.capabilities)); !window)
    return FusionDecision::no(RefusalCode::IterationSpace, window.error().message);
  if (FusionDecision backend = check_backend(module, groups, producer, consumer); !backend) return backend;
  if (groups.would_create_cycle(producer, consumer))
    return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
  return FusionDecision::yes();
}

}  // namespace

FusionDecision decide_gemm_epilogue(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  if (groups.window_of(producer) || groups.window_of(consumer))
    return decide_with_window(module, groups, producer, consumer);
  auto producer_matmul = groups.matmul_of(producer);
  auto consumer_matmul = groups.matmul_of(consumer);
  if (!producer_matmul && !consumer_matmul) return decide_row_space(module, groups, producer, consumer);
  return decide_with_matmul(module, groups, producer, consumer, producer_matmul, consumer_matmul);
}

namespace {

class GemmEpilogue : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    partition_pairwise(module, decide_gemm_epilogue);
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"gemm-epilogue",
     "producer-consumer, plus transposed operands and elementwise epilogues folded into matmul kernels",
     "producer-consumer, plus one matmul per kernel with transposes of its last two dims (used by nothing else) as "
     "operands and elementwise ops of its output shape as epilogue; backend fuses GEMM epilogues; size limit; no cycle",
     "whenever legal; where the backend's epilogue rereads the product (cuda), an epilogue reaching a reduction is "
     "left to the reduction as its prologue",
     [](const PassOptions&) { return std::make_unique<GemmEpilogue>(); }}};

}  // namespace
}  // namespace lazylab
