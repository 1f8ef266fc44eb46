// Reuses host buffers between steps. A training loop frees last step's
// outputs and allocates the same sizes again; without reuse every large
// allocation comes fresh from the OS and pays a page fault per 4 KiB
// (measured: over a quarter of a layernorm step). A caching allocator in the
// spirit of PyTorch's: freed buffers go back to a free list by exact size.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/buffer.h"

namespace lazylab {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Buffers kept for reuse are capped at this many bytes in all.
  explicit BufferPool(size_t max_cached_bytes = size_t{1} << 30) : max_cached_bytes_(max_cached_bytes) {}

  // A buffer of exactly `bytes`; when its last owner lets go it returns here
  // (or is freed, if the pool is gone or full).
  BufferPtr acquire(size_t bytes);
  size_t cached_bytes() const { return cached_bytes_; }

 private:
  void release(Buffer* buffer);

  size_t max_cached_bytes_;
  size_t cached_bytes_ = 0;
  std::map<size_t, std::vector<std::unique_ptr<Buffer>>> free_;
};

}  // namespace lazylab
