#include "core/compilation_cache.h"

namespace lazylab {

std::shared_ptr<CompiledGraph> ComputationCache::find(uint64_t key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

std::vector<const Graph*> ComputationCache::sources() const {
  std::vector<const Graph*> graphs;
  for (const Entry& entry : order_)
    if (entry.second->source) graphs.push_back(&*entry.second->source);
  return graphs;
}

size_t ComputationCache::insert(uint64_t key, std::shared_ptr<CompiledGraph> entry) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    it->second->second = std::move(entry);
    order_.splice(order_.begin(), order_, it->second);
    return 0;
  }
  order_.emplace_front(key, std::move(entry));
  entries_[key] = order_.begin();
  size_t evicted = 0;
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back().first);
    order_.pop_back();
    ++evicted;
  }
  return evicted;
}

}  // namespace lazylab
