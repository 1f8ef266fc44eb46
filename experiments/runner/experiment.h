// An experiment: workloads x pipelines x backends, with the repeat policy,
// the correctness reference and the report outputs. Loaded from YAML; the
// commented schema is experiments/quickstart.yaml.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.h"
#include "workload.h"

namespace lazylab {

struct WorkloadEntry {
  std::string name;  // built-in name, or a .lzir path (resolved against the experiment's folder)
  WorkloadParams params;
  std::string label;    // optional, for reports
  std::string weights;  // optional, for a .lzir file: a folder of N.npy bound to parameter N
  std::string capture;  // optional, for a PyTorch program: how its step is captured (empty: the lazy device)
  std::string inputs;   // optional: the 16-bit float dtype its f32 inputs are stored in (empty: f32)
  // optional: trained (training_step.h) with this loss and optimizer (empty: not a training step)
  std::string train_loss, train_optimizer;
  int line = 0;  // in the experiment file, for errors
};

// A training step's "LOSS/OPTIMIZER", as a peer's cell names it; "" for a
// forward.
inline std::string training_of(const WorkloadEntry& w) {
  return w.train_loss.empty() ? "" : w.train_loss + "/" + w.train_optimizer;
}

struct PipelineEntry {
  std::string name;  // templated pipelines: "name[option=value,...]"
  std::string text;
  int line = 0;
};

struct BackendEntry {
  std::string name;
  std::string options;
  std::string label;  // optional, for reports
  int line = 0;       // in the experiment file, for errors
};

// A program timed on the same workloads in the same run (peers.h).
struct PeerEntry {
  std::string name;
  std::vector<std::string> command;
};

// An override of one experiment key from the command line (--set KEY=VALUE):
// KEY is a dotted path with [i] for list items ("repeat.runs",
// "workloads[0].params.rows"); VALUE is YAML ("3", "[cpu, interp]").
struct KeyOverride {
  std::string key, value;
};

struct Experiment {
  std::string path;
  std::string name;
  std::string description;
  uint64_t seed = 0;
  std::vector<WorkloadEntry> workloads;
  std::vector<PipelineEntry> pipelines;
  std::string baseline;  // a pipeline name
  std::vector<BackendEntry> backends;
  std::vector<PeerEntry> peers;
  // A command run in the experiment's folder before any workload is loaded
  // (`prepare: [command, args...]`): it makes files the workloads read, such
  // as exported models, and skips what is already made.
  std::vector<std::string> prepare;
  int prepare_line = 0;
  // Pass and strategy plugins (paths relative to the experiment file,
  // resolved), loaded by the runner before it parses any pipeline.
  struct Plugin {
    std::string path;
    int line = 0;
  };
  std::vector<Plugin> plugins;
  double peer_timeout_s = 3600;  // a peer still running then is killed and reported
  // `peer-rounds: R`: each peer times each workload in R rounds, one before
  // each R-th of the workload's timed rounds, so that a peer and the cells
  // it is set beside see the machine of the same minutes (peer_rounds.h). 0: the
  // peers run once, after every cell.
  int64_t peer_rounds = 0;
  int64_t warmup = 2;
  int64_t runs = 10;
  // Steps after the timed ones with each kernel timed (a backend's per-kernel
  // timers cost time, so these steps are not among the timed ones); the
  // reports give each kernel's median. 0: none.
  int64_t profile_steps = 3;
  // Step the cells of a workload in rounds, shuffled per round (runner.h).
  bool interleave = true;
  // Before each step after the cold one, write this many bytes on the cell's
  // backend, so that every step starts from cold caches, as the GPU peers
  // time theirs (a memset of 256 MiB before each step). The timed steps then
  // alternate: a device-timed step queued behind the flush (as the peers'
  // are: no idle device before it), and a host-timed step after the flush
  // has finished (its host time holds no flush); `runs` samples of each.
  // 0: no flush.
  int64_t flush_bytes = 0;
  // The timed steps: two per run when flushing (see flush_bytes).
  int64_t timed_steps() const { return flush_bytes > 0 ? 2 * runs : runs; }
  struct {
    std::string backend = "interp";
    std::string pipeline = "lower";
    double rtol = 1e-4;
    double atol = 1e-5;
    // "element": rtol of each element's magnitude; "output": of the output's
    // largest (output_check.h).
    std::string relative_to = "element";
    int line = 0;
  } reference;
  struct {
    std::string json;
    std::string markdown;
    std::string csv;
    std::string html;
  } report;
  size_t cache_capacity = 64;
  bool verify_cache_hits = false;
  // Bytes: one buffer, one executable's arena, and all a cell holds at once
  // (its inputs, the reference's outputs, its own outputs and arena); 0:
  // the host's memory. Nodes: one trace between syncs (0: the default,
  // kDefaultMaxTraceNodes).
  struct {
    uint64_t buffer_bytes = 0;
    uint64_t arena_bytes = 0;
    uint64_t memory_bytes = 0;
    uint64_t trace_nodes = 0;
  } limits;
  uint64_t hash = 0;                   // of the file's bytes and the overrides
  std::vector<KeyOverride> overrides;  // --set, in order
};

Expected<KeyOverride> parse_key_override(const std::string& text);

// Sweeps expand here: a workload parameter given as a list, or several, is
// one entry per combination (a grid); an option value written as a brace
// list in a pipeline ("plan-memory{algo={naive,linear-scan}}") is one
// pipeline per value, named "name[algo=naive]".
Expected<Experiment> load_experiment(const std::string& path, const std::vector<KeyOverride>& overrides = {});
Expected<Experiment> parse_experiment(const std::string& text, const std::string& path,
                                      const std::vector<KeyOverride>& overrides = {});

// "file:line: key: message", for errors found after loading.
Error experiment_error(const Experiment& experiment, int line, const std::string& key, const std::string& message);

}  // namespace lazylab
