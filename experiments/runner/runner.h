// Runs an experiment: every workload x pipeline x backend cell, each checked
// against the reference backend, timed over repeats.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "ceilings.h"
#include "core/metrics.h"
#include "core/pass_manager.h"
#include "core/program_cost.h"
#include "experiment.h"
#include "peers.h"

namespace lazylab {

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> samples);

struct Correctness {
  bool pass = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string problem;  // first mismatch, shape or dtype difference
};

// What tells one cell from another: the workload with its parameters, the
// pipeline, and the backend with its options. Speedups compare cells that
// differ only in pipeline.
struct CellIdentity {
  std::string workload;            // built-in name or .lzir path
  WorkloadParams workload_params;  // every parameter, defaults included
  std::string pipeline;            // its name in the experiment
  std::string pipeline_text;
  std::string backend;
  std::string backend_options;  // "key=value,..." as given
  std::string label;            // the entries' labels, " / "-joined; may be empty
  size_t workload_entry = 0;    // index into Experiment::workloads
  size_t backend_entry = 0;     // index into Experiment::backends
  // How reports name the workload and backend: labels where given, else the
  // name, with parameters where the experiment has the same workload twice
  // and with options where given.
  std::string workload_shown, backend_shown;

  bool same_except_pipeline(const CellIdentity& other) const;
};

struct CellResult : CellIdentity {
  Correctness correctness;
  size_t kernels = 0;
  uint64_t arena_bytes = 0;        // peak arena bytes of the memory plan
  uint64_t naive_arena_bytes = 0;  // the same values without reuse
  double compile_ms = 0;           // cold: passes + backend compile on the first step
  // The same compile once more in a fresh engine: the in-memory cache is
  // empty, a backend's disk cache of compiled kernels is now warm.
  double recompile_ms = 0;
  double cold_step_ms = 0;      // the whole first step
  Spread step_ms;               // trace + sync + execute, per step, cache hits
  Spread trace_us;              // recording the step's ops
  Spread hit_sync_overhead_us;  // sync on a hit minus the backend's execute call (not its device time)
  Spread execute_ms;            // the backend's execute call, on the host
  Spread device_ms;             // the execution on the backend's device, timed there (CUDA events)
  int64_t nodes_per_step = 0;
  int64_t ops_per_step = 0;  // workload-defined (chain: 3 * iters)
  std::vector<PassStat> passes;
  ProgramCost cost;
  // From the run's measured ceilings: traffic over the median step, and the
  // floor (minimum bytes at copy bandwidth, or FLOPs at the sgemm rate).
  double achieved_gb_s = 0;
  double copy_bandwidth_fraction = 0;
  double floor_ms = 0;
  double floor_fraction = 0;
  bool device_ceilings = false;  // the floor is from the backend's device ceilings, not the host's
  Metrics metrics;
  double speedup_vs_baseline = 0;  // baseline median step / this median step

  // What comparisons use: the device time on a device backend (measured
  // there, as GPU peers are timed), else the whole step on the host.
  double time_ms() const { return device_ceilings && device_ms.median > 0 ? device_ms.median : step_ms.median; }
};

// Sets each cell's speedup_vs_baseline against the cell that differs from it
// only in having the baseline pipeline (0 where there is none).
void compute_speedups(std::vector<CellResult>& cells, const std::string& baseline_pipeline);

// A backend's own device ceilings (a GPU's), measured by the backend.
struct DeviceCeilings {
  double copy_gb_s = 0, gemm_gflop_s = 0;
  std::string method;
  bool measured() const { return copy_gb_s > 0; }
};

struct ExperimentResult {
  Experiment experiment;
  Ceilings ceilings;                            // the host's
  std::vector<DeviceCeilings> device_ceilings;  // by backend entry
  std::vector<CellResult> cells;
  std::vector<std::string> backend_devices;  // "name: description", one per backend
  std::vector<PeerResult> peers;
  bool all_correct() const;
};

// Errors (a workload that fails to build, a pipeline that does not parse, a
// backend that cannot load or run) end the run: no partial result.
Expected<ExperimentResult> run_experiment(const Experiment& experiment, std::ostream* progress);

}  // namespace lazylab
