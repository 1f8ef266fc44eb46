// Backends loaded at run time from .so plugins through the C ABI of
// plugins/include/lazylab/backend_abi.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/expected.h"
#include "core/program.h"
#include "lazylab/backend_abi.h"

namespace lazylab {

class PluginLibrary;

class Executable {
 public:
  Executable(std::shared_ptr<const PluginLibrary> library, lazylab_executable* handle);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  Status execute(const void* const* parameters, void* const* outputs);

 private:
  std::shared_ptr<const PluginLibrary> library_;
  lazylab_executable* handle_;
};

class Backend {
 public:
  Backend(std::shared_ptr<const PluginLibrary> library, lazylab_backend* handle, std::string path,
          const std::string& options);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  std::string summary() const;
  std::string device_description() const;
  const lazylab_capabilities& capabilities() const { return capabilities_; }
  // Part of the cache key: the backend's name and options.
  uint64_t fingerprint() const { return fingerprint_; }

  // Checks the Program against the declared capabilities, then compiles.
  Expected<std::unique_ptr<Executable>> compile(const Program& program, const Graph& graph);
  // An error naming the first op the backend says it cannot run.
  Status check_supported(const Program& program, const Graph& graph) const;

 private:
  std::shared_ptr<const PluginLibrary> library_;
  lazylab_backend* handle_;
  std::string name_, path_;
  lazylab_capabilities capabilities_{};
  uint64_t fingerprint_ = 0;
};

struct PluginSearch {
  // Where `load_backend` looks for "lazylab-backend-NAME.so", in order:
  // LAZYLAB_PLUGIN_PATH (colon-separated), the build tree, the install dir.
  static std::vector<std::string> directories();
};

// `name_or_path`: a backend name ("interp") or a path to a .so file.
// `options`: "key=value,..." passed to the plugin's create().
Expected<std::unique_ptr<Backend>> load_backend(const std::string& name_or_path, const std::string& options = "");

struct BackendListing {
  std::string name, path, summary;
  std::string problem;  // why it cannot be loaded, if it cannot
};
std::vector<BackendListing> list_backends();

}  // namespace lazylab
