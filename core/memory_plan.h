// Live ranges of arena values over a Program's kernel order, shared by the
// scheduling and memory-planning passes and their tests.
#pragma once

#include <vector>

#include "program.h"

namespace lazylab {

struct LiveRange {
  NodeId value;
  int first, last;  // kernel positions: produced at `first`, last read at `last`
  uint64_t bytes;   // aligned to kArenaAlignment
};

std::vector<LiveRange> arena_live_ranges(const Program& program);

// The largest sum of bytes live at one kernel: what any placement needs.
uint64_t peak_live_bytes(const Program& program);

// Two arena values overlap in memory while both are live: the error names
// them; empty when the plan is sound.
std::string check_memory_plan(const Program& program);

inline uint64_t align_arena(uint64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace lazylab
