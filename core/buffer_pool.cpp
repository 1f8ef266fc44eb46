#include "core/buffer_pool.h"

namespace lazylab {

BufferPtr BufferPool::acquire(size_t bytes) {
  std::unique_ptr<Buffer> buffer;
  if (auto it = free_.find(bytes); it != free_.end() && !it->second.empty()) {
    buffer = std::move(it->second.back());
    it->second.pop_back();
    cached_bytes_ -= bytes;
  } else {
    buffer = std::make_unique<Buffer>(bytes);
  }
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return BufferPtr(buffer.release(), [pool](Buffer* b) {
    if (auto alive = pool.lock())
      alive->release(b);
    else
      delete b;
  });
}

void BufferPool::release(Buffer* buffer) {
  if (cached_bytes_ + buffer->bytes() > max_cached_bytes_) {
    delete buffer;
    return;
  }
  cached_bytes_ += buffer->bytes();
  free_[buffer->bytes()].emplace_back(buffer);
}

}  // namespace lazylab
