// Counters in the spirit of PyTorch/XLA's metrics report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lazylab {

struct Metrics {
  uint64_t traces = 0;        // syncs that found pending work
  uint64_t nodes_traced = 0;  // nodes recorded by the tensor API
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;  // each one a compilation (a new shape is a new graph)
  uint64_t evictions = 0;
  double compile_ms = 0;  // passes + backend compile, misses only
  double execute_ms = 0;  // backend execute calls, on the host (a device backend may return before it is done)
  // Device time of the executions waited for (Context::wait), measured by
  // the backend on its device; the last one alone too.
  double device_execute_ms = 0;
  double last_device_execute_ms = 0;
  // Data crossing between the host and the backend's buffers: parameters
  // entering (a tensor's first use on the backend) and host reads.
  uint64_t host_to_device_transfers = 0;
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_transfers = 0;
  uint64_t device_to_host_bytes = 0;
  // Parameter buffers given up with an execution whose memory an output
  // took (buffer donation: a step's new weights written over its old ones).
  uint64_t donated_buffers = 0;
  uint64_t donated_bytes = 0;
  // Each miss after the first, diagnosed against the nearest cached graph
  // with its hint ("constant at %3 changes: 0.99 -> 0.98; make it ...");
  // the first kMaxRecompileDiagnoses are kept.
  std::vector<std::string> recompile_diagnoses;
};

inline constexpr size_t kMaxRecompileDiagnoses = 100;

}  // namespace lazylab
