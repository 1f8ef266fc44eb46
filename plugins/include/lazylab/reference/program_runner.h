// Runs a whole Program with the reference kernels, one op at a time, on
// memory given per execution: the interpreter's engine, and any backend that
// wants reference results on memory of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lazylab/backend_plugin.hpp"
#include "lazylab/reference/kernels.h"

namespace lazylab::reference {

class ProgramRunner {
 public:
  explicit ProgramRunner(const lazylab_program& program);

  // parameters[i] holds parameter ordinal i; outputs[i] receives root i
  // (copied there when the root's value is not written in place). With
  // `kernel_ms`, each kernel's wall time is appended to it.
  void run(const void* const* parameters, void* const* outputs, std::vector<double>* kernel_ms = nullptr);

 private:
  struct Step {
    uint32_t kernel;
    uint32_t op;
    uint32_t result;
    std::vector<uint32_t> operands;
    std::vector<Attr> attrs;
  };

  std::vector<std::byte> arena_;
  std::vector<std::vector<std::byte>> scratch_;
  std::vector<Array> arrays_;
  std::vector<uint32_t> kinds_;
  std::vector<int64_t> ordinals_;
  std::vector<uint64_t> bytes_;
  std::vector<Step> steps_;  // kernel by kernel, in order
  uint32_t num_kernels_ = 0;
  std::vector<uint32_t> outputs_;
};

// A host backend's executable that runs its Program with a ProgramRunner,
// timing each kernel when asked.
class RunnerExecutable : public plugin::HostExecutable {
 public:
  RunnerExecutable(const lazylab_program& program, std::shared_ptr<plugin::HostMemoryPool> pool)
      : HostExecutable(program, std::move(pool)), runner_(program) {}
  void run(const void* const* parameters, void* const* outputs) override { runner_.run(parameters, outputs); }
  void run_timing_kernels(const void* const* parameters, void* const* outputs,
                          std::vector<double>& kernel_ms) override {
    runner_.run(parameters, outputs, &kernel_ms);
  }

 private:
  ProgramRunner runner_;
};

}  // namespace lazylab::reference
