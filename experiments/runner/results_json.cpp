#include "results_json.h"

#include <fmt/format.h>

namespace lazylab {
namespace {

using nlohmann::json;

json spread_json(const Spread& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }
Spread spread_from(const json& j) { return {j.value("median", 0.0), j.value("min", 0.0), j.value("max", 0.0)}; }

json estimate_json(const Estimate& e) { return {{"value", e.value}, {"low", e.low}, {"high", e.high}}; }
Estimate estimate_from(const json& j) { return {j.value("value", 0.0), j.value("low", 0.0), j.value("high", 0.0)}; }

json passes_json(const std::vector<PassStat>& passes) {
  json list = json::array();
  for (const PassStat& p : passes)
    list.push_back({{"pass", p.pass},
                    {"ms", p.milliseconds},
                    {"nodes_before", p.nodes_before},
                    {"nodes_after", p.nodes_after},
                    {"kernels_before", p.kernels_before},
                    {"kernels_after", p.kernels_after},
                    {"changed", p.changed}});
  return list;
}

std::vector<PassStat> passes_from(const json& list) {
  std::vector<PassStat> passes;
  for (const json& p : list)
    passes.push_back({p.value("pass", ""), p.value("ms", 0.0), p.value("nodes_before", size_t{0}),
                      p.value("nodes_after", size_t{0}), p.value("kernels_before", size_t{0}),
                      p.value("kernels_after", size_t{0}), p.value("changed", false)});
  return passes;
}

// Metrics fields, listed once for both directions.
template <class MetricsRef, class Visit>
void visit_metrics(MetricsRef& m, Visit&& visit) {
  visit("traces", m.traces);
  visit("nodes_traced", m.nodes_traced);
  visit("cache_hits", m.cache_hits);
  visit("cache_misses", m.cache_misses);
  visit("evictions", m.evictions);
  visit("compile_ms", m.compile_ms);
  visit("execute_ms", m.execute_ms);
  visit("device_execute_ms", m.device_execute_ms);
  visit("host_to_device_transfers", m.host_to_device_transfers);
  visit("host_to_device_bytes", m.host_to_device_bytes);
  visit("device_to_host_transfers", m.device_to_host_transfers);
  visit("device_to_host_bytes", m.device_to_host_bytes);
  visit("recompile_diagnoses", m.recompile_diagnoses);
}

CellStatus status_from(const std::string& name) {
  for (CellStatus s : {CellStatus::Ok, CellStatus::Mismatch, CellStatus::Failed, CellStatus::Crashed})
    if (name == status_name(s)) return s;
  return CellStatus::Failed;
}

Verdict verdict_from(const std::string& name) {
  for (Verdict v : {Verdict::Lower, Verdict::Higher, Verdict::NoSignificantDifference})
    if (name == verdict_name(v)) return v;
  return Verdict::NoSignificantDifference;
}

}  // namespace

json cell_to_json(const CellResult& c) {
  json metrics = json::object();
  visit_metrics(c.metrics, [&](const char* key, const auto& value) { metrics[key] = value; });
  json speedup = estimate_json(c.speedup);
  speedup["verdict"] = verdict_name(c.speedup_verdict);
  json cell = {{"workload", c.workload},
               {"workload_params", c.workload_params},
               {"pipeline", c.pipeline},
               {"pipeline_text", c.pipeline_text},
               {"backend", c.backend},
               {"backend_options", c.backend_options},
               {"label", c.label},
               {"workload_shown", c.workload_shown},
               {"backend_shown", c.backend_shown},
               {"workload_entry", c.workload_entry},
               {"backend_entry", c.backend_entry},
               {"pipeline_entry", c.pipeline_entry},
               {"status", status_name(c.status)},
               {"error", c.error},
               {"correctness",
                {{"pass", c.correctness.pass},
                 {"max_abs_error", c.correctness.max_abs_error},
                 {"max_rel_error", c.correctness.max_rel_error},
                 {"problem", c.correctness.problem}}},
               {"kernels", c.kernels},
               {"arena_bytes", c.arena_bytes},
               {"naive_arena_bytes", c.naive_arena_bytes},
               {"kernel_bytes", c.cost.kernel_bytes},
               {"kernel_operations", c.cost.kernel_operations},
               {"kernel_flops", c.cost.kernel_flops},
               {"kernel_labels", c.kernel_labels},
               {"compile_notes", c.compile_notes},
               {"kernel_ms", c.kernel_ms},
               {"bytes_moved", c.cost.total_bytes},
               {"minimum_bytes", c.cost.minimum_bytes},
               {"flops", c.cost.flops},
               {"minimum_flops", c.cost.minimum_flops},
               {"elementwise_ops", c.cost.elementwise_ops},
               {"achieved_gb_s", c.achieved_gb_s},
               {"copy_bandwidth_fraction", c.copy_bandwidth_fraction},
               {"floor_ms", c.floor_ms},
               {"floor_fraction", c.floor_fraction},
               {"rounds_copy_gb_s", c.rounds_copy_gb_s},
               {"rounds_sgemm_gflop_s", c.rounds_sgemm_gflop_s},
               {"rounds_floor_ms", c.rounds_floor_ms},
               {"rounds_floor_fraction", c.rounds_floor_fraction},
               {"device_ceilings", c.device_ceilings},
               {"compile_ms", c.compile_ms},
               {"recompile_ms", c.recompile_ms},
               {"cold_step_ms", c.cold_step_ms},
               {"step_ms", spread_json(c.step_ms)},
               {"trace_us", spread_json(c.trace_us)},
               {"hit_sync_overhead_us", spread_json(c.hit_sync_overhead_us)},
               {"execute_ms", spread_json(c.execute_ms)},
               {"device_ms", spread_json(c.device_ms)},
               {"samples", {{"step_ms", c.step_samples_ms}, {"device_ms", c.device_samples_ms}}},
               {"time_ms", estimate_json(c.time)},
               {"timed_on_device", c.timed_on_device()},
               {"noisy", c.noisy},
               {"nodes_per_step", c.nodes_per_step},
               {"ops_per_step", c.ops_per_step},
               {"speedup_vs_baseline", speedup},
               {"passes", passes_json(c.passes)},
               {"fusion_refusals", c.fusion_refusals},
               {"kernel_graph_dot", c.kernel_graph},
               {"metrics", metrics}};
  if (c.ops_per_step > 0) cell["step_us_per_op"] = c.step_ms.median * 1e3 / static_cast<double>(c.ops_per_step);
  return cell;
}

Expected<CellResult> cell_from_json(const json& j) {
  try {
    CellResult c;
    c.workload = j.at("workload").get<std::string>();
    c.workload_params = j.at("workload_params").get<WorkloadParams>();
    c.pipeline = j.at("pipeline").get<std::string>();
    c.pipeline_text = j.at("pipeline_text").get<std::string>();
    c.backend = j.at("backend").get<std::string>();
    c.backend_options = j.at("backend_options").get<std::string>();
    c.label = j.value("label", "");
    c.workload_shown = j.value("workload_shown", c.workload);
    c.backend_shown = j.value("backend_shown", c.backend);
    c.workload_entry = j.value("workload_entry", size_t{0});
    c.backend_entry = j.value("backend_entry", size_t{0});
    c.pipeline_entry = j.value("pipeline_entry", size_t{0});
    c.status = status_from(j.value("status", "ok"));
    c.error = j.value("error", "");
    const json& correct = j.at("correctness");
    c.correctness = {correct.value("pass", false), correct.value("max_abs_error", 0.0),
                     correct.value("max_rel_error", 0.0), correct.value("problem", "")};
    c.kernels = j.value("kernels", size_t{0});
    c.arena_bytes = j.value("arena_bytes", uint64_t{0});
    c.naive_arena_bytes = j.value("naive_arena_bytes", uint64_t{0});
    c.cost.kernel_bytes = j.value("kernel_bytes", std::vector<uint64_t>{});
    c.cost.kernel_operations = j.value("kernel_operations", std::vector<uint64_t>{});
    c.cost.kernel_flops = j.value("kernel_flops", std::vector<uint64_t>{});
    c.kernel_labels = j.value("kernel_labels", std::vector<std::string>{});
    c.compile_notes = j.value("compile_notes", std::vector<std::string>{});
    c.kernel_ms = j.value("kernel_ms", std::vector<double>{});
    c.cost.total_bytes = j.value("bytes_moved", uint64_t{0});
    c.cost.minimum_bytes = j.value("minimum_bytes", uint64_t{0});
    c.cost.flops = j.value("flops", uint64_t{0});
    c.cost.minimum_flops = j.value("minimum_flops", c.cost.flops);  // reports before it: the dense count
    c.cost.elementwise_ops = j.value("elementwise_ops", uint64_t{0});
    c.achieved_gb_s = j.value("achieved_gb_s", 0.0);
    c.copy_bandwidth_fraction = j.value("copy_bandwidth_fraction", 0.0);
    c.floor_ms = j.value("floor_ms", 0.0);
    c.floor_fraction = j.value("floor_fraction", 0.0);
    c.rounds_copy_gb_s = j.value("rounds_copy_gb_s", 0.0);
    c.rounds_sgemm_gflop_s = j.value("rounds_sgemm_gflop_s", 0.0);
    c.rounds_floor_ms = j.value("rounds_floor_ms", 0.0);
    c.rounds_floor_fraction = j.value("rounds_floor_fraction", 0.0);
    c.device_ceilings = j.value("device_ceilings", false);
    c.compile_ms = j.value("compile_ms", 0.0);
    c.recompile_ms = j.value("recompile_ms", 0.0);
    c.cold_step_ms = j.value("cold_step_ms", 0.0);
    c.step_ms = spread_from(j.value("step_ms", json::object()));
    c.trace_us = spread_from(j.value("trace_us", json::object()));
    c.hit_sync_overhead_us = spread_from(j.value("hit_sync_overhead_us", json::object()));
    c.execute_ms = spread_from(j.value("execute_ms", json::object()));
    c.device_ms = spread_from(j.value("device_ms", json::object()));
    json samples = j.value("samples", json::object());
    c.step_samples_ms = samples.value("step_ms", std::vector<double>{});
    c.device_samples_ms = samples.value("device_ms", std::vector<double>{});
    c.time = estimate_from(j.value("time_ms", json::object()));
    c.noisy = j.value("noisy", false);
    c.nodes_per_step = j.value("nodes_per_step", int64_t{0});
    c.ops_per_step = j.value("ops_per_step", int64_t{0});
    json speedup = j.value("speedup_vs_baseline", json::object());
    if (speedup.is_object()) {
      c.speedup = estimate_from(speedup);
      c.speedup_verdict = verdict_from(speedup.value("verdict", ""));
    }
    c.passes = passes_from(j.value("passes", json::array()));
    c.fusion_refusals = j.value("fusion_refusals", std::map<std::string, uint64_t>{});
    c.kernel_graph = j.value("kernel_graph_dot", "");
    json metrics = j.value("metrics", json::object());
    visit_metrics(c.metrics, [&](const char* key, auto& value) { value = metrics.value(key, value); });
    return c;
  } catch (const json::exception& ex) {
    return make_error(fmt::format("a cell in the report is malformed: {}", ex.what()));
  }
}

json ceilings_to_json(const Ceilings& c) {
  return {{"copy_gb_s", c.copy_gb_s},         {"elementwise_gop_s", c.elementwise_gop_s},
          {"sgemm_gflop_s", c.sgemm_gflop_s}, {"blas", c.blas},
          {"blas_core", c.blas_core},         {"method", c.method}};
}

Ceilings ceilings_from_json(const json& j) {
  Ceilings c;
  c.copy_gb_s = j.value("copy_gb_s", 0.0);
  c.elementwise_gop_s = j.value("elementwise_gop_s", 0.0);
  c.sgemm_gflop_s = j.value("sgemm_gflop_s", 0.0);
  c.blas = j.value("blas", "");
  c.blas_core = j.value("blas_core", "");
  c.method = j.value("method", "");
  return c;
}

json device_ceilings_to_json(const ExperimentResult& result) {
  json list = json::array();
  for (size_t b = 0; b < result.device_ceilings.size(); ++b) {
    const DeviceCeilings& d = result.device_ceilings[b];
    if (d.measured())
      list.push_back({{"backend", result.experiment.backends[b].name},
                      {"options", result.experiment.backends[b].options},
                      {"copy_gb_s", d.copy_gb_s},
                      {"gemm_gflop_s", d.gemm_gflop_s},
                      {"method", d.method}});
  }
  return list;
}

nlohmann::json capture_to_json(const TorchCapture& c) {
  return {{"capture", c.style},
          {"graphs", c.graphs},
          {"aten_ops_per_step", c.aten_ops_per_step},
          {"capture_ms", c.capture_ms},
          {"capture_every_step", c.every_step},
          {"host_ms_per_step", c.host_ms_per_step},
          {"baked_reads", c.baked_reads},
          {"eager_check",
           {{"loss_relative_error", c.loss_error},
            {"state_scaled_error", c.state_error},
            {"loss_tolerance", c.loss_tolerance},
            {"state_tolerance", c.state_tolerance}}}};
}

Expected<TorchCapture> capture_from_json(const nlohmann::json& j) {
  try {
    TorchCapture c;
    c.style = j.at("capture").get<std::string>();
    c.graphs = j.value("graphs", int64_t{1});  // records before the dynamo capture ran as one graph
    c.aten_ops_per_step = j.at("aten_ops_per_step").get<double>();
    c.capture_ms = j.at("capture_ms").get<double>();
    c.every_step = j.at("capture_every_step").get<bool>();
    c.host_ms_per_step = j.at("host_ms_per_step").get<double>();
    c.baked_reads = j.at("baked_reads").get<int64_t>();
    const nlohmann::json& check = j.at("eager_check");
    c.loss_error = check.at("loss_relative_error").get<double>();
    c.state_error = check.at("state_scaled_error").get<double>();
    c.loss_tolerance = check.at("loss_tolerance").get<double>();
    c.state_tolerance = check.at("state_tolerance").get<double>();
    return c;
  } catch (const nlohmann::json::exception& ex) {
    return make_error(fmt::format("a capture record is malformed: {}", ex.what()));
  }
}

}  // namespace lazylab
