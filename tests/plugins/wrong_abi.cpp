// A plugin built for a future ABI major version: the host must refuse it.
#include "lazylab/backend_abi.h"

extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry(uint32_t, uint32_t) {
  static lazylab_backend_api api{};
  api.struct_size = sizeof(api);
  api.abi_major = LAZYLAB_ABI_MAJOR + 1;
  api.abi_minor = 0;
  api.name = "wrongabi";
  api.summary = "built for another ABI";
  return &api;
}
