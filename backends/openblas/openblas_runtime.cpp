#include "openblas_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace lazylab::openblas {
namespace {

constexpr const char* kLibrary = "libopenblas.so.0";

// Every AVX-512 extension that the SkylakeX kernels use.
bool has_skylakex_isa() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
}

bool amd_with_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") && has_skylakex_isa();
}

// The core type to set before the library loads, or nullptr to leave
// OpenBLAS's own choice. Intel CPUs with AVX-512 are detected by OpenBLAS
// itself; AMD ones (Zen 4 and later) are the case old releases get wrong.
// An explicit OPENBLAS_CORETYPE is the user's choice and is kept.
const char* core_override(std::string& note) {
  if (const char* pinned = std::getenv("OPENBLAS_CORETYPE")) {
    note = std::string("core type from OPENBLAS_CORETYPE=") + pinned;
    if (amd_with_avx512())
      note += "; this CPU runs the SkylakeX kernels, which lazylab picks when the variable is unset";
    return nullptr;
  }
  if (void* loaded = dlopen(kLibrary, RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(loaded);
    note = "core type chosen when OpenBLAS was first loaded in this process";
    return nullptr;
  }
  if (amd_with_avx512()) {
    note = "core type SkylakeX set by lazylab for an AMD CPU with AVX-512";
    return "SkylakeX";
  }
  note = "core type detected by OpenBLAS";
  return nullptr;
}

template <class F>
bool bind(void* library, const char* name, F& function, std::string& error) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (!function) error = std::string(kLibrary) + " has no symbol " + name;
  return function != nullptr;
}

struct Loaded {
  Runtime runtime;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded loaded;
  Runtime& rt = loaded.runtime;
  // setenv is not thread-safe against getenv; this runs once, under
  // call_once, and puts the variable back as it found it.
  const char* core = core_override(rt.core_note);
  if (core) setenv("OPENBLAS_CORETYPE", core, 1);
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  if (core) unsetenv("OPENBLAS_CORETYPE");
  if (!library) {
    const char* why = dlerror();
    loaded.error = std::string("cannot open ") + kLibrary + ": " + (why ? why : "unknown error");
    return loaded;
  }
  char* (*get_config)() = nullptr;
  char* (*get_corename)() = nullptr;
  if (!bind(library, "cblas_sgemm", rt.sgemm, loaded.error) ||
      !bind(library, "openblas_set_num_threads", rt.set_num_threads, loaded.error) ||
      !bind(library, "openblas_get_config", get_config, loaded.error) ||
      !bind(library, "openblas_get_corename", get_corename, loaded.error))
    return loaded;
  rt.config = get_config();
  rt.core = get_corename();
  loaded.ok = true;
  return loaded;
}

}  // namespace

const Runtime* runtime(std::string& error) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  error = loaded.error;
  return loaded.ok ? &loaded.runtime : nullptr;
}

}  // namespace lazylab::openblas
