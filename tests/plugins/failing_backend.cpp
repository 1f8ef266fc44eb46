// A backend whose compile and execute fail and that declines softmax, to
// check that these errors reach the caller as values with clear messages.
// With option `flaky`, it runs only programs that reshape one f32 parameter
// (it copies the bytes), and gets the third execution wrong: the runner must
// check every step, not only the last. With option `crash`, execute
// segfaults: a run isolates cells to survive it; with `crash-in-create` or
// `abort-in-create`, creating the backend segfaults or aborts.
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "lazylab/backend_plugin.hpp"

namespace {

class FailingExecutable : public lazylab::plugin::HostExecutable {
 public:
  using HostExecutable::HostExecutable;
  void run(const void* const*, void* const*) override { throw std::runtime_error("device on fire"); }
};

class CrashingExecutable : public lazylab::plugin::HostExecutable {
 public:
  using HostExecutable::HostExecutable;
  void run(const void* const*, void* const*) override { std::raise(SIGSEGV); }
};

class FlakyExecutable : public lazylab::plugin::HostExecutable {
 public:
  FlakyExecutable(const lazylab_program& program, std::shared_ptr<lazylab::plugin::HostMemoryPool> pool)
      : HostExecutable(program, std::move(pool)) {
    bool reshape = program.num_parameters == 1 && program.num_outputs == 1 && program.num_kernels == 1 &&
                   program.kernels[0].num_ops == 1 && program.kernels[0].ops[0].op == LAZYLAB_OP_Reshape &&
                   program.values[program.parameters[0]].dtype == LAZYLAB_F32;
    if (!reshape) throw std::invalid_argument("flaky: only a reshape of one f32 parameter");
    bytes_ = program.values[program.parameters[0]].bytes;
  }
  void run(const void* const* parameters, void* const* outputs) override {
    std::memcpy(outputs[0], parameters[0], bytes_);
    if (++executions_ == 3) static_cast<float*>(outputs[0])[0] += 1.0f;
  }

 private:
  uint64_t bytes_ = 0;
  int executions_ = 0;
};

class FailingBackend : public lazylab::plugin::Backend {
 public:
  explicit FailingBackend(const std::map<std::string, std::string>& options)
      : fail_compile_(options.count("fail-compile")), flaky_(options.count("flaky")), crash_(options.count("crash")) {
    if (options.count("crash-in-create")) std::raise(SIGSEGV);
    if (options.count("abort-in-create")) std::abort();
  }
  // Everything but softmax, fused 3 ops at most: the host's capability
  // check and the fusion strategies' size limit can be tested against it.
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Softmax;
    caps.fuses_elementwise = 1;
    caps.max_ops_per_kernel = 3;
  }
  std::string device_description() const override { return "nothing"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    if (fail_compile_)
      throw std::runtime_error("kernel for op " + std::to_string(program.kernels[0].ops[0].op) + " failed to compile");
    if (flaky_) return std::make_unique<FlakyExecutable>(program, host_memory_);
    if (crash_) return std::make_unique<CrashingExecutable>(program, host_memory_);
    return std::make_unique<FailingExecutable>(program, host_memory_);
  }

 private:
  bool fail_compile_, flaky_, crash_;
};

}  // namespace

LAZYLAB_DEFINE_BACKEND(FailingBackend, "failing", "fails on purpose (tests)")
