// Backends loaded at run time from .so plugins through the C ABI of
// plugins/include/lazylab/backend_abi.h (version 2: data in backend-owned
// buffers, on the backend's devices).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "buffer.h"
#include "expected.h"
#include "lazylab/backend_abi.h"
#include "op_info.h"
#include "program.h"

namespace lazylab {

class PluginLibrary;
struct BackendInstance;  // the plugin's backend object; lives while anything made from it does

// An array in a backend's memory (device or host), destroyed through the
// plugin when the last reference goes.
class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<BackendInstance> backend, lazylab_buffer* handle, TensorType type, int32_t device,
               BufferPtr host_data);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  lazylab_buffer* handle() const { return handle_; }
  const TensorType& type() const { return type_; }
  int32_t device() const { return device_; }
  // Where the data lies in device memory, for a DLPack exchange without a
  // copy (ABI 3.6); none for host memory or a backend that cannot say.
  struct DeviceData {
    void* pointer = nullptr;
    int32_t dlpack_device_type = 0;
  };
  std::optional<DeviceData> device_data() const;
  // The host address of data in host memory (complete once the backend's
  // work writing it is: Backend::synchronize), else null.
  const void* host_data() const;
  // The device's later work (this buffer's release among it) made to wait
  // for what another library queued on `stream` so far: its reads of the
  // buffer, shared through DLPack (ABI 3.7; nothing where the plugin has
  // no such entry).
  Status wait_for_stream(uint64_t stream) const;

 private:
  std::shared_ptr<BackendInstance> backend_;
  lazylab_buffer* handle_;
  TensorType type_;
  int32_t device_;
  BufferPtr host_data_;  // host memory the plugin may alias: kept alive and unchanged
};
using DeviceBufferPtr = std::shared_ptr<DeviceBuffer>;

// The completion of one execution.
class DeviceEvent {
 public:
  DeviceEvent(std::shared_ptr<BackendInstance> backend, lazylab_event* handle);
  ~DeviceEvent();
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  Status wait();
  // Device milliseconds of the execution (after wait); negative when unknown.
  double elapsed_ms() const;
  // Milliseconds per kernel in the Program's order (after wait), for an
  // execution run with profile_kernels; empty when the backend gave none.
  std::vector<double> kernel_ms() const;

 private:
  std::shared_ptr<BackendInstance> backend_;
  lazylab_event* handle_;
};

class Executable {
 public:
  Executable(std::shared_ptr<BackendInstance> backend, lazylab_executable* handle, std::vector<TensorType> output_types,
             int32_t device);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Parameters by ordinal, on this executable's device; one new buffer per
  // output. May return before the device is done; `done` (when given)
  // receives the execution's completion, with per-kernel times when
  // `profile_kernels` asks for them and the backend can (ABI 2.2).
  // `donated` (empty, or one entry per parameter): nonzero where the caller
  // gives that parameter's buffer up with this call, so that an output may
  // take its memory (ABI 3.8); `taken` (the same size) says where one did.
  Expected<std::vector<DeviceBufferPtr>> execute(std::span<const DeviceBuffer* const> parameters,
                                                 std::unique_ptr<DeviceEvent>* done, bool profile_kernels = false,
                                                 std::span<const uint8_t> donated = {}, std::span<uint8_t> taken = {});
  // What the backend decided compiling it (ABI 3.5), a line each; none from
  // an older plugin.
  Expected<std::vector<std::string>> notes() const;

 private:
  std::shared_ptr<BackendInstance> backend_;
  lazylab_executable* handle_;
  std::vector<TensorType> output_types_;
  int32_t device_;
};

// The host's ceilings as a host backend measured them (ABI 3.12,
// lazylab_host_ceilings says what each is), its strings copied.
struct HostCeilings {
  double copy_gb_s = 0, elementwise_gop_s = 0, gemm_gflop_s = 0;
  std::string gemm_library, method;
  std::vector<std::string> peer_environment;  // NAME=value
};

class Backend {
 public:
  Backend(std::shared_ptr<BackendInstance> instance, std::string path, const std::string& options,
          std::string device_description);
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  std::string summary() const;
  // What create() made, as the plugin described it when it was loaded.
  const std::string& device_description() const { return device_description_; }
  int32_t device_count() const;
  const lazylab_capabilities& capabilities() const { return capabilities_; }
  // Whether it computes in the dtype (ABI 3.13; an older plugin: the five
  // dtypes before bf16).
  bool runs_dtype(DType dtype) const;
  // Part of the cache key: the backend's name and options.
  uint64_t fingerprint() const { return fingerprint_; }

  // Checks the Program against the declared capabilities, then compiles.
  Expected<std::unique_ptr<Executable>> compile(const Program& program, const Graph& graph, int32_t device = 0);
  // An error naming the first op the backend says it cannot run, or whose
  // dtype it does not compute in.
  Status check_supported(const Program& program, const Graph& graph) const;

  // Host data into a backend buffer on `device`. The buffer keeps `data`
  // alive and the plugin may alias it (host backends do: no copy), so it
  // must not change afterwards.
  Expected<DeviceBufferPtr> upload(const TensorType& type, BufferPtr data, int32_t device = 0);
  // A copy, made on the device, of another library's device memory (a CUDA
  // tensor's, through DLPack; ABI 3.7): after the work queued on the
  // producer's `stream`, and before what it queues next.
  struct DeviceMemory {
    const void* data = nullptr;
    int32_t dlpack_device_type = 0;
    int32_t device = 0;
    uint64_t stream = 0;
  };
  Expected<DeviceBufferPtr> copy_device_memory(const TensorType& type, const DeviceMemory& memory);
  // The buffer's data on the host, once the work writing it is complete: a
  // view of it when it is in host memory, else a copy.
  Expected<BufferPtr> download(const DeviceBufferPtr& buffer);
  Status synchronize(int32_t device = 0);
  // Another library's `stream` (a CUstream) made to wait for the work queued
  // on `device` so far (ABI 3.7); a plugin that cannot is synchronized.
  Status stream_wait_device(int32_t device, uint64_t stream);
  // The device's ceilings as the backend measures them (zeros where it
  // measures none: host backends, plugins older than ABI 2.1).
  Expected<lazylab_ceilings> measure_ceilings(int32_t device = 0);
  // Whether the backend measures the host's ceilings (ABI 3.12: one that
  // computes on the host's cores), and those ceilings: the best of several
  // trials, or with `quick` one trial of the copy and the product.
  bool measures_host() const;
  Expected<HostCeilings> measure_host_ceilings(bool quick);
  // The code the backend generates for the Program (empty: none); an error
  // for a plugin older than ABI 3.2, which cannot say.
  Expected<std::string> generated_code(const Program& program, const Graph& graph);

 private:
  void point_at_host_tables();
  std::optional<DType> dtype_not_run(const Graph& graph, NodeId id) const;

  std::shared_ptr<BackendInstance> instance_;
  std::string name_, path_;
  lazylab_capabilities capabilities_{};
  std::array<uint8_t, kNumOps> supported_ops_{};                 // capabilities_.supports_op
  std::array<uint8_t, LAZYLAB_DTYPE_COUNT> supported_dtypes_{};  // capabilities_.supports_dtype
  uint64_t fingerprint_ = 0;
  std::string device_description_;
};

struct PluginSearch {
  // Where `load_backend` looks for "lazylab-backend-NAME.so", in order:
  // LAZYLAB_PLUGIN_PATH (colon-separated), then the shipped plugins: those of
  // the build tree when this liblazylab is the build tree's, else the
  // `lazylab` folder beside the installed library (LIBDIR/lazylab), so an
  // installed lazylab never sees a build tree and a moved or staged
  // (DESTDIR) install still finds its own plugins.
  static std::vector<std::string> directories();
  // The shipped plugins' folders alone.
  static std::vector<std::string> shipped_directories();
  // The folder this liblazylab was loaded from.
  static std::string library_directory();
};

// The file load_backend(name_or_path) would open.
Expected<std::string> find_backend_file(const std::string& name_or_path);

// Whether `path` is a backend lazylab ships (interp, cpu and cuda, as this
// build made them) in lazylab's own plugin folder. A run loads and runs any
// other plugin in child processes, so that one that crashes cannot take
// the run down (runner.h: Containment).
bool is_shipped_backend(const std::string& path);

// `name_or_path`: a backend name ("interp") or a path to a .so file.
// `options`: "key=value,...", checked against what the plugin declares and
// passed to its create() spelled out (backend_options.h).
Expected<std::unique_ptr<Backend>> load_backend(const std::string& name_or_path, const std::string& options = "");

struct BackendListing {
  std::string name, path, summary, device;
  std::string problem;               // why it cannot be loaded, if it cannot
  std::vector<std::string> options;  // what it declares, one line each (describe_options)
};
// Each backend name once, with the file load_backend(name) would open; loads
// nothing.
std::vector<BackendListing> find_backend_plugins();
// Loads the plugin file (dlopen, its entry point, the ABI checks) and
// returns its one-line summary, creating nothing.
Expected<std::string> backend_library_summary(const std::string& path);
// ... and the options it declares, one line each: "name=default  (kind) summary".
Expected<std::vector<std::string>> backend_library_options(const std::string& path);
// Loads `listing`'s plugin and creates an instance (default options) in this
// process, filling in its summary and device, or the problem (with the
// summary where the plugin loads but cannot create an instance here). A plugin that
// crashes takes the process with it: `lazylab backends` probes each in a
// child.
void probe_backend(BackendListing& listing);

}  // namespace lazylab
