// A plugin as one built against ABI 3.0 might be: it knows the 39 ops of
// that version's op table, so it fills only those entries of the host's
// supports_op (through its own capabilities function, as a 3.0 build of the
// helper would), and it leaves the optional event_kernel_times (and the
// later generated_code, executable_notes and the device-memory entries)
// out. The host
// must load it, run what it knows, take no kernel times from it, and refuse
// a Program with a newer op by name before compiling it.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "lazylab/backend_plugin.hpp"
#include "lazylab/reference/program_runner.h"

namespace {

constexpr uint32_t kOpsOfAbi30 = LAZYLAB_OP_Gelu + 1;

class OlderBackend : public lazylab::plugin::Backend {
 public:
  explicit OlderBackend(const std::map<std::string, std::string>&) {}
  void capabilities(lazylab_capabilities&) const override {}  // written by older_capabilities below
  std::string device_description() const override { return "host CPU, built for ABI 3.0"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<lazylab::reference::RunnerExecutable>(program, host_memory_);
  }
};

void older_capabilities(const lazylab_backend*, lazylab_capabilities* caps) {
  uint32_t known = std::min(caps->num_ops, kOpsOfAbi30);
  for (uint32_t op = 0; op < known; ++op) caps->supports_op[op] = op != LAZYLAB_OP_Parameter;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry(uint32_t, uint32_t) {
  static lazylab_backend_api api = [] {
    lazylab_backend_api table =
        *lazylab::plugin::detail::make_api<OlderBackend>("olderminor", "a reference backend built for ABI 3.0");
    table.abi_minor = 0;
    table.capabilities = older_capabilities;
    table.event_kernel_times = nullptr;
    table.generated_code = nullptr;
    table.executable_notes = nullptr;
    table.buffer_device_data = nullptr;
    table.buffer_from_device_data = nullptr;
    table.stream_wait_device = nullptr;
    table.device_wait_stream = nullptr;
    return table;
  }();
  return &api;
}
