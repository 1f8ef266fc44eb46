// Each elementwise op's formula, written once, generic over the value type
// (tinygrad's code_for_op, as C++ templates). A "math" type M supplies the
// primitives for one value type, and every formula is instantiated from it:
// double for the reference (reference_semantics.hpp), float and SIMD vectors
// for the cpu loops, CUDA C++ source text for the CUDA code generator.
// Adding an op touches its ops.def row and its formula here.
//
// What M provides:
//   using Value;      using Predicate;
//   Value constant(double);
//   Value neg(Value), abs(Value), exp(Value), log(Value), sqrt(Value), tanh(Value), erf(Value);
//   Value add(Value, Value), sub, mul, div, pow;
//   Value max(Value, Value), min;   // NaN if either operand is NaN
//   Predicate eq(Value, Value), ne, lt, le, gt, ge;
//   Value select(Predicate, Value if_true, Value if_false);
//   Value from_predicate(Predicate);  // 1 or 0
#ifndef LAZYLAB_OP_FORMULAS_HPP
#define LAZYLAB_OP_FORMULAS_HPP

#include <cstdint>
#include <type_traits>

#include "lazylab/backend_abi.h"
#include "lazylab/op_table.hpp"

namespace lazylab::formulas {

inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluCubic = 0.044715;

// out = op(x) for the unary ops with a formula; false for any other op.
// Each primitive is its own statement, so a math that emits code or graph
// nodes emits them in one order on every compiler.
template <class M>
constexpr bool unary(M& m, uint32_t op, typename M::Value x, typename M::Value& out) {
  switch (op) {
    case LAZYLAB_OP_Neg: out = m.neg(x); return true;
    case LAZYLAB_OP_Abs: out = m.abs(x); return true;
    case LAZYLAB_OP_Exp: out = m.exp(x); return true;
    case LAZYLAB_OP_Log: out = m.log(x); return true;
    case LAZYLAB_OP_Sqrt: out = m.sqrt(x); return true;
    case LAZYLAB_OP_Rsqrt: {
      auto root = m.sqrt(x);
      out = m.div(m.constant(1), root);
      return true;
    }
    case LAZYLAB_OP_Tanh: out = m.tanh(x); return true;
    case LAZYLAB_OP_Erf: out = m.erf(x); return true;
    case LAZYLAB_OP_Sigmoid: {
      auto exp_neg = m.exp(m.neg(x));
      auto denominator = m.add(m.constant(1), exp_neg);
      out = m.div(m.constant(1), denominator);
      return true;
    }
    // NaN is not > 0, so relu(NaN) = 0: lazylab's reference semantics, kept
    // by every backend.
    case LAZYLAB_OP_Relu: {
      auto zero = m.constant(0);
      auto positive = m.gt(x, zero);
      out = m.select(positive, x, zero);
      return true;
    }
    // 0.5x(1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715x^3), evaluated as
    // x / (1 + exp(-2u)): the same function, without the cancellation in
    // 1 + tanh(u) that loses the digits of float for u << 0 (in f32 the tanh
    // form is 30% off at x = -5 and gives -0 at x = -6).
    case LAZYLAB_OP_Gelu: {
      auto cubic = m.mul(m.constant(kGeluCubic), x);
      cubic = m.mul(cubic, x);
      cubic = m.mul(cubic, x);
      auto sum = m.add(x, cubic);
      auto inner = m.mul(m.constant(kGeluScale), sum);
      auto twice = m.mul(m.constant(-2), inner);
      auto decay = m.exp(twice);
      auto denominator = m.add(m.constant(1), decay);
      out = m.div(x, denominator);
      return true;
    }
    default: return false;
  }
}

// The derivative of the unary ops with a formula, dy/dx, from x and y =
// op(x) (what reverse-mode differentiation keeps from the forward); false
// where the op has none (comparisons give no gradient, and the other
// composites are differentiated through their decompositions). At a kink
// (relu, abs at 0) the derivative is 0, as PyTorch's.
template <class M>
constexpr bool unary_derivative(M& m, uint32_t op, typename M::Value x, typename M::Value y, typename M::Value& out) {
  switch (op) {
    case LAZYLAB_OP_Neg: out = m.constant(-1); return true;
    case LAZYLAB_OP_Abs: {
      auto positive = m.from_predicate(m.gt(x, m.constant(0)));
      auto negative = m.from_predicate(m.lt(x, m.constant(0)));
      out = m.sub(positive, negative);
      return true;
    }
    case LAZYLAB_OP_Exp: out = y; return true;
    case LAZYLAB_OP_Log: out = m.div(m.constant(1), x); return true;
    case LAZYLAB_OP_Sqrt: out = m.div(m.constant(0.5), y); return true;
    case LAZYLAB_OP_Rsqrt: {  // -x^(-3/2) / 2 = -y^3 / 2
      auto cube = m.mul(m.mul(y, y), y);
      out = m.mul(m.constant(-0.5), cube);
      return true;
    }
    case LAZYLAB_OP_Tanh: out = m.sub(m.constant(1), m.mul(y, y)); return true;
    case LAZYLAB_OP_Sigmoid: out = m.mul(y, m.sub(m.constant(1), y)); return true;
    case LAZYLAB_OP_Relu: out = m.from_predicate(m.gt(x, m.constant(0))); return true;
    case LAZYLAB_OP_Erf: {  // 2 / sqrt(pi) exp(-x^2)
      auto square = m.mul(x, x);
      out = m.mul(m.constant(1.1283791670955126), m.exp(m.neg(square)));
      return true;
    }
    // gelu = x s, s = 1 / (1 + exp(-2u)): s + x s (1 - s) 2u', from x alone.
    // Its primitives are not the formula's (2u as x (2c + 2ca x^2), then
    // neg and exp): cse leaves them apart, so the backward computes them
    // again from x instead of the forward keeping its intermediates.
    case LAZYLAB_OP_Gelu: {
      auto square = m.mul(x, x);
      auto twice_inner =
          m.mul(x, m.add(m.constant(2 * kGeluScale), m.mul(m.constant(2 * kGeluScale * kGeluCubic), square)));
      auto denominator = m.add(m.constant(1), m.exp(m.neg(twice_inner)));
      auto s = m.div(m.constant(1), denominator);
      auto slope = m.add(m.constant(2 * kGeluScale), m.mul(m.constant(6 * kGeluScale * kGeluCubic), square));
      auto spread = m.mul(s, m.sub(m.constant(1), s));
      out = m.add(s, m.mul(m.mul(x, slope), spread));
      return true;
    }
    default: return false;
  }
}

// The partial derivatives of the binary ops with a formula, dy/da and dy/db,
// from a, b and y = a OP b; false where the op has none. max and min give
// the whole gradient to a where a and b tie.
template <class M>
constexpr bool binary_derivatives(M& m, uint32_t op, typename M::Value a, typename M::Value b, typename M::Value y,
                                  typename M::Value& da, typename M::Value& db) {
  switch (op) {
    case LAZYLAB_OP_Add: da = m.constant(1), db = m.constant(1); return true;
    case LAZYLAB_OP_Sub: da = m.constant(1), db = m.constant(-1); return true;
    case LAZYLAB_OP_Mul: da = b, db = a; return true;
    case LAZYLAB_OP_Div:  // 1 / b and -a / b^2 = -y / b
      da = m.div(m.constant(1), b);
      db = m.neg(m.div(y, b));
      return true;
    case LAZYLAB_OP_Pow:  // b a^(b - 1) and y log(a)
      da = m.mul(b, m.pow(a, m.sub(b, m.constant(1))));
      db = m.mul(y, m.log(a));
      return true;
    case LAZYLAB_OP_Max:
      da = m.from_predicate(m.ge(a, b));
      db = m.from_predicate(m.lt(a, b));
      return true;
    case LAZYLAB_OP_Min:
      da = m.from_predicate(m.le(a, b));
      db = m.from_predicate(m.gt(a, b));
      return true;
    default: return false;
  }
}

// pred = a OP b for the comparisons; false for any other op.
template <class M>
constexpr bool compare(M& m, uint32_t op, typename M::Value a, typename M::Value b, typename M::Predicate& pred) {
  switch (op) {
    case LAZYLAB_OP_Eq: pred = m.eq(a, b); return true;
    case LAZYLAB_OP_Ne: pred = m.ne(a, b); return true;
    case LAZYLAB_OP_Lt: pred = m.lt(a, b); return true;
    case LAZYLAB_OP_Le: pred = m.le(a, b); return true;
    case LAZYLAB_OP_Gt: pred = m.gt(a, b); return true;
    case LAZYLAB_OP_Ge: pred = m.ge(a, b); return true;
    default: return false;
  }
}

// out = a OP b for the binary ops with a formula (comparisons give 1 or 0);
// false for any other op.
template <class M>
constexpr bool binary(M& m, uint32_t op, typename M::Value a, typename M::Value b, typename M::Value& out) {
  switch (op) {
    case LAZYLAB_OP_Add: out = m.add(a, b); return true;
    case LAZYLAB_OP_Sub: out = m.sub(a, b); return true;
    case LAZYLAB_OP_Mul: out = m.mul(a, b); return true;
    case LAZYLAB_OP_Div: out = m.div(a, b); return true;
    case LAZYLAB_OP_Pow: out = m.pow(a, b); return true;
    case LAZYLAB_OP_Max: out = m.max(a, b); return true;
    case LAZYLAB_OP_Min: out = m.min(a, b); return true;
    default: {
      typename M::Predicate pred{};
      if (!compare(m, op, a, b, pred)) return false;
      out = m.from_predicate(pred);
      return true;
    }
  }
}

// Whether the op has a unary or binary formula above.
constexpr bool has_formula(uint32_t op) {
  switch (op) {
    case LAZYLAB_OP_Cast:
    case LAZYLAB_OP_Select: return false;
    default:
      return (ops::is_elementwise(op) || op == LAZYLAB_OP_Gelu) && (ops::row(op).arity == 1 || ops::row(op).arity == 2);
  }
}

// Calls f(std::integral_constant<uint32_t, OP>{}) for a runtime `op` that
// has a formula, so that loops instantiate one body per op with the formula
// resolved at compile time; false for ops without one.
template <class F>
bool with_formula_op(uint32_t op, F&& f) {
  switch (op) {
#define LAZYLAB_OP(id, ...)                                   \
  case LAZYLAB_OP_##id:                                       \
    if constexpr (has_formula(LAZYLAB_OP_##id)) {             \
      f(std::integral_constant<uint32_t, LAZYLAB_OP_##id>{}); \
      return true;                                            \
    } else {                                                  \
      return false;                                           \
    }
#include "lazylab/ops.def"
#undef LAZYLAB_OP
    default: return false;
  }
}

}  // namespace lazylab::formulas

#endif
