#include "core/engine.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/container/small_vector.hpp>
#include <chrono>

#include "core/donation.h"
#include "core/dot.h"
#include "core/hash.h"
#include "core/module.h"
#include "core/pass_manager.h"
#include "core/recompile_diagnosis.h"
#include "core/text_format.h"

namespace lazylab {
namespace {

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Status check_limits(const Program& program, const Graph& graph, const EngineOptions& options) {
  for (NodeId id = 0; id < graph.size(); ++id) {
    const ValueInfo& value = program.values[id];
    if (value.kind == ValueKind::Unused || value.bytes <= options.max_buffer_bytes) continue;
    return make_error(fmt::format("%{} = {} needs {} bytes, over the limit of {} bytes for one buffer", id,
                                  print_node(graph, id), value.bytes, options.max_buffer_bytes));
  }
  if (program.arena_bytes > options.max_arena_bytes)
    return make_error(fmt::format("the memory plan needs an arena of {} bytes, over the limit of {} bytes",
                                  program.arena_bytes, options.max_arena_bytes));
  uint64_t parameters = 0, outputs = 0;
  for (NodeId id : graph.parameters()) parameters += graph.node(id).type.bytes();
  for (NodeId id : graph.roots()) outputs += graph.node(id).type.bytes();
  uint64_t total = parameters + outputs + program.arena_bytes + options.resident_bytes;
  if (total > options.max_memory_bytes)
    return make_error(fmt::format(
        "an execution would hold {} at once, over the limit of {} (limits.memory-bytes): inputs {}, outputs {}, "
        "arena {}{}",
        describe_bytes(total), describe_bytes(options.max_memory_bytes), describe_bytes(parameters),
        describe_bytes(outputs), describe_bytes(program.arena_bytes),
        options.resident_bytes
            ? fmt::format(", and {} held beside them (the reference's outputs)", describe_bytes(options.resident_bytes))
            : std::string()));
  return {};
}

}  // namespace

uint64_t host_memory_bytes() {
  static const uint64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : kMaxTensorBytes;
  }();
  return bytes;
}

Engine::Engine(Pipeline pipeline, Backend& backend, EngineOptions options)
    : pipeline_(std::move(pipeline)),
      backend_(backend),
      options_(std::move(options)),
      cache_(options_.cache_capacity) {}

uint64_t Engine::cache_key(uint64_t graph_hash) const {
  return hash_combine(hash_combine(graph_hash, pipeline_.fingerprint), backend_.fingerprint());
}

std::shared_ptr<CompiledGraph> Engine::lookup(uint64_t key) {
  auto entry = cache_.find(key);
  if (entry) ++metrics_.cache_hits;
  return entry;
}

Expected<std::shared_ptr<CompiledGraph>> Engine::compile(uint64_t key, const Graph& graph,
                                                         std::vector<int64_t> source_ordinals) {
  auto start = std::chrono::steady_clock::now();
  ++metrics_.cache_misses;
  if (metrics_.recompile_diagnoses.size() < kMaxRecompileDiagnoses)
    if (auto diagnosis = diagnose_recompilation(cache_.sources(), graph))
      metrics_.recompile_diagnoses.push_back(diagnosis->text + "; " + diagnosis->hint());
  Module module;
  module.graph = graph;
  module.capabilities = &backend_.capabilities();
  auto stats = run_pipeline(pipeline_, module, options_.passes);
  if (!stats) return stats.error();
  if (!module.program)
    return make_error("pipeline '" + pipeline_.canonical +
                      "' does not lower the graph to a Program; end it with 'lower'");
  LAZYLAB_TRY(check_limits(*module.program, module.graph, options_));
  module.program->output_donors = plan_output_donors(*module.program, module.graph);
  auto executable = backend_.compile(*module.program, module.graph, options_.device);
  if (!executable) return executable.error();
  auto compiled = std::make_shared<CompiledGraph>();
  compiled->executable = std::move(*executable);
  auto notes = compiled->executable->notes();
  if (!notes) return notes.error();
  compiled->backend_notes = std::move(*notes);
  compiled->source_ordinals = std::move(source_ordinals);
  for (NodeId root : graph.roots()) compiled->output_types.push_back(graph.node(root).type);
  compiled->source = graph;
  compiled->pass_stats = std::move(*stats);
  compiled->num_kernels = module.program->kernels.size();
  compiled->arena_bytes = module.program->arena_bytes;
  compiled->naive_arena_bytes = module.program->naive_arena_bytes;
  compiled->cost = program_cost(*module.program, module.graph);
  if (compiled->num_kernels <= kKernelGraphLimit)
    compiled->kernel_graph = kernel_graph_dot(*module.program, module.graph, compiled->cost.kernel_bytes);
  for (const Kernel& kernel : module.program->kernels)
    compiled->kernel_labels.push_back(kernel_label(kernel, module.graph));
  for (const FusionCandidate& candidate : module.fusion_log)
    if (!candidate.decision) ++compiled->fusion_refusals[static_cast<size_t>(candidate.decision.code)];
  compiled->compile_ms = milliseconds_since(start);
  metrics_.compile_ms += compiled->compile_ms;
  metrics_.evictions += cache_.insert(key, compiled);
  last_compiled_ = compiled;
  return compiled;
}

Expected<std::vector<DeviceBufferPtr>> Engine::execute(CompiledGraph& compiled,
                                                       std::span<const DeviceBuffer* const> parameters,
                                                       std::span<const uint8_t> donated) {
  auto start = std::chrono::steady_clock::now();
  last_execution_.reset();
  bool timed = device_timing_ || profile_kernels_;
  boost::container::small_vector<uint8_t, 8> taken(donated.size(), 0);
  auto outputs = compiled.executable->execute(parameters, timed ? &last_execution_ : nullptr, profile_kernels_, donated,
                                              std::span(taken.data(), taken.size()));
  metrics_.execute_ms += milliseconds_since(start);
  for (size_t p = 0; p < taken.size(); ++p)
    if (taken[p]) {
      ++metrics_.donated_buffers;
      metrics_.donated_bytes += parameters[p]->type().bytes();
    }
  last_executed_ = &compiled;
  return outputs;
}

Status Engine::wait() {
  if (!last_execution_) return backend_.synchronize(options_.device);
  std::unique_ptr<DeviceEvent> execution = std::move(last_execution_);
  LAZYLAB_TRY(execution->wait());
  if (profile_kernels_) last_kernel_times_ = {last_executed_, execution->kernel_ms()};
  double ms = execution->elapsed_ms();
  if (ms >= 0) {
    metrics_.device_execute_ms += ms;
    metrics_.last_device_execute_ms = ms;
  }
  return {};
}

}  // namespace lazylab
