#include "core/backend.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include <boost/container/small_vector.hpp>

#include "core/backend_options.h"
#include "core/hash.h"
#include "core/program_view.h"
#include "core/suggest.h"
#include "core/text_format.h"

#ifndef LAZYLAB_BUILD_ROOT
#define LAZYLAB_BUILD_ROOT ""
#endif
#ifndef LAZYLAB_SHIPPED_BACKENDS  // "interp,cpu,cuda": the backends this build makes (meson)
#define LAZYLAB_SHIPPED_BACKENDS ""
#endif

namespace fs = std::filesystem;

namespace lazylab {

class PluginLibrary {
 public:
  PluginLibrary(void* handle, const lazylab_backend_api* api) : handle_(handle), api_(api) {}
  ~PluginLibrary() { dlclose(handle_); }
  const lazylab_backend_api& api() const { return *api_; }

  // Takes a plugin-allocated error string and turns it into an Error.
  Error take_error(char* message, const std::string& context) const {
    std::string text = message ? message : "failed without a message (its error string was NULL)";
    if (message) api_->free_error(message);
    return make_error(fmt::format("{}: {}", context, text));
  }

 private:
  void* handle_;
  const lazylab_backend_api* api_;
};

struct BackendInstance {
  BackendInstance(std::shared_ptr<const PluginLibrary> owner, lazylab_backend* backend)
      : library(std::move(owner)), handle(backend), name(library->api().name) {}
  ~BackendInstance() { library->api().destroy(handle); }
  BackendInstance(const BackendInstance&) = delete;
  BackendInstance& operator=(const BackendInstance&) = delete;
  std::shared_ptr<const PluginLibrary> library;
  lazylab_backend* handle;
  std::string name;
  const lazylab_backend_api& api() const { return library->api(); }
  Error take_error(char* message, const std::string& context) const {
    return library->take_error(message, fmt::format("backend {}: {}", name, context));
  }
};

namespace {

std::string plugin_file_name(const std::string& name) { return "lazylab-backend-" + name + ".so"; }

bool looks_like_path(const std::string& text) { return text.find('/') != std::string::npos || text.ends_with(".so"); }

Expected<std::string> find_plugin(const std::string& name) {
  std::vector<std::string> dirs = PluginSearch::directories();
  for (const std::string& dir : dirs) {
    fs::path candidate = fs::path(dir) / plugin_file_name(name);
    if (fs::exists(candidate)) return candidate.string();
  }
  std::vector<std::string> found;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
      std::string file = entry.path().filename().string();
      if (file.starts_with("lazylab-backend-") && file.ends_with(".so"))
        found.push_back(file.substr(16, file.size() - 19));
    }
  }
  return make_error(fmt::format("backend '{}': no {} in the plugin path [{}]{}", name, plugin_file_name(name),
                                fmt::join(dirs, ", "), did_you_mean(name, found)));
}

// Plugins of an older major version return no table to this host; asking
// as their own version tells which one they speak. Every version's table
// starts with struct_size, abi_major and abi_minor.
std::string refused_version(lazylab_backend_entry_fn entry) {
  for (uint32_t major = 1; major < LAZYLAB_ABI_MAJOR; ++major)
    if (const lazylab_backend_api* old = entry(major, 0))
      return fmt::format("it was built for plugin ABI {}.{}, this lazylab speaks {}.{}; rebuild it", old->abi_major,
                         old->abi_minor, LAZYLAB_ABI_MAJOR, LAZYLAB_ABI_MINOR);
  return "its entry point returned no API (it refused this host's ABI version)";
}

// ABI 3.0's table: later minor versions append optional entries, which the
// host reads only where the plugin's struct_size covers them.
constexpr size_t kMinimumApiBytes = offsetof(lazylab_backend_api, event_kernel_times) + sizeof(void*);

template <class Entry>
bool has_optional_entry(const lazylab_backend_api& api, size_t offset, Entry entry) {
  return api.struct_size >= offset + sizeof(void*) && entry != nullptr;
}

// The name of the first entry of the table that is missing, or empty.
std::string missing_entry(const lazylab_backend_api& api) {
  const std::pair<const void*, const char*> entries[] = {
      {api.name, "name"},
      {api.summary, "summary"},
      {reinterpret_cast<const void*>(api.create), "create"},
      {reinterpret_cast<const void*>(api.destroy), "destroy"},
      {reinterpret_cast<const void*>(api.capabilities), "capabilities"},
      {reinterpret_cast<const void*>(api.device_description), "device_description"},
      {reinterpret_cast<const void*>(api.device_count), "device_count"},
      {reinterpret_cast<const void*>(api.compile), "compile"},
      {reinterpret_cast<const void*>(api.destroy_executable), "destroy_executable"},
      {reinterpret_cast<const void*>(api.execute), "execute"},
      {reinterpret_cast<const void*>(api.buffer_from_host), "buffer_from_host"},
      {reinterpret_cast<const void*>(api.buffer_to_host), "buffer_to_host"},
      {reinterpret_cast<const void*>(api.buffer_host_data), "buffer_host_data"},
      {reinterpret_cast<const void*>(api.buffer_destroy), "buffer_destroy"},
      {reinterpret_cast<const void*>(api.event_wait), "event_wait"},
      {reinterpret_cast<const void*>(api.event_elapsed_ms), "event_elapsed_ms"},
      {reinterpret_cast<const void*>(api.event_destroy), "event_destroy"},
      {reinterpret_cast<const void*>(api.synchronize), "synchronize"},
      {reinterpret_cast<const void*>(api.free_error), "free_error"},
  };
  for (auto [entry, name] : entries)
    if (!entry) return name;
  return "";
}

Expected<std::shared_ptr<PluginLibrary>> open_library(const std::string& path) {
  if (!fs::exists(path)) return make_error(fmt::format("backend plugin {}: no such file", path));
  // RTLD_NODELETE: a plugin stays mapped until exit even after dlclose, since
  // threads it started (TBB, OpenBLAS workers) may outlive its last backend.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) return make_error(fmt::format("backend plugin {}: cannot load: {}", path, dlerror()));
  auto entry = reinterpret_cast<lazylab_backend_entry_fn>(dlsym(handle, LAZYLAB_BACKEND_ENTRY));
  if (!entry) {
    dlclose(handle);
    return make_error(fmt::format("backend plugin {}: missing entry point '{}' (not a lazylab backend plugin?)", path,
                                  LAZYLAB_BACKEND_ENTRY));
  }
  const lazylab_backend_api* api = entry(LAZYLAB_ABI_MAJOR, LAZYLAB_ABI_MINOR);
  std::string problem;
  if (!api)
    problem = refused_version(entry);
  else if (api->abi_major != LAZYLAB_ABI_MAJOR)
    problem = fmt::format("it was built for plugin ABI {}.{}, this lazylab speaks {}.{}; rebuild it", api->abi_major,
                          api->abi_minor, LAZYLAB_ABI_MAJOR, LAZYLAB_ABI_MINOR);
  else if (api->struct_size < kMinimumApiBytes)
    problem = fmt::format("its API table has {} bytes, ABI {}.0 needs {}", api->struct_size, LAZYLAB_ABI_MAJOR,
                          kMinimumApiBytes);
  else if (std::string missing = missing_entry(*api); !missing.empty())
    problem = fmt::format("its API table has no '{}'", missing);
  else if (Status declared = check_declared_options(*api); !declared)
    problem = declared.error().message;
  if (!problem.empty()) {
    dlclose(handle);
    return make_error(fmt::format("backend plugin {}: {}", path, problem));
  }
  return std::make_shared<PluginLibrary>(handle, api);
}

}  // namespace

std::string PluginSearch::library_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PluginSearch::library_directory), &info) == 0 || !info.dli_fname) return {};
  std::error_code ec;
  fs::path library = fs::weakly_canonical(info.dli_fname, ec);
  return ec ? std::string() : library.parent_path().string();
}

std::vector<std::string> PluginSearch::shipped_directories() {
  std::vector<std::string> dirs;
  std::error_code ec;
  fs::path library_dir = library_directory();
  fs::path build_root = fs::weakly_canonical(LAZYLAB_BUILD_ROOT, ec);
  if (!library_dir.empty() && !ec && library_dir == build_root) {
    for (const auto& entry : fs::directory_iterator(build_root / "backends", ec))
      if (entry.is_directory()) dirs.push_back(entry.path().string());
  } else if (!library_dir.empty()) {
    dirs.push_back((library_dir / "lazylab").string());
  }
  return dirs;
}

std::vector<std::string> PluginSearch::directories() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LAZYLAB_PLUGIN_PATH")) {
    std::stringstream stream(env);
    for (std::string dir; std::getline(stream, dir, ':');)
      if (!dir.empty()) dirs.push_back(dir);
  }
  for (std::string& dir : shipped_directories()) dirs.push_back(std::move(dir));
  // A folder named twice (the path set twice, or also the build tree) is
  // searched once, where it first appears.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& dir : dirs) {
    std::error_code canonical_ec;
    fs::path canonical = fs::weakly_canonical(dir, canonical_ec);
    if (seen.insert(canonical_ec ? dir : canonical.string()).second) unique.push_back(dir);
  }
  return unique;
}

DeviceBuffer::DeviceBuffer(std::shared_ptr<BackendInstance> backend, lazylab_buffer* handle, TensorType type,
                           int32_t device, BufferPtr host_data)
    : backend_(std::move(backend)),
      handle_(handle),
      type_(std::move(type)),
      device_(device),
      host_data_(std::move(host_data)) {}

DeviceBuffer::~DeviceBuffer() { backend_->api().buffer_destroy(backend_->handle, handle_); }

std::optional<DeviceBuffer::DeviceData> DeviceBuffer::device_data() const {
  const lazylab_backend_api& api = backend_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, buffer_device_data), api.buffer_device_data))
    return std::nullopt;
  DeviceData data;
  if (!api.buffer_device_data(handle_, &data.pointer, &data.dlpack_device_type) || !data.pointer) return std::nullopt;
  return data;
}

const void* DeviceBuffer::host_data() const { return backend_->api().buffer_host_data(handle_); }

Status DeviceBuffer::wait_for_stream(uint64_t stream) const {
  const lazylab_backend_api& api = backend_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, device_wait_stream), api.device_wait_stream)) return {};
  char* error = nullptr;
  if (api.device_wait_stream(backend_->handle, device_, stream, &error) != 0)
    return backend_->take_error(error, "device_wait_stream");
  return {};
}

DeviceEvent::DeviceEvent(std::shared_ptr<BackendInstance> backend, lazylab_event* handle)
    : backend_(std::move(backend)), handle_(handle) {}

DeviceEvent::~DeviceEvent() { backend_->api().event_destroy(handle_); }

Status DeviceEvent::wait() {
  char* error = nullptr;
  if (backend_->api().event_wait(handle_, &error) != 0) return backend_->take_error(error, "wait");
  return {};
}

double DeviceEvent::elapsed_ms() const { return backend_->api().event_elapsed_ms(handle_); }

std::vector<double> DeviceEvent::kernel_ms() const {
  const lazylab_backend_api& api = backend_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, event_kernel_times), api.event_kernel_times)) return {};
  std::vector<double> times(64);
  uint32_t count = api.event_kernel_times(handle_, times.data(), static_cast<uint32_t>(times.size()));
  if (count > times.size()) {
    times.resize(count);
    count = api.event_kernel_times(handle_, times.data(), count);
  }
  times.resize(std::min<size_t>(count, times.size()));
  return times;
}

Executable::Executable(std::shared_ptr<BackendInstance> backend, lazylab_executable* handle,
                       std::vector<TensorType> output_types, int32_t device)
    : backend_(std::move(backend)), handle_(handle), output_types_(std::move(output_types)), device_(device) {}

Executable::~Executable() { backend_->api().destroy_executable(handle_); }

Expected<std::vector<std::string>> Executable::notes() const {
  const lazylab_backend_api& api = backend_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, executable_notes), api.executable_notes))
    return std::vector<std::string>{};
  char *text = nullptr, *error = nullptr;
  if (api.executable_notes(handle_, &text, &error) != 0) return backend_->take_error(error, "executable notes");
  std::vector<std::string> lines;
  std::istringstream in(text ? text : "");
  api.free_error(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

Expected<std::vector<DeviceBufferPtr>> Executable::execute(std::span<const DeviceBuffer* const> parameters,
                                                           std::unique_ptr<DeviceEvent>* done, bool profile_kernels,
                                                           std::span<const uint8_t> donated, std::span<uint8_t> taken) {
  boost::container::small_vector<lazylab_buffer*, 8> inputs;
  for (const DeviceBuffer* parameter : parameters) inputs.push_back(parameter->handle());
  boost::container::small_vector<lazylab_buffer*, 8> outputs(output_types_.size(), nullptr);
  lazylab_event* event = nullptr;
  lazylab_execute_args args{sizeof(lazylab_execute_args),
                            handle_,
                            static_cast<uint32_t>(inputs.size()),
                            inputs.data(),
                            static_cast<uint32_t>(outputs.size()),
                            outputs.data(),
                            done ? &event : nullptr,
                            profile_kernels ? 1u : 0u,
                            donated.size() == inputs.size() ? donated.data() : nullptr,
                            taken.size() == inputs.size() ? taken.data() : nullptr};
  char* error = nullptr;
  if (backend_->api().execute(backend_->handle, &args, &error) != 0) return backend_->take_error(error, "execute");
  std::vector<DeviceBufferPtr> results;
  for (size_t i = 0; i < outputs.size(); ++i)
    results.push_back(std::make_shared<DeviceBuffer>(backend_, outputs[i], output_types_[i], device_, nullptr));
  if (done && event) *done = std::make_unique<DeviceEvent>(backend_, event);
  return results;
}

Backend::Backend(std::shared_ptr<BackendInstance> instance, std::string path, const std::string& options,
                 std::string device_description)
    : instance_(std::move(instance)),
      name_(instance_->name),
      path_(std::move(path)),
      device_description_(std::move(device_description)) {
  // The name alone would let two option sets share cache entries.
  std::string identity = name_ + "|" + options;
  fingerprint_ = hash_bytes(identity.data(), identity.size());
  capabilities_.struct_size = sizeof(lazylab_capabilities);
  // A backend of an older minor version runs the dtypes there were before
  // 3.13, and does not write this table.
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool})
    supported_dtypes_[dtype_id(dtype)] = 1;
  point_at_host_tables();
  instance_->api().capabilities(instance_->handle, &capabilities_);
  point_at_host_tables();  // a plugin must not move the host's tables
}

void Backend::point_at_host_tables() {
  capabilities_.num_ops = kNumOps;
  capabilities_.supports_op = supported_ops_.data();
  capabilities_.num_dtypes = LAZYLAB_DTYPE_COUNT;
  capabilities_.supports_dtype = supported_dtypes_.data();
}

bool Backend::runs_dtype(DType dtype) const { return supported_dtypes_[dtype_id(dtype)] != 0; }

std::string Backend::summary() const { return instance_->api().summary; }

int32_t Backend::device_count() const { return instance_->api().device_count(instance_->handle); }

// The dtype of the node's result or operands that the backend does not run.
std::optional<DType> Backend::dtype_not_run(const Graph& graph, NodeId id) const {
  const Node& node = graph.node(id);
  if (!runs_dtype(node.type.dtype)) return node.type.dtype;
  for (NodeId operand : node.operands)
    if (DType dtype = graph.node(operand).type.dtype; !runs_dtype(dtype)) return dtype;
  return std::nullopt;
}

Status Backend::check_supported(const Program& program, const Graph& graph) const {
  for (const Kernel& kernel : program.kernels) {
    if (kernel.description.kind == KernelKind::Attention) {
      const Attention& a = kernel.description.attention;
      if (std::max(a.d, a.dv) > capabilities_.attention_max_head_dim)
        return make_error(fmt::format(
            "backend {} cannot run the attention kernel ending at %{} (head dims {} and {}; it runs {}): fuse "
            "for this backend (lazylab passes its capabilities to fusion)",
            name_, a.output, a.d, a.dv,
            capabilities_.attention_max_head_dim ? fmt::format("up to {}", capabilities_.attention_max_head_dim)
                                                 : std::string("none")));
      if (a.mask != kNoNode && !capabilities_.attention_masks)
        return make_error(fmt::format(
            "backend {} cannot run the attention kernel ending at %{} with its mask %{} read from memory: fuse for "
            "this backend (lazylab passes its capabilities to fusion)",
            name_, a.output, a.mask));
      if (a.through_views && !capabilities_.attention_views)
        return make_error(fmt::format(
            "backend {} cannot run the attention kernel ending at %{} through the layout ops around it (ABI "
            "3.16's attention_views): fuse for this backend (lazylab passes its capabilities to fusion)",
            name_, a.output));
      if (a.dtype != DType::F32 && !capabilities_.attention_16_bit)
        return make_error(fmt::format(
            "backend {} cannot run the attention kernel ending at %{} in {} (it runs attention in f32): fuse for "
            "this backend (lazylab passes its capabilities to fusion)",
            name_, a.output, dtype_name(a.dtype)));
    }
    if (!capabilities_.reads_row_groups)
      for (const ValueAccess& a : kernel.description.accesses)
        if (a.kind == Access::RowGroup)
          return make_error(fmt::format(
              "backend {} cannot read %{} as a group of rows (ABI 3.10) in the kernel ending at %{}: fuse for this "
              "backend (lazylab passes its capabilities to fusion)",
              name_, a.source, kernel.ops.empty() ? 0 : kernel.ops.back()));
    for (NodeId id : kernel.ops) {
      if (auto dtype = dtype_not_run(graph, id))
        return make_error(fmt::format("backend {} does not compute in {} (%{} = {})", name_, dtype_name(*dtype), id,
                                      print_node(graph, id)));
      OpId op = graph.node(id).op;
      if (capabilities_.supports_op[static_cast<int>(op)]) continue;
      bool composite = op_info(op).category == OpCategory::Composite;
      return make_error(fmt::format("backend {} cannot run op '{}' (%{} = {}){}", name_, op_name(op), id,
                                    print_node(graph, id), composite ? "; add 'decompose' to the pipeline" : ""));
    }
  }
  return {};
}

Expected<std::unique_ptr<Executable>> Backend::compile(const Program& program, const Graph& graph, int32_t device) {
  LAZYLAB_TRY(check_supported(program, graph));
  ProgramView view(program, graph);
  lazylab_compile_args args{sizeof(lazylab_compile_args), &view.get(), device, nullptr};
  char* error = nullptr;
  if (instance_->api().compile(instance_->handle, &args, &error) != 0) return instance_->take_error(error, "compile");
  std::vector<TensorType> output_types;
  for (NodeId root : graph.roots()) output_types.push_back(graph.node(root).type);
  return std::make_unique<Executable>(instance_, args.executable, std::move(output_types), device);
}

Expected<DeviceBufferPtr> Backend::upload(const TensorType& type, BufferPtr data, int32_t device) {
  lazylab_buffer_from_host_args args{sizeof(lazylab_buffer_from_host_args),
                                     static_cast<uint32_t>(type.dtype),
                                     static_cast<uint32_t>(type.shape.size()),
                                     type.shape.data(),
                                     device,
                                     data->data(),
                                     LAZYLAB_HOST_DATA_STAYS,
                                     nullptr};
  char* error = nullptr;
  if (instance_->api().buffer_from_host(instance_->handle, &args, &error) != 0)
    return instance_->take_error(error, fmt::format("buffer from host ({})", to_string(type)));
  return std::make_shared<DeviceBuffer>(instance_, args.buffer, type, device, std::move(data));
}

Expected<DeviceBufferPtr> Backend::copy_device_memory(const TensorType& type, const DeviceMemory& memory) {
  const lazylab_backend_api& api = instance_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, buffer_from_device_data), api.buffer_from_device_data))
    return make_error(
        fmt::format("backend {} (plugin ABI {}.{}) cannot take device memory (DLPack device type {}); "
                    "copy it to the host first",
                    name_, api.abi_major, api.abi_minor, memory.dlpack_device_type));
  lazylab_buffer_from_device_args args{sizeof(lazylab_buffer_from_device_args),
                                       static_cast<uint32_t>(type.dtype),
                                       static_cast<uint32_t>(type.shape.size()),
                                       type.shape.data(),
                                       memory.device,
                                       memory.data,
                                       memory.dlpack_device_type,
                                       memory.stream,
                                       nullptr};
  char* error = nullptr;
  if (api.buffer_from_device_data(instance_->handle, &args, &error) != 0)
    return instance_->take_error(error, fmt::format("buffer from device memory ({})", to_string(type)));
  return std::make_shared<DeviceBuffer>(instance_, args.buffer, type, memory.device, nullptr);
}

Expected<BufferPtr> Backend::download(const DeviceBufferPtr& buffer) {
  size_t bytes = buffer->type().bytes();
  if (const void* host = instance_->api().buffer_host_data(buffer->handle())) {
    LAZYLAB_TRY(synchronize(buffer->device()));
    return std::make_shared<Buffer>(static_cast<std::byte*>(const_cast<void*>(host)), bytes, buffer);
  }
  BufferPtr copy;
  try {
    copy = std::make_shared<Buffer>(bytes);
  } catch (const std::bad_alloc&) {
    return make_error(fmt::format("cannot allocate {} bytes on the host for {}", bytes, to_string(buffer->type())));
  }
  char* error = nullptr;
  if (instance_->api().buffer_to_host(instance_->handle, buffer->handle(), copy->data(), &error) != 0)
    return instance_->take_error(error, fmt::format("buffer to host ({})", to_string(buffer->type())));
  return copy;
}

Expected<lazylab_ceilings> Backend::measure_ceilings(int32_t device) {
  lazylab_ceilings ceilings{sizeof(lazylab_ceilings), 0, 0, ""};
  const lazylab_backend_api& api = instance_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, measure_ceilings), api.measure_ceilings)) return ceilings;
  char* error = nullptr;
  if (api.measure_ceilings(instance_->handle, device, &ceilings, &error) != 0)
    return instance_->take_error(error, "measure ceilings");
  if (!ceilings.method) ceilings.method = "";
  return ceilings;
}

bool Backend::measures_host() const {
  const lazylab_backend_api& api = instance_->api();
  return has_optional_entry(api, offsetof(lazylab_backend_api, measure_host_ceilings), api.measure_host_ceilings);
}

Expected<HostCeilings> Backend::measure_host_ceilings(bool quick) {
  if (!measures_host())
    return make_error(fmt::format("backend {} does not measure the host's ceilings (that needs ABI 3.12)", name_));
  lazylab_host_ceilings out{sizeof(lazylab_host_ceilings), 0, 0, 0, nullptr, nullptr, nullptr};
  char* error = nullptr;
  if (instance_->api().measure_host_ceilings(instance_->handle, quick ? 1 : 0, &out, &error) != 0)
    return instance_->take_error(error, "measure host ceilings");
  for (const char* text : {out.gemm_library, out.method, out.peer_environment})
    if (!text) return make_error(fmt::format("backend {}: measure_host_ceilings left a string NULL", name_));
  HostCeilings ceilings{out.copy_gb_s, out.elementwise_gop_s, out.gemm_gflop_s, out.gemm_library, out.method, {}};
  std::istringstream lines(out.peer_environment);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) ceilings.peer_environment.push_back(line);
  return ceilings;
}

Expected<std::string> Backend::generated_code(const Program& program, const Graph& graph) {
  const lazylab_backend_api& api = instance_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, generated_code), api.generated_code))
    return make_error(fmt::format("backend {} (plugin ABI {}.{}) cannot show its generated code: that needs ABI 3.2",
                                  name_, api.abi_major, api.abi_minor));
  ProgramView view(program, graph);
  char *text = nullptr, *error = nullptr;
  if (api.generated_code(instance_->handle, &view.get(), &text, &error) != 0)
    return instance_->take_error(error, "generated code");
  std::string code = text ? text : "";
  api.free_error(text);
  return code;
}

Status Backend::synchronize(int32_t device) {
  char* error = nullptr;
  if (instance_->api().synchronize(instance_->handle, device, &error) != 0)
    return instance_->take_error(error, "synchronize");
  return {};
}

Status Backend::stream_wait_device(int32_t device, uint64_t stream) {
  const lazylab_backend_api& api = instance_->api();
  if (!has_optional_entry(api, offsetof(lazylab_backend_api, stream_wait_device), api.stream_wait_device))
    return synchronize(device);
  char* error = nullptr;
  if (api.stream_wait_device(instance_->handle, device, stream, &error) != 0)
    return instance_->take_error(error, "stream_wait_device");
  return {};
}

Expected<std::string> find_backend_file(const std::string& name_or_path) {
  if (looks_like_path(name_or_path)) return name_or_path;
  return find_plugin(name_or_path);
}

bool is_shipped_backend(const std::string& path) {
  std::error_code ec;
  fs::path file = fs::weakly_canonical(path, ec);
  if (ec) return false;
  std::string name = file.filename().string();
  bool shipped_name = false;
  std::stringstream names(LAZYLAB_SHIPPED_BACKENDS);
  for (std::string shipped; std::getline(names, shipped, ',');)
    shipped_name = shipped_name || name == plugin_file_name(shipped);
  if (!shipped_name) return false;
  for (const std::string& dir : PluginSearch::shipped_directories()) {
    std::error_code dir_ec;
    if (fs::weakly_canonical(dir, dir_ec) == file.parent_path() && !dir_ec) return true;
  }
  return false;
}

Expected<std::unique_ptr<Backend>> load_backend(const std::string& name_or_path, const std::string& options) {
  auto found = find_backend_file(name_or_path);
  if (!found) return found.error();
  std::string path = *found;
  auto library = open_library(path);
  if (!library) return library.error();
  auto canonical = canonical_options((*library)->api(), options);
  if (!canonical) return canonical.error();
  char* error = nullptr;
  lazylab_backend* handle = (*library)->api().create(canonical->c_str(), &error);
  if (!handle) return (*library)->take_error(error, fmt::format("backend plugin {}: create", path));
  auto instance = std::make_shared<BackendInstance>(*library, handle);
  // Every string a plugin hands back is checked before it becomes one of
  // ours (a NULL one aborted lazylab in std::string's constructor).
  const char* device = instance->api().device_description(handle);
  if (!device) return make_error(fmt::format("backend plugin {}: device_description returned NULL", path));
  return std::make_unique<Backend>(std::move(instance), path, *canonical, device);
}

// Each name once: the file load_backend(name) would open, the first on the path.
std::vector<BackendListing> find_backend_plugins() {
  std::vector<BackendListing> listings;
  std::set<std::string> names;
  std::error_code ec;
  for (const std::string& dir : PluginSearch::directories())
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string file = entry.path().filename().string();
      if (!file.starts_with("lazylab-backend-") || !file.ends_with(".so")) continue;
      BackendListing listing{file.substr(16, file.size() - 19), entry.path().string(), {}, {}, {}, {}};
      if (names.insert(listing.name).second) listings.push_back(std::move(listing));
    }
  return listings;
}

Expected<std::string> backend_library_summary(const std::string& path) {
  auto library = open_library(path);
  if (!library) return library.error();
  return std::string((*library)->api().summary);
}

Expected<std::vector<std::string>> backend_library_options(const std::string& path) {
  auto library = open_library(path);
  if (!library) return library.error();
  return describe_options((*library)->api());
}

void probe_backend(BackendListing& listing) {
  auto summary = backend_library_summary(listing.path);
  if (!summary) {
    listing.problem = summary.error().message;
    return;
  }
  listing.summary = *summary;
  if (auto options = backend_library_options(listing.path)) listing.options = std::move(*options);
  auto backend = load_backend(listing.path);
  if (!backend) {
    listing.problem = backend.error().message;
    return;
  }
  listing.summary = (*backend)->summary();
  listing.device = (*backend)->device_description();
}

}  // namespace lazylab
