#include "runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <random>
#include <sstream>

#include "cell_run.h"
#include "child_process.h"
#include "core/pass_plugin.h"
#include "footprint.h"
#include "peer_rounds.h"
#include "resolve.h"
#include "rooflines.h"

namespace lazylab {

std::string workload_shown(const Experiment& e, size_t w) {
  const WorkloadEntry& workload = e.workloads[w];
  if (!workload.label.empty()) return workload.label;
  bool repeated = std::count_if(e.workloads.begin(), e.workloads.end(), [&](const WorkloadEntry& other) {
                    return other.name == workload.name && other.inputs == workload.inputs;
                  }) > 1;
  std::string shown = repeated ? fmt::format("{}[{}]", workload.name, describe_params(workload.params)) : workload.name;
  if (!workload.inputs.empty()) shown = fmt::format("{} ({} inputs)", shown, workload.inputs);
  if (!workload.train_loss.empty())
    shown = fmt::format("{} (train: {}, {})", shown, workload.train_loss, workload.train_optimizer);
  return workload.capture.empty() ? shown : fmt::format("{} ({})", shown, workload.capture);
}

namespace {

// The cell's identity from the experiment's entries; `params` are the
// workload's resolved parameters.
CellIdentity identify(const Experiment& e, size_t w, size_t p, size_t b, WorkloadParams params) {
  const WorkloadEntry& workload = e.workloads[w];
  const BackendEntry& backend = e.backends[b];
  CellIdentity id;
  id.workload = workload.name;
  id.workload_params = std::move(params);
  id.pipeline = e.pipelines[p].name;
  id.pipeline_text = e.pipelines[p].text;
  id.backend = backend.name;
  id.backend_options = backend.options;
  id.workload_entry = w;
  id.backend_entry = b;
  id.pipeline_entry = p;
  std::vector<std::string> labels;
  for (const std::string* label : {&workload.label, &backend.label})
    if (!label->empty()) labels.push_back(*label);
  id.label = fmt::format("{}", fmt::join(labels, " / "));
  id.workload_shown = workload_shown(e, w);
  id.backend_shown = !backend.label.empty()    ? backend.label
                     : backend.options.empty() ? backend.name
                                               : fmt::format("{}[{}]", backend.name, backend.options);
  return id;
}

}  // namespace

namespace {

Status measure_all_ceilings(const Experiment& e, const Resolved& r, const RunOptions& options, HostMeter& host,
                            ExperimentResult& result) {
  Progress* progress = options.progress;
  if (options.pinned_ceilings) {
    result.ceilings = *options.pinned_ceilings;
  } else {
    auto measured = host.measure();
    if (!measured) return measured.error();
    result.ceilings = std::move(*measured);
  }
  if (progress)
    progress->line(fmt::format("  ceilings{}: copy {:.1f} GB/s, elementwise {:.1f} Gop/s, sgemm {:.1f} GFLOP/s",
                               options.pinned_ceilings ? " (pinned)" : "", result.ceilings.copy_gb_s,
                               result.ceilings.elementwise_gop_s, result.ceilings.gemm_gflop_s));
  for (size_t b = 0; b < r.backends.size(); ++b) {
    if (options.pinned_device_ceilings && b < options.pinned_device_ceilings->size() &&
        (*options.pinned_device_ceilings)[b].measured()) {
      result.device_ceilings.push_back((*options.pinned_device_ceilings)[b]);
      continue;
    }
    if (!r.backends[b]) {  // contained: measured in its child, or not at all
      result.device_ceilings.push_back(r.probed_ceilings[b]);
      continue;
    }
    auto device = r.backends[b]->measure_ceilings(0);
    if (!device) return make_error(fmt::format("backends[{}] ({}): {}", b, e.backends[b].name, device.error().message));
    result.device_ceilings.push_back({device->copy_gb_s, device->gemm_gflop_s, device->method});
    if (progress && result.device_ceilings.back().measured())
      progress->line(fmt::format("  {} device ceilings: copy {:.0f} GB/s, f32 GEMM {:.0f} GFLOP/s", e.backends[b].name,
                                 device->copy_gb_s, device->gemm_gflop_s));
  }
  return {};
}

const CellResult* find_resumed(const RunOptions& options, const CellIdentity& id) {
  for (const CellResult& cell : options.resumed)
    if (cell.pipeline == id.pipeline && cell.pipeline_text == id.pipeline_text && cell.same_except_pipeline(id))
      return &cell;
  return nullptr;
}

// The host's copy and sgemm rates, one sample of each a timed round. A
// sample that fails stops the sampling (the run says why) and leaves the
// cells without rates of their rounds, as a run that takes none.
struct RoundRates {
  std::vector<double> copy_gb_s, sgemm_gflop_s;
  bool failed = false;
  void probe(HostMeter& host, Progress* progress) {
    if (failed) return;
    auto sample = host.sample();
    if (!sample || !*sample) {
      failed = true;
      copy_gb_s.clear();
      sgemm_gflop_s.clear();
      if (!sample && progress) progress->line("  the host's rates in rounds not taken: " + sample.error().message);
      return;
    }
    copy_gb_s.push_back((*sample)->copy_gb_s);
    if ((*sample)->gemm_gflop_s > 0) sgemm_gflop_s.push_back((*sample)->gemm_gflop_s);
  }
  void give_to(CellResult& cell) const {
    if (copy_gb_s.empty()) return;
    cell.rounds_copy_gb_s = spread_of(copy_gb_s).median;
    cell.rounds_sgemm_gflop_s = sgemm_gflop_s.empty() ? 0 : spread_of(sgemm_gflop_s).median;
  }
};

// A workload's cells are stepped in rounds: every cell once per round, in
// an order shuffled per round (seeded), so drift of a shared machine falls
// on them alike instead of on whichever cell ran last. The host probe, where
// given, runs after the cells of each timed round; the peers' rounds, where
// given, before the timed rounds they are due at, after which the cells
// warm up again.
void run_rounds(const Experiment& e, size_t workload_index, std::vector<std::unique_ptr<CellRun>>& runs,
                HostMeter* probe, RoundRates& rates, PeerRounds* peers, Progress* progress) {
  for (auto& run : runs) run->step(0);
  std::vector<CellRun*> order;
  for (auto& run : runs) order.push_back(run.get());
  std::mt19937_64 rng(e.seed * 1000003 + workload_index);
  for (int64_t step = 1; step <= e.warmup + e.timed_steps(); ++step) {
    if (progress)
      progress->working_on(fmt::format("{}, round {} of {}", e.workloads[workload_index].name, step + 1,
                                       1 + e.warmup + e.timed_steps()));
    if (e.interleave) std::shuffle(order.begin(), order.end(), rng);
    if (peers && step > e.warmup && peers->before_step(workload_index, step - e.warmup, e.timed_steps()))
      for (int64_t warm = 1; warm <= e.warmup; ++warm)  // the peers' processes had the machine
        for (CellRun* run : order) run->step(warm);
    for (CellRun* run : order) run->step(step);
    if (probe && step > e.warmup) rates.probe(*probe, progress);
  }
}

// Runs one cell after another, all steps each (repeat.interleave: false).
void run_in_sequence(const Experiment& e, std::vector<std::unique_ptr<CellRun>>& runs) {
  for (auto& run : runs)
    for (int64_t step = 0; step <= e.warmup + e.timed_steps(); ++step) run->step(step);
}

void report_cell(Progress* progress, const CellResult& c) {
  if (!progress) return;
  std::string outcome = c.ran()
                            ? fmt::format("{:.4f} ms{} {}", c.time_ms(), c.noisy ? " (noisy)" : "",
                                          c.status == CellStatus::Ok ? "ok" : "MISMATCH")
                            : fmt::format("{}: {}", c.status == CellStatus::Crashed ? "CRASHED" : "FAILED", c.error);
  progress->cell_done(fmt::format("{} / {} / {}", c.workload_shown, c.pipeline, c.backend_shown), outcome);
}

// The shard (0-based) of each (workload, backend) group, by w * backends +
// b: longest first onto the least loaded shard, costs from the workloads'
// input bytes (ties broken by order), so every shard computes the same plan.
std::vector<size_t> assign_shards(const Resolved& r, size_t count) {
  size_t backends = r.backends.size();
  std::vector<std::pair<double, size_t>> groups;  // (cost, group)
  for (size_t w = 0; w < r.workloads.size(); ++w) {
    double bytes = 1;
    for (const TensorType& type : r.workloads[w]->input_types()) bytes += static_cast<double>(type.bytes());
    for (size_t b = 0; b < backends; ++b) groups.push_back({bytes, w * backends + b});
  }
  std::stable_sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<double> load(count, 0);
  std::vector<size_t> shard_of(groups.size());
  for (auto [cost, group] : groups) {
    size_t lightest = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shard_of[group] = lightest;
    load[lightest] += cost;
  }
  return shard_of;
}

// Which cells of workload `w` run, by backend * pipelines + pipeline: the
// selected ones and their baselines.
std::vector<bool> selected_cells(const Experiment& e, const Resolved& r, size_t w, const RunOptions& options) {
  size_t pipelines = r.pipelines.size();
  std::vector<bool> wanted(r.backends.size() * pipelines, true);
  if (options.only_cell) {
    std::fill(wanted.begin(), wanted.end(), false);
    if (options.only_cell->workload == w)
      wanted[options.only_cell->backend * pipelines + options.only_cell->pipeline] = true;
    return wanted;
  }
  std::vector<size_t> shard_of = options.shard ? assign_shards(r, options.shard->count) : std::vector<size_t>();
  size_t baseline = static_cast<size_t>(std::find_if(e.pipelines.begin(), e.pipelines.end(),
                                                     [&](const PipelineEntry& p) { return p.name == e.baseline; }) -
                                        e.pipelines.begin());
  for (size_t b = 0; b < r.backends.size(); ++b) {
    bool in_shard = !options.shard || shard_of[w * r.backends.size() + b] == options.shard->index - 1;
    bool any = false;
    for (size_t p = 0; p < pipelines; ++p) {
      bool chosen = in_shard && (!options.select || options.select(identify(e, w, p, b, r.workloads[w]->params())));
      wanted[b * pipelines + p] = chosen;
      any = any || chosen;
    }
    if (any && baseline < pipelines) wanted[b * pipelines + baseline] = true;
  }
  return wanted;
}

// Every cell of workload `w`: taken from the resumed ones where present,
// else run (a reference that fails fails the workload's cells).
void run_workload(const Experiment& e, Resolved& r, size_t w, const RunOptions& options, HostMeter* probe,
                  PeerRounds* peers, std::vector<CellResult>& cells) {
  const Workload& workload = *r.workloads[w];
  std::vector<CellIdentity> pending;
  std::vector<std::pair<size_t, size_t>> pending_at;  // (backend, pipeline)
  std::map<std::pair<size_t, size_t>, CellResult> done;
  std::vector<bool> wanted = selected_cells(e, r, w, options);
  for (size_t b = 0; b < r.backends.size(); ++b)
    for (size_t p = 0; p < r.pipelines.size(); ++p) {
      if (!wanted[b * r.pipelines.size() + p]) continue;
      CellIdentity id = identify(e, w, p, b, workload.params());
      if (const CellResult* earlier = find_resumed(options, id)) {
        CellResult cell = *earlier;
        static_cast<CellIdentity&>(cell) = std::move(id);
        done.emplace(std::pair{b, p}, std::move(cell));
      } else {
        pending.push_back(std::move(id));
        pending_at.push_back({b, p});
      }
    }
  // The cells of contained backends, one after another in children; those
  // of a backend that could not be created, or of a workload that could not
  // be made, failed with why.
  for (size_t i = 0; i < pending.size();) {
    size_t b = pending_at[i].first;
    if (!r.contained[b] && !workload.failure()) {
      ++i;
      continue;
    }
    if (options.progress)
      options.progress->working_on(
          fmt::format("{} / {} / {}", pending[i].workload_shown, pending[i].pipeline, pending[i].backend_shown));
    CellResult cell = workload.failure()      ? CellResult::failure(CellStatus::Failed, *workload.failure())
                      : r.unusable[b].empty() ? options.run_elsewhere(pending[i])
                                              : CellResult::failure(CellStatus::Crashed, r.unusable[b]);
    static_cast<CellIdentity&>(cell) = pending[i];
    report_cell(options.progress, cell);
    done.emplace(pending_at[i], std::move(cell));
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    pending_at.erase(pending_at.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (!pending.empty()) {
    if (options.progress) {
      options.progress->line(fmt::format("  {}: {} cells, {} rounds{}", e.workloads[w].name, pending.size(),
                                         1 + e.warmup + e.timed_steps(), e.interleave ? ", interleaved" : ""));
      options.progress->working_on(e.workloads[w].name);
    }
    std::vector<HostTensor> inputs = workload.make_inputs(e.seed);
    auto reference = run_reference({e, workload, inputs, *r.reference_backend, r.reference_pipeline});
    std::vector<std::unique_ptr<CellRun>> runs;
    for (size_t i = 0; i < pending.size() && reference; ++i) {
      auto [b, p] = pending_at[i];
      runs.push_back(std::make_unique<CellRun>(CellSetup{e, workload, inputs, *r.backends[b], r.pipelines[p]},
                                               *reference, pending[i]));
    }
    RoundRates rates;
    if (e.interleave)
      run_rounds(e, w, runs, probe, rates, peers, options.progress);
    else
      run_in_sequence(e, runs);
    for (size_t i = 0; i < pending.size(); ++i) {
      CellResult cell =
          reference ? runs[i]->finish()
                    : CellResult::failure(CellStatus::Failed, "the reference failed: " + reference.error().message);
      static_cast<CellIdentity&>(cell) = pending[i];
      rates.give_to(cell);
      report_cell(options.progress, cell);
      done.emplace(pending_at[i], std::move(cell));
    }
  }
  if (peers) peers->finish(w);
  for (auto& [at, cell] : done) cells.push_back(std::move(cell));
}

// Whether a workload's rounds probe the host's rates: where some backend's
// cells are timed on the host, against ceilings measured in this run, each
// step behind a flush (a probe would otherwise leave the next step's caches
// cold where the experiment wants them warm).
bool probes_rounds(const Experiment& e, const RunOptions& options, const ExperimentResult& result) {
  bool host_backend = std::any_of(result.device_ceilings.begin(), result.device_ceilings.end(),
                                  [](const DeviceCeilings& device) { return !device.measured(); });
  return host_backend && e.interleave && e.flush_bytes > 0 && e.timed_steps() > 0 && !options.pinned_ceilings &&
         !options.only_cell && !result.isolated;
}

// Whether the peers run in rounds beside the cells (peer-rounds): not in a
// shard (peers run in the first only, once) or a single cell's child, and
// not where every cell runs in a child of its own (no rounds here to set
// them beside); the run says so where it was asked for.
bool peers_in_rounds(const Experiment& e, const RunOptions& options, const ExperimentResult& result) {
  if (e.peer_rounds == 0 || e.peers.empty() || options.only_cell) return false;
  std::string why = options.shard     ? "a shard runs the peers once (in shard 1)"
                    : result.isolated ? "every cell runs in a child of its own"
                                      : "";
  if (!why.empty() && options.progress)
    options.progress->line("  peer-rounds not applied: " + why + "; the peers run once, after every cell");
  return why.empty();
}

// How many cells the run will measure: the selected ones, less those taken
// from a resumed run (progress counts only what it waits for).
size_t count_cells(const Experiment& e, const Resolved& r, const RunOptions& options) {
  size_t total = 0;
  for (size_t w = 0; w < r.workloads.size(); ++w) {
    std::vector<bool> wanted = selected_cells(e, r, w, options);
    for (size_t b = 0; b < r.backends.size(); ++b)
      for (size_t p = 0; p < r.pipelines.size(); ++p)
        if (wanted[b * r.pipelines.size() + p] &&
            !find_resumed(options, identify(e, w, p, b, r.workloads[w]->params())))
          ++total;
  }
  return total;
}

}  // namespace

// The experiment's prepare command, in its folder; its output goes to the
// terminal (an export says what it made).
Status prepare(const Experiment& e, const RunOptions& options) {
  if (options.progress) options.progress->working_on("prepare: " + fmt::format("{}", fmt::join(e.prepare, " ")));
  ChildOptions child;
  std::string folder = std::filesystem::path(e.path).parent_path().string();
  child.folder = folder.empty() ? "." : folder;
  ChildOutcome outcome = run_child(e.prepare, child);
  if (!outcome.succeeded()) return experiment_error(e, e.prepare_line, "prepare", outcome.describe(e.prepare.front()));
  return {};
}

Expected<ExperimentResult> run_experiment(const Experiment& e, const RunOptions& options) {
  if (!e.prepare.empty() && !options.only_cell) LAZYLAB_TRY(prepare(e, options));
  auto resolved = resolve(e, options);
  if (!resolved) return resolved.error();
  ExperimentResult result{e, "", resolved->every_cell_contained, {}, {}, {}, resolved->devices, {}, {}};
  for (size_t w = 0; w < resolved->workloads.size(); ++w)
    if (const TorchCapture* capture = resolved->workloads[w]->torch_capture()) result.captures.push_back({w, *capture});
  if (result.isolated) result.experiment.interleave = false;
  HostMeter host = options.only_cell || options.pinned_ceilings ? HostMeter() : HostMeter::find(e, *resolved);
  if (!options.only_cell)
    LAZYLAB_TRY(measure_all_ceilings(e, *resolved, options, host, result));
  else
    result.device_ceilings.resize(e.backends.size());
  if (options.progress) options.progress->start(count_cells(e, *resolved, options));
  HostMeter* probe = probes_rounds(e, options, result) ? &host : nullptr;
  std::unique_ptr<PeerRounds> peer_rounds =
      peers_in_rounds(e, options, result)
          ? std::make_unique<PeerRounds>(e, result.ceilings.peer_environment, options.progress)
          : nullptr;
  for (size_t w = 0; w < resolved->workloads.size(); ++w) {
    run_workload(e, *resolved, w, options, probe, peer_rounds.get(), result.cells);
    if (options.checkpoint) options.checkpoint(result);
  }
  compute_rooflines(result);  // first: it says which cells are timed on a device
  for (CellResult& cell : result.cells) summarize_samples(cell, e.seed);
  compute_speedups(result.cells, e.baseline, e.seed);
  if (options.shard) result.shard = fmt::format("{}/{}", options.shard->index, options.shard->count);
  if (peer_rounds) result.peers = peer_rounds->take();
  for (size_t p = 0; p < e.peers.size(); ++p) {
    if ((options.shard && options.shard->index != 1) || options.only_cell) break;
    if (!peer_rounds) {
      if (options.progress) options.progress->working_on("peer " + e.peers[p].name);
      result.peers.push_back(run_peer(e.peers[p], e, result.ceilings.peer_environment));
    }
    const PeerResult& peer = result.peers[p];
    if (options.progress)
      options.progress->line(peer.error.empty() ? fmt::format("  peer {}: {} workloads", peer.name, peer.cells.size())
                                                : fmt::format("  peer {}: failed: {}", peer.name, peer.error));
  }
  return result;
}

}  // namespace lazylab
