#include "core/scheduler.h"

#include <fmt/format.h>

namespace lazylab {

Status apply_kernel_order(Program& program, const std::vector<int>& order) {
  size_t n = program.kernels.size();
  if (order.size() != n) return make_error(fmt::format("the order has {} kernels, the Program {}", order.size(), n));
  std::vector<int> position(n, -1);
  for (size_t p = 0; p < n; ++p) {
    int k = order[p];
    if (k < 0 || static_cast<size_t>(k) >= n || position[k] >= 0)
      return make_error(fmt::format("the order is not a permutation of the {} kernels (at position {}: {})", n, p, k));
    position[k] = static_cast<int>(p);
  }
  for (size_t k = 0; k < n; ++k)
    for (NodeId id : program.kernels[k].inputs) {
      int producer = program.values[id].kernel;
      if (producer >= 0 && position[producer] >= position[k])
        return make_error(
            fmt::format("kernel {} would run before kernel {}, which produces its input %{}", k, producer, id));
    }
  std::vector<Kernel> kernels;
  kernels.reserve(n);
  for (int k : order) kernels.push_back(std::move(program.kernels[k]));
  program.kernels = std::move(kernels);
  for (size_t k = 0; k < n; ++k)
    for (NodeId id : program.kernels[k].ops) program.values[id].kernel = static_cast<int>(k);
  return {};
}

}  // namespace lazylab
