// A buffer in device memory (shared through DLPack without a copy) and an
// execution's completion on the stream, timed per kernel when profiled.
// Included by backend.cpp.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "device.h"

namespace lazylab::cuda {

// A buffer's contents never change once written (by its upload or by the
// execution that made it), so its serial stands for them: a graph's staged
// parameter copied from the same serial last step is still current.
constexpr int32_t kDLPackCuda = 2;  // DLPack's kDLCUDA

class DeviceBuffer : public plugin::Buffer {
 public:
  DeviceBuffer(Device& device, uint32_t dtype, std::vector<int64_t> shape, int32_t index)
      : DeviceBuffer(device, dtype, std::move(shape), index, 0) {}
  // `adopted`: memory of this size taken from another buffer (donation), or
  // 0 for new memory.
  DeviceBuffer(Device& device, uint32_t dtype, std::vector<int64_t> shape, int32_t index, CUdeviceptr adopted)
      : Buffer(dtype, std::move(shape), index),
        device_(device),
        pointer_(adopted ? adopted : device.allocate(bytes())),
        serial_(next_serial_.fetch_add(1) + 1) {}
  ~DeviceBuffer() override {
    if (!pointer_) return;  // given to an output
    device_.bind();
    device_.driver.cuMemFreeAsync(pointer_, device_.stream);  // after the queued work that reads it
  }
  // Gives the memory up to the caller, who frees it.
  CUdeviceptr release() { return std::exchange(pointer_, 0); }
  CUdeviceptr pointer() const { return pointer_; }
  uint64_t serial() const { return serial_; }
  DeviceData device_data() const override { return {reinterpret_cast<void*>(pointer_), kDLPackCuda}; }

 private:
  static inline std::atomic<uint64_t> next_serial_{0};
  Device& device_;
  CUdeviceptr pointer_;
  uint64_t serial_;
};

// The start and end of one execution on the stream; when profiled, also a
// mark before each kernel and one after the last (marks_[k] to marks_[k + 1]
// is kernel k's time).
class ExecutionEvent : public plugin::Event {
 public:
  ExecutionEvent(const Device& device, bool profile_kernels, size_t num_kernels) : device_(device) {
    start_ = create();
    stop_ = create();
    if (profile_kernels)
      for (size_t k = 0; k <= num_kernels; ++k) marks_.push_back(create());
  }
  ~ExecutionEvent() override {
    for (CUevent event : marks_) device_.give_back_event(event);
    device_.give_back_event(start_);
    device_.give_back_event(stop_);
  }
  ExecutionEvent(const ExecutionEvent&) = delete;
  ExecutionEvent& operator=(const ExecutionEvent&) = delete;

  void record_start() { record(start_); }
  // k == the number of kernels: the end of the last.
  void record_kernel_start(size_t k) {
    if (k < marks_.size()) record(marks_[k]);
  }
  void record_stop() { record(stop_); }

  void wait() override { check(device_.driver, device_.driver.cuEventSynchronize(stop_), "cuEventSynchronize"); }
  double elapsed_ms() const override { return between(start_, stop_); }
  std::vector<double> kernel_ms() const override {
    std::vector<double> times;
    for (size_t k = 0; k + 1 < marks_.size(); ++k) times.push_back(between(marks_[k], marks_[k + 1]));
    return times;
  }

 private:
  CUevent create() { return device_.take_event(); }
  void record(CUevent event) {
    check(device_.driver, device_.driver.cuEventRecord(event, device_.stream), "cuEventRecord");
  }
  double between(CUevent from, CUevent to) const {
    float ms = -1;
    if (device_.driver.cuEventElapsedTime(&ms, from, to) != CUDA_SUCCESS) return -1;
    return ms;
  }

  const Device& device_;
  CUevent start_ = nullptr, stop_ = nullptr;
  std::vector<CUevent> marks_;
};

}  // namespace lazylab::cuda
