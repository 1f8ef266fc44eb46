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

// Every name of one kind the plugin registers must be free, in the registry
// and within the plugin itself.
template <class Info>
Status check_names_free(const std::vector<Info>& infos, const char* kind) {
  std::set<std::string> names;
  for (const Info& info : infos) {
    if (const Info* taken = Registry<Info>::global().find(info.name))
      return make_error(
          fmt::format("it registers {} '{}', which {} provides already", kind, info.name, owner(taken->provenance)));
    if (!names.insert(info.name).second) return make_error(fmt::format("it registers {} '{}' twice", kind, info.name));
    if (!info.create) return make_error(fmt::format("its {} '{}' has no create function", kind, info.name));
  }
  return {};
}

template <class Info>
void add_all(std::vector<Info>& infos, const char* kind, const std::string& provenance, LoadedPlugin& loaded) {
  for (Info& info : infos) {
    info.provenance = provenance;
    loaded.registered.emplace_back(kind, info.name);
    Registry<Info>::global().add(std::move(info));
  }
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
  Status free = check_names_free(registrar.passes(), "pass");
  if (free) free = check_names_free(registrar.strategies(), "fusion strategy");
  if (free) free = check_names_free(registrar.schedulers(), "scheduler");
  if (free) free = check_names_free(registrar.planners(), "memory planner");
  if (free) free = check_names_free(registrar.policies(), "precision policy");
  if (free) free = check_names_free(registrar.remat_strategies(), "rematerialization strategy");
  if (!free)
    return make_error(fmt::format("pass plugin {} ({} {}): {}; nothing of it was registered", path, info->name,
                                  info->version, free.error().message));
  LoadedPlugin loaded{info->name, info->version, canonical, {}};
  std::string provenance = fmt::format("plugin {} {}", info->name, info->version);
  add_all(registrar.passes(), "pass", provenance, loaded);
  add_all(registrar.strategies(), "fusion strategy", provenance, loaded);
  add_all(registrar.schedulers(), "scheduler", provenance, loaded);
  add_all(registrar.planners(), "memory planner", provenance, loaded);
  add_all(registrar.policies(), "precision policy", provenance, loaded);
  add_all(registrar.remat_strategies(), "rematerialization strategy", provenance, loaded);
  plugins().push_back(loaded);
  return loaded;
}

const std::vector<LoadedPlugin>& loaded_pass_plugins() { return plugins(); }

}  // namespace lazylab
