// The cpu backend's one parallel loop: [begin, end) in chunks of at least
// `grain`, run concurrently on the backend's TBB arena.
//
// Under ThreadSanitizer the chunks run on plain std::threads instead (as
// many as the arena has), with the same concurrency: Debian's TBB is not
// built for TSan, whose reports would then drown lazylab's own races in TBB's
// internals that it cannot see synchronise.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>

#if defined(__SANITIZE_THREAD__)
#include <thread>
#include <vector>
#endif

namespace lazylab::cpu {

// chunk(first, end) runs on some thread of `arena` for each chunk.
template <class Chunk>
void parallel_chunks(tbb::task_arena& arena, int64_t begin, int64_t end, int64_t grain, const Chunk& chunk) {
#if defined(__SANITIZE_THREAD__)
  int64_t threads = std::max(1, arena.max_concurrency());
  int64_t step = std::max(grain, (end - begin + threads - 1) / threads);
  std::vector<std::thread> workers;
  for (int64_t first = begin; first < end; first += step)
    workers.emplace_back([&chunk, first, last = std::min(end, first + step)] { chunk(first, last); });
  for (std::thread& worker : workers) worker.join();
#else
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(begin, end, grain),
                      [&](const tbb::blocked_range<int64_t>& range) { chunk(range.begin(), range.end()); });
  });
#endif
}

// chunk(first, end) over [0, count), a chunk per item on the arena's threads
// where there is an arena of several, else all of it on this thread.
template <class Chunk>
void each_in_parallel(tbb::task_arena* arena, int64_t count, const Chunk& chunk) {
  if (arena && arena->max_concurrency() > 1)
    parallel_chunks(*arena, 0, count, 1, chunk);
  else
    chunk(0, count);
}

}  // namespace lazylab::cpu
