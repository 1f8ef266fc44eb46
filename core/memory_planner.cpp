#include "core/memory_planner.h"

#include <algorithm>
#include <unordered_map>

namespace lazylab {
namespace {

// The placed values, found by live range: a segment tree over all ranges in
// order of `first`, each node holding the largest `last` among its placed
// ranges, so a query visits only subtrees that hold an overlapping placed
// range (scanning every placed value made planning quadratic in the number
// of kernels).
class PlacedRanges {
 public:
  explicit PlacedRanges(const std::vector<LiveRange>& ranges) : size_(ranges.size()) {
    for (size_t i = 0; i < ranges.size(); ++i) by_first_.push_back(&ranges[i]);
    std::stable_sort(by_first_.begin(), by_first_.end(),
                     [](const LiveRange* a, const LiveRange* b) { return a->first < b->first; });
    for (size_t i = 0; i < by_first_.size(); ++i) slot_of_[by_first_[i]] = i;
    max_last_.assign(4 * std::max<size_t>(size_, 1), -1);
  }

  void place(const LiveRange& range) { update(1, 0, size_, slot_of_.at(&range), range.last); }

  // Every placed range live at some kernel position of `range`.
  template <class Visit>
  void overlapping(const LiveRange& range, Visit&& visit) const {
    size_t end = static_cast<size_t>(std::upper_bound(by_first_.begin(), by_first_.end(), range.last,
                                                      [](int last, const LiveRange* r) { return last < r->first; }) -
                                     by_first_.begin());
    query(1, 0, size_, end, range.first, visit);
  }

 private:
  void update(size_t node, size_t lo, size_t hi, size_t slot, int last) {
    max_last_[node] = std::max(max_last_[node], last);
    if (hi - lo == 1) return;
    size_t mid = (lo + hi) / 2;
    if (slot < mid)
      update(2 * node, lo, mid, slot, last);
    else
      update(2 * node + 1, mid, hi, slot, last);
  }
  // Slots [lo, hi) of this node, restricted to [0, end), whose placed range
  // ends at or after `first`.
  template <class Visit>
  void query(size_t node, size_t lo, size_t hi, size_t end, int first, Visit& visit) const {
    if (lo >= end || max_last_[node] < first) return;
    if (hi - lo == 1) {
      visit(*by_first_[lo]);
      return;
    }
    size_t mid = (lo + hi) / 2;
    query(2 * node, lo, mid, end, first, visit);
    query(2 * node + 1, mid, hi, end, first, visit);
  }

  size_t size_;
  std::vector<const LiveRange*> by_first_;
  std::unordered_map<const LiveRange*, size_t> slot_of_;
  std::vector<int> max_last_;  // -1: nothing placed below
};

// Lowest offset where `range` fits beside the already placed values that
// are live with it.
uint64_t first_fit(const LiveRange& range, const PlacedRanges& placed, const Program& program) {
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end)
  placed.overlapping(range, [&](const LiveRange& other) {
    uint64_t at = program.values[other.value].offset;
    busy.emplace_back(at, at + other.bytes);
  });
  std::sort(busy.begin(), busy.end());
  uint64_t offset = 0;
  for (auto [begin, end] : busy) {
    if (begin >= offset + range.bytes) break;
    offset = std::max(offset, end);
  }
  return offset;
}

}  // namespace

void place_first_fit(Program& program, const std::vector<LiveRange>& ranges) {
  PlacedRanges placed(ranges);
  for (const LiveRange& range : ranges) {
    program.values[range.value].offset = first_fit(range, placed, program);
    placed.place(range);
  }
}

}  // namespace lazylab
