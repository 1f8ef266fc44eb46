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
#include "device.h"
#include "device_buffer.h"
#include "executable.h"
#include "lazylab/backend_plugin.hpp"
#include "lazylab/op_table.hpp"
#include "product.h"

namespace lazylab::cuda {
namespace {

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
      {"gelu-epilogue", LAZYLAB_OPTION_BOOL, "off",
       "autocast's bias and gelu after a 16-bit product done by cuBLASLt's GELU_BIAS epilogue on the f32 sums", nullptr,
       0},
      {"row-block", LAZYLAB_OPTION_ENUM, "auto", "threads a block for rows past 1,024 columns", "auto|128|256|512|1024",
       0},
      {"row-groups", LAZYLAB_OPTION_BOOL, "on", "read a per-channel value over NCHW's rows in place (ABI 3.10)",
       nullptr, 0},
      {"wgmma", LAZYLAB_OPTION_BOOL, "on",
       "16-bit attention on Hopper's warpgroup products (sm_90 only; mma.sync elsewhere or when off)", nullptr, 0},
      {"attention-rows", LAZYLAB_OPTION_ENUM, "auto",
       "rows a block of the warpgroup attention kernel at head dims up to 64 (auto: 256 where not causal and "
       "there are at least 128 such blocks, else 128)",
       "auto|128|256", 0},
  };

  explicit CudaBackend(const plugin::BackendOptions& options) {
    if (const std::string& graph = options.text("graph"); graph != "auto")
      graph_.mode = graph == "on" ? GraphPolicy::On : GraphPolicy::Off;
    tf32_ = options.flag("tf32");
    codegen_.bias_epilogue = options.flag("bias-epilogue");
    codegen_.gelu_epilogue = options.flag("gelu-epilogue");
    const std::string& row_block = options.text("row-block");
    codegen_.row_block_threads = row_block == "auto" ? 0 : std::stoi(row_block);
    row_groups_ = options.flag("row-groups");
    codegen_.wgmma = options.flag("wgmma");
    const std::string& attention_rows = options.text("attention-rows");
    codegen_.wgmma_attention_rows = attention_rows == "auto" ? 0 : std::stoi(attention_rows);
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

  void capabilities(lazylab_capabilities& caps) const override { declare_capabilities(caps, row_groups_); }

  std::string device_description() const override {
    const Device& d = *devices_[0];
    return fmt::format(
        "{} ({}, {} SMs, {:.0f} GiB), {} device(s), driver {}.{}, NVRTC {}, cuBLASLt {}, TF32 {}, "
        "bias epilogue {}, gelu epilogue {}, row block {}, 16-bit attention on {}, kernel cache {}, CUDA graphs {}",
        d.name, d.arch(), d.sm_count, d.memory / double(1 << 30), devices_.size(), driver_->version / 1000,
        driver_->version % 1000 / 10, nvrtc_version_, blas_->cublasLtGetVersion(), tf32_ ? "on" : "off",
        codegen_.bias_epilogue ? "cuBLASLt" : "generated", codegen_.gelu_epilogue ? "cuBLASLt" : "generated",
        codegen_.row_block_threads ? std::to_string(codegen_.row_block_threads) : "auto",
        codegen_for(d).wgmma
            ? fmt::format("wgmma ({} rows a block up to head dim 64)",
                          codegen_.wgmma_attention_rows ? std::to_string(codegen_.wgmma_attention_rows) : "auto")
            : "mma.sync",
        compiler_.disk_cache ? cache_directory(compiler_) : "off",
        graph_.mode == GraphPolicy::On ? "on"
        : graph_.mode == GraphPolicy::Off
            ? "off"
            : fmt::format("auto (replayed where a step has >= {} launches and stages <= "
                          "{} KiB a launch; parameters past {} KiB read in place)",
                          GraphPolicy::kMinLaunches, GraphPolicy::kStagedBytesPerLaunch >> 10,
                          GraphPolicy::kStagedParameterBytes >> 10));
  }

  int32_t device_count() const override { return static_cast<int32_t>(devices_.size()); }

  std::unique_ptr<plugin::Executable> compile(const lazylab_program& program, int32_t index) override {
    Device& d = device(index);
    CompilerOptions options = compiler_;
    CodegenOptions codegen = codegen_for(d);
    // wgmma is sm_90a's, an arch of its own (its code runs on sm_90 alone).
    options.arch = codegen.wgmma ? "sm_90a" : d.arch();
    return std::make_unique<CudaExecutable>(d, index, program, codegen, options, tf32_, graph_);
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
    return annotated_source(generate(program, codegen_for(device(0))));
  }

 private:
  // The options as `d` can take them: wgmma on compute capability 9.0 only.
  CodegenOptions codegen_for(const Device& d) const {
    CodegenOptions options = codegen_;
    options.wgmma = options.wgmma && d.major == 9 && d.minor == 0;
    return options;
  }

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
  Product product(d, compiler_, c, LAZYLAB_F32, tf32_, ProductEpilogue::kNone);
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
