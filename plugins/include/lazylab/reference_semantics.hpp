// Reference scalar semantics of the elementwise ops of ops.def, in double
// precision: the formulas of op_formulas.hpp over doubles. The interpreter
// evaluates with them and constant folding folds with them, so the two cannot
// disagree. Header-only C++ so backends can use it without linking lazylab.
#ifndef LAZYLAB_REFERENCE_SEMANTICS_HPP
#define LAZYLAB_REFERENCE_SEMANTICS_HPP

#include <cmath>

#include "lazylab/backend_abi.h"
#include "lazylab/op_formulas.hpp"

namespace lazylab::reference {

using formulas::kGeluCubic;
using formulas::kGeluScale;

// The primitives in double precision; max and min propagate NaN, as IEEE
// maximum does and PyTorch expects.
struct DoubleMath {
  using Value = double;
  using Predicate = bool;
  static double constant(double v) { return v; }
  static double neg(double x) { return -x; }
  static double abs(double x) { return std::fabs(x); }
  static double exp(double x) { return std::exp(x); }
  static double log(double x) { return std::log(x); }
  static double sqrt(double x) { return std::sqrt(x); }
  static double tanh(double x) { return std::tanh(x); }
  static double add(double a, double b) { return a + b; }
  static double sub(double a, double b) { return a - b; }
  static double mul(double a, double b) { return a * b; }
  static double div(double a, double b) { return a / b; }
  static double pow(double a, double b) { return std::pow(a, b); }
  static double max(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b); }
  static double min(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b); }
  static bool eq(double a, double b) { return a == b; }
  static bool ne(double a, double b) { return a != b; }
  static bool lt(double a, double b) { return a < b; }
  static bool le(double a, double b) { return a <= b; }
  static bool gt(double a, double b) { return a > b; }
  static bool ge(double a, double b) { return a >= b; }
  static double select(bool c, double a, double b) { return c ? a : b; }
  static double from_predicate(bool c) { return c ? 1.0 : 0.0; }
};

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
// then keeps the low 32 bits, as integer arithmetic wraps.)
inline long long to_integer(double value) {
  if (!(value > -9.2233720368547758e18 && value < 9.2233720368547758e18)) return 0;
  return (long long)value;
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

}  // namespace lazylab::reference

#endif
