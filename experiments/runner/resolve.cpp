#include "resolve.h"

#include <fmt/format.h>

#include "cell_run.h"
#include "child_process.h"
#include "core/pass_plugin.h"
#include "footprint.h"
#include "training_step.h"

namespace lazylab {
namespace {

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

// A workload whose step traces past the trace limit, or whose inputs, outputs
// and reference outputs together pass the memory limit, is refused before
// anything is allocated (its arena is checked when it compiles).
Status check_footprint(const Workload& workload, const WorkloadEntry& entry, const EngineOptions& options) {
  auto footprint = trace_footprint(workload, options);
  std::string name = fmt::format("workload {} ({})", entry.name, describe_params(workload.params()));
  if (!footprint) return make_error(fmt::format("{}: {}", name, footprint.error().message));
  if (footprint->total() <= options.max_memory_bytes) return {};
  return make_error(fmt::format(
      "{}: a cell would hold {} at once, over the limit of {} (limits.memory-bytes): inputs {}, outputs {}, the "
      "reference's outputs as checked {}, before any arena",
      name, describe_bytes(footprint->total()), describe_bytes(options.max_memory_bytes),
      describe_bytes(footprint->input_bytes), describe_bytes(footprint->output_bytes),
      describe_bytes(footprint->reference_bytes)));
}

Expected<Pipeline> resolve_pipeline(const Experiment& e, int line, const std::string& key, const std::string& text) {
  auto pipeline = parse_pipeline(text);
  if (!pipeline) return experiment_error(e, line, key, pipeline.error().message);
  if (!pipeline->lowers)
    return experiment_error(e, line, key,
                            fmt::format("'{}' does not lower the graph to a Program; end it with 'lower'", text));
  return pipeline;
}

// Whether the backend in `path` is kept out of this process.
bool contains(const std::string& path, const RunOptions& options) {
  if (!options.run_elsewhere || !options.probe_elsewhere || options.only_cell) return false;
  return options.containment == Containment::All ||
         (options.containment == Containment::ThirdParty && !is_shipped_backend(path));
}

// Loads the experiment's backends, here or (contained) in a child each.
Status resolve_backends(const Experiment& e, const RunOptions& options, Resolved& r) {
  auto reference_path = find_backend_file(e.reference.backend);
  if (!reference_path)
    return experiment_error(e, e.reference.line, "reference.backend", reference_path.error().message);
  // A contained reference runs in each cell's child, so every cell does.
  r.every_cell_contained = contains(*reference_path, options) ||
                           (options.containment == Containment::All && options.run_elsewhere && !options.only_cell);
  if (!contains(*reference_path, options)) {
    auto reference_backend = load_backend(*reference_path);
    if (!reference_backend)
      return experiment_error(e, e.reference.line, "reference.backend", reference_backend.error().message);
    r.reference_backend = std::move(*reference_backend);
  }
  for (size_t b = 0; b < e.backends.size(); ++b) {
    const BackendEntry& entry = e.backends[b];
    std::string key = fmt::format("backends[{}]", b);
    r.backends.emplace_back();
    r.contained.push_back(r.every_cell_contained);
    r.unusable.emplace_back();
    r.probed_ceilings.emplace_back();
    if (options.only_cell && options.only_cell->backend != b) {  // an isolated cell's child runs one backend
      r.devices.push_back(entry.name + ": not loaded in this cell's process");
      continue;
    }
    auto path = find_backend_file(entry.name);
    if (!path) return experiment_error(e, entry.line, key, path.error().message);
    if (!contains(*path, options)) {
      auto backend = load_backend(*path, entry.options);
      if (!backend) return experiment_error(e, entry.line, key, backend.error().message);
      r.devices.push_back(entry.name + ": " + (*backend)->device_description());
      r.backends.back() = std::move(*backend);
      continue;
    }
    r.contained.back() = true;
    BackendProbe probe = options.probe_elsewhere(*path, entry.options, !options.pinned_device_ceilings);
    if (!probe.error.empty()) return experiment_error(e, entry.line, key, probe.error);
    std::string placement = is_shipped_backend(*path) ? "each cell in its own child process"
                                                      : fmt::format(
                                                            "plugin {}, not shipped with lazylab: loaded, and "
                                                            "each cell run, in a child process",
                                                            *path);
    if (!probe.crash.empty()) {
      r.unusable.back() = fmt::format("backend {} {}; none of its cells ran", entry.name, probe.crash);
      r.devices.push_back(fmt::format("{}: UNUSABLE: {} ({})", entry.name, probe.crash, placement));
    } else {
      r.devices.push_back(fmt::format("{}: {} ({})", entry.name, probe.device, placement));
      r.probed_ceilings.back() = probe.ceilings;
    }
  }
  return {};
}

}  // namespace

Expected<Resolved> resolve(const Experiment& e, const RunOptions& options) {
  Resolved r;
  for (size_t i = 0; i < e.plugins.size(); ++i)
    if (auto loaded = load_pass_plugin(e.plugins[i].path); !loaded)
      return experiment_error(e, e.plugins[i].line, fmt::format("plugins[{}]", i), loaded.error().message);
  auto reference_pipeline = resolve_pipeline(e, e.reference.line, "reference.pipeline", e.reference.pipeline);
  if (!reference_pipeline) return reference_pipeline.error();
  r.reference_pipeline = std::move(*reference_pipeline);
  for (const PipelineEntry& entry : e.pipelines) {
    auto pipeline = resolve_pipeline(e, entry.line, "pipelines." + entry.name, entry.text);
    if (!pipeline) return pipeline.error();
    r.pipelines.push_back(std::move(*pipeline));
  }
  for (size_t w = 0; w < e.workloads.size(); ++w) {
    const WorkloadEntry& entry = e.workloads[w];
    auto workload = make_workload(entry.name, entry.params, entry.weights, entry.capture);
    if (!workload) return experiment_error(e, entry.line, fmt::format("workloads[{}]", w), workload.error().message);
    if (!entry.train_loss.empty())
      *workload = as_training_step(std::move(*workload), TrainingSpec{entry.train_loss, entry.train_optimizer});
    if (!entry.inputs.empty()) *workload = with_inputs_stored_in(std::move(*workload), *parse_dtype(entry.inputs));
    if (!(*workload)->failure()) {
      LAZYLAB_TRY(check_inputs(**workload, entry, engine_options(e)));
      if (!options.only_cell) LAZYLAB_TRY(check_footprint(**workload, entry, engine_options(e)));
    }
    r.workloads.push_back(std::move(*workload));
  }
  LAZYLAB_TRY(resolve_backends(e, options, r));
  return r;
}

}  // namespace lazylab
