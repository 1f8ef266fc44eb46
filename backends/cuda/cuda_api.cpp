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

Loaded<Driver> load_driver() {
  Loaded<Driver> loaded;
  std::string why;
  void* library = open_first({"libcuda.so.1", "libcuda.so"}, why);
  if (!library) {
    loaded.error = "no CUDA driver (" + why + ")";
    return loaded;
  }
  Driver& d = loaded.api;
#define LAZYLAB_BIND(name) \
  if (!bind(library, LAZYLAB_CUDA_SYMBOL(name), d.name, "libcuda.so.1", loaded.error)) return loaded;
  LAZYLAB_DRIVER_FUNCTIONS(LAZYLAB_BIND)
#undef LAZYLAB_BIND
  d.cuDriverGetVersion(&d.version);
  loaded.ok = true;
  return loaded;
}

Loaded<Nvrtc> load_nvrtc() {
  Loaded<Nvrtc> loaded;
  std::string why;
  void* library = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, why);
  if (!library) {
    loaded.error = "no NVRTC (" + why + ")";
    return loaded;
  }
  Nvrtc& n = loaded.api;
#define LAZYLAB_BIND(name) \
  if (!bind(library, LAZYLAB_CUDA_SYMBOL(name), n.name, "libnvrtc", loaded.error)) return loaded;
  LAZYLAB_NVRTC_FUNCTIONS(LAZYLAB_BIND)
#undef LAZYLAB_BIND
  n.nvrtcVersion(&n.major, &n.minor);
  loaded.ok = true;
  return loaded;
}

Loaded<CublasLt> load_cublaslt() {
  Loaded<CublasLt> loaded;
  std::string why;
  void* library = open_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, why);
  if (!library) {
    loaded.error = "no cuBLASLt (" + why + ")";
    return loaded;
  }
  CublasLt& c = loaded.api;
#define LAZYLAB_BIND(name) \
  if (!bind(library, LAZYLAB_CUDA_SYMBOL(name), c.name, "libcublasLt", loaded.error)) return loaded;
  LAZYLAB_CUBLASLT_FUNCTIONS(LAZYLAB_BIND)
#undef LAZYLAB_BIND
  loaded.ok = true;
  return loaded;
}

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
