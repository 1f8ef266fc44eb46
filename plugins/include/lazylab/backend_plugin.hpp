// C++ helper for backend plugin authors: subclass Backend and Executable,
// then LAZYLAB_DEFINE_BACKEND(MyBackend, "name", "summary") exports the C
// entry point. Exceptions never cross the C boundary: anything thrown
// becomes an error string for the host.
#ifndef LAZYLAB_BACKEND_PLUGIN_HPP
#define LAZYLAB_BACKEND_PLUGIN_HPP

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "lazylab/backend_abi.h"

namespace lazylab::plugin {

// "key=value,key=value" -> map; throws on a malformed item.
inline std::map<std::string, std::string> parse_options(const char* text) {
  std::map<std::string, std::string> options;
  std::string all = text ? text : "";
  size_t start = 0;
  while (start < all.size()) {
    size_t comma = all.find(',', start);
    std::string item = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("backend option '" + item + "' is not key=value");
    options[item.substr(0, eq)] = item.substr(eq + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return options;
}

class Executable {
 public:
  virtual ~Executable() = default;
  // parameters by ordinal; outputs in root order. Throw to report an error.
  virtual void execute(const void* const* parameters, void* const* outputs) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void capabilities(lazylab_capabilities& caps) const = 0;
  virtual std::string device_description() const = 0;
  // Copy what you need: `program` is valid only during this call.
  virtual std::unique_ptr<Executable> compile(const lazylab_program& program) = 0;
};

namespace detail {

inline char* copy_error(const char* message) {
  size_t n = std::strlen(message) + 1;
  char* copy = static_cast<char*>(std::malloc(n));
  if (copy) std::memcpy(copy, message, n);
  return copy;
}

template <class Fn>
bool guarded(char** error, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    if (error) *error = copy_error(e.what());
  } catch (...) {
    if (error) *error = copy_error("unknown exception in backend plugin");
  }
  return false;
}

struct BackendHandle {
  std::unique_ptr<Backend> backend;
  std::string description;
};

template <class BackendClass>
const lazylab_backend_api* make_api(const char* name, const char* summary) {
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
          owned->backend = std::make_unique<BackendClass>(parse_options(options));
          owned->description = owned->backend->device_description();
          handle = owned.release();
        });
        return reinterpret_cast<lazylab_backend*>(handle);
      },
      [](lazylab_backend* backend) { delete reinterpret_cast<BackendHandle*>(backend); },
      [](const lazylab_backend* backend, lazylab_capabilities* caps) {
        size_t size = caps->struct_size;
        std::memset(caps, 0, size);
        caps->struct_size = size;
        reinterpret_cast<const BackendHandle*>(backend)->backend->capabilities(*caps);
      },
      [](const lazylab_backend* backend) {
        return reinterpret_cast<const BackendHandle*>(backend)->description.c_str();
      },
      [](lazylab_backend* backend, const lazylab_program* program, char** error) -> lazylab_executable* {
        Executable* executable = nullptr;
        guarded(error,
                [&] { executable = reinterpret_cast<BackendHandle*>(backend)->backend->compile(*program).release(); });
        return reinterpret_cast<lazylab_executable*>(executable);
      },
      [](lazylab_executable* executable) { delete reinterpret_cast<Executable*>(executable); },
      [](lazylab_executable* executable, const void* const* parameters, void* const* outputs, char** error) {
        return guarded(error, [&] { reinterpret_cast<Executable*>(executable)->execute(parameters, outputs); }) ? 0 : 1;
      },
      [](char* error) { std::free(error); },
  };
  return &api;
}

}  // namespace detail
}  // namespace lazylab::plugin

// Exports the entry point; refuses a host with another ABI major version.
#define LAZYLAB_DEFINE_BACKEND(BackendClass, name, summary)                                           \
  extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry( \
      uint32_t host_major, uint32_t /*host_minor*/) {                                                 \
    if (host_major != LAZYLAB_ABI_MAJOR) return nullptr;                                              \
    return ::lazylab::plugin::detail::make_api<BackendClass>(name, summary);                          \
  }

#endif
