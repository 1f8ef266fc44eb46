#include "core/backend.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/hash.h"
#include "core/program_view.h"
#include "core/text_format.h"

#ifndef LAZYLAB_BUILD_BACKENDS_DIR
#define LAZYLAB_BUILD_BACKENDS_DIR ""
#endif
#ifndef LAZYLAB_INSTALL_PLUGIN_DIR
#define LAZYLAB_INSTALL_PLUGIN_DIR ""
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
    std::string text = message ? message : "unknown error";
    if (message) api_->free_error(message);
    return make_error(fmt::format("{}: {}", context, text));
  }

 private:
  void* handle_;
  const lazylab_backend_api* api_;
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
  return make_error(
      fmt::format("backend '{}': no {} in the plugin path [{}]", name, plugin_file_name(name), fmt::join(dirs, ", ")));
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
    problem = "its entry point returned no API (it refused this host's ABI version)";
  else if (api->abi_major != LAZYLAB_ABI_MAJOR)
    problem = fmt::format("it was built for plugin ABI {}.{}, this lazylab speaks {}.{}; rebuild it", api->abi_major,
                          api->abi_minor, LAZYLAB_ABI_MAJOR, LAZYLAB_ABI_MINOR);
  else if (api->struct_size < sizeof(lazylab_backend_api))
    problem = "its API table is smaller than ABI 1.0 requires";
  if (!problem.empty()) {
    dlclose(handle);
    return make_error(fmt::format("backend plugin {}: {}", path, problem));
  }
  return std::make_shared<PluginLibrary>(handle, api);
}

}  // namespace

std::vector<std::string> PluginSearch::directories() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LAZYLAB_PLUGIN_PATH")) {
    std::stringstream stream(env);
    for (std::string dir; std::getline(stream, dir, ':');)
      if (!dir.empty()) dirs.push_back(dir);
  }
  std::error_code ec;
  fs::path build_dir = LAZYLAB_BUILD_BACKENDS_DIR;
  if (!build_dir.empty() && fs::is_directory(build_dir, ec))
    for (const auto& entry : fs::directory_iterator(build_dir, ec))
      if (entry.is_directory()) dirs.push_back(entry.path().string());
  if (std::string install = LAZYLAB_INSTALL_PLUGIN_DIR; !install.empty()) dirs.push_back(install);
  return dirs;
}

Executable::Executable(std::shared_ptr<const PluginLibrary> library, lazylab_executable* handle)
    : library_(std::move(library)), handle_(handle) {}

Executable::~Executable() { library_->api().destroy_executable(handle_); }

Status Executable::execute(const void* const* parameters, void* const* outputs) {
  char* error = nullptr;
  if (library_->api().execute(handle_, parameters, outputs, &error) != 0) return library_->take_error(error, "execute");
  return {};
}

Backend::Backend(std::shared_ptr<const PluginLibrary> library, lazylab_backend* handle, std::string path,
                 const std::string& options)
    : library_(std::move(library)), handle_(handle), name_(library_->api().name), path_(std::move(path)) {
  // The name alone would let two option sets share cache entries.
  std::string identity = name_ + "|" + options;
  fingerprint_ = hash_bytes(identity.data(), identity.size());
  capabilities_.struct_size = sizeof(lazylab_capabilities);
  library_->api().capabilities(handle_, &capabilities_);
}

Backend::~Backend() { library_->api().destroy(handle_); }

std::string Backend::summary() const { return library_->api().summary; }

std::string Backend::device_description() const { return library_->api().device_description(handle_); }

Status Backend::check_supported(const Program& program, const Graph& graph) const {
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.ops) {
      OpId op = graph.node(id).op;
      if (capabilities_.supports_op[static_cast<int>(op)]) continue;
      bool composite = op_info(op).category == OpCategory::Composite;
      return make_error(fmt::format("backend {} cannot run op '{}' (%{} = {}){}", name_, op_name(op), id,
                                    print_node(graph, id), composite ? "; add 'decompose' to the pipeline" : ""));
    }
  return {};
}

Expected<std::unique_ptr<Executable>> Backend::compile(const Program& program, const Graph& graph) {
  LAZYLAB_TRY(check_supported(program, graph));
  ProgramView view(program, graph);
  char* error = nullptr;
  lazylab_executable* handle = library_->api().compile(handle_, &view.get(), &error);
  if (!handle) return library_->take_error(error, fmt::format("backend {}: compile", name_));
  return std::make_unique<Executable>(library_, handle);
}

Expected<std::unique_ptr<Backend>> load_backend(const std::string& name_or_path, const std::string& options) {
  std::string path = name_or_path;
  if (!looks_like_path(name_or_path)) {
    auto found = find_plugin(name_or_path);
    if (!found) return found.error();
    path = *found;
  }
  auto library = open_library(path);
  if (!library) return library.error();
  char* error = nullptr;
  lazylab_backend* handle = (*library)->api().create(options.c_str(), &error);
  if (!handle) return (*library)->take_error(error, fmt::format("backend plugin {}: create", path));
  return std::make_unique<Backend>(*library, handle, path, options);
}

std::vector<BackendListing> list_backends() {
  std::vector<BackendListing> listings;
  std::error_code ec;
  for (const std::string& dir : PluginSearch::directories())
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string file = entry.path().filename().string();
      if (!file.starts_with("lazylab-backend-") || !file.ends_with(".so")) continue;
      BackendListing listing{file.substr(16, file.size() - 19), entry.path().string(), {}, {}};
      auto library = open_library(listing.path);
      if (library)
        listing.summary = (*library)->api().summary;
      else
        listing.problem = library.error().message;
      listings.push_back(std::move(listing));
    }
  return listings;
}

}  // namespace lazylab
