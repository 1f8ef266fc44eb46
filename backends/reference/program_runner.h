// Runs a whole Program with the reference kernels, one op at a time, on
// memory given per execution: the interpreter's engine, and any backend that
// wants reference results on memory of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace lazylab::reference {

class ProgramRunner {
 public:
  explicit ProgramRunner(const lazylab_program& program);

  // parameters[i] holds parameter ordinal i; outputs[i] receives root i
  // (copied there when the root's value is not written in place).
  void run(const void* const* parameters, void* const* outputs);

 private:
  struct Step {
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
  std::vector<Step> steps_;
  std::vector<uint32_t> outputs_;
};

}  // namespace lazylab::reference
