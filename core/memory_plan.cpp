#include "core/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace lazylab {

std::vector<LiveRange> arena_live_ranges(const Program& program) {
  std::vector<LiveRange> ranges;
  std::vector<int> index(program.values.size(), -1);
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (NodeId id : program.kernels[k].outputs)
      if (program.values[id].kind == ValueKind::Arena) {
        index[id] = static_cast<int>(ranges.size());
        ranges.push_back({id, static_cast<int>(k), static_cast<int>(k), align_arena(program.values[id].bytes)});
      }
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (NodeId id : program.kernels[k].inputs)
      if (index[id] >= 0) ranges[index[id]].last = std::max(ranges[index[id]].last, static_cast<int>(k));
  return ranges;
}

uint64_t peak_live_bytes(const Program& program) {
  std::vector<uint64_t> live(program.kernels.size() + 1, 0);
  for (const LiveRange& range : arena_live_ranges(program))
    for (int k = range.first; k <= range.last; ++k) live[k] += range.bytes;
  return *std::max_element(live.begin(), live.end());
}

std::string check_memory_plan(const Program& program) {
  std::vector<LiveRange> ranges = arena_live_ranges(program);
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      const LiveRange &a = ranges[i], &b = ranges[j];
      bool live_together = a.first <= b.last && b.first <= a.last;
      uint64_t a_at = program.values[a.value].offset, b_at = program.values[b.value].offset;
      bool overlap = a_at < b_at + b.bytes && b_at < a_at + a.bytes;
      if (live_together && overlap)
        return fmt::format("%{} and %{} overlap in the arena while both are live", a.value, b.value);
      if (a_at + a.bytes > program.arena_bytes) return fmt::format("%{} ends past the arena", a.value);
    }
  return {};
}

}  // namespace lazylab
