// The cpu backend's copy of the Program's buffer table, and where each value
// lives during one execution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lazylab/backend_abi.h"

namespace lazylab::cpu {

struct ValueInfo {
  uint32_t dtype = LAZYLAB_F32;
  std::vector<int64_t> shape;
  uint32_t kind = LAZYLAB_VALUE_ARENA;
  int64_t ordinal = -1;
  uint64_t offset = 0;
  uint64_t bytes = 0;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::vector<ValueInfo> copy_values(const lazylab_program& program);

// Value id -> memory for parameters and arena values in one execution.
struct Memory {
  const std::vector<ValueInfo>* values = nullptr;
  std::byte* arena = nullptr;
  const void* const* parameters = nullptr;
  void* const* outputs = nullptr;
  // Floats the kernels share, one kernel at a time (16-bit products'
  // widened panels): as many as the largest KernelPlan::panel_floats().
  float* panels = nullptr;

  void* address(uint32_t value) const {
    const ValueInfo& info = (*values)[value];
    if (info.kind == LAZYLAB_VALUE_PARAMETER) return const_cast<void*>(parameters[info.ordinal]);
    if (info.kind == LAZYLAB_VALUE_OUTPUT) return outputs[info.ordinal];
    return arena + info.offset;
  }
  float* f32(uint32_t value) const { return static_cast<float*>(address(value)); }
};

// A compiled kernel.
class KernelPlan {
 public:
  virtual ~KernelPlan() = default;
  virtual void run(const Memory& memory) = 0;
  // Where part of the kernel runs on the reference kernels, why (strict=1
  // refuses that for kernels the fast plans should cover); else empty.
  virtual std::string on_reference_kernels() const { return ""; }
  // How many floats of Memory::panels its run() uses.
  virtual int64_t panel_floats() const { return 0; }
};

}  // namespace lazylab::cpu
