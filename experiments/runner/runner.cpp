#include "runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <ostream>

#include "core/backend.h"
#include "core/engine.h"
#include "core/pipeline.h"
#include "openblas_runtime.h"
#include "workload.h"

namespace lazylab {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Outputs {
  std::vector<TensorType> types;
  std::vector<std::vector<double>> values;
};

double element(const Buffer& buffer, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::F32: return reinterpret_cast<const float*>(buffer.data())[i];
    case DType::F64: return reinterpret_cast<const double*>(buffer.data())[i];
    case DType::I32: return reinterpret_cast<const int32_t*>(buffer.data())[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(buffer.data())[i]);
    case DType::Bool: return reinterpret_cast<const uint8_t*>(buffer.data())[i];
  }
  return 0;
}

Expected<Outputs> read_outputs(const std::vector<Tensor>& tensors) {
  Outputs outputs;
  for (const Tensor& tensor : tensors) {
    auto buffer = tensor.data();
    if (!buffer) return buffer.error();
    std::vector<double> values(tensor.type().num_elements());
    for (size_t i = 0; i < values.size(); ++i) values[i] = element(**buffer, tensor.dtype(), static_cast<int64_t>(i));
    outputs.types.push_back(tensor.type());
    outputs.values.push_back(std::move(values));
  }
  return outputs;
}

// numpy.allclose semantics: |a - b| <= atol + rtol * |b|; NaNs must match.
// Reads each output where it is on the host, without copying it (outputs
// of the large GPU workloads are checked every step).
Expected<Correctness> compare(const std::vector<Tensor>& got, const Outputs& want, double rtol, double atol) {
  Correctness c;
  c.pass = true;
  std::vector<TensorType> types;
  for (const Tensor& t : got) types.push_back(t.type());
  if (types != want.types) return Correctness{false, 0, 0, "output types differ from the reference"};
  for (size_t o = 0; o < got.size(); ++o) {
    auto buffer = got[o].data();
    if (!buffer) return buffer.error();
    const std::vector<double>& expected = want.values[o];
    for (size_t i = 0; i < expected.size(); ++i) {
      double a = element(**buffer, types[o].dtype, static_cast<int64_t>(i)), b = expected[i];
      if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
        bool same = (std::isnan(a) && std::isnan(b)) || a == b;
        if (!same && c.pass)
          c = {false, c.max_abs_error, c.max_rel_error,
               fmt::format("output {} element {}: {} vs reference {}", o, i, a, b)};
        continue;
      }
      double abs_error = std::fabs(a - b);
      c.max_abs_error = std::max(c.max_abs_error, abs_error);
      c.max_rel_error = std::max(c.max_rel_error, abs_error / std::max(std::fabs(b), 1e-30));
      if (abs_error > atol + rtol * std::fabs(b) && c.pass) {
        c.pass = false;
        c.problem = fmt::format("output {} element {}: {} vs reference {}", o, i, a, b);
      }
    }
  }
  return c;
}

Status outputs_ok(const std::vector<Tensor>& outputs, const std::string& workload) {
  for (const Tensor& t : outputs)
    if (!t.ok()) return make_error(fmt::format("workload {}: {}", workload, t.error()->message));
  return {};
}

struct CellSetup {
  const Experiment& experiment;
  const Workload& workload;
  const std::vector<HostTensor>& inputs;
  Backend& backend;
  const Pipeline& pipeline;
};

EngineOptions engine_options(const Experiment& e) {
  EngineOptions options;
  options.cache_capacity = e.cache_capacity;
  options.verify_cache_hits = e.verify_cache_hits;
  if (e.limits.buffer_bytes) options.max_buffer_bytes = e.limits.buffer_bytes;
  if (e.limits.arena_bytes) options.max_arena_bytes = e.limits.arena_bytes;
  return options;
}

// Inputs are allocated on the host, so they are checked before they are.
Status check_inputs(const Workload& workload, const WorkloadEntry& entry, const EngineOptions& options) {
  std::vector<TensorType> types = workload.input_types();
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i].bytes() > options.max_buffer_bytes)
      return make_error(
          fmt::format("workload {} ({}): input {} is {}, {} bytes, over the limit of {} bytes for one "
                      "buffer (limits.buffer-bytes)",
                      entry.name, describe_params(workload.params()), i, to_string(types[i]), types[i].bytes(),
                      options.max_buffer_bytes));
  return {};
}

// Folds one step's comparison into the cell's: the first failing step's
// problem, the largest errors of any step.
void absorb(Correctness& total, const Correctness& step, int64_t index) {
  total.max_abs_error = std::max(total.max_abs_error, step.max_abs_error);
  total.max_rel_error = std::max(total.max_rel_error, step.max_rel_error);
  if (!step.pass && total.pass) {
    total.pass = false;
    total.problem = fmt::format("step {}: {}", index, step.problem);
  }
}

Expected<Outputs> run_reference(const CellSetup& setup) {
  Engine engine(setup.pipeline, setup.backend, engine_options(setup.experiment));
  Context context(engine);
  std::vector<Tensor> inputs = bind_inputs(context, setup.inputs);
  std::vector<Tensor> outputs = setup.workload.step(context, inputs);
  LAZYLAB_TRY(outputs_ok(outputs, setup.workload.name()));
  LAZYLAB_TRY(context.sync());
  return read_outputs(outputs);
}

// The compile time of the cell's graph in a fresh engine (0 if it fails: the
// cell's own steps already reported any error).
double compile_again(const CellSetup& setup) {
  Engine engine(setup.pipeline, setup.backend, engine_options(setup.experiment));
  Context context(engine);
  std::vector<Tensor> inputs = bind_inputs(context, setup.inputs);
  std::vector<Tensor> outputs = setup.workload.step(context, inputs);
  if (!context.sync() || !context.wait()) return 0;
  return context.metrics().compile_ms;
}

Expected<CellResult> run_cell(const CellSetup& setup, const Outputs& reference) {
  const Experiment& e = setup.experiment;
  Engine engine(setup.pipeline, setup.backend, engine_options(e));
  Context context(engine);
  std::vector<Tensor> inputs = bind_inputs(context, setup.inputs);
  CellResult cell;
  cell.correctness.pass = true;
  std::vector<double> step_ms, trace_us, overhead_us, execute_ms, device_ms;
  for (int64_t step = 0; step < 1 + e.warmup + e.runs; ++step) {
    uint64_t nodes_before = context.metrics().nodes_traced;
    double execute_before = context.metrics().execute_ms;
    auto t0 = Clock::now();
    std::vector<Tensor> outputs = setup.workload.step(context, inputs);
    auto t1 = Clock::now();
    LAZYLAB_TRY(outputs_ok(outputs, setup.workload.name()));
    LAZYLAB_TRY(context.sync());
    auto synced = Clock::now();
    LAZYLAB_TRY(context.wait());  // a device backend's sync may return before the work is done
    auto t2 = Clock::now();
    double execute = context.metrics().execute_ms - execute_before;
    cell.nodes_per_step = static_cast<int64_t>(context.metrics().nodes_traced - nodes_before);
    if (step == 0) {
      cell.cold_step_ms = elapsed_ms(t0, t2);
      cell.compile_ms = context.metrics().compile_ms;
      if (auto compiled = engine.last_compiled()) {
        cell.passes = compiled->pass_stats;
        cell.kernels = compiled->num_kernels;
        cell.arena_bytes = compiled->arena_bytes;
        cell.naive_arena_bytes = compiled->naive_arena_bytes;
        cell.cost = compiled->cost;
      }
    } else if (step > e.warmup) {
      step_ms.push_back(elapsed_ms(t0, t2));
      trace_us.push_back(elapsed_ms(t0, t1) * 1e3);
      overhead_us.push_back((elapsed_ms(t1, synced) - execute) * 1e3);
      execute_ms.push_back(execute);
      device_ms.push_back(context.metrics().last_device_execute_ms);
    }
    // Every step is checked, outside the timed region: a race shows in some
    // steps only.
    auto checked = compare(outputs, reference, e.reference.rtol, e.reference.atol);
    if (!checked) return checked.error();
    absorb(cell.correctness, *checked, step);
  }
  cell.recompile_ms = compile_again(setup);
  cell.step_ms = spread_of(step_ms);
  cell.trace_us = spread_of(trace_us);
  cell.hit_sync_overhead_us = spread_of(overhead_us);
  cell.execute_ms = spread_of(execute_ms);
  cell.device_ms = spread_of(device_ms);
  cell.ops_per_step = setup.workload.ops_per_step();
  cell.metrics = context.metrics();
  return cell;
}

// The floor is the slowest of three bounds: the minimum bytes at copy
// bandwidth, the matmul FLOPs at the sgemm rate, and the elementwise work at
// the elementwise rate. Elementwise work is the least any pipeline of the
// run needed for that workload, so a pipeline that does more extra work is
// not given a higher floor for it.
void compute_rooflines(ExperimentResult& result) {
  const Ceilings& ceil = result.ceilings;
  std::map<size_t, uint64_t> least_elementwise;  // by workload entry
  for (const CellResult& cell : result.cells) {
    auto [it, inserted] = least_elementwise.emplace(cell.workload_entry, cell.cost.elementwise_ops);
    it->second = std::min(it->second, cell.cost.elementwise_ops);
  }
  auto ms_at = [](double amount, double per_second) { return per_second > 0 ? amount / per_second * 1e3 : 0.0; };
  for (CellResult& cell : result.cells) {
    // A device backend's cells are timed on its device, against its ceilings
    // (no elementwise rate is measured there: that bound is left out).
    const DeviceCeilings& device = result.device_ceilings[cell.backend_entry];
    cell.device_ceilings = device.measured();
    double copy = cell.device_ceilings ? device.copy_gb_s : ceil.copy_gb_s;
    double gemm = cell.device_ceilings ? device.gemm_gflop_s : ceil.sgemm_gflop_s;
    double elementwise = cell.device_ceilings ? 0 : ceil.elementwise_gop_s;
    double time_ms = cell.time_ms();
    double seconds = time_ms / 1e3;
    if (seconds <= 0) continue;
    cell.achieved_gb_s = static_cast<double>(cell.cost.total_bytes) / seconds / 1e9;
    cell.copy_bandwidth_fraction = cell.achieved_gb_s / copy;
    double memory_ms = ms_at(static_cast<double>(cell.cost.minimum_bytes), copy * 1e9);
    double matmul_ms = ms_at(static_cast<double>(cell.cost.flops), gemm * 1e9);
    double elementwise_ms = ms_at(static_cast<double>(least_elementwise[cell.workload_entry]), elementwise * 1e9);
    cell.floor_ms = std::max({memory_ms, matmul_ms, elementwise_ms});
    cell.floor_fraction = cell.floor_ms / time_ms;
  }
}

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
  std::vector<std::string> labels;
  for (const std::string* label : {&workload.label, &backend.label})
    if (!label->empty()) labels.push_back(*label);
  id.label = fmt::format("{}", fmt::join(labels, " / "));
  bool repeated = std::count_if(e.workloads.begin(), e.workloads.end(),
                                [&](const WorkloadEntry& other) { return other.name == workload.name; }) > 1;
  id.workload_shown = !workload.label.empty() ? workload.label
                      : repeated              ? fmt::format("{}[{}]", workload.name, describe_params(workload.params))
                                              : workload.name;
  id.backend_shown = !backend.label.empty()    ? backend.label
                     : backend.options.empty() ? backend.name
                                               : fmt::format("{}[{}]", backend.name, backend.options);
  return id;
}

}  // namespace

bool CellIdentity::same_except_pipeline(const CellIdentity& other) const {
  return workload == other.workload && workload_params == other.workload_params && backend == other.backend &&
         backend_options == other.backend_options && label == other.label;
}

void compute_speedups(std::vector<CellResult>& cells, const std::string& baseline_pipeline) {
  for (CellResult& cell : cells) {
    cell.speedup_vs_baseline = 0;
    for (const CellResult& base : cells)
      if (base.pipeline == baseline_pipeline && base.same_except_pipeline(cell) && cell.time_ms() > 0)
        cell.speedup_vs_baseline = base.time_ms() / cell.time_ms();
  }
}

Spread spread_of(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  double median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return {median, samples.front(), samples.back()};
}

bool ExperimentResult::all_correct() const {
  return std::all_of(cells.begin(), cells.end(), [](const CellResult& c) { return c.correctness.pass; });
}

Expected<ExperimentResult> run_experiment(const Experiment& e, std::ostream* progress) {
  // OpenBLAS's kernels are chosen, and the library loaded with them, before
  // a backend plugin loads it (it then finds it loaded; openblas_runtime.h).
  std::string not_chosen;
  if (!e.openblas_core.empty() && !openblas::choose_core(e.openblas_core, not_chosen) && progress)
    *progress << "  openblas-core " << e.openblas_core << " not applied: " << not_chosen << "\n";
  std::string no_openblas;  // the ceilings report it
  openblas::runtime(no_openblas);
  // Everything named is resolved before anything is measured, so a typo
  // costs no ceiling measurement.
  auto reference_backend = load_backend(e.reference.backend);
  if (!reference_backend) return reference_backend.error();
  auto reference_pipeline = parse_pipeline(e.reference.pipeline);
  if (!reference_pipeline) return make_error("reference: " + reference_pipeline.error().message);
  std::vector<Pipeline> pipelines;
  for (const PipelineEntry& entry : e.pipelines) {
    auto pipeline = parse_pipeline(entry.text);
    if (!pipeline) return make_error(fmt::format("pipelines.{}: {}", entry.name, pipeline.error().message));
    pipelines.push_back(std::move(*pipeline));
  }
  std::vector<std::unique_ptr<Workload>> workloads;
  for (const WorkloadEntry& entry : e.workloads) {
    auto workload = make_workload(entry.name, entry.params);
    if (!workload) return workload.error();
    LAZYLAB_TRY(check_inputs(**workload, entry, engine_options(e)));
    workloads.push_back(std::move(*workload));
  }
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::string> devices;
  for (const BackendEntry& entry : e.backends) {
    auto backend = load_backend(entry.name, entry.options);
    if (!backend) return backend.error();
    devices.push_back(entry.name + ": " + (*backend)->device_description());
    backends.push_back(std::move(*backend));
  }

  ExperimentResult result{e, measure_ceilings(), {}, {}, std::move(devices), {}};
  if (progress)
    *progress << fmt::format("  ceilings: copy {:.1f} GB/s, elementwise {:.1f} Gop/s, sgemm {:.1f} GFLOP/s\n",
                             result.ceilings.copy_gb_s, result.ceilings.elementwise_gop_s,
                             result.ceilings.sgemm_gflop_s);
  for (size_t b = 0; b < backends.size(); ++b) {
    auto device = backends[b]->measure_ceilings(0);
    if (!device) return make_error(fmt::format("backends[{}] ({}): {}", b, e.backends[b].name, device.error().message));
    result.device_ceilings.push_back({device->copy_gb_s, device->gemm_gflop_s, device->method});
    if (progress && result.device_ceilings.back().measured())
      *progress << fmt::format("  {} device ceilings: copy {:.0f} GB/s, f32 GEMM {:.0f} GFLOP/s\n", e.backends[b].name,
                               device->copy_gb_s, device->gemm_gflop_s);
  }
  for (size_t w = 0; w < workloads.size(); ++w) {
    const Workload& workload = *workloads[w];
    std::vector<HostTensor> inputs = workload.make_inputs(e.seed);
    auto reference = run_reference({e, workload, inputs, **reference_backend, *reference_pipeline});
    if (!reference)
      return make_error(fmt::format("{} on the reference: {}", e.workloads[w].name, reference.error().message));
    for (size_t b = 0; b < backends.size(); ++b)
      for (size_t p = 0; p < pipelines.size(); ++p) {
        CellIdentity id = identify(e, w, p, b, workload.params());
        if (progress)
          *progress << fmt::format("  {} / {} / {} ...", id.workload_shown, id.pipeline, id.backend_shown)
                    << std::flush;
        auto cell = run_cell({e, workload, inputs, *backends[b], pipelines[p]}, *reference);
        if (!cell)
          return make_error(
              fmt::format("{} / {} / {}: {}", id.workload_shown, id.pipeline, id.backend_shown, cell.error().message));
        static_cast<CellIdentity&>(*cell) = std::move(id);
        if (progress)
          *progress << fmt::format(" {:.3f} ms {}\n", cell->step_ms.median, cell->correctness.pass ? "ok" : "MISMATCH");
        result.cells.push_back(std::move(*cell));
      }
  }
  compute_rooflines(result);  // first: it says which cells are timed on a device
  compute_speedups(result.cells, e.baseline);
  for (const PeerEntry& peer : e.peers) {
    if (progress) *progress << fmt::format("  peer {} ...", peer.name) << std::flush;
    result.peers.push_back(run_peer(peer, e, result.ceilings.blas_core));
    if (progress)
      *progress << (result.peers.back().error.empty() ? fmt::format(" {} workloads\n", result.peers.back().cells.size())
                                                      : " failed: " + result.peers.back().error + "\n");
  }
  return result;
}

}  // namespace lazylab
