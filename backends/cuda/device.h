// One GPU as the backend holds it (its context, stream, memory pool and
// cuBLASLt state), and when a step is replayed as a CUDA graph. Included by
// backend.cpp.
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

#include "cuda_api.h"
#include "lazylab/backend_plugin.hpp"

namespace lazylab::cuda {

// A product as cuBLASLt's choice depends on it: batch, m, n, k, whether each
// operand is transposed, the bias epilogue, TF32, the dtype and whether
// every batch reads one lhs.
using ProductKey = std::array<int64_t, 10>;

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's scratch, per device (and launches', codegen.h)

// A graph replays the launches of a step with one call, but its parameters
// and outputs move through staging memory at fixed addresses (a copy each
// per step): worth it where launches are many and the data small.
struct GraphPolicy {
  enum Mode { Off, On, Auto } mode = Auto;
  static constexpr size_t kMinLaunches = 8;
  // A replay copies its staged values (the outputs, and the parameters up
  // to kStagedParameterBytes, smallest first, where they changed) at some
  // 2 TB/s; it saves a launch's gap (1 to 3 µs) a launch: worth it where
  // the copies are at most 1 MiB a launch.
  static constexpr uint64_t kStagedBytesPerLaunch = uint64_t{1} << 20;
  // Larger parameters (a model's weights) are read where they lie, the graph
  // captured at their addresses; captured again where one moves, and given
  // up for launches one by one where they move on two steps running.
  static constexpr uint64_t kStagedParameterBytes = uint64_t{1} << 20;
  static constexpr int kMovesBeforeGivingUp = 2;

  bool replays(size_t launches, uint64_t staged_bytes) const {
    return mode == On || (mode == Auto && launches >= kMinLaunches && staged_bytes <= launches * kStagedBytesPerLaunch);
  }
};

// One GPU: its context, stream, memory pool and cuBLASLt state.
struct Device {
  const Driver& driver;
  const CublasLt& blas;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  // Graphs are captured here, a stream nothing else uses: work another
  // thread queues meanwhile (a buffer freed) cannot join a capture.
  CUstream capture_stream = nullptr;
  int sm_count = 0, major = 0, minor = 0;
  std::string name;
  size_t memory = 0;
  cublasLtHandle_t lt = nullptr;
  CUdeviceptr workspace = 0;
  // cuBLASLt's choice for each product shape, asked once per device.
  mutable std::mutex algo_mutex;
  mutable std::map<ProductKey, AlgoChoice> algos;
  // Events of finished executions, for the next ones: creating and
  // destroying two a step was a measurable part of a small step's host time.
  mutable std::mutex event_mutex;
  mutable std::vector<CUevent> spare_events;

  Device(const Driver& d, const CublasLt& b, int index) : driver(d), blas(b) {
    check(d, d.cuDeviceGet(&device, index), "cuDeviceGet");
    check(d, d.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    bind();
    check(d, d.cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device), "attribute");
    check(d, d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "attribute");
    check(d, d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "attribute");
    char text[256] = {};
    d.cuDeviceGetName(text, sizeof text, device);
    name = text;
    d.cuDeviceTotalMem(&memory, device);
    check(d, d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(d, d.cuStreamCreate(&capture_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    // Freed buffers stay in the pool for the next step instead of going back
    // to the driver: no allocation from the system per step.
    CUmemoryPool pool = nullptr;
    if (d.cuDeviceGetDefaultMemPool(&pool, device) == CUDA_SUCCESS) {
      uint64_t keep = UINT64_MAX;
      d.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    }
    check(b.cublasLtCreate(&lt), "cublasLtCreate");
    check(d, d.cuMemAlloc(&workspace, kWorkspaceBytes), "cuMemAlloc (cuBLASLt workspace)");
  }
  ~Device() {
    bind();
    driver.cuStreamSynchronize(stream);
    for (CUevent event : spare_events) driver.cuEventDestroy(event);
    driver.cuMemFree(workspace);
    blas.cublasLtDestroy(lt);
    driver.cuStreamDestroy(capture_stream);
    driver.cuStreamDestroy(stream);
    driver.cuDevicePrimaryCtxRelease(device);
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  void bind() const { check(driver, driver.cuCtxSetCurrent(context), "cuCtxSetCurrent"); }
  std::string arch() const { return fmt::format("sm_{}{}", major, minor); }

  CUdeviceptr allocate(size_t bytes) const {
    CUdeviceptr pointer = 0;
    CUresult result = driver.cuMemAllocAsync(&pointer, std::max<size_t>(bytes, 256), stream);
    if (result != CUDA_SUCCESS) check(driver, result, fmt::format("cuMemAllocAsync ({} bytes)", bytes).c_str());
    return pointer;
  }

  CUevent take_event() const {
    {
      std::lock_guard<std::mutex> lock(event_mutex);
      if (!spare_events.empty()) {
        CUevent event = spare_events.back();
        spare_events.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    check(driver, driver.cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    return event;
  }
  void give_back_event(CUevent event) const {
    std::lock_guard<std::mutex> lock(event_mutex);
    spare_events.push_back(event);
  }
};

}  // namespace lazylab::cuda
