#include "core/fusion_strategy.h"

namespace lazylab {

FusionStrategyRegistry& FusionStrategyRegistry::global() {
  static FusionStrategyRegistry registry;
  return registry;
}

const FusionStrategyInfo* FusionStrategyRegistry::find(const std::string& name) const {
  auto it = strategies_.find(name);
  return it == strategies_.end() ? nullptr : &it->second;
}

std::vector<std::string> FusionStrategyRegistry::names() const {
  std::vector<std::string> names;
  for (auto& [name, info] : strategies_) names.push_back(name);
  return names;
}

}  // namespace lazylab
