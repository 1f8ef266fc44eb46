// Reference scalar semantics of the elementwise ops of ops.def, in double
// precision: the formulas of op_formulas.hpp over doubles. The interpreter
// evaluates with them and constant folding folds with them, so the two cannot
// disagree. Header-only C++ so backends can use it without linking lazylab.
#ifndef LAZYLAB_REFERENCE_SEMANTICS_HPP
#define LAZYLAB_REFERENCE_SEMANTICS_HPP

#include <cmath>
#include <type_traits>

#include "lazylab/backend_abi.h"
#include "lazylab/dtype_table.hpp"
#include "lazylab/op_formulas.hpp"

namespace lazylab::reference {

using formulas::kGeluCubic;
using formulas::kGeluScale;

// The primitives over a real type R (double for the reference; the fuzzer's
// precise evaluator uses long double); max and min propagate NaN, as IEEE
// maximum does and PyTorch expects.
template <class R>
struct RealMath {
  using Value = R;
  using Predicate = bool;
  static R constant(double v) { return v; }
  static R neg(R x) { return -x; }
  static R abs(R x) { return std::fabs(x); }
  static R exp(R x) { return std::exp(x); }
  static R log(R x) { return std::log(x); }
  static R sqrt(R x) { return std::sqrt(x); }
  static R tanh(R x) { return std::tanh(x); }
  static R erf(R x) { return std::erf(x); }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R pow(R a, R b) { return std::pow(a, b); }
  static R max(R a, R b) { return (std::isnan(a) || std::isnan(b)) ? R(NAN) : (a > b ? a : b); }
  static R min(R a, R b) { return (std::isnan(a) || std::isnan(b)) ? R(NAN) : (a < b ? a : b); }
  static bool eq(R a, R b) { return a == b; }
  static bool ne(R a, R b) { return a != b; }
  static bool lt(R a, R b) { return a < b; }
  static bool le(R a, R b) { return a <= b; }
  static bool gt(R a, R b) { return a > b; }
  static bool ge(R a, R b) { return a >= b; }
  static R select(bool c, R a, R b) { return c ? a : b; }
  static R from_predicate(bool c) { return c ? R(1) : R(0); }
};
using DoubleMath = RealMath<double>;

// Returns false if `op` is not a unary elementwise op.
inline bool apply_unary(uint32_t op, double x, double& out) {
  DoubleMath m;
  return formulas::unary(m, op, x, out);
}

// Returns false if `op` is not a binary elementwise op. Comparisons give 1/0.
inline bool apply_binary(uint32_t op, double a, double b, double& out) {
  DoubleMath m;
  return formulas::binary(m, op, a, b, out);
}

// A double stored into an integer: truncated toward zero; NaN, infinities
// and values beyond int64 give 0 rather than undefined behaviour. (An i32
// then keeps the low 32 bits, as integer arithmetic wraps.) -2^63 itself is
// in range: it was once read as 0.
inline long long to_integer(double value) {
  if (!(value >= -9.2233720368547758e18 && value < 9.2233720368547758e18)) return 0;
  return (long long)value;
}

// An integer as a value of integer or bool `dtype` holds it: a narrower
// integer keeps its low bits (as its arithmetic wraps: an i32 its low 32, a
// u8 its low 8), a bool is 0 or 1.
inline long long wrap_integer(uint32_t dtype, long long value) {
  if (dtype == LAZYLAB_BOOL) return value != 0;
  if (!dtypes::known(dtype)) return value;
  return dtypes::visit(dtype, [&]<class T>(T) -> long long {
    if constexpr (std::is_integral_v<T>)
      return static_cast<long long>(static_cast<T>(value));
    else
      return value;
  });
}

// Comparisons of integers, exactly (through double, two int64 values past
// 2^53 could compare equal).
inline bool compare_int(uint32_t op, long long a, long long b) {
  switch (op) {
    case LAZYLAB_OP_Eq: return a == b;
    case LAZYLAB_OP_Ne: return a != b;
    case LAZYLAB_OP_Lt: return a < b;
    case LAZYLAB_OP_Le: return a <= b;
    case LAZYLAB_OP_Gt: return a > b;
    default: return a >= b;
  }
}

// Integer arithmetic wraps (two's complement), as it does on every backend's
// hardware. Division truncates toward zero, as C does; dividing by zero is an
// error the interpreter reports rather than undefined behaviour, and the one
// quotient that overflows (the most negative value over -1) wraps to itself.
inline bool apply_binary_int(uint32_t op, long long a, long long b, long long& out) {
  switch (op) {
    case LAZYLAB_OP_Add: out = (long long)((unsigned long long)a + (unsigned long long)b); return true;
    case LAZYLAB_OP_Sub: out = (long long)((unsigned long long)a - (unsigned long long)b); return true;
    case LAZYLAB_OP_Mul: out = (long long)((unsigned long long)a * (unsigned long long)b); return true;
    case LAZYLAB_OP_Div:
      if (b == 0) return false;
      out = b == -1 ? (long long)(0ULL - (unsigned long long)a) : a / b;
      return true;
    case LAZYLAB_OP_Max: out = a > b ? a : b; return true;
    case LAZYLAB_OP_Min: out = a < b ? a : b; return true;
    default: return false;
  }
}

// neg, abs and relu on integers: exact, with negation wrapping (the most
// negative value is its own negation). Returns false for the other unary ops,
// which integers evaluate through double.
inline bool apply_unary_int(uint32_t op, long long x, long long& out) {
  long long negated = (long long)(0ULL - (unsigned long long)x);
  switch (op) {
    case LAZYLAB_OP_Neg: out = negated; return true;
    case LAZYLAB_OP_Abs: out = x < 0 ? negated : x; return true;
    case LAZYLAB_OP_Relu: out = x > 0 ? x : 0; return true;
    default: return false;
  }
}

}  // namespace lazylab::reference

#endif
