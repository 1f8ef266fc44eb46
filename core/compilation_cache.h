// The in-memory computation cache: LRU, keyed by
// graph hash ⊕ pipeline fingerprint ⊕ backend fingerprint.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend.h"
#include "graph.h"
#include "module.h"
#include "pass_manager.h"
#include "program_cost.h"

namespace lazylab {

// Programs with more kernels than this keep no kernel graph: too many
// boxes to read, and too much text for every report.
inline constexpr size_t kKernelGraphLimit = 200;

struct CompiledGraph {
  std::unique_ptr<Executable> executable;
  // For compiled parameter i, the ordinal it had in the trace that produced
  // the key (a trace may hold parameters that did not survive the cut).
  std::vector<int64_t> source_ordinals;
  std::vector<TensorType> output_types;
  // The graph it was compiled from: hits are verified against it on request,
  // and a later miss is diagnosed against it (recompile_diagnosis.h).
  std::optional<Graph> source;
  std::vector<PassStat> pass_stats;
  size_t num_kernels = 0;
  uint64_t arena_bytes = 0;
  uint64_t naive_arena_bytes = 0;
  ProgramCost cost;
  // The kernels after fusion as Graphviz DOT (dot.h), for the reports;
  // empty above kKernelGraphLimit kernels.
  std::string kernel_graph;
  std::vector<std::string> kernel_labels;  // each kernel's ops (dot.h's kernel_label), for per-kernel reports
  double compile_ms = 0;
  // What the backend decided compiling it (Executable::notes): candidates
  // timed and chosen, where its code came from.
  std::vector<std::string> backend_notes;
  // The fusion strategy's refusals, counted by code (module.h).
  std::array<uint32_t, kRefusalCodes> fusion_refusals{};
};

class ComputationCache {
 public:
  explicit ComputationCache(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Returns the entry and marks it most recently used, or nullptr.
  std::shared_ptr<CompiledGraph> find(uint64_t key);
  // Inserts and returns how many entries were evicted.
  size_t insert(uint64_t key, std::shared_ptr<CompiledGraph> entry);
  size_t size() const { return entries_.size(); }
  // The cached entries' source graphs, most recent first.
  std::vector<const Graph*> sources() const;
  size_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<uint64_t, std::shared_ptr<CompiledGraph>>;
  size_t capacity_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> entries_;
};

}  // namespace lazylab
