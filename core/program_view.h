// The flat, read-only C view of a Program handed to backend plugins. It owns
// the storage the C structs point into.
#pragma once

#include <deque>
#include <vector>

#include "lazylab/backend_abi.h"
#include "program.h"

namespace lazylab {

class ProgramView {
 public:
  ProgramView(const Program& program, const Graph& graph);
  ProgramView(const ProgramView&) = delete;
  ProgramView& operator=(const ProgramView&) = delete;
  const lazylab_program& get() const { return view_; }

 private:
  lazylab_kernel describe(const KernelDescription& description);
  std::vector<lazylab_value> values_;
  std::vector<lazylab_kernel> kernels_;
  std::vector<std::vector<lazylab_op>> ops_;
  // Every array the structs point into; deques never move what they hold.
  std::deque<std::vector<int64_t>> int_arrays_;
  std::deque<std::vector<uint32_t>> id_arrays_;
  std::deque<std::vector<lazylab_attr>> attr_arrays_;
  std::deque<std::vector<lazylab_access>> access_arrays_;
  std::vector<int32_t> donors_;
  lazylab_program view_{};
};

}  // namespace lazylab
