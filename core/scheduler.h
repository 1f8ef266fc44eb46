// Schedulers: the kernel order of a Program, selected by name with
// schedule{order=NAME} (passes/schedule.cpp) and registered like fusion
// strategies (built in, or from a plugin), with options of their own.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "expected.h"
#include "pass.h"
#include "program.h"

namespace lazylab {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The new order: order[position] is the index of the kernel to run there.
  // The pass checks it (a permutation that runs every producer before its
  // readers) before applying it.
  virtual Expected<std::vector<int>> order(const Program& program) = 0;
};

struct SchedulerInfo {
  std::string name;
  std::string summary;  // one line: what it optimises
  std::function<std::unique_ptr<Scheduler>(const PassOptions&)> create;
  std::vector<PassOptionSpec> options = {};
  std::string provenance = {};  // "plugin NAME VERSION"; empty for built-ins
};

using SchedulerRegistry = Registry<SchedulerInfo>;
extern template class Registry<SchedulerInfo>;
using SchedulerRegistrar = Registrar<SchedulerInfo>;

// Puts the kernels in `order` and renumbers the values' kernels; an order
// that is not a permutation or runs a reader before its producer is an
// error naming the kernel.
Status apply_kernel_order(Program& program, const std::vector<int>& order);

}  // namespace lazylab
