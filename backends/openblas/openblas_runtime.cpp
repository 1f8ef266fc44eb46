#include "openblas_runtime.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>

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
// An explicit OPENBLAS_CORETYPE is the user's choice and is kept, unless
// choose_core() asked for another.
std::string& chosen_core() {
  static std::string core;
  return core;
}

// What OPENBLAS_CORETYPE must be while the library loads: nullopt leaves the
// environment as it is, "" unsets it, anything else sets it.
std::optional<std::string> core_override(std::string& note) {
  if (void* loaded = dlopen(kLibrary, RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(loaded);
    note = "core type chosen when OpenBLAS was first loaded in this process";
    return std::nullopt;
  }
  const std::string& chosen = chosen_core();
  if (!chosen.empty() && chosen != "auto") {
    note = "core type " + chosen + " chosen by the cpu backend's openblas-core";
    return chosen;
  }
  const char* inherited = std::getenv("OPENBLAS_CORETYPE");
  if (inherited && chosen.empty()) {
    note = std::string("core type from OPENBLAS_CORETYPE=") + inherited;
    if (amd_with_avx512()) note += "; this CPU runs the SkylakeX kernels (the cpu backend's openblas-core=auto)";
    return std::nullopt;
  }
  if (amd_with_avx512()) {
    note = "core type SkylakeX set by lazylab for an AMD CPU with AVX-512";
    if (inherited) note += std::string(", over OPENBLAS_CORETYPE=") + inherited;
    return "SkylakeX";
  }
  note = "core type detected by OpenBLAS";
  if (inherited) {
    note += std::string(", OPENBLAS_CORETYPE=") + inherited + " set aside";
    return "";
  }
  return std::nullopt;
}

template <class F>
bool bind(void* library, const char* name, F& function, std::string& error) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (!function) error = std::string(kLibrary) + " has no symbol " + name;
  return function != nullptr;
}

#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer OpenBLAS runs on the calling thread only: its
// workers wait for work in spin loops that TSan cannot see (OpenBLAS is not
// instrumented), so their writes to C (sgemm_beta's memset, which TSan
// intercepts) showed as races with the caller's reads after sgemm returned.
// As parallel.h runs TBB's chunks on plain threads there.
decltype(&openblas_set_num_threads) openblas_threads = nullptr;
void one_thread(int) { openblas_threads(1); }
#endif

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
  std::optional<std::string> core = core_override(rt.core_note);
  const char* inherited = std::getenv("OPENBLAS_CORETYPE");
  std::optional<std::string> saved = inherited ? std::optional<std::string>(inherited) : std::nullopt;
  if (core && core->empty()) unsetenv("OPENBLAS_CORETYPE");
  if (core && !core->empty()) setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  if (core && saved) setenv("OPENBLAS_CORETYPE", saved->c_str(), 1);
  if (core && !saved) unsetenv("OPENBLAS_CORETYPE");
  if (!library) {
    const char* why = dlerror();
    loaded.error = std::string("cannot open ") + kLibrary + ": " + (why ? why : "unknown error");
    return loaded;
  }
  char* (*get_config)() = nullptr;
  char* (*get_corename)() = nullptr;
  if (!bind(library, "cblas_sgemm", rt.sgemm, loaded.error) || !bind(library, "cblas_sgemv", rt.sgemv, loaded.error) ||
      !bind(library, "openblas_set_num_threads", rt.set_num_threads, loaded.error) ||
      !bind(library, "openblas_get_config", get_config, loaded.error) ||
      !bind(library, "openblas_get_corename", get_corename, loaded.error))
    return loaded;
#if defined(__SANITIZE_THREAD__)
  openblas_threads = rt.set_num_threads;
  rt.set_num_threads = one_thread;
  one_thread(1);
#endif
  rt.config = get_config();
  rt.core = get_corename();
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  if (core && !core->empty() && lower(*core) != lower(rt.core))
    rt.core_note += "; OpenBLAS does not run '" + *core + "' here and chose " + rt.core;
  loaded.ok = true;
  return loaded;
}

std::once_flag& load_once() {
  static std::once_flag once;
  return once;
}

bool& loading_started() {
  static bool started = false;
  return started;
}

}  // namespace

bool choose_core(const std::string& core, std::string& error) {
  if (loading_started() && core == chosen_core()) return true;
  if (loading_started()) {
    error = "OpenBLAS is already loaded in this process (" +
            (chosen_core().empty() ? std::string("no core asked for") : "core " + chosen_core() + " asked for") +
            "); its kernels are chosen once, before it loads";
    return false;
  }
  chosen_core() = core;
  return true;
}

const Runtime* runtime(std::string& error) {
  static Loaded loaded;
  std::call_once(load_once(), [] {
    loading_started() = true;
    loaded = load();
  });
  error = loaded.error;
  return loaded.ok ? &loaded.runtime : nullptr;
}

}  // namespace lazylab::openblas
