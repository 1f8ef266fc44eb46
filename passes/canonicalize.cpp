// canonicalize: algebraic simplification and constant folding, as a table of
// rewrite rules applied to a fixed point. Each rule names the op it matches
// and returns a replacement or nothing.
//
// Folding evaluates with the interpreter's reference semantics
// (lazylab/reference_semantics.hpp) and rounds to the result dtype, so a
// folded value equals what the interpreter would compute. Identities that are
// only true up to the sign of zero (x + 0 -> x) are applied, as in most ML
// compilers; x * 0 is not folded (NaN and infinity would change).
#include <cmath>

#include "core/fixed_point.h"
#include "core/graph_builder.h"
#include "core/kernel_description.h"
#include "core/pass.h"
#include "lazylab/op_table.hpp"
#include "lazylab/reference_semantics.hpp"

namespace lazylab {
namespace {

using Replacement = Expected<std::optional<NodeId>>;
constexpr std::optional<NodeId> kKeep{};

struct Match {
  GraphBuilder& builder;
  const Node& node;  // in the graph being rebuilt: its operands are that graph's ids
  const Operands& operands;
  const std::vector<int64_t>& uses;  // of each node of the graph being rebuilt, roots counted

  // The node's operand `i` is used by this node alone: rewriting the node
  // leaves no other user of the operand's old value.
  bool sole_user_of(size_t i) const { return uses[node.operands[i]] == 1; }

  const Node& operand(size_t i) const { return builder.node(operands[i]); }
  bool is_constant(size_t i) const { return operand(i).op == OpId::Constant; }
  // Integer and bool splats hold their value exactly, in the attribute's `i`.
  bool integral(size_t i) const { return !is_float(operand(i).type.dtype); }
  long long int_value(size_t i) const { return operand(i).attrs[0].i; }
  bool is_splat(size_t i, double value) const {
    if (!is_constant(i)) return false;
    return integral(i) ? static_cast<double>(int_value(i)) == value : operand(i).attrs[0].f == value;
  }
  // A zero that leaves every x unchanged under `op`, signed zeros included
  // (IEEE: -0 + 0 is +0, so only x + -0 and x - +0 keep x; integers have one
  // zero).
  bool is_identity_zero(size_t i, OpId op) const {
    if (!is_splat(i, 0)) return false;
    if (integral(i)) return true;
    bool negative = std::signbit(operand(i).attrs[0].f);
    return op == OpId::Add ? negative : !negative;
  }
  // A splat's value as its type stores it (an f32 constant 0.1 is the float
  // nearest, a bf16's the bf16 nearest; an integer's is exact up to 2^53 here, so integer folds use
  // int_value): folding reads what the interpreter would (found by lazylab
  // fuzz: cast(bool 3) folded to 3.0).
  double value(size_t i) const {
    if (integral(i)) return static_cast<double>(int_value(i));
    return round_to(operand(i).type.dtype, operand(i).attrs[0].f);
  }
  // The node as a splat of `value`, stored as the interpreter stores a double
  // into its dtype (rounded to a float's, truncated to an integer's).
  NodeId fold_to(double value) const { return builder.constant(round_to(node.type.dtype, value), node.type); }
  // ... of an integer, exactly (wrapped to an i32, a bool 0 or 1).
  NodeId fold_to_int(long long value) const {
    if (is_float(node.type.dtype)) return fold_to(static_cast<double>(value));
    return builder.constant(integer_scalar_attr(node.type.dtype, value), node.type);
  }
};

bool all_constant(const Match& m) {
  for (size_t i = 0; i < m.operands.size(); ++i)
    if (!m.is_constant(i)) return false;
  return !m.operands.empty();
}

// Integers fold exactly, as the interpreter computes them (wrapping, C's
// division); floats through the reference's double formulas.
Replacement fold_elementwise(const Match& m) {
  if (!all_constant(m)) return kKeep;
  auto op = static_cast<uint32_t>(m.node.op);
  if (m.node.op == OpId::Cast)
    return std::optional(m.integral(0) ? m.fold_to_int(m.int_value(0)) : m.fold_to(m.value(0)));
  if (m.node.op == OpId::Select) return std::optional(m.operands[m.int_value(0) != 0 ? 1 : 2]);
  long long integer = 0;
  double out = 0;
  if (m.operands.size() == 1) {
    if (m.integral(0) && reference::apply_unary_int(op, m.int_value(0), integer))
      return std::optional(m.fold_to_int(integer));
    if (reference::apply_unary(op, m.value(0), out)) return std::optional(m.fold_to(out));
    return kKeep;
  }
  if (m.operands.size() != 2) return kKeep;
  if (m.integral(0) && m.node.op != OpId::Pow) {
    if (ops::is_comparison(op))
      return std::optional(m.fold_to_int(reference::compare_int(op, m.int_value(0), m.int_value(1))));
    if (!reference::apply_binary_int(op, m.int_value(0), m.int_value(1), integer))
      return kKeep;  // division by zero: the runtime reports it
    return std::optional(m.fold_to_int(integer));
  }
  if (reference::apply_binary(op, m.value(0), m.value(1), out)) return std::optional(m.fold_to(out));
  return kKeep;
}

// A splat keeps its value through any layout change.
Replacement fold_layout(const Match& m) {
  if (!all_constant(m)) return kKeep;
  return std::optional(m.builder.constant(m.operand(0).attrs[0], m.node.type));
}

Replacement fold_reduce(const Match& m) {
  if (!m.is_constant(0)) return kKeep;
  int64_t count = m.operand(0).type.num_elements() / std::max<int64_t>(m.node.type.num_elements(), 1);
  if (count == 0) return kKeep;  // over nothing: the runtime's starting value, or its error
  if (m.node.op == OpId::ReduceMax || m.node.op == OpId::ReduceMin)
    return std::optional(m.builder.constant(m.operand(0).attrs[0], m.node.type));
  if (m.integral(0)) {  // the runtime's sum wraps; its mean divides the wrapped sum
    long long total = static_cast<long long>(static_cast<unsigned long long>(m.int_value(0)) *
                                             static_cast<unsigned long long>(count));
    return std::optional(m.fold_to_int(m.node.op == OpId::ReduceMean ? total / count : total));
  }
  // Sums start from +0, as the runtime's do: a sum or mean of -0s is +0.
  if (m.node.op == OpId::ReduceMean) return std::optional(m.fold_to(0.0 + m.value(0)));
  return std::optional(m.fold_to(0.0 + m.value(0) * static_cast<double>(count)));
}

// x + -0, -0 + x, x - 0, x * 1, 1 * x, x / 1, pow(x, 1) -> x (for floats
// x + 0 is no identity: -0 + 0 is +0, and rsqrt tells them apart; found by
// lazylab fuzz)
// x op e = x for the op table's identity e (e op x = x too where the op is
// commutative). Only zeros and ones: a max with -inf would be one for floats
// but an integer's least value depends on its dtype.
Replacement identity_operand(const Match& m) {
  auto op = static_cast<uint32_t>(m.node.op);
  auto is_identity = [&](size_t i) {
    switch (ops::identity(op)) {
      case ops::Identity::Zero: return m.is_identity_zero(i, m.node.op);
      case ops::Identity::One: return m.is_splat(i, 1);
      default: return false;
    }
  };
  if (is_identity(1)) return std::optional(m.operands[0]);
  if (ops::is_commutative(op) && is_identity(0)) return std::optional(m.operands[1]);
  return kKeep;
}

Replacement double_negation(const Match& m) {
  if (m.operand(0).op != OpId::Neg) return kKeep;
  return std::optional(m.operand(0).operands[0]);
}

// Layout ops and casts that leave their operand unchanged.
Replacement no_op_layout(const Match& m) {
  if (m.node.type != m.operand(0).type) return kKeep;
  if (m.node.op == OpId::Transpose)
    for (size_t d = 0; d < m.node.attrs[0].ints.size(); ++d)
      if (m.node.attrs[0].ints[d] != static_cast<int64_t>(d)) return kKeep;
  return std::optional(m.operands[0]);
}

// transpose(transpose(x, p), q) -> transpose(x, p after q): one layout
// change (none when they cancel: no-op-layout drops it), not two kernels.
Replacement transpose_of_transpose(const Match& m) {
  const Node& inner = m.operand(0);
  if (inner.op != OpId::Transpose) return kKeep;
  const Ints& p = inner.attrs[0].ints;
  Attrs attrs{};
  for (int64_t axis : m.node.attrs[0].ints) attrs[0].ints.push_back(p[axis]);
  auto id = m.builder.add(OpId::Transpose, {inner.operands[0]}, attrs, &m.node.type);
  if (!id) return id.error();
  return std::optional(*id);
}

// transpose(a b) -> b^T a^T where the product has no other user: the
// product is written in the layout wanted, its operands' transposes are
// read in place by a contraction (or cancel), and an elementwise consumer
// can be its epilogue. A weight gradient x^T dy transposed back to the
// weight's layout is the common case.
Replacement transpose_of_matmul(const Match& m) {
  const Node& product = m.operand(0);
  if (product.op != OpId::Matmul || !m.sole_user_of(0) || !swaps_last_two(m.node)) return kKeep;
  Attrs swap{};
  swap[0].ints = m.node.attrs[0].ints;
  const NodeId factors[2] = {product.operands[0], product.operands[1]};  // `product` moves as the builder grows
  NodeId transposed[2];
  for (size_t i = 0; i < 2; ++i) {
    TensorType type = m.builder.type(factors[i]);
    std::swap(type.shape[type.rank() - 2], type.shape[type.rank() - 1]);
    auto id = m.builder.add(OpId::Transpose, {factors[i]}, swap, &type);
    if (!id) return id.error();
    transposed[i] = *id;
  }
  auto id = m.builder.add(OpId::Matmul, {transposed[1], transposed[0]});
  if (!id) return id.error();
  return std::optional(*id);
}

Replacement reshape_of_reshape(const Match& m) {
  if (m.operand(0).op != OpId::Reshape) return kKeep;
  auto id = m.builder.add(OpId::Reshape, {m.operand(0).operands[0]}, {}, &m.node.type);
  if (!id) return id.error();
  return std::optional(*id);
}

// broadcast(reshape(x)) -> broadcast(x) where the reshape only adds or drops
// dims of size 1 and x has none: a per-channel [C] made [1, C, 1, 1] to
// spread over [N, C, H, W] is then one broadcast, which fusion can read in
// place, not a reshape kernel before it.
Replacement broadcast_of_unit_reshape(const Match& m) {
  const Node& reshape = m.operand(0);
  if (reshape.op != OpId::Reshape) return kKeep;
  const Dims& source = m.builder.node(reshape.operands[0]).type.shape;
  const Dims& shaped = reshape.type.shape;
  const Ints& dims = m.node.attrs[0].ints;
  Ints through;  // the broadcast's result dim of each dim of x
  for (size_t d = 0; d < shaped.size(); ++d) {
    if (shaped[d] == 1) continue;
    if (through.size() == source.size() || source[through.size()] != shaped[d]) return kKeep;
    through.push_back(dims[d]);
  }
  if (through.size() != source.size()) return kKeep;  // x has a dim of size 1
  Attrs attrs{};
  attrs[0].ints = std::move(through);
  auto id = m.builder.add(OpId::Broadcast, {reshape.operands[0]}, attrs, &m.node.type);
  if (!id) return id.error();
  return std::optional(*id);
}

// matmul(a[..., M, K], broadcast(w[K, N]) to [..., K, N]) ->
// reshape(matmul(reshape(a, [... * M, K]), w), [..., M, N]): a weight shared by
// every batch is one product of all the rows with it, not a copy of the
// weight per batch and a batch of smaller products.
Replacement shared_weight_matmul(const Match& m) {
  const Node& weight = m.operand(1);
  const TensorType& a = m.operand(0).type;
  int64_t rank = a.rank();
  if (rank <= 2 || weight.op != OpId::Broadcast) return kKeep;
  const TensorType& source = m.builder.node(weight.operands[0]).type;
  if (source.rank() != 2 || weight.attrs[0].ints != Ints{rank - 2, rank - 1}) return kKeep;
  // Only batch dims added: a w[K, 1] stretched to [..., K, N] is no shared
  // [K, N] (found by lazylab fuzz: the product came out [.., 1]).
  if (source.shape[0] != weight.type.shape[rank - 2] || source.shape[1] != weight.type.shape[rank - 1]) return kKeep;
  TensorType rows{a.dtype, {a.num_elements() / a.shape[rank - 1], a.shape[rank - 1]}};
  NodeId shared = weight.operands[0];  // read before the builder grows: `weight` may move
  auto flat = m.builder.add(OpId::Reshape, {m.operands[0]}, {}, &rows);
  if (!flat) return flat.error();
  auto product = m.builder.add(OpId::Matmul, {*flat, shared});
  if (!product) return product.error();
  auto result = m.builder.add(OpId::Reshape, {*product}, {}, &m.node.type);
  if (!result) return result.error();
  return std::optional(*result);
}

// cast(broadcast(x)) -> broadcast(cast(x)): the cast of fewer elements. A
// cast to a narrower dtype also moves ahead of a transpose, reshape or slice
// that only it reads, so the layout moves fewer bytes and the cast can join
// its source's kernel (autocast's bf16 q, k and v, sliced from one f32
// projection: their casts meet as one, which cse merges, in the
// projection's epilogue). A slice keeping less than a quarter of its source
// keeps its cast after it: casting the whole source would cost more than it
// saves; a widening cast stays after any of them (the layout would move
// more bytes; widen-after-broadcast moves it further down).
Replacement cast_before_layout(const Match& m) {
  const Node& layout = m.operand(0);
  bool broadcast = layout.op == OpId::Broadcast;
  if (!broadcast && layout.op != OpId::Transpose && layout.op != OpId::Reshape && layout.op != OpId::Slice)
    return kKeep;  // (read no operand before: a parameter or constant has none)
  const TensorType& source = m.builder.type(layout.operands[0]);
  bool narrows = dtype_size(m.node.type.dtype) < dtype_size(layout.type.dtype);
  bool small_slice = layout.op == OpId::Slice && 4 * layout.type.num_elements() < source.num_elements();
  if (!narrows || (!broadcast && (small_slice || !m.sole_user_of(0)))) return kKeep;
  TensorType cast_type{m.node.type.dtype, source.shape};
  const OpId op = layout.op;  // read before the builder grows: `layout` may move
  const Attrs attrs = layout.attrs;
  auto cast = m.builder.add(OpId::Cast, {layout.operands[0]}, {}, &cast_type);
  if (!cast) return cast.error();
  auto id = m.builder.add(op, {*cast}, attrs, &m.node.type);
  if (!id) return id.error();
  return std::optional(*id);
}

// cast(cast(x, B), C) -> cast(x, C), or x when C is x's dtype, where B
// holds every value of x's dtype: the inner cast changes no value, so the
// outer one rounds x itself. (A bf16 weight widened to f32 and narrowed
// back by autocast is read as it is.)
Replacement cast_of_exact_cast(const Match& m) {
  const Node& inner = m.operand(0);
  if (inner.op != OpId::Cast) return kKeep;
  NodeId source = inner.operands[0];
  DType from = m.builder.type(source).dtype;
  if (!holds_every_value(from, inner.type.dtype)) return kKeep;
  if (from == m.node.type.dtype) return std::optional(source);
  auto id = m.builder.add(OpId::Cast, {source}, {}, &m.node.type);
  if (!id) return id.error();
  return std::optional(*id);
}

// An elementwise op reading broadcast(cast(x)) where the cast widens
// exactly (a bf16 bias or norm weight stored narrow, widened for an f32
// add): it reads cast(broadcast(x)) instead. The cast is then an
// elementwise op of the reader's own shape, which fusion takes into the
// reader's kernel (a product's epilogue, a norm's row loop), the vector
// widened where read, instead of a kernel of its own for a few hundred
// values. (Only for elementwise readers: a product keeps its broadcast
// operand, which shared-weight-matmul reads.)
Replacement widen_after_broadcast(const Match& m) {
  std::optional<Operands> rewritten;
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const Node& spread = m.operand(i);
    if (spread.op != OpId::Broadcast) continue;
    const Node& widen = m.builder.node(spread.operands[0]);
    if (widen.op != OpId::Cast) continue;
    NodeId narrow = widen.operands[0];
    DType from = m.builder.type(narrow).dtype;
    if (dtype_size(from) >= dtype_size(widen.type.dtype) || !holds_every_value(from, widen.type.dtype)) continue;
    TensorType narrow_spread{from, spread.type.shape};
    const TensorType wide_spread = spread.type;  // read before the builder grows: `spread` may move
    const Attrs attrs = spread.attrs;
    auto moved = m.builder.add(OpId::Broadcast, {narrow}, attrs, &narrow_spread);
    if (!moved) return moved.error();
    auto cast = m.builder.add(OpId::Cast, {*moved}, {}, &wide_spread);
    if (!cast) return cast.error();
    if (!rewritten) rewritten = m.operands;
    (*rewritten)[i] = *cast;
  }
  if (!rewritten) return kKeep;
  const OpId op = m.node.op;
  const Attrs attrs = m.node.attrs;
  const TensorType type = m.node.type;
  auto id = m.builder.add(op, *rewritten, attrs, &type);
  if (!id) return id.error();
  return std::optional(*id);
}

// gather(cast(x), i) -> cast(gather(x, i)) where the gather keeps fewer
// elements than x has: an embedding table stored in bf16 and widened for an
// f32 model is read row by row as stored, the rows it keeps widened (in its
// reader's kernel), not the whole table widened every step in a kernel of
// its own (GPT-2's 50257 x 768 rows, 0.036 ms a step on an H200). A cast
// changes each element alone, so the two orders give the same values.
Replacement cast_after_gather(const Match& m) {
  const Node& cast = m.operand(0);
  if (cast.op != OpId::Cast || m.node.type.num_elements() >= cast.type.num_elements()) return kKeep;
  const NodeId source = cast.operands[0];  // read before the builder grows: `cast` may move
  const TensorType gathered{m.builder.type(source).dtype, m.node.type.shape};
  const TensorType type = m.node.type;
  const Attrs attrs = m.node.attrs;
  auto gather = m.builder.add(OpId::Gather, {source, m.operands[1]}, attrs, &gathered);
  if (!gather) return gather.error();
  auto id = m.builder.add(OpId::Cast, {*gather}, {}, &type);
  if (!id) return id.error();
  return std::optional(*id);
}

struct Rule {
  const char* name;
  bool (*matches)(OpId op);
  Replacement (*rewrite)(const Match& m);
};

bool is_elementwise(OpId op) { return op_info(op).category == OpCategory::Elementwise; }
bool is_reduction(OpId op) { return op_info(op).category == OpCategory::Reduction; }
// A view of a splat is a splat.
bool is_view(OpId op) { return ops::is_view(static_cast<uint32_t>(op)); }
bool has_identity(OpId op) {
  return is_elementwise(op) && op_info(op).arity == 2 &&
         ops::identity(static_cast<uint32_t>(op)) != ops::Identity::None;
}

constexpr Rule kRules[] = {
    {"fold-elementwise", is_elementwise, fold_elementwise},
    {"fold-layout", is_view, fold_layout},
    {"fold-reduce", is_reduction, fold_reduce},
    {"identity-operand", has_identity, identity_operand},
    {"double-negation", [](OpId op) { return op == OpId::Neg; }, double_negation},
    {"no-op-layout", [](OpId op) { return is_view(op) || op == OpId::Cast; }, no_op_layout},
    {"transpose-of-transpose", [](OpId op) { return op == OpId::Transpose; }, transpose_of_transpose},
    {"transpose-of-matmul", [](OpId op) { return op == OpId::Transpose; }, transpose_of_matmul},
    {"reshape-of-reshape", [](OpId op) { return op == OpId::Reshape; }, reshape_of_reshape},
    {"broadcast-of-unit-reshape", [](OpId op) { return op == OpId::Broadcast; }, broadcast_of_unit_reshape},
    {"shared-weight-matmul", [](OpId op) { return op == OpId::Matmul; }, shared_weight_matmul},
    {"cast-of-exact-cast", [](OpId op) { return op == OpId::Cast; }, cast_of_exact_cast},
    {"cast-before-layout", [](OpId op) { return op == OpId::Cast; }, cast_before_layout},
    {"cast-after-gather", [](OpId op) { return op == OpId::Gather; }, cast_after_gather},
    {"widen-after-broadcast", [](OpId op) { return is_elementwise(op) && op != OpId::Cast; }, widen_after_broadcast},
};

Replacement apply_rules(GraphBuilder& builder, const Node& node, const Operands& operands,
                        const std::vector<int64_t>& uses) {
  Match m{builder, node, operands, uses};
  for (const Rule& rule : kRules) {
    if (!rule.matches(node.op)) continue;
    auto replacement = rule.rewrite(m);
    if (!replacement || *replacement) return replacement;
  }
  return kKeep;
}

// How many operands of live nodes and roots name each node. Nodes a rewrite
// left unused (dce removes them later) count for nothing: a value's one
// live reader is its sole user even while a replaced reader lingers, so
// rules that need one (cast-before-layout, step by step up a chain) go on
// in the next round.
std::vector<int64_t> use_counts(const Graph& graph) {
  std::vector<int64_t> uses(graph.size(), 0);
  std::vector<bool> live(graph.size(), false);
  for (NodeId root : graph.roots()) {
    ++uses[root];
    live[root] = true;
  }
  for (size_t id = graph.size(); id-- > 0;) {  // operands come before their users
    if (!live[id]) continue;
    for (NodeId operand : graph.nodes()[id].operands) {
      ++uses[operand];
      live[operand] = true;
    }
  }
  return uses;
}

// One round: every rule applied once over the graph.
class CanonicalizeRound : public Pass {
 public:
  Expected<bool> run(Module& module) override {
    std::vector<int64_t> uses = use_counts(module.graph);
    auto rebuilt = rebuild(module.graph, [&](GraphBuilder& builder, const Node& node, const Operands& operands) {
      return apply_rules(builder, node, operands, uses);
    });
    if (!rebuilt) return rebuilt.error();
    if (rebuilt->changed) replace_graph(module, std::move(rebuilt->graph));
    return rebuilt->changed;
  }
};

// Rounds to a fixed point, in the loop fix(...) runs.
LAZYLAB_REGISTER_PASS(PassInfo{
    "canonicalize",
    "Algebraic simplification and constant folding, to a fixed point",
    {{"max-iterations", OptionKind::Int, "8", "rewrite rounds before giving up on a fixed point", {}, {}, 1}},
    [](const PassOptions& options) {
      std::vector<std::unique_ptr<Pass>> round;
      round.push_back(std::make_unique<CanonicalizeRound>());
      return std::make_unique<FixedPoint>(std::move(round), options.get_int("max-iterations"));
    }});

}  // namespace
}  // namespace lazylab
