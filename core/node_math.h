// op_formulas.hpp's "math" over graph nodes: each primitive of a formula
// becomes a node shaped like `like`. `Emitter` is whatever appends nodes:
// `op(OpId, Operands)` and `scalar(double, NodeId like)` (decompose's
// emitter, autodiff's backward builder).
#pragma once

#include "core/graph.h"

namespace lazylab {

template <class Emitter>
struct NodeMath {
  using Value = NodeId;
  using Predicate = NodeId;
  Emitter& e;
  NodeId like;
  NodeId constant(double v) { return e.scalar(v, like); }
  NodeId neg(NodeId x) { return e.op(OpId::Neg, {x}); }
  NodeId abs(NodeId x) { return e.op(OpId::Abs, {x}); }
  NodeId exp(NodeId x) { return e.op(OpId::Exp, {x}); }
  NodeId log(NodeId x) { return e.op(OpId::Log, {x}); }
  NodeId sqrt(NodeId x) { return e.op(OpId::Sqrt, {x}); }
  NodeId tanh(NodeId x) { return e.op(OpId::Tanh, {x}); }
  NodeId erf(NodeId x) { return e.op(OpId::Erf, {x}); }
  NodeId add(NodeId a, NodeId b) { return e.op(OpId::Add, {a, b}); }
  NodeId sub(NodeId a, NodeId b) { return e.op(OpId::Sub, {a, b}); }
  NodeId mul(NodeId a, NodeId b) { return e.op(OpId::Mul, {a, b}); }
  NodeId div(NodeId a, NodeId b) { return e.op(OpId::Div, {a, b}); }
  NodeId pow(NodeId a, NodeId b) { return e.op(OpId::Pow, {a, b}); }
  NodeId max(NodeId a, NodeId b) { return e.op(OpId::Max, {a, b}); }
  NodeId min(NodeId a, NodeId b) { return e.op(OpId::Min, {a, b}); }
  NodeId eq(NodeId a, NodeId b) { return e.op(OpId::Eq, {a, b}); }
  NodeId ne(NodeId a, NodeId b) { return e.op(OpId::Ne, {a, b}); }
  NodeId lt(NodeId a, NodeId b) { return e.op(OpId::Lt, {a, b}); }
  NodeId le(NodeId a, NodeId b) { return e.op(OpId::Le, {a, b}); }
  NodeId gt(NodeId a, NodeId b) { return e.op(OpId::Gt, {a, b}); }
  NodeId ge(NodeId a, NodeId b) { return e.op(OpId::Ge, {a, b}); }
  NodeId select(NodeId c, NodeId a, NodeId b) { return e.op(OpId::Select, {c, a, b}); }
  NodeId from_predicate(NodeId c) { return select(c, constant(1), constant(0)); }
};

}  // namespace lazylab
