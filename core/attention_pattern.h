// Attention as one kernel (ABI 3.4's LAZYLAB_KERNEL_ATTENTION): the two
// products around a softmax, softmax(f(Q Kᵀ)) V, where f scales the scores
// and may mask them causally. Found once here from the ops `decompose`
// leaves, so the fusion strategy that groups them and the description the
// backends read agree on what the group is.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "expected.h"
#include "kernel_description.h"

namespace lazylab {

struct AttentionPattern {
  Attention attention;
  std::vector<NodeId> ops;  // every op of the kernel, in program order; the last is the output
  NodeId scores = 0;        // the first product
  NodeId mask = 0;          // the causal mask's select (0: none), for the explanation
  // A causal mask's comparison and its two iotas, which the kernel computes
  // itself (it knows i >= j); among `ops` unless without_causal_mask dropped them.
  std::vector<NodeId> causal_mask;
};

// The attention ending at the matmul `output`, or why `output` ends none.
// The pattern: output = matmul(p, v); p = div(e, broadcast(reduce_sum(e)));
// e = exp(sub(x, broadcast(reduce_max(x)))), the reductions over the last
// axis; x = the scores, multiplied (or divided) by a constant and/or selected by a mask
// i >= j (ge of the row and column iotas) against -inf; the scores =
// matmul(q, kᵀ), the transpose folded where it is one of the last two dims.
// All f32; or autocast's form: output = matmul(cast(p), v) with the products,
// q, k, v, the scale and the mask in bf16 or f16, widened to f32
// (x = cast(...)) for the softmax.
Expected<AttentionPattern> match_attention(const Graph& graph, NodeId output);

// The same attention reading k's transpose from memory, as a [.., d, n]
// value, instead of folding it in (for a transpose other ops read too).
AttentionPattern without_k_transpose(const Graph& graph, AttentionPattern pattern);

// The same attention reading its causal mask's comparison from memory
// (for a mask other ops read too); the kernel ignores it, knowing i >= j.
AttentionPattern without_causal_mask(AttentionPattern pattern);

// ge(iota(rows), iota(cols)) or le(iota(cols), iota(rows)) over [..., m, n]:
// the mask keeping scores i >= j.
bool is_causal_mask(const Graph& graph, NodeId id);

// The same attention reading q, k and v through the layout ops that make
// them, and writing its output through the reshapes and transposes after
// it, where `may_take` allows each op and the views keep the last dim
// contiguous (ABI 3.16's attention_views): the ops join the pattern, the
// attention names the values they start from (and the one they end in)
// with their views. k as [d, n] whose d is contiguous becomes k's rows.
AttentionPattern through_views(const Graph& graph, AttentionPattern pattern,
                               const std::function<bool(NodeId)>& may_take);

// `ops` as one attention kernel, or why they are not exactly one.
Expected<KernelDescription> describe_attention(const Graph& graph, std::span<const NodeId> ops);

}  // namespace lazylab
