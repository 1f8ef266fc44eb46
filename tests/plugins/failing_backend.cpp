// A backend whose compile and execute fail and that declines softmax, to
// check that these errors reach the caller as values with clear messages.
#include <stdexcept>

#include "lazylab/backend_plugin.hpp"

namespace {

class FailingExecutable : public lazylab::plugin::Executable {
 public:
  void execute(const void* const*, void* const*) override { throw std::runtime_error("device on fire"); }
};

class FailingBackend : public lazylab::plugin::Backend {
 public:
  explicit FailingBackend(const std::map<std::string, std::string>& options)
      : fail_compile_(options.count("fail-compile")) {}
  // Everything but softmax, fused 3 ops at most: the host's capability
  // check and the fusion strategies' size limit can be tested against it.
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Softmax;
    caps.fuses_elementwise = 1;
    caps.max_ops_per_kernel = 3;
  }
  std::string device_description() const override { return "nothing"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program) override {
    if (fail_compile_)
      throw std::runtime_error("kernel for op " + std::to_string(program.kernels[0].ops[0].op) + " failed to compile");
    return std::make_unique<FailingExecutable>();
  }

 private:
  bool fail_compile_;
};

}  // namespace

LAZYLAB_DEFINE_BACKEND(FailingBackend, "failing", "fails on purpose (tests)")
