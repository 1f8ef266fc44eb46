// Fusion strategies: behind one interface so a researcher adds one file (or
// one plugin) and selects it with fuse{strategy=NAME}.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/module.h"

namespace lazylab {

class FusionStrategy {
 public:
  virtual ~FusionStrategy() = default;
  // Kernel id for every node (-1 for parameters and dead nodes); kernel ids
  // are dense from 0.
  virtual Expected<std::vector<int>> partition(const Module& module) = 0;
};

struct FusionStrategyInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<FusionStrategy>()> create;
};

class FusionStrategyRegistry {
 public:
  static FusionStrategyRegistry& global();
  void add(FusionStrategyInfo info) { strategies_.insert_or_assign(info.name, std::move(info)); }
  const FusionStrategyInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, FusionStrategyInfo> strategies_;
};

struct FusionStrategyRegistrar {
  explicit FusionStrategyRegistrar(FusionStrategyInfo info) { FusionStrategyRegistry::global().add(std::move(info)); }
};

}  // namespace lazylab
