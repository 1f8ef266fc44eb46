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

namespace {

// A cell's report fields, described once: the writer and the reader follow
// this list, and a test checks report.schema.json against it
// (cell_field_names). `field(key, value, required)`: `value` a member, or a
// view of several (speedup, samples) that converts both ways.
struct SpeedupView {
  Estimate& estimate;
  Verdict& verdict;
};
struct SamplesView {
  std::vector<double>& step_ms;
  std::vector<double>& device_ms;
};
struct CorrectnessView {
  Correctness& correctness;
};
struct StatusView {
  CellStatus& status;
};
struct SpreadView {
  Spread& spread;
};
struct EstimateView {
  Estimate& estimate;
};
struct PassesView {
  std::vector<PassStat>& passes;
};
struct MetricsView {
  Metrics& metrics;
};

void to_json(json& j, const SpeedupView& v) {
  j = estimate_json(v.estimate);
  j["verdict"] = verdict_name(v.verdict);
}
void from_json(const json& j, SpeedupView v) {
  if (!j.is_object()) return;
  v.estimate = estimate_from(j);
  v.verdict = verdict_from(j.value("verdict", ""));
}
void to_json(json& j, const SamplesView& v) { j = {{"step_ms", v.step_ms}, {"device_ms", v.device_ms}}; }
void from_json(const json& j, SamplesView v) {
  v.step_ms = j.value("step_ms", std::vector<double>{});
  v.device_ms = j.value("device_ms", std::vector<double>{});
}
void to_json(json& j, const CorrectnessView& v) {
  const Correctness& c = v.correctness;
  j = {
      {"pass", c.pass}, {"max_abs_error", c.max_abs_error}, {"max_rel_error", c.max_rel_error}, {"problem", c.problem}};
}
void from_json(const json& j, CorrectnessView v) {
  v.correctness = {j.value("pass", false), j.value("max_abs_error", 0.0), j.value("max_rel_error", 0.0),
                   j.value("problem", "")};
}
void to_json(json& j, const StatusView& v) { j = status_name(v.status); }
void from_json(const json& j, StatusView v) { v.status = status_from(j.get<std::string>()); }
void to_json(json& j, const EstimateView& v) { j = estimate_json(v.estimate); }
void from_json(const json& j, EstimateView v) { v.estimate = estimate_from(j); }
void to_json(json& j, const SpreadView& v) { j = spread_json(v.spread); }
void from_json(const json& j, SpreadView v) { v.spread = spread_from(j); }
void to_json(json& j, const PassesView& v) { j = passes_json(v.passes); }
void from_json(const json& j, PassesView v) { v.passes = passes_from(j); }
void to_json(json& j, const MetricsView& v) {
  j = json::object();
  visit_metrics(v.metrics, [&](const char* key, const auto& value) { j[key] = value; });
}
void from_json(const json& j, MetricsView v) {
  visit_metrics(v.metrics, [&](const char* key, auto& value) { value = j.value(key, value); });
}

constexpr bool kRequired = true, kOptional = false;

// One list serves both directions, so it takes a mutable cell; the writer
// only reads through it.
template <class Field>
void visit_cell_fields(CellResult& c, Field&& field) {
  field("workload", c.workload, kRequired);
  field("workload_params", c.workload_params, kRequired);
  field("pipeline", c.pipeline, kRequired);
  field("pipeline_text", c.pipeline_text, kRequired);
  field("backend", c.backend, kRequired);
  field("backend_options", c.backend_options, kRequired);
  field("label", c.label, kOptional);
  field("workload_shown", c.workload_shown, kOptional);
  field("backend_shown", c.backend_shown, kOptional);
  field("workload_entry", c.workload_entry, kOptional);
  field("backend_entry", c.backend_entry, kOptional);
  field("pipeline_entry", c.pipeline_entry, kOptional);
  field("status", StatusView{c.status}, kOptional);
  field("error", c.error, kOptional);
  field("correctness", CorrectnessView{c.correctness}, kRequired);
  field("kernels", c.kernels, kOptional);
  field("arena_bytes", c.arena_bytes, kOptional);
  field("naive_arena_bytes", c.naive_arena_bytes, kOptional);
  field("kernel_bytes", c.cost.kernel_bytes, kOptional);
  field("kernel_operations", c.cost.kernel_operations, kOptional);
  field("kernel_flops", c.cost.kernel_flops, kOptional);
  field("kernel_labels", c.kernel_labels, kOptional);
  field("compile_notes", c.compile_notes, kOptional);
  field("kernel_ms", c.kernel_ms, kOptional);
  field("bytes_moved", c.cost.total_bytes, kOptional);
  field("minimum_bytes", c.cost.minimum_bytes, kOptional);
  field("flops", c.cost.flops, kOptional);
  field("minimum_flops", c.cost.minimum_flops, kOptional);
  field("elementwise_ops", c.cost.elementwise_ops, kOptional);
  field("achieved_gb_s", c.achieved_gb_s, kOptional);
  field("copy_bandwidth_fraction", c.copy_bandwidth_fraction, kOptional);
  field("floor_ms", c.floor_ms, kOptional);
  field("floor_fraction", c.floor_fraction, kOptional);
  field("rounds_copy_gb_s", c.rounds_copy_gb_s, kOptional);
  field("rounds_sgemm_gflop_s", c.rounds_sgemm_gflop_s, kOptional);
  field("rounds_floor_ms", c.rounds_floor_ms, kOptional);
  field("rounds_floor_fraction", c.rounds_floor_fraction, kOptional);
  field("device_ceilings", c.device_ceilings, kOptional);
  field("compile_ms", c.compile_ms, kOptional);
  field("recompile_ms", c.recompile_ms, kOptional);
  field("cold_step_ms", c.cold_step_ms, kOptional);
  field("step_ms", SpreadView{c.step_ms}, kOptional);
  field("trace_us", SpreadView{c.trace_us}, kOptional);
  field("hit_sync_overhead_us", SpreadView{c.hit_sync_overhead_us}, kOptional);
  field("execute_ms", SpreadView{c.execute_ms}, kOptional);
  field("device_ms", SpreadView{c.device_ms}, kOptional);
  field("samples", SamplesView{c.step_samples_ms, c.device_samples_ms}, kOptional);
  field("time_ms", EstimateView{c.time}, kOptional);
  field("noisy", c.noisy, kOptional);
  field("nodes_per_step", c.nodes_per_step, kOptional);
  field("ops_per_step", c.ops_per_step, kOptional);
  field("speedup_vs_baseline", SpeedupView{c.speedup, c.speedup_verdict}, kOptional);
  field("passes", PassesView{c.passes}, kOptional);
  field("fusion_refusals", c.fusion_refusals, kOptional);
  field("kernel_graph_dot", c.kernel_graph, kOptional);
  field("metrics", MetricsView{c.metrics}, kOptional);
}

// Written from the fields above, read by nobody.
constexpr const char* kDerivedCellFields[] = {"timed_on_device", "step_us_per_op"};

}  // namespace

std::vector<std::string> cell_field_names() {
  std::vector<std::string> names;
  CellResult cell;
  visit_cell_fields(cell, [&](const char* key, auto&&, bool) { names.push_back(key); });
  for (const char* key : kDerivedCellFields) names.push_back(key);
  return names;
}

json cell_to_json(const CellResult& c) {
  json cell = json::object();
  visit_cell_fields(const_cast<CellResult&>(c), [&](const char* key, const auto& value, bool) { cell[key] = value; });
  cell["timed_on_device"] = c.timed_on_device();
  if (c.ops_per_step > 0) cell["step_us_per_op"] = c.step_ms.median * 1e3 / static_cast<double>(c.ops_per_step);
  return cell;
}

Expected<CellResult> cell_from_json(const json& j) {
  try {
    CellResult c;
    visit_cell_fields(c, [&](const char* key, auto&& value, bool required) {
      if (required)
        j.at(key).get_to(value);
      else if (auto it = j.find(key); it != j.end())
        it->get_to(value);
    });
    // Reports from before these fields.
    if (!j.contains("workload_shown")) c.workload_shown = c.workload;
    if (!j.contains("backend_shown")) c.backend_shown = c.backend;
    if (!j.contains("minimum_flops")) c.cost.minimum_flops = c.cost.flops;  // the dense count
    return c;
  } catch (const json::exception& ex) {
    return make_error(fmt::format("a cell in the report is malformed: {}", ex.what()));
  }
}

// The report keeps the names of the cpu backend's measurements: its product
// is OpenBLAS's sgemm.
json ceilings_to_json(const Ceilings& c) {
  return {{"copy_gb_s", c.copy_gb_s}, {"elementwise_gop_s", c.elementwise_gop_s}, {"sgemm_gflop_s", c.gemm_gflop_s},
          {"blas", c.gemm_library},   {"peer_environment", c.peer_environment},   {"method", c.method}};
}

Ceilings ceilings_from_json(const json& j) {
  Ceilings c;
  c.copy_gb_s = j.value("copy_gb_s", 0.0);
  c.elementwise_gop_s = j.value("elementwise_gop_s", 0.0);
  c.gemm_gflop_s = j.value("sgemm_gflop_s", 0.0);
  c.gemm_library = j.value("blas", "");
  c.peer_environment = j.value("peer_environment", std::vector<std::string>());
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
