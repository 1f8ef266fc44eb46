// A plugin built against ABI 1.0, the way such plugins were built: its entry
// point returns no table to a host of another major version. The host must
// find out which version it speaks and refuse it, naming both.
#include <stddef.h>
#include <stdint.h>

namespace {

// The start of ABI 1.0's table, which every major version keeps.
struct ApiPrefix {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;
  const char* summary;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ApiPrefix* lazylab_backend_entry(uint32_t host_major,
                                                                                         uint32_t) {
  static const ApiPrefix api{sizeof(ApiPrefix) + 12 * sizeof(void*), 1, 0, "wrongabi", "built for ABI 1.0"};
  return host_major == 1 ? &api : nullptr;
}
