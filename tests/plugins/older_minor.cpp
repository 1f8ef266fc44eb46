// A plugin as one built against ABI 2.1 was: its table ends before
// event_kernel_times (the entry is still filled in here, so a host that read
// past struct_size would find it and the test would see kernel times). The
// host must load it and take no kernel times from it.
#include <cstddef>

#include "lazylab/backend_plugin.hpp"
#include "program_runner.h"  // backends/reference

namespace {

class OlderBackend : public lazylab::plugin::Backend {
 public:
  explicit OlderBackend(const std::map<std::string, std::string>&) {}
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Parameter;
  }
  std::string device_description() const override { return "host CPU, built for ABI 2.1"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<lazylab::reference::RunnerExecutable>(program, host_memory_);
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry(uint32_t, uint32_t) {
  static lazylab_backend_api api = [] {
    lazylab_backend_api table =
        *lazylab::plugin::detail::make_api<OlderBackend>("olderminor", "a reference backend built for ABI 2.1");
    table.struct_size = offsetof(lazylab_backend_api, event_kernel_times);
    table.abi_minor = 1;
    return table;
  }();
  return &api;
}
