// C++ helper for backend plugin authors: subclass Backend and Executable,
// then LAZYLAB_DEFINE_BACKEND(MyBackend, "name", "summary") exports the C
// entry point. Exceptions never cross the C boundary: anything thrown
// becomes an error string for the host.
//
// Host backends (data in host memory) subclass HostExecutable and write
// run() on plain pointers: the helper gives them zero-copy buffers (host data
// is aliased, not copied; outputs come from a caching pool) and the rest of
// the buffer API. Device backends subclass Buffer and override Backend's
// buffer functions and Executable::execute.
#ifndef LAZYLAB_BACKEND_PLUGIN_HPP
#define LAZYLAB_BACKEND_PLUGIN_HPP

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "lazylab/backend_abi.h"
#include "lazylab/backend_options.hpp"
#include "lazylab/dtype_table.hpp"

namespace lazylab::plugin {

// "key=value,key=value" -> map, for a backend that declares no options and
// takes the text as written; throws on a malformed item.
inline std::map<std::string, std::string> parse_options(const char* text) {
  std::vector<std::pair<std::string, std::string>> items;
  if (std::string error = options::split_items(text ? text : "", items); !error.empty())
    throw std::invalid_argument("backend " + error);
  return {items.begin(), items.end()};
}

// The bytes of an array (the dtype table's element size; a sized list here
// gave bf16 four bytes an element).
inline uint64_t bytes_of(uint32_t dtype, const std::vector<int64_t>& shape) {
  uint64_t n = dtypes::known(dtype) ? dtypes::size(dtype) : 0;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// An array of one dtype and shape on one device.
class Buffer {
 public:
  Buffer(uint32_t dtype, std::vector<int64_t> shape, int32_t device)
      : dtype_(dtype), shape_(std::move(shape)), device_(device), bytes_(bytes_of(dtype_, shape_)) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint32_t dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int32_t device() const { return device_; }
  uint64_t bytes() const { return bytes_; }
  // The data's address if it is in host memory, else nullptr.
  virtual const void* host_data() const { return nullptr; }
  // Its address in device memory and the DLPack device type (kDLCUDA = 2),
  // for a buffer a DLPack consumer may share; {nullptr, 0} for none.
  struct DeviceData {
    void* pointer = nullptr;
    int32_t dlpack_device_type = 0;
  };
  virtual DeviceData device_data() const { return {}; }

 private:
  uint32_t dtype_;
  std::vector<int64_t> shape_;
  int32_t device_;
  uint64_t bytes_;
};

// Host memory, 64-byte aligned, reused by exact size: a training loop frees
// last step's outputs and asks for the same sizes again, and fresh large
// allocations cost a page fault per 4 KiB. Thread-safe; memory released
// while the pool is full (or gone) goes back to the system.
class HostMemoryPool : public std::enable_shared_from_this<HostMemoryPool> {
 public:
  explicit HostMemoryPool(size_t max_cached_bytes = size_t{1} << 30) : max_cached_bytes_(max_cached_bytes) {}
  ~HostMemoryPool() {
    for (auto& [bytes, blocks] : free_)
      for (std::byte* block : blocks) release_to_system(block);
  }

  // `bytes` of memory, returned here when the last owner lets go.
  std::shared_ptr<std::byte> acquire(size_t bytes) {
    std::byte* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        block = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= bytes;
      }
    }
    if (!block) block = static_cast<std::byte*>(::operator new (bytes ? bytes : 1, std::align_val_t{64}));
    std::weak_ptr<HostMemoryPool> pool = weak_from_this();
    return std::shared_ptr<std::byte>(block, [pool, bytes](std::byte* memory) {
      if (auto owner = pool.lock())
        owner->release(memory, bytes);
      else
        release_to_system(memory);
    });
  }

 private:
  static void release_to_system(std::byte* memory) { ::operator delete (memory, std::align_val_t{64}); }
  void release(std::byte* memory, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + bytes <= max_cached_bytes_) {
        free_[bytes].push_back(memory);
        cached_bytes_ += bytes;
        return;
      }
    }
    release_to_system(memory);
  }

  std::mutex mutex_;
  size_t max_cached_bytes_;
  size_t cached_bytes_ = 0;
  std::map<size_t, std::vector<std::byte*>> free_;
};

// A buffer in host memory: its own (from a pool) or the host's, aliased.
class HostBuffer : public Buffer {
 public:
  HostBuffer(uint32_t dtype, std::vector<int64_t> shape, int32_t device, std::shared_ptr<std::byte> storage)
      : Buffer(dtype, std::move(shape), device), storage_(std::move(storage)), data_(storage_.get()) {}
  // Aliases memory the host keeps alive and unchanged.
  HostBuffer(uint32_t dtype, std::vector<int64_t> shape, int32_t device, const void* aliased)
      : Buffer(dtype, std::move(shape), device), data_(static_cast<std::byte*>(const_cast<void*>(aliased))) {}

  std::byte* data() { return data_; }
  const void* host_data() const override { return data_; }
  // Its own memory; null where it aliases the host's.
  const std::shared_ptr<std::byte>& storage() const { return storage_; }

 private:
  std::shared_ptr<std::byte> storage_;
  std::byte* data_;
};

// The completion of one execution.
class Event {
 public:
  virtual ~Event() = default;
  virtual void wait() {}
  // Device milliseconds the execution took; negative when unknown.
  virtual double elapsed_ms() const = 0;
  // Milliseconds per kernel, in the Program's order, for an execution run
  // with ExecuteOptions::profile_kernels; empty when not timed.
  virtual std::vector<double> kernel_ms() const { return {}; }
};

// A host backend's execution is complete when execute() returns.
class CompletedEvent : public Event {
 public:
  explicit CompletedEvent(double ms, std::vector<double> kernel_ms = {}) : ms_(ms), kernel_ms_(std::move(kernel_ms)) {}
  double elapsed_ms() const override { return ms_; }
  std::vector<double> kernel_ms() const override { return kernel_ms_; }

 private:
  double ms_;
  std::vector<double> kernel_ms_;
};

// What the host asks of one execution.
struct ExecuteOptions {
  bool profile_kernels = false;  // time each kernel; the event returns the times
  // ABI 3.8, one entry per parameter or empty: nonzero where the host gives
  // that parameter's buffer up with this call; set `taken` where an output
  // took its memory (see output_donors in lazylab_program).
  std::span<const uint8_t> donated;
  std::span<uint8_t> taken;
};

// Runs `fn` and, when `kernel_ms` is given, appends its wall time in
// milliseconds: a host backend wraps each kernel of a profiled execution.
template <class Fn>
void run_kernel_timed(std::vector<double>* kernel_ms, Fn&& fn) {
  if (!kernel_ms) return fn();
  auto start = std::chrono::steady_clock::now();
  fn();
  kernel_ms->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

class Executable {
 public:
  virtual ~Executable() = default;
  // Parameters by ordinal; one new buffer per output, in root order. May
  // return before the device is done; sets *done, when given, to an event
  // that completes with this execution (with per-kernel times when
  // `options` asks for them and the backend can). Throw to report an error.
  virtual std::vector<std::unique_ptr<Buffer>> execute(std::span<Buffer* const> parameters,
                                                       std::unique_ptr<Event>* done, const ExecuteOptions& options) = 0;
  // What compiling this executable decided that a report should show (the
  // candidates timed and the one chosen), a line each; empty: nothing.
  virtual std::string notes() const { return ""; }
};

// An executable of a host backend: run() reads parameters and writes outputs
// through plain host pointers (parameters by ordinal; outputs[i] holds the
// bytes of root i). An output whose value is not LAZYLAB_VALUE_OUTPUT with
// that ordinal (a parameter, or a value returned twice) is copied there by
// run() itself.
class HostExecutable : public Executable {
 public:
  HostExecutable(const lazylab_program& program, std::shared_ptr<HostMemoryPool> pool) : pool_(std::move(pool)) {
    const int32_t* donors = lazylab_program_donors(&program);
    for (uint32_t i = 0; i < program.num_outputs; ++i) {
      const lazylab_value& value = program.values[program.outputs[i]];
      output_types_.push_back({value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank)});
      donors_.push_back(donors ? donors[i] : -1);
    }
  }

  virtual void run(const void* const* parameters, void* const* outputs) = 0;
  // The same with each kernel's time appended to `kernel_ms` (Program
  // order; see run_kernel_timed). A backend that does not run kernel by
  // kernel keeps this default: no per-kernel times.
  virtual void run_timing_kernels(const void* const* parameters, void* const* outputs,
                                  std::vector<double>& /*kernel_ms*/) {
    run(parameters, outputs);
  }

  std::vector<std::unique_ptr<Buffer>> execute(std::span<Buffer* const> parameters, std::unique_ptr<Event>* done,
                                               const ExecuteOptions& options) override {
    std::vector<const void*> inputs;
    for (Buffer* parameter : parameters) {
      const void* data = parameter->host_data();
      if (!data) throw std::invalid_argument("a parameter buffer is not in host memory");
      inputs.push_back(data);
    }
    std::vector<std::unique_ptr<Buffer>> outputs;
    std::vector<void*> pointers;
    for (size_t i = 0; i < output_types_.size(); ++i) {
      const auto& [dtype, shape] = output_types_[i];
      std::shared_ptr<std::byte> storage = donated_storage(donors_[i], parameters, options);
      if (!storage) storage = pool_->acquire(bytes_of(dtype, shape));
      auto buffer = std::make_unique<HostBuffer>(dtype, shape, 0, std::move(storage));
      pointers.push_back(buffer->data());
      outputs.push_back(std::move(buffer));
    }
    std::vector<double> kernel_ms;
    auto start = std::chrono::steady_clock::now();
    if (options.profile_kernels)
      run_timing_kernels(inputs.data(), pointers.data(), kernel_ms);
    else
      run(inputs.data(), pointers.data());
    if (done)
      *done = std::make_unique<CompletedEvent>(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
          std::move(kernel_ms));
    return outputs;
  }

 protected:
  std::shared_ptr<HostMemoryPool> pool_;

 private:
  // The memory of parameter `donor` where the host gave it up and this
  // backend owns it (not host data it aliases), marked taken; else null.
  static std::shared_ptr<std::byte> donated_storage(int32_t donor, std::span<Buffer* const> parameters,
                                                    const ExecuteOptions& options) {
    if (donor < 0 || static_cast<size_t>(donor) >= options.donated.size() || !options.donated[donor] ||
        options.taken[donor])
      return nullptr;
    auto* buffer = dynamic_cast<HostBuffer*>(parameters[donor]);
    if (!buffer || !buffer->storage()) return nullptr;
    options.taken[donor] = 1;
    return buffer->storage();
  }

  std::vector<std::pair<uint32_t, std::vector<int64_t>>> output_types_;
  std::vector<int32_t> donors_;  // per output: lazylab_program's output_donors, or -1
};

// The host's ceilings as a host backend measures them (ABI 3.12,
// lazylab_host_ceilings): what each field means is said there.
struct HostCeilings {
  double copy_gb_s = 0, elementwise_gop_s = 0, gemm_gflop_s = 0;
  std::string gemm_library, method, peer_environment;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void capabilities(lazylab_capabilities& caps) const = 0;
  virtual std::string device_description() const = 0;
  virtual int32_t device_count() const { return 1; }
  // Copy what you need: `program` is valid only during this call.
  virtual std::unique_ptr<Executable> compile(const lazylab_program& program, int32_t device) = 0;

  // Buffers in host memory, unless a device backend overrides these.
  virtual std::unique_ptr<Buffer> buffer_from_host(uint32_t dtype, std::vector<int64_t> shape, int32_t device,
                                                   const void* data, bool data_stays) {
    if (data_stays) return std::make_unique<HostBuffer>(dtype, std::move(shape), device, data);
    auto buffer = std::make_unique<HostBuffer>(dtype, shape, device, host_memory_->acquire(bytes_of(dtype, shape)));
    std::memcpy(buffer->data(), data, buffer->bytes());
    return buffer;
  }
  // A copy of another library's device memory (ABI 3.7): `stream` is the
  // producer's; see buffer_from_device_data in backend_abi.h for the order.
  virtual std::unique_ptr<Buffer> buffer_from_device_data(uint32_t /*dtype*/, std::vector<int64_t> /*shape*/,
                                                          int32_t /*device*/, const void* /*data*/,
                                                          int32_t dlpack_device_type, uint64_t /*stream*/) {
    throw std::invalid_argument(
        "this backend keeps its data in host memory: it cannot take device memory (DLPack "
        "device type " +
        std::to_string(dlpack_device_type) + ") without a copy to the host first");
  }
  virtual void buffer_to_host(Buffer& buffer, void* destination) {
    const void* data = buffer.host_data();
    if (!data) throw std::logic_error("buffer_to_host: a device buffer reached the host-memory implementation");
    std::memcpy(destination, data, buffer.bytes());
  }
  virtual void synchronize(int32_t /*device*/) {}
  // Another library's `stream` made to wait for the device's queued work
  // (ABI 3.7); a host backend's work is done when its calls return.
  virtual void stream_wait_device(int32_t device, uint64_t /*stream*/) { synchronize(device); }
  // The device's later work made to wait for another library's `stream`
  // (ABI 3.7); nothing to order on a host backend.
  virtual void device_wait_stream(int32_t /*device*/, uint64_t /*stream*/) {}
  // The device's own ceilings; host backends leave them to the host (zeros)
  // and may declare measure_host_ceilings (HostCeilings) instead.
  virtual lazylab_ceilings measure_ceilings(int32_t /*device*/) {
    return lazylab_ceilings{sizeof(lazylab_ceilings), 0, 0, ""};
  }
  // The code this backend would generate for `program`; empty: it generates
  // none (it runs kernels written ahead of time).
  virtual std::string generated_code(const lazylab_program& /*program*/) { return ""; }

 protected:
  std::shared_ptr<HostMemoryPool> host_memory_ = std::make_shared<HostMemoryPool>();
};

namespace detail {

inline char* copy_error(const char* message) {
  size_t n = std::strlen(message) + 1;
  char* copy = static_cast<char*>(std::malloc(n));
  if (copy) std::memcpy(copy, message, n);
  return copy;
}

template <class Fn>
int guarded(char** error, Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::bad_alloc&) {
    if (error) *error = copy_error("out of memory");
  } catch (const std::exception& e) {
    if (error) *error = copy_error(e.what());
  } catch (...) {
    if (error) *error = copy_error("unknown exception in backend plugin");
  }
  return 1;
}

struct BackendHandle {
  std::unique_ptr<Backend> backend;
  std::string description;
  HostCeilings host_ceilings;  // the last measured: lazylab_host_ceilings' strings point into it
};

inline Backend& backend_of(lazylab_backend* handle) { return *reinterpret_cast<BackendHandle*>(handle)->backend; }
inline Buffer& buffer_of(lazylab_buffer* handle) { return *reinterpret_cast<Buffer*>(handle); }

inline void check_device(Backend& backend, int32_t device) {
  if (device < 0 || device >= backend.device_count())
    throw std::out_of_range("device " + std::to_string(device) + " out of range (" +
                            std::to_string(backend.device_count()) + " devices)");
}

// A backend declares its options as `static constexpr lazylab_option_spec
// kOptions[]` and takes them as `const BackendOptions&`; one without
// kOptions declares none (a BackendOptions constructor then refuses any).
template <class B, class = void>
struct DeclaredOptions {
  static constexpr const lazylab_option_spec* specs = nullptr;
  static constexpr uint32_t count = 0;
};
template <class B>
struct DeclaredOptions<B, std::void_t<decltype(B::kOptions)>> {
  static constexpr const lazylab_option_spec* specs = B::kOptions;
  static constexpr uint32_t count = static_cast<uint32_t>(std::size(B::kOptions));
};

// A backend that computes on the host's cores declares
// `HostCeilings measure_host_ceilings(bool quick)` (ABI 3.12); one without
// it leaves the entry NULL.
template <class B>
concept MeasuresHost = requires(B& backend) {
  { backend.measure_host_ceilings(true) } -> std::same_as<HostCeilings>;
};

template <class BackendClass>
lazylab_host_ceilings_fn host_ceilings_entry() {
  if constexpr (MeasuresHost<BackendClass>) {
    return [](lazylab_backend* backend, uint32_t quick, lazylab_host_ceilings* out, char** error) {
      return guarded(error, [&] {
        auto* handle = reinterpret_cast<BackendHandle*>(backend);
        handle->host_ceilings = static_cast<BackendClass&>(*handle->backend).measure_host_ceilings(quick != 0);
        const HostCeilings& measured = handle->host_ceilings;
        out->copy_gb_s = measured.copy_gb_s;
        out->elementwise_gop_s = measured.elementwise_gop_s;
        out->gemm_gflop_s = measured.gemm_gflop_s;
        out->gemm_library = measured.gemm_library.c_str();
        out->method = measured.method.c_str();
        out->peer_environment = measured.peer_environment.c_str();
      });
    };
  } else {
    return nullptr;
  }
}

template <class BackendClass>
std::unique_ptr<BackendClass> create_backend(const char* name, const char* text) {
  using Declared = DeclaredOptions<BackendClass>;
  if constexpr (std::is_constructible_v<BackendClass, const BackendOptions&>)
    return std::make_unique<BackendClass>(BackendOptions(name, Declared::specs, Declared::count, text ? text : ""));
  else
    return std::make_unique<BackendClass>(parse_options(text));
}

template <class BackendClass>
const lazylab_backend_api* make_api(const char* name, const char* summary) {
  static const char* const backend_name = name;
  static const lazylab_backend_api api = {
      sizeof(lazylab_backend_api),
      LAZYLAB_ABI_MAJOR,
      LAZYLAB_ABI_MINOR,
      name,
      summary,
      [](const char* options, char** error) -> lazylab_backend* {
        BackendHandle* handle = nullptr;
        guarded(error, [&] {
          auto owned = std::make_unique<BackendHandle>();
          owned->backend = create_backend<BackendClass>(backend_name, options);
          owned->description = owned->backend->device_description();
          handle = owned.release();
        });
        return reinterpret_cast<lazylab_backend*>(handle);
      },
      [](lazylab_backend* backend) { delete reinterpret_cast<BackendHandle*>(backend); },
      [](const lazylab_backend* backend, lazylab_capabilities* caps) {
        // The backend fills a table of the ops this plugin knows; the host's
        // may be shorter (an older host) or longer (a newer one).
        // The same for dtypes (ABI 3.13), which start as the five a backend
        // ran before then.
        uint8_t known[LAZYLAB_OP_COUNT] = {};
        uint8_t known_dtypes[LAZYLAB_DTYPE_COUNT] = {};
        for (uint32_t dtype = LAZYLAB_F32; dtype <= LAZYLAB_BOOL; ++dtype) known_dtypes[dtype] = 1;
        lazylab_capabilities mine{};
        mine.struct_size = sizeof mine;
        mine.num_ops = LAZYLAB_OP_COUNT;
        mine.supports_op = known;
        mine.num_dtypes = LAZYLAB_DTYPE_COUNT;
        mine.supports_dtype = known_dtypes;
        reinterpret_cast<const BackendHandle*>(backend)->backend->capabilities(mine);
        uint8_t* host_ops = caps->supports_op;
        uint32_t host_count = caps->num_ops;
        size_t size = std::min(caps->struct_size, sizeof mine);
        bool host_has_dtypes = size >= offsetof(lazylab_capabilities, supports_dtype) + sizeof(uint8_t*);
        uint8_t* host_dtypes = host_has_dtypes ? caps->supports_dtype : nullptr;
        uint32_t host_dtype_count = host_has_dtypes ? caps->num_dtypes : 0;
        std::memcpy(caps, &mine, size);
        caps->struct_size = size;
        caps->num_ops = host_count;
        caps->supports_op = host_ops;
        if (host_ops) std::memcpy(host_ops, known, std::min<uint32_t>(host_count, LAZYLAB_OP_COUNT));
        if (host_has_dtypes) {
          caps->num_dtypes = host_dtype_count;
          caps->supports_dtype = host_dtypes;
          if (host_dtypes)
            std::memcpy(host_dtypes, known_dtypes, std::min<uint32_t>(host_dtype_count, LAZYLAB_DTYPE_COUNT));
        }
      },
      [](const lazylab_backend* backend) {
        return reinterpret_cast<const BackendHandle*>(backend)->description.c_str();
      },
      [](const lazylab_backend* backend) {
        return reinterpret_cast<const BackendHandle*>(backend)->backend->device_count();
      },
      [](lazylab_backend* backend, lazylab_compile_args* args, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), args->device);
          args->executable = reinterpret_cast<lazylab_executable*>(
              backend_of(backend).compile(*args->program, args->device).release());
        });
      },
      [](lazylab_executable* executable) { delete reinterpret_cast<Executable*>(executable); },
      [](lazylab_backend*, lazylab_execute_args* args, char** error) {
        return guarded(error, [&] {
          std::vector<Buffer*> parameters;
          for (uint32_t i = 0; i < args->num_parameters; ++i) parameters.push_back(&buffer_of(args->parameters[i]));
          std::unique_ptr<Event> done;
          ExecuteOptions options;
          options.profile_kernels = lazylab_execute_args_profile(args);
          const uint8_t* donated = lazylab_execute_args_donated(args);
          uint8_t* taken = lazylab_execute_args_taken(args);
          if (donated && taken) {
            options.donated = std::span(donated, args->num_parameters);
            options.taken = std::span(taken, args->num_parameters);
          }
          auto outputs = reinterpret_cast<Executable*>(args->executable)
                             ->execute(parameters, args->done ? &done : nullptr, options);
          if (outputs.size() != args->num_outputs)
            throw std::logic_error("execute produced " + std::to_string(outputs.size()) +
                                   " outputs, the host expects " + std::to_string(args->num_outputs));
          for (uint32_t i = 0; i < args->num_outputs; ++i)
            args->outputs[i] = reinterpret_cast<lazylab_buffer*>(outputs[i].release());
          if (args->done) *args->done = reinterpret_cast<lazylab_event*>(done.release());
        });
      },
      [](lazylab_backend* backend, lazylab_buffer_from_host_args* args, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), args->device);
          auto buffer = backend_of(backend).buffer_from_host(
              args->dtype, std::vector<int64_t>(args->shape, args->shape + args->rank), args->device, args->data,
              args->host_data == LAZYLAB_HOST_DATA_STAYS);
          args->buffer = reinterpret_cast<lazylab_buffer*>(buffer.release());
        });
      },
      [](lazylab_backend* backend, lazylab_buffer* buffer, void* destination, char** error) {
        return guarded(error, [&] { backend_of(backend).buffer_to_host(buffer_of(buffer), destination); });
      },
      [](lazylab_buffer* buffer) { return buffer_of(buffer).host_data(); },
      [](lazylab_backend*, lazylab_buffer* buffer) { delete reinterpret_cast<Buffer*>(buffer); },
      [](lazylab_event* event, char** error) {
        return guarded(error, [&] { reinterpret_cast<Event*>(event)->wait(); });
      },
      [](lazylab_event* event) { return reinterpret_cast<Event*>(event)->elapsed_ms(); },
      [](lazylab_event* event) { delete reinterpret_cast<Event*>(event); },
      [](lazylab_backend* backend, int32_t device, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), device);
          backend_of(backend).synchronize(device);
        });
      },
      [](char* error) { std::free(error); },
      [](lazylab_backend* backend, int32_t device, lazylab_ceilings* out, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), device);
          lazylab_ceilings measured = backend_of(backend).measure_ceilings(device);
          out->copy_gb_s = measured.copy_gb_s;
          out->gemm_gflop_s = measured.gemm_gflop_s;
          out->method = measured.method;
        });
      },
      [](lazylab_event* event, double* ms, uint32_t capacity) -> uint32_t {
        std::vector<double> times;
        try {
          times = reinterpret_cast<Event*>(event)->kernel_ms();
        } catch (...) {
          return 0;
        }
        for (size_t k = 0; k < times.size() && k < capacity; ++k) ms[k] = times[k];
        return static_cast<uint32_t>(times.size());
      },
      [](lazylab_backend* backend, const lazylab_program* program, char** text, char** error) {
        return guarded(error, [&] {
          *text = copy_error(backend_of(backend).generated_code(*program).c_str());
          if (!*text) throw std::bad_alloc();
        });
      },
      [](lazylab_executable* executable, char** text, char** error) {
        return guarded(error, [&] {
          *text = copy_error(reinterpret_cast<const Executable*>(executable)->notes().c_str());
          if (!*text) throw std::bad_alloc();
        });
      },
      [](lazylab_buffer* buffer, void** data, int32_t* dlpack_device_type) -> int {
        Buffer::DeviceData device = buffer_of(buffer).device_data();
        *data = device.pointer;
        *dlpack_device_type = device.dlpack_device_type;
        return device.pointer ? 1 : 0;
      },
      [](lazylab_backend* backend, lazylab_buffer_from_device_args* args, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), args->device);
          auto buffer = backend_of(backend).buffer_from_device_data(
              args->dtype, std::vector<int64_t>(args->shape, args->shape + args->rank), args->device, args->data,
              args->dlpack_device_type, args->stream);
          args->buffer = reinterpret_cast<lazylab_buffer*>(buffer.release());
        });
      },
      [](lazylab_backend* backend, int32_t device, uint64_t stream, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), device);
          backend_of(backend).stream_wait_device(device, stream);
        });
      },
      [](lazylab_backend* backend, int32_t device, uint64_t stream, char** error) {
        return guarded(error, [&] {
          check_device(backend_of(backend), device);
          backend_of(backend).device_wait_stream(device, stream);
        });
      },
      DeclaredOptions<BackendClass>::specs,
      DeclaredOptions<BackendClass>::count,
      host_ceilings_entry<BackendClass>(),
  };
  return &api;
}

}  // namespace detail
}  // namespace lazylab::plugin

// Exports the entry point. The host checks the ABI version in the table.
#define LAZYLAB_DEFINE_BACKEND(BackendClass, name, summary)                                           \
  extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry( \
      uint32_t /*host_major*/, uint32_t /*host_minor*/) {                                             \
    return ::lazylab::plugin::detail::make_api<BackendClass>(name, summary);                          \
  }

#endif
