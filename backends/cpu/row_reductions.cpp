#include "row_reductions.h"

#include <cmath>

#include "float_math.h"
#include "lazylab/backend_abi.h"

namespace lazylab::cpu {
namespace {

// Four SIMD accumulators, so the loop runs at the load rate rather than the
// latency of the add (or max) that each would otherwise wait on; the order
// differs from the reference's, within tolerance.
constexpr int kAccumulators = 4;  // the pairwise joins below assume four

template <class F>
float fold_row(const float* x, int64_t n, float init, F f) {
  Vec acc[kAccumulators];
  for (Vec& a : acc) a = VectorMath::constant(init);
  int64_t i = 0;
  for (; i + kAccumulators * kLanes <= n; i += kAccumulators * kLanes)
    for (int k = 0; k < kAccumulators; ++k) acc[k] = f(acc[k], load_vector(x + i + k * kLanes));
  for (; i + kLanes <= n; i += kLanes) acc[0] = f(acc[0], load_vector(x + i));
  Vec all = f(f(acc[0], acc[1]), f(acc[2], acc[3]));
  float total = init;
  for (int k = 0; k < kLanes; ++k) total = f(total, all[k]);
  for (; i < n; ++i) total = f(total, x[i]);
  return total;
}

// max/min without a NaN test per element: plain comparisons in the lanes
// (keeping the earlier value on ties, as std::max in the reference does),
// and a separate mask for whether any element was NaN (the result then).
template <class Pick>
float reduce_extreme(const float* x, int64_t n, float init, Pick pick) {
  Vec acc[kAccumulators];
  for (Vec& a : acc) a = VectorMath::constant(init);
  Mask nan{};
  int64_t i = 0;
  for (; i + kAccumulators * kLanes <= n; i += kAccumulators * kLanes) {
    Vec v[kAccumulators];
    for (int k = 0; k < kAccumulators; ++k) v[k] = load_vector(x + i + k * kLanes);
    for (int k = 0; k < kAccumulators; ++k) acc[k] = pick(acc[k], v[k]);
    for (int k = 0; k < kAccumulators; ++k) nan |= v[k] != v[k];
  }
  for (; i + kLanes <= n; i += kLanes) {
    Vec a = load_vector(x + i);
    acc[0] = pick(acc[0], a);
    nan |= a != a;
  }
  Vec all = pick(pick(acc[0], acc[1]), pick(acc[2], acc[3]));
  float total = init;
  bool any_nan = false;
  for (int k = 0; k < kLanes; ++k) total = pick(total, all[k]), any_nan = any_nan || nan[k];
  for (; i < n; ++i) total = pick(total, x[i]), any_nan = any_nan || x[i] != x[i];
  return any_nan ? NAN : total;
}

}  // namespace

float reduce_row(uint32_t op, const float* x, int64_t n) {
  switch (op) {
    case LAZYLAB_OP_ReduceMax: return reduce_extreme(x, n, -INFINITY, [](auto m, auto v) { return v > m ? v : m; });
    case LAZYLAB_OP_ReduceMin: return reduce_extreme(x, n, INFINITY, [](auto m, auto v) { return v < m ? v : m; });
    case LAZYLAB_OP_ReduceSum: return fold_row(x, n, 0.0f, [](auto s, auto v) { return s + v; });
    default: return fold_row(x, n, 0.0f, [](auto s, auto v) { return s + v; }) / static_cast<float>(n);
  }
}

}  // namespace lazylab::cpu
