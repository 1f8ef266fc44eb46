// Cache lines wanted soon, issued a few at a time from inside a loop that
// computes. A burst of hundreds of prefetches overflows the core's miss
// buffers and most are dropped: softmax issued its next row (256 lines) at
// the start of each row and its max pass still waited on memory; the same
// lines spread over the row's exp run made the kernel 14-20% faster, and
// layernorm's (48 lines a row, over its last run) 5%.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lazylab::cpu {

class PrefetchQueue {
 public:
  static constexpr int64_t kLineBytes = 64;

  void clear() {
    ranges_.clear();
    at_ = 0;
    lines_left_ = 0;
  }

  void add(const void* first, int64_t bytes) {
    if (bytes <= 0) return;
    const char* begin = static_cast<const char*>(first);
    ranges_.push_back({begin, begin + bytes});
    lines_left_ += (bytes + kLineBytes - 1) / kLineBytes;
  }

  int64_t lines_left() const { return lines_left_; }

  // Prefetches the next `lines` lines (fewer if fewer are left).
  // (Counted in locals: counting in the members made each prefetch wait on
  // the last one's store to them.)
  void issue(int64_t lines) {
    while (lines > 0 && at_ < ranges_.size()) {
      Range& range = ranges_[at_];
      const char* next = range.next;
      int64_t count = std::min(lines, (range.end - next + kLineBytes - 1) / kLineBytes);
      for (int64_t k = 0; k < count; ++k) __builtin_prefetch(next + k * kLineBytes, 0, 3);
      range.next = next + count * kLineBytes;
      lines -= count;
      lines_left_ -= count;
      if (range.next >= range.end) ++at_;
    }
  }

  void issue_all() { issue(lines_left_); }

 private:
  struct Range {
    const char* next;
    const char* end;
  };
  std::vector<Range> ranges_;  // cleared, not freed: no allocation a segment
  std::size_t at_ = 0;
  int64_t lines_left_ = 0;
};

}  // namespace lazylab::cpu
