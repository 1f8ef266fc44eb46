#include "register_run.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "float_math.h"
#include "lazylab/backend_abi.h"
#include "lazylab/op_table.hpp"

namespace lazylab::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kRegisters = 16;  // 32 zmm: 16 for the strip, the rest for operands
#else
constexpr int kRegisters = 8;  // 16 ymm
#endif
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
    return splat(s);
}

template <class T>
using MathOf = std::conditional_t<std::is_same_v<T, float>, FloatMath, VectorMath>;

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

// One step of a run: the op's formula (op_formulas.hpp) on each register.
template <int R, class T>
[[gnu::always_inline]] inline void apply(T (&v)[R], const RunStep& step, const RunOperand& other) {
  formulas::with_formula_op(step.op, [&](auto op) {
    MathOf<T> math;
    if constexpr (formulas::has_formula(op.value) && ops::row(op.value).arity == 1) {
      unary_step(v, [&](T x) {
        T out{};
        formulas::unary(math, op.value, x, out);
        return out;
      });
    } else if constexpr (formulas::has_formula(op.value) && ops::row(op.value).arity == 2) {
      binary_step(v, step, other, [&](T x, T y) {
        T out{};
        formulas::binary(math, op.value, x, y, out);
        return out;
      });
    }
  });
}

// Every step over elements [at, at + R * lanes of T); with `total`, adds the
// results to it. (A runtime test, not a template parameter: a second
// instantiation put the formulas' dispatch out of line in both, and the
// strip through memory, 12% slower on softmax.)
template <int R, class T>
inline void run_strip(float* out, const float* in, const std::vector<RunStep>& steps, const RunOperand* others,
                      int64_t at, T* total, bool streams = false) {
  constexpr int lanes = sizeof(T) / sizeof(float);
  T v[R];
  _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) v[j] = load<T>(in + at + j * lanes);
  for (size_t s = 0; s < steps.size(); ++s) {
    RunOperand other = others[s];
    if (other.ptr) other.ptr += at;
    apply(v, steps[s], other);
  }
  if constexpr (!std::is_same_v<T, float>) {
    if (streams) {
      _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) stream_vector(out + at + j * lanes, v[j]);
      out = nullptr;
    }
  }
  if (out) _Pragma("GCC unroll 16") for (int j = 0; j < R; ++j) store(out + at + j * lanes, v[j]);
  if (total) {
    T strip = v[0];
    _Pragma("GCC unroll 16") for (int j = 1; j < R; ++j) strip += v[j];
    *total += strip;
  }
}

}  // namespace

bool run_supports(uint32_t op) {
  // A formula that calls out of line (SLEEF, pow) would push the strip out
  // of registers; comparisons make bools, which runs do not hold.
  bool compares = formulas::has_formula(op) && ops::row(op).arity == 2 && [op] {
    CallProbe probe;
    int pred = 0;
    return formulas::compare(probe, op, 0, 0, pred);
  }();
  return formulas::has_formula(op) && !formula_calls_out(op) && !compares;
}

void execute_run(float* out, const float* in, const std::vector<RunStep>& steps, const RunOperand* others, int64_t n,
                 float* sum, OverlappedTraffic* traffic, bool streams) {
  streams = streams && out && reinterpret_cast<uintptr_t>(out) % sizeof(Vec) == 0;
  Vec vector_total{};
  float tail_total = 0;
  Vec* vectors = sum ? &vector_total : nullptr;
  float* floats = sum ? &tail_total : nullptr;
  int64_t strips_left = n / kStrip;
  int64_t at = 0;
  for (; at + kStrip <= n; at += kStrip, --strips_left) {
    if (traffic) traffic->before_strip(strips_left);
    run_strip<kRegisters, Vec>(out, in, steps, others, at, vectors, streams);
  }
  if (traffic) traffic->finish();  // a run shorter than a strip
  for (; at + kLanes <= n; at += kLanes) run_strip<1, Vec>(out, in, steps, others, at, vectors);
  for (; at < n; ++at) run_strip<1, float>(out, in, steps, others, at, floats);
  if (!sum) return;
  for (int k = 0; k < kLanes; ++k) tail_total += vector_total[k];
  *sum = tail_total;
}

}  // namespace lazylab::cpu
