// interp: the reference backend. Runs every op of every kernel in order with
// obviously correct loops (the reference kernels, plugins/reference); every other backend is
// checked against it. Kernel-local values get their own scratch storage,
// since the interpreter materialises every op.
#include <stdexcept>

#include "lazylab/backend_plugin.hpp"
#include "lazylab/reference/program_runner.h"

namespace lazylab::interp {
namespace {

class InterpBackend : public plugin::Backend {
 public:
  // Declares no options: the helper refuses any.
  explicit InterpBackend(const plugin::BackendOptions&) {}
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Parameter;
    for (uint32_t dtype = 0; dtype < LAZYLAB_DTYPE_COUNT; ++dtype) caps.supports_dtype[dtype] = 1;
    caps.max_ops_per_kernel = 0;
  }
  std::string device_description() const override { return "host CPU, reference loops (f64 accumulation)"; }
  std::unique_ptr<plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<reference::RunnerExecutable>(program, host_memory_);
  }
};

}  // namespace
}  // namespace lazylab::interp

LAZYLAB_DEFINE_BACKEND(lazylab::interp::InterpBackend, "interp",
                       "Reference interpreter: obviously correct loops, one op at a time")
