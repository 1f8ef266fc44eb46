#include "cell_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/tensor_ops.h"

namespace lazylab {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
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

}  // namespace

EngineOptions engine_options(const Experiment& e) {
  EngineOptions options;
  options.cache_capacity = e.cache_capacity;
  options.verify_cache_hits = e.verify_cache_hits;
  if (e.limits.buffer_bytes) options.max_buffer_bytes = e.limits.buffer_bytes;
  if (e.limits.arena_bytes) options.max_arena_bytes = e.limits.arena_bytes;
  if (e.limits.memory_bytes) options.max_memory_bytes = e.limits.memory_bytes;
  if (e.limits.trace_nodes) options.max_trace_nodes = e.limits.trace_nodes;
  return options;
}

Expected<ReferenceOutputs> run_reference(const CellSetup& setup) {
  Engine engine(setup.pipeline, setup.backend, engine_options(setup.experiment));
  Context context(engine);
  std::vector<Tensor> inputs = bind_inputs(context, setup.inputs);
  std::vector<Tensor> outputs = setup.workload.step(context, inputs);
  LAZYLAB_TRY(outputs_ok(outputs, setup.workload.name()));
  LAZYLAB_TRY(context.sync());
  return read_outputs(outputs);
}

namespace {

// A cell's engine counts the reference's outputs, which the run holds while
// the cell steps, against the memory limit.
EngineOptions cell_engine_options(const Experiment& e, const ReferenceOutputs& reference) {
  EngineOptions options = engine_options(e);
  for (const std::vector<double>& values : reference.values) options.resident_bytes += values.size() * sizeof(double);
  return options;
}

}  // namespace

CellRun::CellRun(const CellSetup& setup, const ReferenceOutputs& reference, CellIdentity identity)
    : setup_(setup),
      reference_(reference),
      engine_(
          std::make_unique<Engine>(setup.pipeline, setup.backend, cell_engine_options(setup.experiment, reference))),
      context_(std::make_unique<Context>(*engine_)),
      inputs_(bind_inputs(*context_, setup.inputs)) {
  static_cast<CellIdentity&>(result_) = std::move(identity);
  result_.correctness.pass = true;
}

CellRun::~CellRun() = default;

void CellRun::step(int64_t index) {
  if (failed()) return;
  Status status = run_step(index);
  if (status) return;
  result_.status = CellStatus::Failed;
  result_.error = index == 0 ? status.error().message : fmt::format("step {}: {}", index, status.error().message);
  // The engine's buffers go now: a failed cell holds no memory while the
  // others go on.
  inputs_.clear();
  context_.reset();
  engine_.reset();
}

Status CellRun::run_step(int64_t index) {
  const Experiment& e = setup_.experiment;
  Metrics& metrics = context_->metrics();
  bool timed = index > e.warmup && index <= e.warmup + e.timed_steps();
  // Flushing, odd timed steps (and the profiled ones) are timed on the
  // device, queued behind the flush; the others on the host, after it.
  bool device_timed = !timed || e.flush_bytes == 0 || (index - e.warmup) % 2 == 1;
  bool host_timed = !timed || e.flush_bytes == 0 || !device_timed;
  // Profiled steps time each kernel on the device: queued behind the flush,
  // the first kernel does not start on an idle device either.
  bool profiled = index > e.warmup + e.timed_steps();
  if (index > 0 && e.flush_bytes > 0) LAZYLAB_TRY(flush_caches(/*wait=*/host_timed && !profiled));
  engine_->set_device_timing(device_timed || profiled);
  uint64_t nodes_before = metrics.nodes_traced;
  double execute_before = metrics.execute_ms;
  auto t0 = Clock::now();
  std::vector<Tensor> outputs = setup_.workload.step(*context_, inputs_);
  auto t1 = Clock::now();
  LAZYLAB_TRY(outputs_ok(outputs, setup_.workload.name()));
  LAZYLAB_TRY(context_->sync());
  auto synced = Clock::now();
  LAZYLAB_TRY(context_->wait());  // a device backend's sync may return before the work is done
  auto t2 = Clock::now();
  double execute = metrics.execute_ms - execute_before;
  result_.nodes_per_step = static_cast<int64_t>(metrics.nodes_traced - nodes_before);
  if (index == 0) {
    result_.cold_step_ms = elapsed_ms(t0, t2);
    record_compilation();
  } else if (timed) {
    if (device_timed) result_.device_samples_ms.push_back(metrics.last_device_execute_ms);
    if (host_timed) {
      result_.step_samples_ms.push_back(elapsed_ms(t0, t2));
      trace_us_.push_back(elapsed_ms(t0, t1) * 1e3);
      overhead_us_.push_back((elapsed_ms(t1, synced) - execute) * 1e3);
      execute_ms_.push_back(execute);
    }
  }
  // Every step is checked, outside the timed region: a race shows in some
  // steps only.
  auto checked =
      compare_outputs(outputs, reference_, e.reference.rtol, e.reference.atol, e.reference.relative_to == "output");
  if (!checked) return checked.error();
  absorb(result_.correctness, *checked, index);
  return {};
}

Status CellRun::flush_caches(bool wait) {
  if (!flush_engine_) {
    auto pipeline = parse_pipeline("lower");
    if (!pipeline) return pipeline.error();
    flush_engine_ = std::make_unique<Engine>(std::move(*pipeline), setup_.backend);
    flush_context_ = std::make_unique<Context>(*flush_engine_);
  }
  // Written, read back, written again. A backend that writes large outputs
  // past the caches (the cpu backend's non-temporal stores) leaves them as
  // they were: the read fills them (as 1024 rows, so it runs in parallel).
  // The last write leaves a GPU's L2 full of written lines, as the peers'
  // memset does.
  const int64_t elements = setup_.experiment.flush_bytes / 4, rows = 1024;
  TensorType type{DType::F32, {rows, elements / rows}};
  Tensor written = flush_context_->full(1.0, type);
  Tensor read_back = sum(written, {1});
  Tensor written_again = flush_context_->full(2.0, type);
  LAZYLAB_TRY(flush_context_->sync());
  return wait ? flush_context_->wait() : Status{};
}

void CellRun::record_compilation() {
  result_.compile_ms = context_->metrics().compile_ms;
  if (auto compiled = engine_->last_compiled()) {
    result_.passes = compiled->pass_stats;
    result_.kernels = compiled->num_kernels;
    result_.arena_bytes = compiled->arena_bytes;
    result_.naive_arena_bytes = compiled->naive_arena_bytes;
    result_.cost = compiled->cost;
    result_.kernel_graph = compiled->kernel_graph;
    result_.kernel_labels = compiled->kernel_labels;
    result_.compile_notes = compiled->backend_notes;
    for (int code = 1; code < kRefusalCodes; ++code)
      if (uint32_t count = compiled->fusion_refusals[code])
        result_.fusion_refusals[refusal_code_name(static_cast<RefusalCode>(code))] = count;
  }
}

void CellRun::profile_kernels() {
  const Experiment& e = setup_.experiment;
  std::vector<std::vector<double>> by_kernel(result_.kernel_labels.size());
  engine_->set_profile_kernels(true);
  for (int64_t i = 0; i < e.profile_steps && !failed(); ++i) {
    step(1 + e.warmup + e.timed_steps() + i);
    const Engine::KernelTimes& times = engine_->last_kernel_times();
    // Times of another graph than the one the reports describe (a step
    // that recompiled) say nothing about its kernels.
    if (failed() || times.graph != engine_->last_compiled().get() || times.ms.size() != by_kernel.size() ||
        std::any_of(times.ms.begin(), times.ms.end(), [](double ms) { return ms < 0; }))
      continue;
    for (size_t k = 0; k < by_kernel.size(); ++k) by_kernel[k].push_back(times.ms[k]);
  }
  if (!engine_) return;
  engine_->set_profile_kernels(false);
  if (by_kernel.empty() || by_kernel[0].empty()) return;
  for (auto& samples : by_kernel) result_.kernel_ms.push_back(spread_of(std::move(samples)).median);
}

CellResult CellRun::finish() {
  if (!failed()) profile_kernels();
  if (!failed()) {
    result_.recompile_ms = compile_again(setup_);
    result_.metrics = context_->metrics();
    if (!result_.correctness.pass) result_.status = CellStatus::Mismatch;
  }
  result_.step_ms = spread_of(result_.step_samples_ms);
  result_.device_ms = spread_of(result_.device_samples_ms);
  result_.trace_us = spread_of(trace_us_);
  result_.hit_sync_overhead_us = spread_of(overhead_us_);
  result_.execute_ms = spread_of(execute_ms_);
  result_.ops_per_step = setup_.workload.ops_per_step();
  return std::move(result_);
}

}  // namespace lazylab
