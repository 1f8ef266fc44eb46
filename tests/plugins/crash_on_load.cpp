// A plugin that segfaults while it is being loaded (a static constructor),
// before lazylab can call anything: `lazylab backends` must still list the
// other plugins and name this one as crashed.
#include <csignal>
#include <cstdint>

#include "lazylab/backend_abi.h"

namespace {

struct CrashOnLoad {
  CrashOnLoad() { std::raise(SIGSEGV); }
} crash_on_load;

}  // namespace

extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry(uint32_t, uint32_t) {
  return nullptr;
}
