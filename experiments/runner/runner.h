// Runs an experiment: every workload x pipeline x backend cell, each checked
// against the reference backend at every step, timed over repeats that are
// interleaved across the cells of a workload. A cell that fails is recorded
// with its reason and the run goes on.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/pass_manager.h"
#include "core/program_cost.h"
#include "experiment.h"
#include "host_ceilings.h"
#include "output_check.h"
#include "peers.h"
#include "progress.h"
#include "statistics.h"
#include "torch_capture.h"

namespace lazylab {

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
  size_t pipeline_entry = 0;    // index into Experiment::pipelines
  // How reports name the workload and backend: labels where given, else the
  // name, with parameters where the experiment has the same workload twice
  // and with options where given.
  std::string workload_shown, backend_shown;

  bool same_except_pipeline(const CellIdentity& other) const;
};

// ok: ran and matched the reference at every step; mismatch: ran, some
// step's outputs differ; failed: an error stopped it (compile, execute, the
// reference); crashed: its child process died (isolated runs).
enum class CellStatus { Ok, Mismatch, Failed, Crashed };
const char* status_name(CellStatus status);

// A cell whose median's 95% interval is wider than this share of the median
// is too noisy to rank against its neighbours; reports say so.
inline constexpr double kNoisyRelativeWidth = 0.10;

struct CellResult : CellIdentity {
  CellStatus status = CellStatus::Ok;
  std::string error;  // why a failed or crashed cell stopped, with the step
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
  // Raw per-step samples of the timed steps, in the order they ran.
  std::vector<double> step_samples_ms, device_samples_ms;
  Estimate time;       // median of time_samples() with its 95% bootstrap interval
  bool noisy = false;  // time.relative_width() > kNoisyRelativeWidth
  int64_t nodes_per_step = 0;
  int64_t ops_per_step = 0;  // workload-defined (chain: 3 * iters)
  std::vector<PassStat> passes;
  std::map<std::string, uint64_t> fusion_refusals;  // by refusal code name, nonzero only
  ProgramCost cost;
  std::string kernel_graph;                // Graphviz DOT of the kernels after fusion; empty when too many to draw
  std::vector<std::string> kernel_labels;  // each kernel's ops
  std::vector<std::string> compile_notes;  // the backend's decisions at the cold compile (Executable::notes)
  // Each kernel's median time over the profiled steps (Experiment::
  // profile_steps), timed by the backend; empty when none was timed.
  std::vector<double> kernel_ms;
  // From the run's measured ceilings: traffic over the median step, and the
  // floor (minimum bytes at copy bandwidth, or FLOPs at the sgemm rate).
  double achieved_gb_s = 0;
  double copy_bandwidth_fraction = 0;
  double floor_ms = 0;
  double floor_fraction = 0;
  bool device_ceilings = false;  // the floor is from the backend's device ceilings, not the host's
  // The host's copy and sgemm rates probed once in each of the workload's
  // timed rounds (medians; 0 where none were), and the floor from them: the
  // machine's bandwidth while the cell's own steps ran, on a shared machine
  // whose copy rate moved 36-77 GB/s from one run to the next.
  double rounds_copy_gb_s = 0, rounds_sgemm_gflop_s = 0;
  double rounds_floor_ms = 0, rounds_floor_fraction = 0;
  Metrics metrics;
  // Baseline median / this median, with its interval (value 0: no baseline
  // cell, or either failed); the verdict reads the interval.
  Estimate speedup;
  Verdict speedup_verdict = Verdict::NoSignificantDifference;

  // A cell that did not run to the end: Failed or Crashed, with why.
  static CellResult failure(CellStatus status, std::string error);

  bool ran() const { return status == CellStatus::Ok || status == CellStatus::Mismatch; }
  // What comparisons use: the device time on a device backend (measured
  // there, as GPU peers are timed), else the whole step on the host.
  bool timed_on_device() const { return device_ceilings && !device_samples_ms.empty() && device_ms.median > 0; }
  const std::vector<double>& time_samples() const { return timed_on_device() ? device_samples_ms : step_samples_ms; }
  double time_ms() const { return timed_on_device() ? device_ms.median : step_ms.median; }
};

// "recompiled 12 times in 13 steps: constant at %3 changes: ...; make it
// ..." for a cell that missed the cache on every step after the first, or
// on more than half of them; else empty.
std::string recompile_warning(const CellResult& cell, int64_t steps);

// Sets each cell's speedup against the cell that differs from it only in
// having the baseline pipeline (value 0 where there is none or either
// failed), with a bootstrap interval over both cells' samples.
void compute_speedups(std::vector<CellResult>& cells, const std::string& baseline_pipeline, uint64_t seed = 0);

// The median with its interval and the noise flag, from the raw samples.
void summarize_samples(CellResult& cell, uint64_t seed);

// A backend's own device ceilings (a GPU's), measured by the backend.
struct DeviceCeilings {
  double copy_gb_s = 0, gemm_gflop_s = 0;
  std::string method;
  bool measured() const { return copy_gb_s > 0; }
};

// A `torch:` workload's capture (workload.h), by its entry.
struct CaptureResult {
  size_t workload_entry = 0;
  TorchCapture capture;
};

struct ExperimentResult {
  Experiment experiment;
  std::string shard;                            // "I/N" for a shard's run, else empty
  bool isolated = false;                        // each cell ran in a child process
  Ceilings ceilings;                            // the host's
  std::vector<DeviceCeilings> device_ceilings;  // by backend entry
  std::vector<CellResult> cells;
  std::vector<std::string> backend_devices;  // "name: description", one per backend
  std::vector<PeerResult> peers;
  std::vector<CaptureResult> captures;  // the torch workloads', by entry
  bool all_correct() const;
  size_t cells_with(CellStatus status) const;
  size_t failed_cells() const { return cells_with(CellStatus::Failed) + cells_with(CellStatus::Crashed); }
};

// The ceilings a backend's cells are measured against: its device's where
// the backend measured them, else the host's (no elementwise rate is
// measured on a device: 0 there).
struct CellCeilings {
  double copy_gb_s = 0, gemm_gflop_s = 0, elementwise_gop_s = 0;
  bool device = false;
};
CellCeilings ceilings_for(const ExperimentResult& result, size_t backend_entry);

// How reports name workload entry `w`: its label, else its name (with its
// parameters where the name is listed again, and its capture where given).
std::string workload_shown(const Experiment& e, size_t w);

// A backend plugin loaded and created in a child process: what it said, or
// how the child ended.
struct BackendProbe {
  std::string summary, device;
  std::string error;                 // an error it returned (refused as one loaded here is)
  std::string crash;                 // how the child died or hung, and at which stage; empty if it did not
  DeviceCeilings ceilings;           // measured there, where asked
  std::vector<std::string> options;  // what it declares (describe_options)
};

// Which backends a run keeps out of its own process: each is loaded and
// created in a child first (so a plugin that crashes there is named and its
// cells fail), and each of its cells runs in a child of its own (so one that
// crashes executing fails that cell). The backends lazylab ships
// (is_shipped_backend) run in-process unless every cell is asked for.
enum class Containment {
  ThirdParty,  // the default: plugins lazylab does not ship (and every cell, where the reference is one)
  All,         // --isolate: every backend
  None,        // --trust-plugins: everything in this process, as before containment
};

struct RunOptions {
  Progress* progress = nullptr;  // null: say nothing
  // Ceilings to use instead of measuring them (--ceilings, or a resumed run's);
  // a backend without pinned device ceilings has its own measured.
  std::optional<Ceilings> pinned_ceilings;
  std::optional<std::vector<DeviceCeilings>> pinned_device_ceilings;  // by backend entry
  // Cells already measured (--resume): a cell with the same identity is
  // taken from here instead of run again.
  std::vector<CellResult> resumed;
  // Which cells run (--filter); empty runs all. The baseline cell of a
  // selected cell runs too, so its speedup can be measured.
  std::function<bool(const CellIdentity&)> select;
  // --shard I/N: this run takes the I-th (1-based) of N shares of the
  // cells. The unit is a workload on one backend (all its pipelines, so
  // speedups stay within a shard), shares balanced by the workload's input
  // bytes; peers run in shard 1 only.
  struct Shard {
    size_t index = 1, count = 1;
  };
  std::optional<Shard> shard;
  // Runs one cell elsewhere (a child process running only it) and returns
  // its result, which may be Crashed; and loads and creates a backend
  // elsewhere. Without both, every backend runs in this process.
  std::function<CellResult(const CellIdentity&)> run_elsewhere;
  std::function<BackendProbe(const std::string& path, const std::string& options, bool ceilings)> probe_elsewhere;
  // The contained backends' cells run one after another, not interleaved.
  Containment containment = Containment::ThirdParty;
  // The child's side: only this cell runs (no baseline, ceilings or peers).
  struct OnlyCell {
    size_t workload = 0, backend = 0, pipeline = 0;
  };
  std::optional<OnlyCell> only_cell;
  // Called after each workload's cells are done, with the cells so far.
  std::function<void(const ExperimentResult&)> checkpoint;
};

// "I/N" with 1 <= I <= N.
Expected<RunOptions::Shard> parse_shard(const std::string& text);

// Everything named (workloads, pipelines, passes and their options, backends
// and their options, the reference) is resolved before anything is
// measured; an error there ends the run before it starts. After that, a
// cell that fails is recorded and the run goes on.
Expected<ExperimentResult> run_experiment(const Experiment& experiment, const RunOptions& options);

}  // namespace lazylab
