// Memory traffic that a register run carries out a piece at a time between
// its strips, while it computes: the prefetches of a later segment's inputs
// and the non-temporal copy of the previous segment's output. A row kernel
// otherwise alternates between waiting on memory and computing.
#pragma once

#include <cstdint>

#include "deferred_stream.h"
#include "prefetch_queue.h"

namespace lazylab::cpu {

struct OverlappedTraffic {
  PrefetchQueue prefetch;
  DeferredStream stream;

  // Before one of the run's last `strips_left` strips: an even share of
  // what is left.
  void before_strip(int64_t strips_left) {
    prefetch.issue((prefetch.lines_left() + strips_left - 1) / strips_left);
    stream.copy((stream.left() + strips_left - 1) / strips_left);
  }

  void finish() {
    prefetch.issue_all();
    stream.finish();
  }
};

}  // namespace lazylab::cpu
