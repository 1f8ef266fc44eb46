// Host memory for tensor data: 64-byte aligned memory of its own, or a view
// of memory something else keeps alive (a backend's host-memory buffer).
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace lazylab {

class Buffer {
 public:
  explicit Buffer(size_t bytes)
      : bytes_(bytes), data_(static_cast<std::byte*>(::operator new (bytes ? bytes : 1, std::align_val_t{64}))) {}
  // A view of `bytes` at `data`, valid while `owner` lives.
  Buffer(std::byte* data, size_t bytes, std::shared_ptr<const void> owner)
      : bytes_(bytes), data_(data), owner_(std::move(owner)) {}
  ~Buffer() {
    if (!owner_) ::operator delete (data_, std::align_val_t{64});
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  std::byte* data_;
  std::shared_ptr<const void> owner_;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace lazylab
