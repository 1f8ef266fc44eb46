// Pass plugins the loader must refuse, one per build flag:
//   WRONG_API  built for another pass plugin API version
//   DUPLICATE  registers a new strategy and then a pass whose name is taken
//   NO_NAME    its info has no name
#include "core/pass_plugin.h"

namespace {

using namespace lazylab;

class Nothing : public Pass {
 public:
  Expected<bool> run(Module&) override { return false; }
};

void register_passes(PluginRegistrar& registrar) {
  FusionStrategyInfo fresh;
  fresh.name = "fresh-from-bad-plugin";
  fresh.summary = "never registered: the plugin's other name is taken";
  fresh.create = [](const PassOptions&) -> std::unique_ptr<FusionStrategy> { return nullptr; };
  registrar.add_fusion_strategy(std::move(fresh));
  registrar.add_pass({"cse", "a second cse", {}, [](const PassOptions&) { return std::make_unique<Nothing>(); }});
}

}  // namespace

extern "C" LAZYLAB_PLUGIN_EXPORT PassPluginInfo lazylab_pass_plugin_info() {
#if defined(WRONG_API)
  return {LAZYLAB_PASS_PLUGIN_API_VERSION + 41, "bad", "0.1", register_passes};
#elif defined(NO_NAME)
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "", "0.1", register_passes};
#else
  return {LAZYLAB_PASS_PLUGIN_API_VERSION, "bad", "0.1", register_passes};
#endif
}
