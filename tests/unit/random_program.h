// Random programs for differential tests: DAGs over two inputs with
// constants, broadcasts and row reductions, so canonicalize, cse and every
// fusion strategy find work. The same seed gives the same program.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_ops.h"

namespace lazylab::testing {

inline std::vector<Tensor> random_program(Context& ctx, uint64_t seed) {
  uint64_t state = seed;
  auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  Tensor a = ctx.from_vector<float>({0.5f, -1.5f, 2.0f, 0.25f, 1.0f, -0.75f}, {2, 3});
  Tensor b = ctx.from_vector<float>({1.0f, 3.0f, -0.5f, 0.75f, 0.1f, 2.5f}, {2, 3});
  std::vector<Tensor> pool{a, b};
  for (int i = 0; i < 14; ++i) {
    const Tensor& x = pool[next() % pool.size()];
    const Tensor& y = pool[next() % pool.size()];
    switch (next() % 9) {
      case 0: pool.push_back(x + y); break;
      case 1: pool.push_back(x * y); break;
      case 2: pool.push_back(x - 0.0); break;
      case 3: pool.push_back(tanh(x) * 1.0); break;
      case 4: pool.push_back(neg(neg(x))); break;
      case 5: pool.push_back(maximum(x, y)); break;
      case 6: pool.push_back(x - max(x, {1}, true)); break;  // row reduction, broadcast back
      case 7: pool.push_back(exp(x * 0.5) / sum(exp(x * 0.5), {1}, true)); break;
      default: pool.push_back(x + ctx.full(2.0, x.type()) * ctx.full(3.0, x.type())); break;
    }
  }
  return std::vector<Tensor>{pool.back(), pool[pool.size() / 2]};
}

}  // namespace lazylab::testing
