// cuda: the GPU backend. Each Program becomes one CUDA C++ translation unit
// (codegen.h) compiled by NVRTC for the device's own architecture through a
// disk cache (compiler.h) and loaded through the driver API; f32 products
// run on cuBLASLt (TF32 off unless asked). Buffers live in device memory from
// the stream-ordered allocator; each executable has one device arena laid
// out by the memory plan; work is queued on one stream per device and
// execute() returns before it is done.
//
// Options: CudaBackend::kOptions (`lazylab backends` lists them).
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

#include "algo_choice.h"
#include "codegen.h"
#include "compiler.h"
#include "cuda_api.h"
#include "lazylab/backend_plugin.hpp"
#include "lazylab/op_table.hpp"

namespace lazylab::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's scratch, per device
// cuBLASLt algorithms timed per product shape. Asked for 16, its heuristic
// gave 3 to 8 for the suite's shapes on an H100 (cuBLASLt 13), and its first
// was the fastest of them each time.
constexpr int kAlgoCandidates = 8;
constexpr uint64_t kMaxAutotuneBytes = uint64_t{2} << 30;  // operands larger than this: the heuristic's choice
// A product whose heuristic first takes longer than this times only the
// heuristic's candidates: the configuration search (about 70 more timings
// for f32) would cost more compile time than it could save.
constexpr float kMaxSearchMs = 5.0f;
constexpr int kFinalists = 3;  // timed again, 3 runs each, after one run of every candidate

// A graph replays the launches of a step with one call, but its parameters
// and outputs move through staging memory at fixed addresses (a copy each
// per step): worth it where launches are many and the data small.
struct GraphPolicy {
  enum Mode { Off, On, Auto } mode = Auto;
  static constexpr size_t kMinLaunches = 8;
  static constexpr uint64_t kMaxStagedBytes = uint64_t{1} << 20;

  bool replays(size_t launches, uint64_t staged_bytes) const {
    return mode == On || (mode == Auto && launches >= kMinLaunches && staged_bytes <= kMaxStagedBytes);
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
  mutable std::map<std::array<int64_t, 8>, AlgoChoice> algos;
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

// A cuBLASLt product D = A B over row-major f32 matrices, batched: computed
// as the column-major D^T = B^T A^T, so cuBLASLt's first operand is B's
// memory and its second A's.
class Product {
 public:
  // With `bias`, cuBLASLt adds a vector of n along each row of the product
  // (its BIAS epilogue: in D^T's column-major terms, one value per row).
  // `compiler` says where the disk cache keeps cuBLASLt's choices.
  Product(const Device& device, const CompilerOptions& compiler, const lazylab_contraction& c, bool tf32, bool bias,
          float alpha = 1.0f)
      : device_(device), c_(c), bias_(bias), alpha_(alpha) {
    const CublasLt& b = device.blas;
    cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check(b.cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    if (bias) {
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      cudaDataType_t type = CUDA_R_32F;
      b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
      b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
    }
    cublasOperation_t first = c.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t second = c.lhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first);
    b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second);
    // B's memory: [k, n] row-major is column-major n x k (ld n); transposed,
    // [n, k] row-major is column-major k x n (ld k). Likewise for A.
    first_ = layout(c.rhs_transposed ? c.k : c.n, c.rhs_transposed ? c.n : c.k, c.k * c.n);
    second_ = layout(c.lhs_transposed ? c.m : c.k, c.lhs_transposed ? c.k : c.m, c.m * c.k);
    out_ = layout(c.n, c.m, c.m * c.n);
    choice_ = choose_algo(compiler, tf32);
    algo_ = choice_.algo;
  }

 private:
  // The fastest of cuBLASLt's first heuristic choices for this shape, each
  // timed on this device: once per shape and device in a process, and once
  // per machine where the disk cache is on.
  AlgoChoice choose_algo(const CompilerOptions& compiler, bool tf32) {
    std::array<int64_t, 8> key = {c_.batch, c_.m, c_.n, c_.k, c_.lhs_transposed, c_.rhs_transposed, bias_, tf32};
    std::lock_guard<std::mutex> lock(device_.algo_mutex);
    if (auto it = device_.algos.find(key); it != device_.algos.end()) {
      AlgoChoice again = it->second;
      again.source = AlgoChoice::Source::Process;
      return again;
    }
    std::string path;
    if (compiler.disk_cache) {
      path = algo_choice_path(cache_directory(compiler), identity(key, compiler));
      std::string why;
      if (auto stored = load_algo_choice(path, why); stored && runs(stored->algo)) {
        device_.algos.emplace(key, *stored);
        return *stored;
      }
    }
    AlgoChoice choice = time_candidates(tf32);
    device_.algos.emplace(key, choice);
    if (!path.empty() && choice.source == AlgoChoice::Source::Timed) store_algo_choice(path, choice);
    return choice;
  }

  // What a stored choice is valid for: the shape, the device and the
  // libraries that timed it.
  std::string identity(const std::array<int64_t, 8>& key, const CompilerOptions& compiler) const {
    return fmt::format("{}|{}|{}|cublasLt {}|driver {}|candidates {} and configurations", fmt::join(key, " "),
                       device_.name, device_.arch(), device_.blas.cublasLtGetVersion(), compiler.driver_version,
                       kAlgoCandidates);
  }

  // Whether cuBLASLt accepts `algo` for this product (one read from disk
  // is checked before it is trusted).
  bool runs(const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t result{};
    return device_.blas.cublasLtMatmulAlgoCheck(device_.lt, desc_, first_, second_, out_, out_, &algo, &result) ==
               CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= kWorkspaceBytes;
  }

  AlgoChoice time_candidates(bool tf32) {
    const CublasLt& b = device_.blas;
    cublasLtMatmulPreference_t preference = nullptr;
    check(b.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    size_t workspace = kWorkspaceBytes;
    b.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                           sizeof workspace);
    std::array<cublasLtMatmulHeuristicResult_t, kAlgoCandidates> results{};
    int found = 0;
    cublasStatus_t status = b.cublasLtMatmulAlgoGetHeuristic(device_.lt, desc_, first_, second_, out_, out_, preference,
                                                             kAlgoCandidates, results.data(), &found);
    b.cublasLtMatmulPreferenceDestroy(preference);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for a {} x [{} x {}] x [{} x {}] product",
                                           c_.batch, c_.m, c_.k, c_.k, c_.n));
    std::vector<cublasLtMatmulAlgo_t> candidates;
    for (int i = 0; i < found; ++i) candidates.push_back(results[i].algo);
    return fastest(std::move(candidates), tf32);
  }

  // Every configuration cuBLASLt accepts for this product: each algorithm's
  // tiles, stages and CTA swizzling. The heuristic names a few of them; for
  // mlp's f32 products on an H100 its first was 3.7% and 2.8% slower than
  // the fastest configuration (1.376 against 1.325 ms, 1.353 against 1.315).
  std::vector<cublasLtMatmulAlgo_t> configurations(bool tf32) const {
    const CublasLt& b = device_.blas;
    cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    std::array<int, 64> ids{};
    int count = 0;
    if (b.cublasLtMatmulAlgoGetIds(device_.lt, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   static_cast<int>(ids.size()), ids.data(), &count) != CUBLAS_STATUS_SUCCESS)
      return {};
    std::vector<cublasLtMatmulAlgo_t> found;
    for (int i = 0; i < count; ++i) {
      cublasLtMatmulAlgo_t algo{};
      if (b.cublasLtMatmulAlgoInit(device_.lt, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      int swizzling = 0;
      size_t written = 0;
      b.cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzling, sizeof swizzling,
                                          &written);
      for (int tile : capability_ids(algo, CUBLASLT_ALGO_CAP_TILE_IDS))
        for (int stages : capability_ids(algo, CUBLASLT_ALGO_CAP_STAGES_IDS))
          for (int swizzle = 0; swizzle <= (swizzling ? 1 : 0); ++swizzle) {
            cublasLtMatmulAlgo_t config = algo;
            const int split_k = 1;
            b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
            b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages);
            b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                                   sizeof swizzle);
            b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k, sizeof split_k);
            if (runs(config)) found.push_back(config);
          }
    }
    return found;
  }

  // An algorithm's list of tile or stage ids; {0} (cuBLASLt's "undefined",
  // its own choice) where it has none.
  std::vector<int> capability_ids(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t what) const {
    const CublasLt& b = device_.blas;
    size_t bytes = 0;
    b.cublasLtMatmulAlgoCapGetAttribute(&algo, what, nullptr, 0, &bytes);
    std::vector<int> ids(bytes / sizeof(int));
    if (ids.empty() ||
        b.cublasLtMatmulAlgoCapGetAttribute(&algo, what, ids.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
      return {0};
    return ids;
  }

  // Times every candidate on scratch operands (one run after one to warm up),
  // then the fastest few again (3 runs each), and keeps the fastest of
  // those; the heuristic's first where the operands would not fit or every
  // candidate fails. The heuristic's candidates come first; where its first
  // is quick to time, every configuration of cuBLASLt's algorithms follows.
  AlgoChoice fastest(std::vector<cublasLtMatmulAlgo_t> candidates, bool tf32) {
    const Driver& d = device_.driver;
    // Each operand 256-byte aligned, as the arena places them.
    auto aligned = [](uint64_t floats) { return (floats * 4 + 255) / 256 * 256; };
    const uint64_t lhs_bytes = aligned(c_.batch * c_.m * c_.k), rhs_bytes = aligned(c_.batch * c_.k * c_.n);
    const uint64_t out_bytes = aligned(c_.batch * c_.m * c_.n),
                   bytes = lhs_bytes + rhs_bytes + out_bytes + aligned(c_.n);
    AlgoChoice heuristic{candidates[0], 0, {}, AlgoChoice::Source::Heuristic};
    if (bytes > kMaxAutotuneBytes) return heuristic;
    CUdeviceptr scratch = 0;
    if (d.cuMemAlloc(&scratch, bytes) != CUDA_SUCCESS) return heuristic;
    CUdeviceptr lhs = scratch, rhs = lhs + lhs_bytes, out = rhs + rhs_bytes, bias = out + out_bytes;
    d.cuMemsetD8Async(scratch, 0x3c, bytes, device_.stream);  // about 0.0115, not zero
    CUevent start = nullptr, stop = nullptr;
    d.cuEventCreate(&start, CU_EVENT_DEFAULT);
    d.cuEventCreate(&stop, CU_EVENT_DEFAULT);
    // The mean of `runs` runs after one to warm up; negative where it fails.
    auto time = [&](const cublasLtMatmulAlgo_t& algo, int runs) -> float {
      algo_ = algo;
      try {
        run(device_.stream, lhs, rhs, out, bias);
        d.cuEventRecord(start, device_.stream);
        for (int r = 0; r < runs; ++r) run(device_.stream, lhs, rhs, out, bias);
        d.cuEventRecord(stop, device_.stream);
        float ms = 0;
        if (d.cuEventSynchronize(stop) != CUDA_SUCCESS || d.cuEventElapsedTime(&ms, start, stop) != CUDA_SUCCESS)
          return -1;
        return ms / static_cast<float>(runs);
      } catch (const std::runtime_error&) {  // this candidate cannot run the product
        return -1;
      }
    };
    float first_ms = time(candidates[0], 1);
    if (first_ms >= 0 && first_ms < kMaxSearchMs)
      for (const cublasLtMatmulAlgo_t& config : configurations(tf32)) candidates.push_back(config);
    AlgoChoice choice{candidates[0], 0, std::vector<float>(candidates.size(), -1.0f), AlgoChoice::Source::Timed};
    choice.candidate_ms[0] = first_ms;
    for (size_t i = 1; i < candidates.size(); ++i) choice.candidate_ms[i] = time(candidates[i], 1);
    std::vector<size_t> order;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (choice.candidate_ms[i] >= 0) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return choice.candidate_ms[a] < choice.candidate_ms[b]; });
    float best_ms = std::numeric_limits<float>::infinity();
    for (size_t rank = 0; rank < std::min<size_t>(order.size(), kFinalists); ++rank) {
      size_t i = order[rank];
      float ms = time(candidates[i], 3);
      if (ms < 0) continue;
      choice.candidate_ms[i] = ms;
      if (ms < best_ms) best_ms = ms, choice.algo = candidates[i], choice.chosen = static_cast<int>(i);
    }
    d.cuStreamSynchronize(device_.stream);
    d.cuEventDestroy(start);
    d.cuEventDestroy(stop);
    d.cuMemFree(scratch);
    return std::isfinite(best_ms) ? choice : heuristic;
  }

 public:
  ~Product() {
    const CublasLt& b = device_.blas;
    b.cublasLtMatrixLayoutDestroy(first_);
    b.cublasLtMatrixLayoutDestroy(second_);
    b.cublasLtMatrixLayoutDestroy(out_);
    b.cublasLtMatmulDescDestroy(desc_);
  }
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;

  void run(CUstream stream, CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr bias = 0) const {
    const float zero = 0.0f;
    if (bias_) {
      const void* pointer = reinterpret_cast<const void*>(bias);
      check(device_.blas.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                                        sizeof pointer),
            "cublasLtMatmulDescSetAttribute (bias)");
    }
    check(device_.blas.cublasLtMatmul(device_.lt, desc_, &alpha_, reinterpret_cast<const void*>(rhs), first_,
                                      reinterpret_cast<const void*>(lhs), second_, &zero, reinterpret_cast<void*>(out),
                                      out_, reinterpret_cast<void*>(out), out_, &algo_,
                                      reinterpret_cast<void*>(device_.workspace), kWorkspaceBytes, stream),
          "cublasLtMatmul");
  }
  const lazylab_contraction& contraction() const { return c_; }
  const AlgoChoice& choice() const { return choice_; }
  bool adds_bias() const { return bias_; }

 private:
  cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t batch_stride) {
    cublasLtMatrixLayout_t l = nullptr;
    check(device_.blas.cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, rows), "cublasLtMatrixLayoutCreate");
    int32_t batch = static_cast<int32_t>(c_.batch);
    device_.blas.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    device_.blas.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                  sizeof batch_stride);
    return l;
  }

  const Device& device_;
  lazylab_contraction c_;
  bool bias_;
  float alpha_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, out_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  AlgoChoice choice_;
};

struct Value {
  uint32_t dtype;
  std::vector<int64_t> shape;
  uint32_t kind;
  int64_t ordinal;
  uint64_t offset;
  uint64_t bytes;
  bool staged = false;  // a parameter or output at a fixed address, for graph replay
  uint64_t stage_offset = 0;
  uint64_t staged_serial = 0;  // the parameter buffer whose contents are staged now (serials start at 1)
};

struct LoadedLaunch {
  CUfunction function;
  Launch launch;
  uint32_t grid;
};

struct LoadedKernel {
  std::unique_ptr<Product> product;
  uint32_t product_out = kNoValue, bias = kNoValue;
  std::vector<LoadedLaunch> launches;
};

class CudaExecutable : public plugin::Executable {
 public:
  CudaExecutable(Device& device, int32_t index, const lazylab_program& program, const CodegenOptions& codegen,
                 const CompilerOptions& compiler, bool tf32, GraphPolicy graph)
      : device_(device), index_(index), outputs_(program.outputs, program.outputs + program.num_outputs) {
    const int32_t* donors = lazylab_program_donors(&program);
    for (uint32_t i = 0; i < program.num_outputs; ++i) donors_.push_back(donors ? donors[i] : -1);
    parameters_.assign(program.parameters, program.parameters + program.num_parameters);
    for (uint32_t v = 0; v < program.num_values; ++v) {
      const lazylab_value& value = program.values[v];
      values_.push_back({value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank), value.kind,
                         value.ordinal, value.offset, value.bytes});
    }
    ProgramCode code = generate(program, codegen);
    place_local_values(program.arena_bytes, code.needs_memory);
    size_t launches = 0;
    for (const KernelCode& kernel : code.kernels) launches += kernel.launches.size() + (kernel.product ? 1 : 0);
    if (graph.replays(launches, staged_bytes())) place_staged_values();
    device.bind();
    if (arena_bytes_) check(device.driver, device.driver.cuMemAlloc(&arena_, arena_bytes_), "cuMemAlloc (arena)");
    CompiledModule module = compile_cuda(code.source, compiler);
    check(device.driver, device.driver.cuModuleLoadData(&module_, module.cubin.data()), "cuModuleLoadData");
    for (uint32_t k = 0; k < program.num_kernels; ++k)
      kernels_.push_back(load(program.kernels[k], code.kernels[k], compiler, tf32));
    notes_ = compile_notes(module);
    for (uint32_t k = 0; k < program.num_kernels; ++k)
      if (!code.kernels[k].op_by_op.empty())
        notes_ += fmt::format("kernel {} ({}): op by op: {}\n", k, lazylab_kernel_kind_name(program.kernels[k].kind),
                              code.kernels[k].op_by_op);
  }

  std::string notes() const override { return notes_; }
  ~CudaExecutable() override {
    device_.bind();
    device_.driver.cuStreamSynchronize(device_.stream);
    if (graph_exec_) device_.driver.cuGraphExecDestroy(graph_exec_);
    if (graph_) device_.driver.cuGraphDestroy(graph_);
    kernels_.clear();
    if (module_) device_.driver.cuModuleUnload(module_);
    if (arena_) device_.driver.cuMemFree(arena_);
  }

  std::vector<std::unique_ptr<plugin::Buffer>> execute(std::span<plugin::Buffer* const> parameters,
                                                       std::unique_ptr<plugin::Event>* done,
                                                       const plugin::ExecuteOptions& options) override {
    const Driver& d = device_.driver;
    device_.bind();
    // Per-kernel times need marks between the launches: those steps launch
    // one by one.
    bool replay = staged_ && !options.profile_kernels;
    std::vector<int32_t> donor = choose_donors(parameters, options);
    std::vector<std::unique_ptr<plugin::Buffer>> outputs(outputs_.size());
    std::vector<CUdeviceptr> output_pointers(outputs_.size(), 0);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (donor[i] >= 0) {  // written into its donor's memory, which it takes once the launches are queued
        output_pointers[i] = static_cast<DeviceBuffer*>(parameters[donor[i]])->pointer();
        continue;
      }
      const Value& root = values_[outputs_[i]];
      auto buffer = std::make_unique<DeviceBuffer>(device_, root.dtype, root.shape, index_);
      output_pointers[i] = buffer->pointer();
      outputs[i] = std::move(buffer);
    }
    auto address = [&](uint32_t v) -> CUdeviceptr {
      const Value& value = values_[v];
      if (replay && value.staged) return arena_ + value.stage_offset;
      switch (value.kind) {
        case LAZYLAB_VALUE_PARAMETER: return static_cast<DeviceBuffer*>(parameters[value.ordinal])->pointer();
        case LAZYLAB_VALUE_OUTPUT: return output_pointers[value.ordinal];
        default: return arena_ + value.offset;
      }
    };
    std::unique_ptr<ExecutionEvent> event;
    if (done) {
      event = std::make_unique<ExecutionEvent>(device_, options.profile_kernels, kernels_.size());
      event->record_start();
    }
    if (replay) {
      for (Value& value : values_) {
        if (!value.staged || value.kind != LAZYLAB_VALUE_PARAMETER || !value.bytes) continue;
        auto* parameter = static_cast<DeviceBuffer*>(parameters[value.ordinal]);
        if (value.staged_serial == parameter->serial()) continue;  // staged last step, unchanged since
        check(d, d.cuMemcpyDtoDAsync(arena_ + value.stage_offset, parameter->pointer(), value.bytes, device_.stream),
              "cuMemcpyDtoDAsync (staging a parameter)");
        value.staged_serial = parameter->serial();
      }
      if (!graph_exec_) capture(address);
      check(d, d.cuGraphLaunch(graph_exec_, device_.stream), "cuGraphLaunch");
    } else {
      for (size_t k = 0; k < kernels_.size(); ++k) {
        if (event) event->record_kernel_start(k);
        run(kernels_[k], address, device_.stream);
      }
    }
    if (event) event->record_kernel_start(kernels_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) {  // roots not written in place, and staged ones
      const Value& value = values_[outputs_[i]];
      bool in_place = value.kind == LAZYLAB_VALUE_OUTPUT && value.ordinal == static_cast<int64_t>(i);
      if ((!in_place || replay) && value.bytes)
        check(d, d.cuMemcpyDtoDAsync(output_pointers[i], address(outputs_[i]), value.bytes, device_.stream),
              "cuMemcpyDtoDAsync");
    }
    take_donated(parameters, donor, outputs);
    if (event) {
      event->record_stop();
      *done = std::move(event);
    }
    return outputs;
  }

 private:
  // Buffer donation (ABI 3.8). Per output, the parameter whose memory it
  // takes (marked taken for the host), or -1: given up by the host, this backend's own, of the output's
  // size, not taken by another output. The host's plan makes it safe: the
  // parameter's readers run in earlier kernels (stream order), or in the
  // output's own elementwise kernel, element for element, whose pointers
  // are then not __restrict__ (codegen.cpp). In graph replay the kernels
  // write staging and the copy out lands in the taken memory.
  std::vector<int32_t> choose_donors(std::span<plugin::Buffer* const> parameters,
                                     const plugin::ExecuteOptions& options) const {
    std::vector<int32_t> donor(outputs_.size(), -1);
    if (options.donated.size() != parameters.size() || options.taken.size() != parameters.size()) return donor;
    std::vector<bool> claimed(parameters.size(), false);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      int32_t p = donors_[i];
      if (p < 0 || static_cast<size_t>(p) >= parameters.size() || !options.donated[p] || options.taken[p] || claimed[p])
        continue;
      auto* buffer = dynamic_cast<DeviceBuffer*>(parameters[p]);
      if (!buffer || !buffer->pointer() || buffer->bytes() != values_[outputs_[i]].bytes) continue;
      claimed[p] = true;
      donor[i] = p;
      options.taken[p] = 1;
    }
    return donor;
  }

  // Once everything reading the parameters is queued, each taken memory
  // passes to its output's buffer.
  void take_donated(std::span<plugin::Buffer* const> parameters, const std::vector<int32_t>& donor,
                    std::vector<std::unique_ptr<plugin::Buffer>>& outputs) {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (donor[i] < 0) continue;
      auto* parameter = static_cast<DeviceBuffer*>(parameters[donor[i]]);
      values_[parameters_[donor[i]]].staged_serial = 0;  // its memory now holds the output
      const Value& root = values_[outputs_[i]];
      outputs[i] = std::make_unique<DeviceBuffer>(device_, root.dtype, root.shape, index_, parameter->release());
    }
  }

  // The launches recorded once into a graph, at the staged addresses.
  template <class Address>
  void capture(Address& address) {
    const Driver& d = device_.driver;
    CUstream stream = device_.capture_stream;
    check(d, d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    try {
      for (const LoadedKernel& kernel : kernels_) run(kernel, address, stream);
    } catch (...) {
      CUgraph partial = nullptr;
      d.cuStreamEndCapture(stream, &partial);
      if (partial) d.cuGraphDestroy(partial);
      throw;
    }
    check(d, d.cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture");
    check(d, d.cuGraphInstantiateWithFlags(&graph_exec_, graph_, 0), "cuGraphInstantiateWithFlags");
  }

  // How the generated code was had, and each product's cuBLASLt choice.
  std::string compile_notes(const CompiledModule& module) const {
    std::string notes = module.from_cache ? "generated kernels: from the disk cache\n"
                                          : fmt::format("generated kernels: NVRTC, {:.0f} ms ({})\n", module.nvrtc_ms,
                                                        module.cache_note);
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const Product* product = kernels_[k].product.get();
      if (!product) continue;
      const lazylab_contraction& c = product->contraction();
      notes += fmt::format("kernel {}: cuBLASLt {} x [{} x {}] x [{} x {}]{}: {}\n", k, c.batch, c.m, c.k, c.k, c.n,
                           product->adds_bias() ? " + bias" : "", describe(product->choice()));
    }
    return notes;
  }

  uint64_t staged_bytes() const {
    uint64_t bytes = 0;
    for (const Value& value : values_)
      if (value.kind == LAZYLAB_VALUE_PARAMETER || value.kind == LAZYLAB_VALUE_OUTPUT) bytes += value.bytes;
    return bytes;
  }

  // Parameters and outputs get fixed addresses after the arena, for graphs.
  void place_staged_values() {
    for (Value& value : values_) {
      if (value.kind != LAZYLAB_VALUE_PARAMETER && value.kind != LAZYLAB_VALUE_OUTPUT) continue;
      arena_bytes_ = (arena_bytes_ + 255) / 256 * 256;
      value.staged = true;
      value.stage_offset = arena_bytes_;
      arena_bytes_ += value.bytes;
    }
    staged_ = true;
  }

  // Kernel-local values the generated code keeps in memory go after the
  // memory plan's arena.
  void place_local_values(uint64_t arena_bytes, const std::vector<uint32_t>& locals) {
    arena_bytes_ = arena_bytes;
    for (uint32_t v : locals) {
      arena_bytes_ = (arena_bytes_ + 255) / 256 * 256;
      values_[v].kind = LAZYLAB_VALUE_ARENA;
      values_[v].offset = arena_bytes_;
      arena_bytes_ += values_[v].bytes;
    }
  }

  LoadedKernel load(const lazylab_kernel& kernel, const KernelCode& code, const CompilerOptions& compiler, bool tf32) {
    LoadedKernel loaded;
    if (code.product)
      loaded.product = std::make_unique<Product>(device_, compiler, kernel.contraction, tf32, code.bias != kNoValue,
                                                 static_cast<float>(code.alpha));
    loaded.product_out = code.product_out;
    loaded.bias = code.bias;
    for (const Launch& launch : code.launches) {
      CUfunction function = nullptr;
      check(device_.driver, device_.driver.cuModuleGetFunction(&function, module_, launch.function.c_str()),
            "cuModuleGetFunction");
      if (launch.shared_bytes > 48 * 1024)  // past the default, asked for explicitly
        check(device_.driver,
              device_.driver.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(launch.shared_bytes)),
              "cuFuncSetAttribute");
      // Grid-stride loops: enough blocks to fill the device, no more.
      uint64_t blocks = launch.block_per_item ? (launch.work + launch.items_per_block - 1) / launch.items_per_block
                                              : (launch.work + launch.block - 1) / launch.block;
      uint64_t limit = launch.block_per_item ? uint64_t{1} << 30 : static_cast<uint64_t>(device_.sm_count) * 32;
      uint32_t grid = launch.blocks ? launch.blocks : static_cast<uint32_t>(std::min(blocks, limit));
      loaded.launches.push_back({function, launch, grid});
    }
    return loaded;
  }

  template <class Address>
  void run(const LoadedKernel& kernel, Address& address, CUstream stream) {
    if (kernel.product) {
      const lazylab_contraction& c = kernel.product->contraction();
      kernel.product->run(stream, address(c.lhs), address(c.rhs), address(kernel.product_out),
                          kernel.bias == kNoValue ? 0 : address(kernel.bias));
    }
    for (const LoadedLaunch& l : kernel.launches) {
      if (l.launch.work == 0) continue;
      std::vector<CUdeviceptr> pointers;
      for (uint32_t v : l.launch.values) pointers.push_back(address(v));
      long long work = l.launch.work;
      std::vector<void*> args;
      for (CUdeviceptr& p : pointers) args.push_back(&p);
      args.push_back(&work);
      check(device_.driver,
            device_.driver.cuLaunchKernel(l.function, l.grid, l.launch.blocks_y, 1, l.launch.block, 1, 1,
                                          l.launch.shared_bytes, stream, args.data(), nullptr),
            "cuLaunchKernel");
    }
  }

  Device& device_;
  int32_t index_;
  std::vector<Value> values_;
  std::vector<uint32_t> outputs_;
  std::vector<uint32_t> parameters_;  // value ids, by ordinal
  std::vector<int32_t> donors_;       // per output: lazylab_program's output_donors, or -1
  uint64_t arena_bytes_ = 0;
  CUdeviceptr arena_ = 0;
  CUmodule module_ = nullptr;
  std::vector<LoadedKernel> kernels_;
  std::string notes_;    // compile_notes()
  bool staged_ = false;  // replayed as a graph (unless a step's kernels are profiled)
  CUgraph graph_ = nullptr;
  CUgraphExec graph_exec_ = nullptr;
};

class CudaBackend : public plugin::Backend {
 public:
  static constexpr lazylab_option_spec kOptions[] = {
      {"tf32", LAZYLAB_OPTION_BOOL, "off", "f32 products on TF32 tensor cores (cuBLASLt)", nullptr, 0},
      {"cache", LAZYLAB_OPTION_BOOL, "on", "keep generated kernels and timed product choices on disk", nullptr, 0},
      {"cache-dir", LAZYLAB_OPTION_STRING, "",
       "the disk cache's directory (empty: $XDG_CACHE_HOME/lazylab/cuda or ~/.cache/lazylab/cuda)", nullptr, 0},
      {"graph", LAZYLAB_OPTION_ENUM, "auto",
       "replay an executable's launches as one CUDA graph (auto: GraphPolicy's rule)", "auto|on|off", 0},
      {"bias-epilogue", LAZYLAB_OPTION_BOOL, "on", "a product's bias added by cuBLASLt's BIAS epilogue", nullptr, 0},
      {"row-block", LAZYLAB_OPTION_ENUM, "auto", "threads a block for rows past 1,024 columns", "auto|128|256|512|1024",
       0},
      {"row-groups", LAZYLAB_OPTION_BOOL, "on", "read a per-channel value over NCHW's rows in place (ABI 3.10)",
       nullptr, 0},
  };

  explicit CudaBackend(const plugin::BackendOptions& options) {
    if (const std::string& graph = options.text("graph"); graph != "auto")
      graph_.mode = graph == "on" ? GraphPolicy::On : GraphPolicy::Off;
    tf32_ = options.flag("tf32");
    codegen_.bias_epilogue = options.flag("bias-epilogue");
    const std::string& row_block = options.text("row-block");
    codegen_.row_block_threads = row_block == "auto" ? 0 : std::stoi(row_block);
    row_groups_ = options.flag("row-groups");
    compiler_.disk_cache = options.flag("cache");
    if (const std::string& dir = options.text("cache-dir"); !dir.empty()) compiler_.cache_dir = dir;
    std::string error;
    driver_ = driver(error);
    if (!driver_) throw std::runtime_error("cuda: " + error);
    if (CUresult r = driver_->cuInit(0); r != CUDA_SUCCESS)
      throw std::runtime_error("cuda: no CUDA device (cuInit: " + driver_error(*driver_, r) + ")");
    int count = 0;
    driver_->cuDeviceGetCount(&count);
    if (count == 0) throw std::runtime_error("cuda: no CUDA device");
    blas_ = cublaslt(error);
    if (!blas_) throw std::runtime_error("cuda: " + error);
    const Nvrtc* compiler = nvrtc(error);
    if (!compiler) throw std::runtime_error("cuda: " + error);
    nvrtc_version_ = fmt::format("{}.{}", compiler->major, compiler->minor);
    devices_.resize(count);
    compiler_.driver_version = driver_->version;
    device(0);  // fails here, clearly, if the first device cannot be used
  }

  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Parameter;
    caps.fuses_elementwise = 1;
    caps.fuses_reduction_prologue = 1;
    caps.fuses_gemm_epilogue = 1;
    caps.fuses_layout_views = 1;
    caps.attention_max_head_dim = 128;            // attention_kernel.h's tiles: shared memory and registers
    caps.reads_row_groups = row_groups_ ? 1 : 0;  // codegen.cpp: a per-channel value indexed by its row's group
  }

  std::string device_description() const override {
    const Device& d = *devices_[0];
    return fmt::format(
        "{} ({}, {} SMs, {:.0f} GiB), {} device(s), driver {}.{}, NVRTC {}, cuBLASLt {}, TF32 {}, "
        "bias epilogue {}, row block {}, kernel cache {}, CUDA graphs {}",
        d.name, d.arch(), d.sm_count, d.memory / double(1 << 30), devices_.size(), driver_->version / 1000,
        driver_->version % 1000 / 10, nvrtc_version_, blas_->cublasLtGetVersion(), tf32_ ? "on" : "off",
        codegen_.bias_epilogue ? "cuBLASLt" : "generated",
        codegen_.row_block_threads ? std::to_string(codegen_.row_block_threads) : "auto",
        compiler_.disk_cache ? cache_directory(compiler_) : "off",
        graph_.mode == GraphPolicy::On    ? "on"
        : graph_.mode == GraphPolicy::Off ? "off"
                                          : fmt::format("auto (replayed where a step has >= {} launches and stages <= "
                                                        "{} KiB)",
                                                        GraphPolicy::kMinLaunches, GraphPolicy::kMaxStagedBytes >> 10));
  }

  int32_t device_count() const override { return static_cast<int32_t>(devices_.size()); }

  std::unique_ptr<plugin::Executable> compile(const lazylab_program& program, int32_t index) override {
    Device& d = device(index);
    CompilerOptions options = compiler_;
    options.arch = d.arch();
    return std::make_unique<CudaExecutable>(d, index, program, codegen_, options, tf32_, graph_);
  }

  std::unique_ptr<plugin::Buffer> buffer_from_host(uint32_t dtype, std::vector<int64_t> shape, int32_t index,
                                                   const void* data, bool) override {
    Device& d = device(index);
    d.bind();
    auto buffer = std::make_unique<DeviceBuffer>(d, dtype, std::move(shape), index);
    if (buffer->bytes())
      check(*driver_, driver_->cuMemcpyHtoDAsync(buffer->pointer(), data, buffer->bytes(), d.stream),
            "cuMemcpyHtoDAsync");
    return buffer;
  }

  // Another library's device memory (ABI 3.7), copied on this device's
  // stream between two events: the copy waits for the work queued on the
  // producer's stream, and the producer's next work waits for the copy.
  std::unique_ptr<plugin::Buffer> buffer_from_device_data(uint32_t dtype, std::vector<int64_t> shape, int32_t index,
                                                          const void* data, int32_t dlpack_device_type,
                                                          uint64_t stream) override {
    if (dlpack_device_type != kDLPackCuda)
      throw std::invalid_argument(fmt::format("cuda takes device memory of DLPack device type {} (CUDA), not {}",
                                              kDLPackCuda, dlpack_device_type));
    Device& d = device(index);
    d.bind();
    auto producer = reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream));
    CUevent ready = d.take_event(), copied = d.take_event();
    check(*driver_, driver_->cuEventRecord(ready, producer), "cuEventRecord (the producer's stream)");
    check(*driver_, driver_->cuStreamWaitEvent(d.stream, ready, 0), "cuStreamWaitEvent");
    auto buffer = std::make_unique<DeviceBuffer>(d, dtype, std::move(shape), index);
    if (buffer->bytes())
      check(
          *driver_,
          driver_->cuMemcpyDtoDAsync(buffer->pointer(), reinterpret_cast<CUdeviceptr>(data), buffer->bytes(), d.stream),
          "cuMemcpyDtoDAsync");
    check(*driver_, driver_->cuEventRecord(copied, d.stream), "cuEventRecord");
    check(*driver_, driver_->cuStreamWaitEvent(producer, copied, 0), "cuStreamWaitEvent (the producer's stream)");
    d.give_back_event(ready);
    d.give_back_event(copied);
    return buffer;
  }

  void buffer_to_host(plugin::Buffer& buffer, void* destination) override {
    Device& d = device(buffer.device());
    d.bind();
    check(*driver_, driver_->cuStreamSynchronize(d.stream), "cuStreamSynchronize");
    if (buffer.bytes())
      check(*driver_, driver_->cuMemcpyDtoH(destination, static_cast<DeviceBuffer&>(buffer).pointer(), buffer.bytes()),
            "cuMemcpyDtoH");
  }

  void stream_wait_device(int32_t index, uint64_t stream) override {
    Device& d = device(index);
    d.bind();
    CUevent done = d.take_event();
    check(*driver_, driver_->cuEventRecord(done, d.stream), "cuEventRecord");
    check(*driver_, driver_->cuStreamWaitEvent(reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream)), done, 0),
          "cuStreamWaitEvent (the consumer's stream)");
    d.give_back_event(done);
  }

  void device_wait_stream(int32_t index, uint64_t stream) override {
    Device& d = device(index);
    d.bind();
    CUevent read = d.take_event();
    check(*driver_, driver_->cuEventRecord(read, reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream))),
          "cuEventRecord (the consumer's stream)");
    check(*driver_, driver_->cuStreamWaitEvent(d.stream, read, 0), "cuStreamWaitEvent");
    d.give_back_event(read);
  }

  void synchronize(int32_t index) override {
    Device& d = device(index);
    d.bind();
    check(*driver_, driver_->cuStreamSynchronize(d.stream), "cuStreamSynchronize");
  }

  lazylab_ceilings measure_ceilings(int32_t index) override;

  std::string generated_code(const lazylab_program& program) override {
    return annotated_source(program, generate(program, codegen_));
  }

 private:
  Device& device(int32_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!devices_[index]) devices_[index] = std::make_unique<Device>(*driver_, *blas_, index);
    return *devices_[index];
  }

  const Driver* driver_ = nullptr;
  const CublasLt* blas_ = nullptr;
  std::string nvrtc_version_;
  bool tf32_ = false, row_groups_ = true;
  GraphPolicy graph_;
  CodegenOptions codegen_;
  CompilerOptions compiler_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// Best of several: a 1 GiB device-to-device copy (bytes read + written) and
// an 8192^3 f32 product through cuBLASLt as this backend runs it.
lazylab_ceilings CudaBackend::measure_ceilings(int32_t index) {
  Device& d = device(index);
  d.bind();
  const Driver& driver = *driver_;
  auto best_ms = [&](int trials, auto&& work) {
    CUevent start = nullptr, stop = nullptr;
    check(driver, driver.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(driver, driver.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    work();  // warm-up
    float best = 1e30f;
    for (int t = 0; t < trials; ++t) {
      driver.cuEventRecord(start, d.stream);
      work();
      driver.cuEventRecord(stop, d.stream);
      driver.cuEventSynchronize(stop);
      float ms = 0;
      driver.cuEventElapsedTime(&ms, start, stop);
      best = std::min(best, ms);
    }
    driver.cuEventDestroy(start);
    driver.cuEventDestroy(stop);
    return static_cast<double>(best);
  };
  const size_t copy_bytes = size_t{1} << 30;
  CUdeviceptr a = d.allocate(copy_bytes), b = d.allocate(copy_bytes);
  driver.cuMemsetD8Async(a, 1, copy_bytes, d.stream);
  double copy_ms = best_ms(5, [&] { driver.cuMemcpyDtoDAsync(b, a, copy_bytes, d.stream); });
  const int64_t n = 8192;
  lazylab_contraction c{0, 0, 0, 0, 0, 1, n, n, n};
  Product product(d, compiler_, c, tf32_, false);
  driver.cuMemsetD8Async(a, 0x3c, n * n * 4, d.stream);  // 0x3c3c3c3c: about 0.0115, not zero
  double gemm_ms = best_ms(3, [&] { product.run(d.stream, a, a + n * n * 4, b); });
  driver.cuMemFreeAsync(a, d.stream);
  driver.cuMemFreeAsync(b, d.stream);
  driver.cuStreamSynchronize(d.stream);
  return lazylab_ceilings{sizeof(lazylab_ceilings), 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9,
                          2.0 * n * n * n / (gemm_ms * 1e-3) / 1e9,
                          tf32_ ? "best of 5: 1 GiB device-to-device copy (read + written); best of 3: 8192^3 f32 "
                                  "cuBLASLt product, TF32 on"
                                : "best of 5: 1 GiB device-to-device copy (read + written); best of 3: 8192^3 f32 "
                                  "cuBLASLt product, TF32 off"};
}

}  // namespace
}  // namespace lazylab::cuda

LAZYLAB_DEFINE_BACKEND(lazylab::cuda::CudaBackend, "cuda",
                       "Generated CUDA kernels (NVRTC, disk-cached) and cuBLASLt products on NVIDIA GPUs")
