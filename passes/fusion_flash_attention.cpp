// Fusion strategy `flash-attention`: gemm-epilogue, plus attention as one
// kernel. Two products around a softmax, softmax(f(Q Kᵀ)) V with f a scale
// and an optional causal mask (core/attention_pattern.h), become one
// LAZYLAB_KERNEL_ATTENTION kernel, which a backend runs FlashAttention-style:
// the scores and the probabilities, batch x m x n each, never reach memory.
//
// Legality: the whole pattern or none of it (a transpose of k that other
// ops read too is left out, and the kernel reads it from memory; a mask's
// broadcast that other selects read too is made again for each select
// first, and a causal mask's comparison of iotas that only attentions read;
// one other ops read stays outside, the kernel ignoring it); no value inside it read outside
// it (only the second product leaves); the backend runs attention kernels
// with these head dims, in this dtype (16 bits: ABI 3.15's attention_16_bit),
// with this mask (read from memory: ABI 3.15's attention_masks) and every op
// of the pattern, within its size limit. Where the backend reads attention
// operands through views (ABI 3.16's attention_views), the layout ops
// making q, k and v and those reading the output join the pattern, each
// read by the next alone (core/attention_pattern.h's through_views).
// (No cycle can form: nothing leaves the pattern but its output.) Pairs
// outside an attention kernel follow gemm-epilogue; an attention kernel
// takes nothing more. Profitability: fuse whenever legal.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/attention_pattern.h"
#include "core/fusion_strategy.h"
#include "core/graph_builder.h"
#include "fusion_decisions.h"

namespace lazylab {
namespace {

FusionDecision attention_decision(const Module& module, const AttentionPattern& pattern) {
  const Graph& graph = module.graph;
  const Attention& a = pattern.attention;
  if (const lazylab_capabilities* caps = module.capabilities) {
    if (std::max(a.d, a.dv) > caps->attention_max_head_dim)
      return FusionDecision::no(RefusalCode::Capability,
                                caps->attention_max_head_dim
                                    ? fmt::format("backend runs attention kernels with head dims up to {}, not {}",
                                                  caps->attention_max_head_dim, std::max(a.d, a.dv))
                                    : std::string("backend runs no attention kernels"));
    if (a.mask != kNoNode && !caps->attention_masks)
      return FusionDecision::no(RefusalCode::Capability,
                                "backend runs attention kernels with a causal mask or none, not one read from memory");
    if (a.dtype != DType::F32 && !caps->attention_16_bit)
      return FusionDecision::no(RefusalCode::Capability,
                                fmt::format("backend runs attention kernels in f32, not {}", dtype_name(a.dtype)));
    for (NodeId id : pattern.ops)
      if (!caps->supports_op[static_cast<int>(graph.node(id).op)])
        return FusionDecision::no(RefusalCode::Capability,
                                  fmt::format("backend cannot run {}", op_name(graph.node(id).op)));
    if (caps->max_ops_per_kernel && pattern.ops.size() > caps->max_ops_per_kernel)
      return FusionDecision::no(RefusalCode::SizeLimit,
                                fmt::format("size limit: {} ops > {}", pattern.ops.size(), caps->max_ops_per_kernel));
  }
  std::set<NodeId> inside(pattern.ops.begin(), pattern.ops.end());
  for (NodeId root : graph.roots())
    if (root != a.output && inside.count(root))
      return FusionDecision::no(RefusalCode::SeveralConsumers, fmt::format("%{} is an output too", root));
  for (NodeId user = pattern.ops.front(); user < graph.size(); ++user) {
    if (inside.count(user)) continue;
    for (NodeId operand : graph.node(user).operands)
      if (operand != a.output && inside.count(operand))
        return FusionDecision::no(RefusalCode::SeveralConsumers,
                                  fmt::format("%{} is read outside the attention, by %{}", operand, user));
  }
  return FusionDecision::yes();
}

// Whether every reader of each value is an attention's causal select
// reading it as its condition, directly or through broadcasts.
std::vector<bool> read_only_as_causal_masks(const Graph& graph) {
  std::vector<bool> causal_select(graph.size(), false);
  for (NodeId id = 0; id < graph.size(); ++id)
    if (graph.node(id).op == OpId::Matmul)
      if (auto pattern = match_attention(graph, id); pattern && pattern->attention.causal)
        causal_select[pattern->mask] = true;
  std::vector<bool> only(graph.size(), true);
  for (NodeId root : graph.roots()) only[root] = false;
  for (NodeId id = graph.size(); id-- > 0;) {  // a value's readers come after it
    const Node& node = graph.node(id);
    for (size_t i = 0; i < node.operands.size(); ++i)
      if (!((node.op == OpId::Select && i == 0 && causal_select[id]) || (node.op == OpId::Broadcast && only[id])))
        only[node.operands[i]] = false;
  }
  return only;
}

// A mask spread over the batches belongs to its attention pattern, and a
// causal one (ge of two iotas) too, which the kernel computes itself; several
// layers of one traced model share one once cse has merged theirs, and a
// pattern whose value another op reads does not fuse. Each select of such a
// broadcast gets its own, as each reader gets its own constant, the original
// staying where another op reads it; a causal mask too, where attentions
// alone read it (a joint graph's backward reads its forward's mask, which
// stays one, outside the forward's attention).
void give_each_select_its_mask(Module& module) {
  const Graph& graph = module.graph;
  std::vector<size_t> readers(graph.size(), 0);
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands) ++readers[operand];
  for (NodeId root : graph.roots()) ++readers[root];
  const std::vector<bool> attentions_alone = read_only_as_causal_masks(graph);
  // The nodes of a select's condition that the select may make again.
  auto own_mask = [&](NodeId condition) {
    std::vector<NodeId> nodes;
    if (graph.node(condition).op == OpId::Broadcast) {
      nodes.push_back(condition);
      condition = graph.node(condition).operands[0];
    }
    if (is_causal_mask(graph, condition) && attentions_alone[condition]) {
      nodes.push_back(condition);
      nodes.insert(nodes.end(), graph.node(condition).operands.begin(), graph.node(condition).operands.end());
    }
    return nodes;
  };
  std::vector<bool> remakes(graph.size(), false);  // a select making its mask again
  std::vector<bool> in_mask(graph.size(), false);  // a node of a mask made again
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op != OpId::Select) continue;
    std::vector<NodeId> mask = own_mask(node.operands[0]);
    if (std::none_of(mask.begin(), mask.end(), [&](NodeId n) { return readers[n] > 1; })) continue;
    remakes[id] = true;
    for (NodeId n : mask) in_mask[n] = true;
  }
  if (std::find(remakes.begin(), remakes.end(), true) == remakes.end()) return;
  GraphBuilder builder;
  std::vector<NodeId> mapped(graph.size(), kNoNode);
  auto copy = [&](NodeId id, const std::function<NodeId(NodeId)>& operand_of) {
    const Node& node = graph.node(id);
    Operands operands;
    for (NodeId operand : node.operands) operands.push_back(operand_of(operand));
    return builder.add_typed(node.op, node.type, std::move(operands), node.attrs);
  };
  // A mask's node made once, where another op reads it, on demand.
  std::function<NodeId(NodeId)> original = [&](NodeId id) {
    if (mapped[id] == kNoNode) mapped[id] = copy(id, original);
    return mapped[id];
  };
  std::function<NodeId(NodeId)> again = [&](NodeId id) { return in_mask[id] ? copy(id, again) : original(id); };
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (in_mask[id]) continue;
    if (!remakes[id]) {
      original(id);
      continue;
    }
    const Node& select = graph.node(id);
    Operands operands{again(select.operands[0]), original(select.operands[1]), original(select.operands[2])};
    mapped[id] = builder.add_typed(select.op, select.type, std::move(operands), select.attrs);
  }
  std::vector<NodeId> roots;
  for (NodeId root : graph.roots()) roots.push_back(original(root));
  builder.graph().set_roots(std::move(roots));
  replace_graph(module, std::move(builder.graph()));
}

// Whether an op outside `pattern`, or the graph's outputs, read `value`.
bool read_outside(const Graph& graph, const AttentionPattern& pattern, NodeId value) {
  if (std::find(graph.roots().begin(), graph.roots().end(), value) != graph.roots().end()) return true;
  for (NodeId user = value + 1; user < graph.size(); ++user)
    if (!std::binary_search(pattern.ops.begin(), pattern.ops.end(), user))
      for (NodeId operand : graph.node(user).operands)
        if (operand == value) return true;
  return false;
}

class FlashAttention : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    duplicate_constants(module);
    give_each_select_its_mask(module);
    const Graph& graph = module.graph;
    KernelGroups groups(graph);
    std::set<NodeId> in_attention;
    for (NodeId id = 0; id < graph.size(); ++id) {
      if (graph.node(id).op != OpId::Matmul || !groups.in_kernel(id)) continue;
      auto pattern = match_attention(graph, id);
      if (!pattern) {
        // A product of a division (or its cast, under autocast), as a softmax
        // ends: say why it is not attention.
        NodeId lhs = graph.node(id).operands[0];
        const Node& division =
            graph.node(lhs).op == OpId::Cast ? graph.node(graph.node(lhs).operands[0]) : graph.node(lhs);
        if (division.op == OpId::Div)
          module.fusion_log.push_back({lhs, id, FusionDecision::no(RefusalCode::OpKind, pattern.error().message)});
        continue;
      }
      // A causal mask other ops read too stays outside; the kernel ignores it.
      const std::vector<NodeId>& mask = pattern->causal_mask;
      if (std::any_of(mask.begin(), mask.end(), [&](NodeId op) { return read_outside(graph, *pattern, op); }))
        *pattern = without_causal_mask(std::move(*pattern));
      // A transpose of k that other ops read too stays a kernel of its own.
      if (pattern->attention.k_transposed && user_count(graph, graph.node(pattern->scores).operands[1]) > 1)
        *pattern = without_k_transpose(graph, std::move(*pattern));
      // The layout ops making q, k and v, and reading the output, each read
      // by the next alone, join it where the backend reads such views.
      if (!module.capabilities || module.capabilities->attention_views)
        *pattern = through_views(graph, std::move(*pattern), [&](NodeId op) { return groups.in_kernel(op); });
      FusionDecision decision = attention_decision(module, *pattern);
      if (decision)
        for (NodeId op : pattern->ops) {
          groups.merge(pattern->ops.back(), op);
          in_attention.insert(op);
        }
      module.fusion_log.push_back({pattern->scores, id, std::move(decision)});
    }
    partition_pairwise(module, groups, [&](Module& m, KernelGroups& g, NodeId producer, NodeId consumer) {
      if (in_attention.count(producer) || in_attention.count(consumer))
        return FusionDecision::no(RefusalCode::OpKind, "an attention kernel takes nothing more");
      return decide_gemm_epilogue(m, g, producer, consumer);
    });
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"flash-attention", "gemm-epilogue, plus softmax(scale * Q K^T, causal mask or none) V as one attention kernel",
     "gemm-epilogue; an attention pattern whole, where nothing inside it is read outside it and the backend runs "
     "attention kernels of its head dims; with the layouts around it where the backend reads views",
     "whenever legal", [](const PassOptions&) { return std::make_unique<FlashAttention>(); }}};

}  // namespace
}  // namespace lazylab
