#include "core/pass_plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace lazylab {
namespace {

std::vector<LoadedPlugin>& plugins() {
  static std::vector<LoadedPlugin> loaded;
  return loaded;
}

// The name's current owner: "a built-in" or "plugin NAME VERSION".
std::string owner(const std::string& provenance) { return provenance.empty() ? "a built-in" : provenance; }

// Every name the plugin registers must be free, in the registries and
// within the plugin itself.
Status check_names_free(PluginRegistrar& registrar) {
  std::set<std::string> passes, strategies;
  for (const PassInfo& info : registrar.passes()) {
    if (const PassInfo* taken = PassRegistry::global().find(info.name))
      return make_error(
          fmt::format("it registers pass '{}', which {} provides already", info.name, owner(taken->provenance)));
    if (!passes.insert(info.name).second) return make_error(fmt::format("it registers pass '{}' twice", info.name));
    if (!info.create) return make_error(fmt::format("its pass '{}' has no create function", info.name));
  }
  for (const FusionStrategyInfo& info : registrar.strategies()) {
    if (const FusionStrategyInfo* taken = FusionStrategyRegistry::global().find(info.name))
      return make_error(fmt::format("it registers fusion strategy '{}', which {} provides already", info.name,
                                    owner(taken->provenance)));
    if (!strategies.insert(info.name).second)
      return make_error(fmt::format("it registers fusion strategy '{}' twice", info.name));
    if (!info.create) return make_error(fmt::format("its fusion strategy '{}' has no create function", info.name));
  }
  return {};
}

Expected<PassPluginInfo> open_plugin(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return make_error("no such file");
  // RTLD_NODELETE: the registries hold its functions until the process ends.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) return make_error(fmt::format("cannot load: {}", dlerror()));
  auto entry = reinterpret_cast<PassPluginEntry>(dlsym(handle, LAZYLAB_PASS_PLUGIN_ENTRY));
  if (!entry) {
    dlclose(handle);
    return make_error(fmt::format("missing entry point '{}' (not a lazylab pass plugin?)", LAZYLAB_PASS_PLUGIN_ENTRY));
  }
  PassPluginInfo info = entry();
  std::string problem;
  if (info.api_version != LAZYLAB_PASS_PLUGIN_API_VERSION)
    problem =
        fmt::format("it was built for pass plugin API {}, this lazylab speaks {}; rebuild it against this lazylab",
                    info.api_version, LAZYLAB_PASS_PLUGIN_API_VERSION);
  else if (!info.name || !*info.name || !info.version || !info.register_with)
    problem = "its plugin info lacks a name, a version or a register function";
  if (!problem.empty()) {
    dlclose(handle);
    return make_error(problem);
  }
  return info;
}

}  // namespace

Expected<LoadedPlugin> load_pass_plugin(const std::string& path) {
  std::error_code ec;
  std::string canonical = fs::weakly_canonical(path, ec).string();
  if (ec) canonical = path;
  for (const LoadedPlugin& plugin : plugins())
    if (plugin.path == canonical) return plugin;
  auto info = open_plugin(canonical);
  if (!info) return make_error(fmt::format("pass plugin {}: {}", path, info.error().message));
  PluginRegistrar registrar;
  info->register_with(registrar);
  if (Status free = check_names_free(registrar); !free)
    return make_error(fmt::format("pass plugin {} ({} {}): {}; nothing of it was registered", path, info->name,
                                  info->version, free.error().message));
  LoadedPlugin loaded{info->name, info->version, canonical, {}, {}};
  std::string provenance = fmt::format("plugin {} {}", info->name, info->version);
  for (PassInfo& pass : registrar.passes()) {
    pass.provenance = provenance;
    loaded.passes.push_back(pass.name);
    PassRegistry::global().add(std::move(pass));
  }
  for (FusionStrategyInfo& strategy : registrar.strategies()) {
    strategy.provenance = provenance;
    loaded.strategies.push_back(strategy.name);
    FusionStrategyRegistry::global().add(std::move(strategy));
  }
  plugins().push_back(loaded);
  return loaded;
}

const std::vector<LoadedPlugin>& loaded_pass_plugins() { return plugins(); }

}  // namespace lazylab
