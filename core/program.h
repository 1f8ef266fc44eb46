// The Program: what a backend compiles. Kernels in execution order over the
// graph's nodes, a buffer table (one entry per node = value) and the memory
// plan placing intermediates in one arena.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "kernel_description.h"

namespace lazylab {

enum class ValueKind : uint8_t {
  Unused,       // not computed (dead, or folded away)
  Parameter,    // bound by the caller, by ordinal
  Arena,        // crosses a kernel boundary: lives in the arena
  KernelLocal,  // produced and consumed inside one kernel
  Output,       // written straight into the caller's output buffer `ordinal`
};

struct ValueInfo {
  ValueKind kind = ValueKind::Unused;
  int64_t ordinal = -1;  // parameters and outputs
  uint64_t offset = 0;   // arena values
  uint64_t bytes = 0;
  int kernel = -1;  // producing kernel; -1 for parameters
};

struct Kernel {
  std::vector<NodeId> ops;      // in graph order
  std::vector<NodeId> inputs;   // values read from outside the kernel
  std::vector<NodeId> outputs;  // values used after the kernel (or roots)
  KernelDescription description;
};

struct Program {
  std::vector<ValueInfo> values;   // indexed by node id
  std::vector<Kernel> kernels;     // in execution order
  std::vector<NodeId> parameters;  // by ordinal
  std::vector<NodeId> outputs;     // the graph's roots, in order
  uint64_t arena_bytes = 0;
  uint64_t naive_arena_bytes = 0;  // every arena value in its own slot: the baseline
  // Per output, the parameter ordinal whose buffer it may take when the
  // caller donates it, or -1 (core/donation.h); empty: none planned.
  std::vector<int64_t> output_donors;
};

inline constexpr uint64_t kArenaAlignment = 64;

std::string print_program(const Program& program, const Graph& graph);

}  // namespace lazylab
