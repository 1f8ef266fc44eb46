// Ties one pipeline and one backend to a computation cache: look up by key,
// compile on a miss (passes, then the backend), execute, and keep metrics.
#pragma once

#include <memory>

#include "backend.h"
#include "compilation_cache.h"
#include "metrics.h"
#include "pipeline.h"

namespace lazylab {

// The host's physical memory in bytes.
uint64_t host_memory_bytes();

// The default bound on a trace between syncs (Context::max_trace_nodes):
// about 1.4 GB of nodes, far past any step of the suite or the ONNX models.
inline constexpr uint64_t kDefaultMaxTraceNodes = 5'000'000;

struct EngineOptions {
  size_t cache_capacity = 128;
  uint64_t max_trace_nodes = kDefaultMaxTraceNodes;
  // The most bytes one value (parameter, output or intermediate) and one
  // executable's arena may take; a Program over either is refused before the
  // backend allocates anything, with an error naming the value. A buffer
  // that large could not be read back to the host anyway.
  uint64_t max_buffer_bytes = host_memory_bytes();
  uint64_t max_arena_bytes = host_memory_bytes();
  // The most one execution may hold at once, its parameters, outputs and
  // arena with `resident_bytes` (what the caller holds beside them: a
  // runner's reference outputs); a Program over it is refused with the
  // figures before the backend allocates anything.
  uint64_t max_memory_bytes = host_memory_bytes();
  uint64_t resident_bytes = 0;
  int32_t device = 0;  // the backend device programs compile and run on
  // Compare the graph structurally on every hit; a mismatch (a 64-bit hash
  // collision) recompiles and replaces the entry instead of trusting it.
  bool verify_cache_hits = false;
  PassManagerOptions passes;
};

class Engine {
 public:
  Engine(Pipeline pipeline, Backend& backend, EngineOptions options = {});

  uint64_t cache_key(uint64_t graph_hash) const;
  // The cached entry for `key`, or nullptr; counts a hit when found.
  std::shared_ptr<CompiledGraph> lookup(uint64_t key);
  // Runs the pipeline and the backend on `graph` (parameters numbered
  // densely) and caches the result under `key`; counts a miss.
  Expected<std::shared_ptr<CompiledGraph>> compile(uint64_t key, const Graph& graph,
                                                   std::vector<int64_t> source_ordinals);

  // Enqueues an execution; outputs stay in the backend's buffers. `donated`
  // (empty, or one per parameter): nonzero where the caller gives that
  // parameter's buffer up, so an output may take its memory (counted in
  // metrics().donated_buffers where the backend did).
  Expected<std::vector<DeviceBufferPtr>> execute(CompiledGraph& compiled,
                                                 std::span<const DeviceBuffer* const> parameters,
                                                 std::span<const uint8_t> donated = {});
  // Waits until the last execution is complete and records its device time.
  Status wait();

  // Asks the backend to time each kernel of the executions that follow. It
  // may slow them down: for steps outside the timed ones.
  void set_profile_kernels(bool on) { profile_kernels_ = on; }
  // Whether the executions that follow are timed on the device (the
  // default). A device backend marks the start and end of each timed one on
  // its stream; a step timed only on the host leaves out those calls, and
  // wait() then waits for the whole device.
  void set_device_timing(bool on) { device_timing_ = on; }
  struct KernelTimes {
    const CompiledGraph* graph = nullptr;  // what ran
    std::vector<double> ms;                // per kernel, in its Program's order; empty when the backend gave none
  };
  // The last profiled execution that wait() saw complete.
  const KernelTimes& last_kernel_times() const { return last_kernel_times_; }

  const EngineOptions& options() const { return options_; }
  const Pipeline& pipeline() const { return pipeline_; }
  Backend& backend() { return backend_; }
  Metrics& metrics() { return metrics_; }
  const ComputationCache& cache() const { return cache_; }
  // The most recent compilation (for reports), or nullptr.
  std::shared_ptr<const CompiledGraph> last_compiled() const { return last_compiled_; }

 private:
  Pipeline pipeline_;
  Backend& backend_;
  EngineOptions options_;
  ComputationCache cache_;
  Metrics metrics_;
  std::shared_ptr<const CompiledGraph> last_compiled_;
  std::unique_ptr<DeviceEvent> last_execution_;
  const CompiledGraph* last_executed_ = nullptr;
  bool profile_kernels_ = false;
  bool device_timing_ = true;
  KernelTimes last_kernel_times_;
};

}  // namespace lazylab
