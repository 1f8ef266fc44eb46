// Reference scalar semantics of the elementwise ops of ops.def, in double
// precision. The interpreter evaluates with them and constant folding folds
// with them, so the two cannot disagree. Header-only C++ so backends can use
// it without linking lazylab.
#ifndef LAZYLAB_REFERENCE_SEMANTICS_HPP
#define LAZYLAB_REFERENCE_SEMANTICS_HPP

#include <cmath>

#include "lazylab/backend_abi.h"

namespace lazylab::reference {

inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluCubic = 0.044715;

// Returns false if `op` is not a unary elementwise op.
inline bool apply_unary(uint32_t op, double x, double& out) {
  switch (op) {
    case LAZYLAB_OP_Neg: out = -x; return true;
    case LAZYLAB_OP_Abs: out = std::fabs(x); return true;
    case LAZYLAB_OP_Exp: out = std::exp(x); return true;
    case LAZYLAB_OP_Log: out = std::log(x); return true;
    case LAZYLAB_OP_Sqrt: out = std::sqrt(x); return true;
    case LAZYLAB_OP_Rsqrt: out = 1.0 / std::sqrt(x); return true;
    case LAZYLAB_OP_Tanh: out = std::tanh(x); return true;
    case LAZYLAB_OP_Sigmoid: out = 1.0 / (1.0 + std::exp(-x)); return true;
    case LAZYLAB_OP_Relu: out = x > 0 ? x : 0.0; return true;
    case LAZYLAB_OP_Gelu: out = 0.5 * x * (1.0 + std::tanh(kGeluScale * (x + kGeluCubic * x * x * x))); return true;
    default: return false;
  }
}

// Returns false if `op` is not a binary elementwise op. Comparisons give 1/0.
inline bool apply_binary(uint32_t op, double a, double b, double& out) {
  switch (op) {
    case LAZYLAB_OP_Add: out = a + b; return true;
    case LAZYLAB_OP_Sub: out = a - b; return true;
    case LAZYLAB_OP_Mul: out = a * b; return true;
    case LAZYLAB_OP_Div: out = a / b; return true;
    case LAZYLAB_OP_Pow: out = std::pow(a, b); return true;
    // max/min propagate NaN, as IEEE maximum does and PyTorch expects.
    case LAZYLAB_OP_Max: out = (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b); return true;
    case LAZYLAB_OP_Min: out = (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b); return true;
    case LAZYLAB_OP_Eq: out = a == b; return true;
    case LAZYLAB_OP_Ne: out = a != b; return true;
    case LAZYLAB_OP_Lt: out = a < b; return true;
    case LAZYLAB_OP_Le: out = a <= b; return true;
    case LAZYLAB_OP_Gt: out = a > b; return true;
    case LAZYLAB_OP_Ge: out = a >= b; return true;
    default: return false;
  }
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
