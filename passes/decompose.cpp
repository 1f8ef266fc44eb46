// decompose: rewrites the composite ops (softmax, layernorm, gelu) into
// primitives, using their definitions in ops.def:
//   softmax(x)   = e / sum(e), e = exp(x - max(x))           along `axis`
//   layernorm    = (x - mean) * rsqrt(var + eps) * w + b     over the last axis
//   gelu(x)      = 0.5x(1 + tanh(u)) = x / (1 + exp(-2u)), u = 0.7978845608(x + 0.044715x^3)
// A composite of bf16 or f16 decomposes in f32, between casts.
#include "core/autodiff.h"
#include "core/graph_builder.h"
#include "core/node_math.h"
#include "core/pass.h"
#include "lazylab/op_formulas.hpp"

namespace lazylab {
namespace {

// A thin expression layer over GraphBuilder so each decomposition reads like
// its formula; the first error sticks and is reported once.
class Emitter {
 public:
  explicit Emitter(GraphBuilder& builder) : builder_(builder) {}

  NodeId op(OpId op, Operands operands, const Attrs& attrs = {}, const TensorType* declared = nullptr) {
    if (error_) return 0;
    // Broadcast operands of elementwise ops to the widest shape.
    if (op_info(op).category == OpCategory::Elementwise && operands.size() > 1) {
      Dims shape = builder_.type(operands[0]).shape;
      for (NodeId id : operands)
        if (builder_.type(id).shape.size() > shape.size()) shape = builder_.type(id).shape;
      for (NodeId& id : operands) id = take(builder_.broadcast_to(id, shape));
    }
    return error_ ? 0 : take(builder_.add(op, std::move(operands), attrs, declared));
  }
  NodeId scalar(double value, NodeId like) { return builder_.constant(value, builder_.type(like)); }
  // Reduction keeping dims (one value per row).
  NodeId reduce(OpId reduce, NodeId x, int64_t axis) {
    Attrs attrs;
    attrs[0].ints = {axis};
    attrs[1].i = 1;
    return op(reduce, {x}, attrs);
  }
  NodeId broadcast(NodeId small, NodeId like) {
    return error_ ? 0 : take(builder_.broadcast_to(small, builder_.type(like).shape));
  }
  NodeId reduce_keep(OpId reduce_op, NodeId x, int64_t axis) { return broadcast(reduce(reduce_op, x, axis), x); }
  Expected<std::optional<NodeId>> result(NodeId id) {
    if (error_) return *error_;
    return std::optional<NodeId>(id);
  }

 private:
  NodeId take(Expected<NodeId> id) {
    if (!id) {
      error_ = id.error();
      return 0;
    }
    return *id;
  }
  GraphBuilder& builder_;
  std::optional<Error> error_;
};

Expected<std::optional<NodeId>> decompose_softmax(Emitter& e, NodeId x, int64_t axis) {
  NodeId shifted = e.op(OpId::Sub, {x, e.reduce_keep(OpId::ReduceMax, x, axis)});
  NodeId exps = e.op(OpId::Exp, {shifted});
  return e.result(e.op(OpId::Div, {exps, e.reduce_keep(OpId::ReduceSum, exps, axis)}));
}

Expected<std::optional<NodeId>> decompose_layernorm(Emitter& e, GraphBuilder& b, const Node& node,
                                                    const Operands& operands) {
  NodeId x = operands[0];
  int64_t last = b.type(x).rank() - 1;
  NodeId centered = e.op(OpId::Sub, {x, e.reduce_keep(OpId::ReduceMean, x, last)});
  // eps and rsqrt once per row, not once per element.
  NodeId variance = e.reduce(OpId::ReduceMean, e.op(OpId::Mul, {centered, centered}), last);
  NodeId inv_std = e.op(OpId::Rsqrt, {e.op(OpId::Add, {variance, e.scalar(node.attrs[0].f, variance)})});
  NodeId normalized = e.op(OpId::Mul, {centered, e.broadcast(inv_std, x)});
  return e.result(e.op(OpId::Add, {e.op(OpId::Mul, {normalized, operands[1]}), operands[2]}));
}

// Gelu's formula from op_formulas.hpp as graph nodes of x's type: the
// function every backend computes.
Expected<std::optional<NodeId>> decompose_gelu(Emitter& e, NodeId x) {
  NodeMath<Emitter> math{e, x};
  NodeId out = 0;
  formulas::unary(math, LAZYLAB_OP_Gelu, x, out);
  return e.result(out);
}

Expected<std::optional<NodeId>> decompose_as(Emitter& e, GraphBuilder& builder, const Node& node,
                                             const Operands& operands);

// The composite decomposed in f32 between casts, when its dtype is narrower.
Expected<std::optional<NodeId>> decompose_node(GraphBuilder& builder, const Node& node, const Operands& operands) {
  Emitter e(builder);
  DType wide = composite_dtype(node.type.dtype);
  if (wide == node.type.dtype || op_info(node.op).category != OpCategory::Composite)
    return decompose_as(e, builder, node, operands);
  auto cast = [&](NodeId x, DType to) {
    TensorType type{to, builder.type(x).shape};
    return e.op(OpId::Cast, {x}, {}, &type);
  };
  Operands widened;
  for (NodeId x : operands) widened.push_back(cast(x, wide));
  auto out = decompose_as(e, builder, node, widened);
  if (!out || !*out) return out;
  return e.result(cast(**out, node.type.dtype));
}

Expected<std::optional<NodeId>> decompose_as(Emitter& e, GraphBuilder& builder, const Node& node,
                                             const Operands& operands) {
  switch (node.op) {
    case OpId::Softmax: return decompose_softmax(e, operands[0], node.attrs[0].i);
    case OpId::Layernorm: return decompose_layernorm(e, builder, node, operands);
    case OpId::Gelu: return decompose_gelu(e, operands[0]);
    default: return std::optional<NodeId>{};
  }
}

class Decompose : public Pass {
 public:
  explicit Decompose(bool keep_fused) : keep_fused_(keep_fused) {}

  Expected<bool> run(Module& module) override {
    auto rebuilt = rebuild(
        module.graph,
        [&](GraphBuilder& builder, const Node& node, const Operands& operands) -> Expected<std::optional<NodeId>> {
          if (keep_fused_ && has_fused_gradient(node.op)) return std::optional<NodeId>{};
          return decompose_node(builder, node, operands);
        });
    if (!rebuilt) return rebuilt.error();
    if (rebuilt->changed) replace_graph(module, std::move(rebuilt->graph));
    return rebuilt->changed;
  }

 private:
  bool keep_fused_;
};

// keep=fused-gradient leaves the composites `grad` differentiates whole
// (core/autodiff.h's has_fused_gradient: softmax, gelu) for grad, and a
// later decompose: `decompose{keep=fused-gradient},grad,decompose`.
LAZYLAB_REGISTER_PASS(PassInfo{
    "decompose",
    "Rewrite composite ops (softmax, layernorm, gelu) into primitives",
    {{"keep",
      OptionKind::Enum,
      "none",
      "composites left whole: none, or fused-gradient (those grad differentiates whole)",
      {"none", "fused-gradient"},
      {}}},
    [](const PassOptions& options) { return std::make_unique<Decompose>(options.get("keep") == "fused-gradient"); }});

}  // namespace
}  // namespace lazylab
