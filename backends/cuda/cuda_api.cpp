#include "cuda_api.h"

#include <dlfcn.h>

#include <initializer_list>
#include <mutex>
#include <stdexcept>

namespace lazylab::cuda {
namespace {

// The first of `names` that opens; its dlerror when none does.
void* open_first(std::initializer_list<const char*> names, std::string& error) {
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    if (error.empty()) error = dlerror();
  }
  return nullptr;
}

template <class Fn>
bool bind(void* library, const char* symbol, Fn& fn, const char* library_name, std::string& error) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!fn) error = std::string(library_name) + " has no " + symbol;
  return fn != nullptr;
}

template <class Api>
struct Loaded {
  Api api;
  std::string error;
  bool ok = false;
};

// Opens the first of `names` that loads and binds every function of Api.
template <class Api, class BindAll>
Loaded<Api> load(std::initializer_list<const char*> names, const char* label, BindAll bind_all) {
  Loaded<Api> loaded;
  std::string why;
  void* library = open_first(names, why);
  if (!library) {
    loaded.error = std::string("no ") + label + " (" + why + ")";
    return loaded;
  }
  loaded.ok = bind_all(library, loaded.api, loaded.error);
  return loaded;
}

#define LAZYLAB_BIND(name) &&bind(library, LAZYLAB_CUDA_SYMBOL(name), api.name, label, error)

Loaded<Driver> load_driver() {
  auto loaded =
      load<Driver>({"libcuda.so.1", "libcuda.so"}, "CUDA driver", [](void* library, Driver& api, std::string& error) {
        const char* label = "libcuda.so.1";
        return true LAZYLAB_DRIVER_FUNCTIONS(LAZYLAB_BIND);
      });
  if (loaded.ok) loaded.api.cuDriverGetVersion(&loaded.api.version);
  return loaded;
}

Loaded<Nvrtc> load_nvrtc() {
  auto loaded = load<Nvrtc>({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "NVRTC",
                            [](void* library, Nvrtc& api, std::string& error) {
                              const char* label = "libnvrtc";
                              return true LAZYLAB_NVRTC_FUNCTIONS(LAZYLAB_BIND);
                            });
  if (loaded.ok) loaded.api.nvrtcVersion(&loaded.api.major, &loaded.api.minor);
  return loaded;
}

Loaded<CublasLt> load_cublaslt() {
  return load<CublasLt>({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "cuBLASLt",
                        [](void* library, CublasLt& api, std::string& error) {
                          const char* label = "libcublasLt";
                          return true LAZYLAB_CUBLASLT_FUNCTIONS(LAZYLAB_BIND);
                        });
}

#undef LAZYLAB_BIND

template <class Api>
const Api* once(Loaded<Api> (*load)(), std::string& error) {
  static Loaded<Api> loaded;
  static std::once_flag flag;
  std::call_once(flag, [&] { loaded = load(); });
  error = loaded.error;
  return loaded.ok ? &loaded.api : nullptr;
}

}  // namespace

const Driver* driver(std::string& error) { return once(load_driver, error); }
const Nvrtc* nvrtc(std::string& error) { return once(load_nvrtc, error); }
const CublasLt* cublaslt(std::string& error) { return once(load_cublaslt, error); }

std::string driver_error(const Driver& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  driver.cuGetErrorName(result, &name);
  driver.cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA error") + ": " + (text ? text : "unknown");
}

void check(const Driver& driver, CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + driver_error(driver, result));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(status)));
}

}  // namespace lazylab::cuda
