#include "core/attention_pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/dtype.h"

namespace lazylab {
namespace {

// Walks the pattern backwards from the output, collecting its ops; each
// step names what it expected where the graph differs.
class AttentionMatcher {
 public:
  AttentionMatcher(const Graph& graph, NodeId output) : graph_(graph), output_(output) {}

  Expected<AttentionPattern> run() {
    const Node& out = node(output_);
    if (out.op != OpId::Matmul) return fail(output_, "is not a matmul");
    dtype_ = out.type.dtype;
    if (dtype_ != DType::F32 && dtype_ != DType::BF16 && dtype_ != DType::F16)
      return fail(output_, "is not f32, bf16 or f16");
    pattern_.attention.dtype = dtype_;
    take(output_);
    Expected<NodeId> p = probabilities(out.operands[0]);
    if (!p) return p.error();
    Expected<NodeId> e = normalized(*p);
    if (!e) return e.error();
    Expected<NodeId> logits = exponentiated(*e);
    if (!logits) return logits.error();
    Expected<NodeId> scores = transformed(*logits);
    if (!scores) return scores.error();
    LAZYLAB_TRY(product(*scores, out.operands[1]));
    std::sort(pattern_.ops.begin(), pattern_.ops.end());
    return std::move(pattern_);
  }

 private:
  const Node& node(NodeId id) const { return graph_.node(id); }

  Error fail(NodeId id, const std::string& why) const {
    return make_error(fmt::format("not attention: %{} ({}) {}", id, op_name(node(id).op), why));
  }

  void take(NodeId id) { pattern_.ops.push_back(id); }

  bool last_axis_keepdim(const Node& reduction) const {
    int64_t rank = node(reduction.operands[0]).type.rank();
    return reduction.attrs[0].ints == Ints{rank - 1} && reduction.attrs[1].i != 0;
  }

  // broadcast(reduce_OP(of)) over the last axis, back to of's shape.
  Status row_statistic(NodeId view, OpId op, NodeId of) {
    const Node& b = node(view);
    if (b.op != OpId::Broadcast) return fail(view, "is not a broadcast of a row statistic");
    const Node& r = node(b.operands[0]);
    if (r.op != op || r.operands[0] != of || !last_axis_keepdim(r))
      return fail(b.operands[0], fmt::format("is not {} over the last axis of %{}", op_name(op), of));
    Ints identity(b.type.rank());
    for (size_t d = 0; d < identity.size(); ++d) identity[d] = static_cast<int64_t>(d);
    if (b.attrs[0].ints != identity || b.type.shape != node(of).type.shape)
      return fail(view, "does not spread the statistic over its row");
    take(view);
    take(b.operands[0]);
    return {};
  }

  // The products' operand p: the softmax itself in f32, or its narrowing to
  // the products' 16 bits (autocast's form).
  Expected<NodeId> probabilities(NodeId operand) {
    if (dtype_ == DType::F32) return operand;
    Expected<NodeId> p = cast_from(operand, DType::F32, "is not the probabilities' narrowing cast from f32");
    if (p) take(operand);
    return p;
  }

  // The operand of `id`, a cast from `from` to id's dtype; or why not.
  Expected<NodeId> cast_from(NodeId id, DType from, const char* why) const {
    const Node& n = node(id);
    if (n.op != OpId::Cast || node(n.operands[0]).type.dtype != from) return fail(id, why);
    return n.operands[0];
  }

  // p = div(e, broadcast(reduce_sum(e))): returns e.
  Expected<NodeId> normalized(NodeId p) {
    const Node& div = node(p);
    if (div.op != OpId::Div) return fail(p, "is not the softmax's division");
    LAZYLAB_TRY(row_statistic(div.operands[1], OpId::ReduceSum, div.operands[0]));
    take(p);
    return div.operands[0];
  }

  // e = exp(sub(x, broadcast(reduce_max(x)))): returns x.
  Expected<NodeId> exponentiated(NodeId e) {
    const Node& exp = node(e);
    if (exp.op != OpId::Exp) return fail(e, "is not the softmax's exp");
    const Node& sub = node(exp.operands[0]);
    if (sub.op != OpId::Sub) return fail(exp.operands[0], "is not the softmax's subtraction");
    LAZYLAB_TRY(row_statistic(sub.operands[1], OpId::ReduceMax, sub.operands[0]));
    take(e);
    take(exp.operands[0]);
    return sub.operands[0];
  }

  // A splat constant's value, where `id` is one.
  std::optional<double> splat(NodeId id) const {
    const Node& c = node(id);
    if (c.op != OpId::Constant) return std::nullopt;
    return c.attrs[0].f;
  }

  // The scale and the mask, in either order, down to the scores; in the
  // 16-bit form these are in the products' dtype, widened to f32 after.
  Expected<NodeId> transformed(NodeId x) {
    if (dtype_ != DType::F32) {
      Expected<NodeId> narrow = cast_from(x, dtype_, "is not the scores' widening cast to f32");
      if (!narrow) return narrow.error();
      take(x);
      x = *narrow;
    }
    bool scaled = false, masked = false;
    for (;;) {
      const Node& n = node(x);
      if (n.op == OpId::Mul && !scaled) {
        int constant = splat(n.operands[1]) ? 1 : splat(n.operands[0]) ? 0 : -1;
        if (constant < 0) return fail(x, "multiplies the scores by something other than a constant");
        // As the constant holds it: 0.1 in bf16 is 0.10009765625.
        pattern_.attention.scale = round_to(dtype_, *splat(n.operands[constant]));
        scaled = true;
        take(x);
        take(n.operands[constant]);
        x = n.operands[1 - constant];
      } else if (n.op == OpId::Div && !scaled) {
        // Divided by a constant (BERT's and GPT-2's sqrt(d)): the scale is
        // its reciprocal, exact where the constant is a power of two.
        std::optional<double> divisor = splat(n.operands[1]);
        if (!divisor || *divisor == 0) return fail(x, "divides the scores by something other than a nonzero constant");
        pattern_.attention.scale = 1.0 / round_to(dtype_, *divisor);
        scaled = true;
        take(x);
        take(n.operands[1]);
        x = n.operands[0];
      } else if (n.op == OpId::Select && !masked) {
        // The kernel scales, then masks: a scale after the mask must keep -inf.
        if (scaled && !(pattern_.attention.scale > 0))
          return fail(x, "is scaled after the mask by a factor that is not positive");
        Expected<NodeId> kept = masked_scores(x);
        if (!kept) return kept.error();
        masked = true;
        x = *kept;
      } else {
        return x;
      }
    }
  }

  bool is_minus_inf(NodeId id) const {
    auto fill = splat(id);
    return fill && std::isinf(*fill) && *fill < 0;
  }

  // select(c, x, -inf) or select(c, -inf, x), the condition broadcast over
  // the batches: the causal mask i >= j where that is c, kept where true;
  // else c read from memory. Returns x.
  Expected<NodeId> masked_scores(NodeId select) {
    const Node& s = node(select);
    bool keeps = is_minus_inf(s.operands[2]);
    if (!keeps && !is_minus_inf(s.operands[1])) return fail(select, "masks with a fill other than -inf");
    NodeId fill = s.operands[keeps ? 2 : 1];
    NodeId condition = s.operands[0];
    std::optional<NodeId> view;
    if (node(condition).op == OpId::Broadcast) {
      const Node& b = node(condition);
      int64_t rank = b.type.rank(), in_rank = node(b.operands[0]).type.rank();
      for (int64_t d = 0; d < in_rank; ++d)
        if (b.attrs[0].ints[d] != rank - in_rank + d)
          return fail(condition, "spreads the mask other than over the batches");
      view = condition;
      condition = b.operands[0];
    }
    // The mask's own rows and columns must be the scores': a [1, n] mask
    // spread over the rows is not i >= j.
    const Dims &mask = node(condition).type.shape, &scores = s.type.shape;
    if (mask.size() < 2 || mask[mask.size() - 2] != scores[scores.size() - 2] || mask.back() != scores.back())
      return fail(condition, "is a mask of other rows or columns than the scores'");
    if (keeps && is_causal_mask(graph_, condition)) {
      pattern_.attention.causal = true;
      pattern_.causal_mask = {condition, node(condition).operands[0], node(condition).operands[1]};
      for (NodeId op : pattern_.causal_mask) take(op);
    } else {
      // Any other mask is read as a bool [m, n], the same for every batch.
      if (node(condition).type.num_elements() != mask[mask.size() - 2] * mask.back())
        return fail(condition, "is a mask of its own for each batch");
      pattern_.attention.mask = condition;
      pattern_.attention.mask_keeps = keeps;
    }
    pattern_.mask = select;
    take(select);
    take(fill);
    if (view) take(*view);
    return s.operands[keeps ? 1 : 2];
  }

  // scores = matmul(q, kᵀ), and the output's v: shapes and batches agree.
  Status product(NodeId scores, NodeId v) {
    const Node& s = node(scores);
    if (s.op != OpId::Matmul) return fail(scores, "is not the scores' matmul");
    take(scores);
    pattern_.scores = scores;
    Attention& a = pattern_.attention;
    a.output = output_;
    a.q = s.operands[0];
    a.k = s.operands[1];
    a.v = v;
    if (swaps_last_two(node(a.k))) {
      take(a.k);
      a.k = node(a.k).operands[0];
      a.k_transposed = true;
    }
    const Dims &q = node(a.q).type.shape, &k = node(a.k).type.shape, &vs = node(v).type.shape;
    const Dims& out = node(output_).type.shape;
    size_t rank = out.size();
    if (q.size() != rank || k.size() != rank || vs.size() != rank || s.type.rank() != static_cast<int64_t>(rank))
      return fail(scores, "has batches broadcast between q, k and v");
    for (size_t d = 0; d + 2 < rank; ++d)
      if (q[d] != out[d] || k[d] != out[d] || vs[d] != out[d])
        return fail(scores, "has batches broadcast between q, k and v");
    if (s.type.dtype != dtype_) return fail(scores, fmt::format("is not {} as the output is", dtype_name(dtype_)));
    for (NodeId operand : {a.q, a.k, v})
      if (node(operand).type.dtype != dtype_)
        return fail(operand, fmt::format("is not {} as the output is", dtype_name(dtype_)));
    a.m = q[rank - 2];
    a.d = q[rank - 1];
    a.n = s.type.shape.back();
    a.dv = vs[rank - 1];
    a.batch = node(output_).type.num_elements() / std::max<int64_t>(a.m * a.dv, 1);
    a.batch_shape.assign(out.begin(), out.end() - 2);
    a.q_view = row_major_view(q);
    a.k_view = row_major_view(k);
    a.v_view = row_major_view(vs);
    a.output_view = row_major_view(out);
    // Softmax over no keys is no distribution; an empty batch is no work.
    if (node(scores).type.num_elements() == 0 || a.d == 0 || a.dv == 0) return fail(scores, "has an empty dimension");
    return {};
  }

  const Graph& graph_;
  NodeId output_;
  DType dtype_ = DType::F32;  // the products' (and q's, k's, v's)
  AttentionPattern pattern_;
};

}  // namespace

bool is_causal_mask(const Graph& graph, NodeId id) {
  const Node& c = graph.node(id);
  if ((c.op != OpId::Ge && c.op != OpId::Le) || c.type.rank() < 2) return false;
  int64_t rank = c.type.rank();
  auto iota_axis = [&](NodeId v) -> int64_t {
    const Node& i = graph.node(v);
    return i.op == OpId::Iota && i.type.shape == c.type.shape ? i.attrs[0].i : -1;
  };
  int64_t first = iota_axis(c.operands[0]), second = iota_axis(c.operands[1]);
  int64_t row = c.op == OpId::Ge ? first : second, col = c.op == OpId::Ge ? second : first;
  return row == rank - 2 && col == rank - 1;
}

Expected<AttentionPattern> match_attention(const Graph& graph, NodeId output) {
  return AttentionMatcher(graph, output).run();
}

AttentionPattern without_k_transpose(const Graph& graph, AttentionPattern pattern) {
  Attention& a = pattern.attention;
  if (!a.k_transposed) return pattern;
  NodeId transpose = graph.node(pattern.scores).operands[1];
  std::erase(pattern.ops, transpose);
  a.k = transpose;
  a.k_transposed = false;
  a.k_view = row_major_view(graph.node(transpose).type.shape);
  return pattern;
}

AttentionPattern without_causal_mask(AttentionPattern pattern) {
  for (NodeId op : pattern.causal_mask) std::erase(pattern.ops, op);
  pattern.causal_mask.clear();
  return pattern;
}

namespace {

// The ops reading `value`, once for each time they read it.
std::vector<NodeId> readers(const Graph& graph, NodeId value) {
  std::vector<NodeId> users;
  for (NodeId id = value + 1; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands)
      if (operand == value) users.push_back(id);
  return users;
}

bool is_root(const Graph& graph, NodeId value) {
  return std::find(graph.roots().begin(), graph.roots().end(), value) != graph.roots().end();
}

// An operand's view from a strided view of its source's memory; nullopt
// where its last dim is not contiguous there.
std::optional<AttentionView> operand_view(const StridedLayout& layout) {
  size_t rank = layout.strides.size();
  if (rank < 2 || (layout.strides[rank - 1] != 1 && layout.shape[rank - 1] != 1)) return std::nullopt;
  AttentionView view{layout.offset, layout.strides[rank - 2], {}};
  for (size_t d = 0; d + 2 < rank; ++d) view.batch_strides.push_back(layout.shape[d] == 1 ? 0 : layout.strides[d]);
  return view;
}

// The layout ops ending at `operand` that `may_take` allows, each read by
// the next alone (the last by the attention), outermost last, and the
// operand as a strided view of the value they start from; nullopt where
// there are none or they make no view.
struct Chain {
  std::vector<NodeId> ops;
  NodeId source = 0;
  StridedLayout layout;
};
std::optional<Chain> chain_to(const Graph& graph, NodeId operand, const std::function<bool(NodeId)>& may_take) {
  Chain chain;
  NodeId x = operand;
  while (is_chain_layout(graph.node(x).op) && graph.node(x).operands.size() == 1 && may_take(x) &&
         readers(graph, x).size() == 1 && !is_root(graph, x)) {
    chain.ops.push_back(x);
    x = graph.node(x).operands[0];
  }
  if (chain.ops.empty()) return std::nullopt;
  chain.source = x;
  chain.layout = contiguous(graph.node(x).type.shape);
  for (size_t i = chain.ops.size(); i-- > 0;) {
    auto next = view_after(graph.node(chain.ops[i]), chain.layout);
    if (!next) return std::nullopt;
    chain.layout = std::move(*next);
  }
  return chain;
}

// The reshapes and transposes reading `output` one after another that
// `may_take` allows, each the only reader of the one before (the last may
// have any), and the output as a strided view of the last one's memory
// (walked back from it through each op's inverse); nullopt where none.
std::optional<Chain> chain_from(const Graph& graph, NodeId output, const std::function<bool(NodeId)>& may_take) {
  Chain chain;
  NodeId x = output;
  for (;;) {
    std::vector<NodeId> users = readers(graph, x);
    if (is_root(graph, x) || users.size() != 1) break;
    NodeId user = users[0];
    const Node& next = graph.node(user);
    if ((next.op != OpId::Reshape && next.op != OpId::Transpose) || !may_take(user)) break;
    chain.ops.push_back(user);
    x = user;
  }
  if (chain.ops.empty()) return std::nullopt;
  chain.source = x;
  chain.layout = contiguous(graph.node(x).type.shape);
  for (size_t i = chain.ops.size(); i-- > 0;) {
    const Node& op = graph.node(chain.ops[i]);
    const Dims& operand = graph.node(op.operands[0]).type.shape;
    StridedLayout before;
    before.offset = chain.layout.offset;
    before.shape.assign(operand.begin(), operand.end());
    if (op.op == OpId::Reshape) {
      auto strides = reshaped_strides(chain.layout, before.shape);
      if (!strides) return std::nullopt;
      before.strides = std::move(*strides);
    } else {  // result dim d is operand dim perm[d]
      before.strides.assign(operand.size(), 0);
      const Ints& perm = op.attrs[0].ints;
      for (size_t d = 0; d < perm.size(); ++d) before.strides[perm[d]] = chain.layout.strides[d];
    }
    chain.layout = std::move(before);
  }
  return chain;
}

}  // namespace

AttentionPattern through_views(const Graph& graph, AttentionPattern pattern,
                               const std::function<bool(NodeId)>& may_take) {
  Attention& a = pattern.attention;
  auto take = [&](const Chain& chain, NodeId& value, AttentionView& view, const AttentionView& found) {
    value = chain.source;
    view = found;
    pattern.ops.insert(pattern.ops.end(), chain.ops.begin(), chain.ops.end());
    a.through_views = true;
  };
  for (auto [operand, view] : {std::pair{&a.q, &a.q_view}, std::pair{&a.v, &a.v_view}})
    if (auto chain = chain_to(graph, *operand, may_take))
      if (auto found = operand_view(chain->layout)) take(*chain, *operand, *view, *found);
  if (auto chain = chain_to(graph, a.k, may_take)) {
    // k as [d, n] whose d is contiguous is k's rows, read as such.
    StridedLayout rows = chain->layout;
    size_t rank = rows.shape.size();
    bool swap = !a.k_transposed && rank >= 2 && rows.strides[rank - 2] == 1 && rows.strides[rank - 1] != 1;
    if (swap)
      std::swap(rows.shape[rank - 2], rows.shape[rank - 1]), std::swap(rows.strides[rank - 2], rows.strides[rank - 1]);
    if (auto view = operand_view(rows)) {
      take(*chain, a.k, a.k_view, *view);
      a.k_transposed = a.k_transposed || swap;
    }
  }
  if (auto chain = chain_from(graph, a.output, may_take))
    if (auto view = operand_view(chain->layout)) take(*chain, a.output, a.output_view, *view);
  std::sort(pattern.ops.begin(), pattern.ops.end());
  return pattern;
}

Expected<KernelDescription> describe_attention(const Graph& graph, std::span<const NodeId> ops) {
  if (ops.empty()) return make_error("no ops");
  std::vector<NodeId> given(ops.begin(), ops.end());
  std::sort(given.begin(), given.end());
  // The output's product is the kernel's last matmul; layout ops may follow it.
  auto product =
      std::find_if(given.rbegin(), given.rend(), [&](NodeId id) { return graph.node(id).op == OpId::Matmul; });
  if (product == given.rend()) return make_error("no matmul");
  Expected<AttentionPattern> pattern = match_attention(graph, *product);
  if (!pattern) return pattern.error();
  auto inside = [&](NodeId id) { return std::binary_search(given.begin(), given.end(), id); };
  AttentionPattern whole = std::move(*pattern);
  if (!std::all_of(whole.causal_mask.begin(), whole.causal_mask.end(), inside))
    whole = without_causal_mask(std::move(whole));
  *pattern = through_views(graph, whole, inside);
  if (given != pattern->ops) *pattern = through_views(graph, without_k_transpose(graph, std::move(whole)), inside);
  if (given != pattern->ops) return make_error("the kernel holds ops besides the attention's");
  KernelDescription description;
  description.kind = KernelKind::Attention;
  description.attention = pattern->attention;
  description.rows = pattern->attention.batch * pattern->attention.m;
  description.cols = pattern->attention.n;
  return description;
}

}  // namespace lazylab
