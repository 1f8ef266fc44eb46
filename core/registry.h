// One registry design for everything a pipeline selects by name: passes,
// fusion strategies, schedulers, memory planners and precision policies. An Info has at least
// `name`, `summary`, typed `options` and `provenance` ("plugin NAME
// VERSION", empty for built-ins). Built-ins register from static
// initialisers in liblazylab; plugins through PluginRegistrar
// (pass_plugin.h). Each kind's global() lives in liblazylab (explicit
// instantiation), so a plugin sees the same registry as the host.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lazylab {

template <class Info>
class Registry {
 public:
  // Defined and instantiated for each kind in registry.cpp only: a program
  // or plugin linking liblazylab must not get a registry of its own.
  static Registry& global();
  void add(Info info) {
    std::string name = info.name;
    entries_.insert_or_assign(std::move(name), std::move(info));
  }
  const Info* find(std::string_view name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  std::vector<const Info*> list() const {  // sorted by name
    std::vector<const Info*> infos;
    for (auto& [name, info] : entries_) infos.push_back(&info);
    return infos;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> names;
    for (auto& [name, info] : entries_) names.push_back(name);
    return names;
  }

 private:
  std::map<std::string, Info, std::less<>> entries_;
};

// Registers at static-initialisation time (built-ins).
template <class Info>
struct Registrar {
  explicit Registrar(Info info) { Registry<Info>::global().add(std::move(info)); }
};

}  // namespace lazylab
