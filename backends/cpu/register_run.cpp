#include "register_run.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "lazylab/backend_abi.h"
#include "vector_math.h"  // the intrinsics headers

namespace lazylab::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16, kRegisters = 16;  // 32 zmm: 16 for the strip, the rest for operands
#elif defined(__AVX2__)
constexpr int kLanes = 8, kRegisters = 8;  // 16 ymm
#else
constexpr int kLanes = 4, kRegisters = 8;
#endif
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
using Mask = int __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int64_t kStrip = int64_t{kLanes} * kRegisters;

// Unaligned vector access through a may_alias type: no address of a strip
// value is taken, so the compiler keeps the strip in registers.
using UnalignedVec = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(sizeof(float)), may_alias));

template <class T>
T load(const float* p) {
  if constexpr (std::is_same_v<T, float>)
    return *p;
  else
    return *reinterpret_cast<const UnalignedVec*>(p);
}

template <class T>
void store(float* p, T x) {
  if constexpr (std::is_same_v<T, float>)
    *p = x;
  else
    *reinterpret_cast<UnalignedVec*>(p) = x;
}

template <class T>
T broadcast(float s) {
  if constexpr (std::is_same_v<T, float>)
    return s;
  else
    return Vec{} + s;
}

// Unary ops with the reference's semantics, for one float or one vector.
float abs_of(float x) { return std::fabs(x); }
Vec abs_of(Vec x) { return std::bit_cast<Vec>(std::bit_cast<Mask>(x) & 0x7fffffff); }
float sqrt_of(float x) { return std::sqrt(x); }
Vec sqrt_of(Vec x) {
#if defined(__AVX512F__)
  return std::bit_cast<Vec>(_mm512_sqrt_ps(std::bit_cast<__m512>(x)));
#elif defined(__AVX2__)
  return std::bit_cast<Vec>(_mm256_sqrt_ps(std::bit_cast<__m256>(x)));
#else
  for (int i = 0; i < kLanes; ++i) x[i] = std::sqrt(x[i]);
  return x;
#endif
}

template <int R, class T, class F>
[[gnu::always_inline]] inline void unary_step(T (&v)[R], F f) {
  _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(v[j]);
}

template <int R, class T, class F>
[[gnu::always_inline]] inline void binary_step(T (&v)[R], const RunStep& step, const RunOperand& other, F f) {
  if (step.other == RunStep::Running) {
    _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(v[j], v[j]);
  } else if (step.other == RunStep::Scalar) {
    T k = broadcast<T>(other.scalar);
    if (step.running_first)
      _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(v[j], k);
    else
      _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(k, v[j]);
  } else {
    constexpr int lanes = sizeof(T) / sizeof(float);
    if (step.running_first)
      _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(v[j], load<T>(other.ptr + j * lanes));
    else
      _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = f(load<T>(other.ptr + j * lanes), v[j]);
  }
}

// NaN-propagating max/min, as the reference defines them.
constexpr auto kMax = [](auto x, auto y) { return (x != x) | (y != y) ? x + y : (x > y ? x : y); };
constexpr auto kMin = [](auto x, auto y) { return (x != x) | (y != y) ? x + y : (x < y ? x : y); };

// Every op of the row loops (row_plan.cpp) but those run_supports() refuses.
template <int R, class T>
[[gnu::always_inline]] inline void apply(T (&v)[R], const RunStep& step, const RunOperand& other) {
  switch (step.op) {
    case LAZYLAB_OP_Add: return binary_step(v, step, other, [](auto x, auto y) { return x + y; });
    case LAZYLAB_OP_Sub: return binary_step(v, step, other, [](auto x, auto y) { return x - y; });
    case LAZYLAB_OP_Mul: return binary_step(v, step, other, [](auto x, auto y) { return x * y; });
    case LAZYLAB_OP_Div: return binary_step(v, step, other, [](auto x, auto y) { return x / y; });
    case LAZYLAB_OP_Max: return binary_step(v, step, other, kMax);
    case LAZYLAB_OP_Min: return binary_step(v, step, other, kMin);
    case LAZYLAB_OP_Neg: return unary_step(v, [](auto x) { return -x; });
    case LAZYLAB_OP_Abs: return unary_step(v, [](auto x) { return abs_of(x); });
    case LAZYLAB_OP_Relu: return unary_step(v, [](auto x) { return x > T{} ? x : T{}; });
    case LAZYLAB_OP_Sqrt: return unary_step(v, [](auto x) { return sqrt_of(x); });
    case LAZYLAB_OP_Rsqrt: return unary_step(v, [](auto x) { return broadcast<T>(1.0f) / sqrt_of(x); });
  }
}

// Every step over elements [at, at + R * lanes of T).
template <int R, class T>
inline void run_strip(float* out, const float* in, const std::vector<RunStep>& steps, const RunOperand* others,
                      int64_t at) {
  constexpr int lanes = sizeof(T) / sizeof(float);
  T v[R];
  _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = load<T>(in + at + j * lanes);
  for (size_t s = 0; s < steps.size(); ++s) {
    RunOperand other = others[s];
    if (other.ptr) other.ptr += at;
    apply(v, steps[s], other);
  }
  _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) store(out + at + j * lanes, v[j]);
}

}  // namespace

bool run_supports(uint32_t op) {
  // pow and the SLEEF functions are calls, which would push the strip out of
  // registers.
  switch (op) {
    case LAZYLAB_OP_Pow:
    case LAZYLAB_OP_Exp:
    case LAZYLAB_OP_Log:
    case LAZYLAB_OP_Tanh:
    case LAZYLAB_OP_Sigmoid: return false;
    default: return true;
  }
}

void execute_run(float* out, const float* in, const std::vector<RunStep>& steps, const RunOperand* others, int64_t n) {
  int64_t at = 0;
  for (; at + kStrip <= n; at += kStrip) run_strip<kRegisters, Vec>(out, in, steps, others, at);
  for (; at + kLanes <= n; at += kLanes) run_strip<1, Vec>(out, in, steps, others, at);
  for (; at < n; ++at) run_strip<1, float>(out, in, steps, others, at);
}

}  // namespace lazylab::cpu
