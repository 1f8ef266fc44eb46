// A backend whose device_description() returns NULL: lazylab must refuse it
// with an error naming the plugin and the entry (a NULL string once aborted
// it in std::string's constructor).
#include "lazylab/backend_plugin.hpp"

namespace {

class NullDeviceBackend : public lazylab::plugin::Backend {
 public:
  explicit NullDeviceBackend(const std::map<std::string, std::string>&) {}
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = 0;
  }
  std::string device_description() const override { return "replaced by NULL below"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program&, int32_t) override { return nullptr; }
};

const char* no_description(const lazylab_backend*) { return nullptr; }

}  // namespace

extern "C" __attribute__((visibility("default"))) const lazylab_backend_api* lazylab_backend_entry(uint32_t, uint32_t) {
  static lazylab_backend_api api = [] {
    lazylab_backend_api copy = *lazylab::plugin::detail::make_api<NullDeviceBackend>("nulldevice", "says nothing");
    copy.device_description = no_description;
    return copy;
  }();
  return &api;
}
