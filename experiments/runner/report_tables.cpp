#include "report_tables.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace lazylab {
namespace {

using CellColumn = ReportColumn<CellResult>;

// Measures of a cell that did not run stay blank.
template <class Read>
std::function<ReportValue(const CellResult&)> if_ran(Read read) {
  return [read](const CellResult& c) { return c.ran() ? read(c) : ReportValue{}; };
}

ReportValue percent(double fraction) { return {fmt::format("{:.1f}%", 100 * fraction), fmt::format("{}", fraction)}; }

// Figures from the rounds' host probes stay blank where none ran.
ReportValue probed_number(double value, int decimals) {
  return value > 0 ? report_number(value, decimals) : ReportValue{};
}
ReportValue probed_percent(double fraction) { return fraction > 0 ? percent(fraction) : ReportValue{}; }

std::string correctness_text(const Correctness& c) {
  return fmt::format("{} ({:.1e})", c.pass ? "ok" : "FAIL", c.max_abs_error);
}

ReportValue time_value(const CellResult& c) {
  return {fmt::format("{:.4f} [{:.4f}, {:.4f}]{}", c.time.value, c.time.low, c.time.high, c.noisy ? " NOISY" : ""),
          fmt::format("{}", c.time.value)};
}

ReportValue speedup_value(const CellResult& c) {
  if (c.speedup.value <= 0) return {"-", ""};
  std::string raw = fmt::format("{}", c.speedup.value);
  if (c.speedup.low == c.speedup.high) return {fmt::format("{:.2f}x", c.speedup.value), raw};
  std::string verdict = c.speedup_verdict == Verdict::NoSignificantDifference ? " n.s." : "";
  return {fmt::format("{:.2f}x [{:.2f}, {:.2f}]{}", c.speedup.value, c.speedup.low, c.speedup.high, verdict), raw};
}

const Spread& timed_spread(const CellResult& c) { return c.timed_on_device() ? c.device_ms : c.step_ms; }

}  // namespace

std::string outcome_text(const CellResult& c) {
  switch (c.status) {
    case CellStatus::Ok: return correctness_text(c.correctness);
    case CellStatus::Mismatch: return correctness_text(c.correctness) + ": " + c.correctness.problem;
    case CellStatus::Failed: return "FAILED: " + c.error;
    case CellStatus::Crashed: return "CRASHED: " + c.error;
  }
  return "";
}

std::string recompile_text(const ExperimentResult& result, const CellResult& c) {
  return recompile_warning(c, 1 + result.experiment.warmup + result.experiment.runs);
}

// One line per cell that recompiles on most steps, naming why.
std::string recompile_lines(const ExperimentResult& result, const std::string& prefix) {
  std::string out;
  for (const CellResult& c : result.cells)
    if (std::string text = recompile_text(result, c); !text.empty())
      out += fmt::format("{}{} / {} / {}: {}\n", prefix, c.workload_shown, c.pipeline, c.backend_shown, text);
  return out;
}

// "2 of 12 cells failed, 1 mismatched; 3 too noisy to rank", or "".
std::string outcome_summary(const ExperimentResult& result) {
  std::vector<std::string> parts;
  size_t total = result.cells.size();
  if (size_t failed = result.failed_cells()) parts.push_back(fmt::format("{} of {} cells failed", failed, total));
  if (size_t mismatched = result.cells_with(CellStatus::Mismatch))
    parts.push_back(fmt::format("{} of {} cells do not match the reference", mismatched, total));
  auto count = [&](auto predicate) {
    return static_cast<size_t>(std::count_if(result.cells.begin(), result.cells.end(), predicate));
  };
  if (size_t recompiling = count([&](const CellResult& c) { return !recompile_text(result, c).empty(); }))
    parts.push_back(
        fmt::format("{} of {} cells recompile on most steps (see each cell's recompilations)", recompiling, total));
  if (size_t noisy = count([](const CellResult& c) { return c.noisy; }))
    parts.push_back(fmt::format(
        "{} of {} cells too noisy to rank (95% interval of the median wider than {:.0f}% of it): more runs or a "
        "quieter machine",
        noisy, total, 100 * kNoisyRelativeWidth));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Round r of R ran before the r-th R-th of the cell's timed steps
// (peer_rounds.h): its ratio is to the median of those steps.
std::vector<double> round_ratios(const PeerCell& peer, const CellResult& cell, bool on_device) {
  const std::vector<double>& samples = on_device ? cell.device_samples_ms : cell.step_samples_ms;
  size_t rounds = peer.round_ms.size(), count = samples.size();
  std::vector<double> ratios;
  if (rounds == 0 || count < rounds) return ratios;
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<double> share(samples.begin() + static_cast<std::ptrdiff_t>(r * count / rounds),
                              samples.begin() + static_cast<std::ptrdiff_t>((r + 1) * count / rounds));
    double ms = spread_of(std::move(share)).median;
    if (ms > 0) ratios.push_back(peer.round_ms[r] / ms);
  }
  return ratios;
}

std::vector<PeerComparison> peer_comparisons(const ExperimentResult& result) {
  // Peers are given each workload's first entry (peers.h), so only that
  // entry's cells compare with them: the first of those with the peer's
  // stored inputs and training step.
  std::vector<PeerComparison> rows;
  const std::vector<WorkloadEntry>& entries = result.experiment.workloads;
  for (const PeerResult& peer : result.peers)
    for (const PeerCell& pc : peer.cells) {
      auto first = std::find_if(entries.begin(), entries.end(), [&](const WorkloadEntry& w) {
        return w.name == pc.workload && w.inputs == pc.inputs && training_of(w) == pc.train;
      });
      size_t entry = static_cast<size_t>(first - entries.begin());
      PeerComparison row{&peer, &pc, nullptr, 0, false, {}};
      for (const CellResult& c : result.cells) {
        if (c.workload_entry != entry || c.status != CellStatus::Ok) continue;
        // A cell without a device clock has only its host step to give.
        bool on_device = peer.clock == PeerClock::Device && c.timed_on_device();
        double ms = on_device ? c.device_ms.median : c.step_ms.median;
        if (!row.best || ms < row.lazylab_ms) {
          row.best = &c;
          row.lazylab_ms = ms;
          row.lazylab_on_device = on_device;
        }
      }
      if (row.best) row.round_ratios = round_ratios(pc, *row.best, row.lazylab_on_device);
      rows.push_back(row);
    }
  return rows;
}

const CellColumns& cell_identity_columns() {
  static const CellColumns columns = {
      {"workload", "workload", kEverywhere, false, [](const CellResult& c) { return report_text(c.workload_shown); }},
      {"pipeline", "pipeline", kEverywhere, false, [](const CellResult& c) { return report_text(c.pipeline); }},
      {"backend", "backend", kEverywhere, false, [](const CellResult& c) { return report_text(c.backend_shown); }},
      {"", "pipeline_text", kCsv, false, [](const CellResult& c) { return report_text(c.pipeline_text); }},
      {"", "status", kCsv, false, [](const CellResult& c) { return report_text(status_name(c.status)); }},
  };
  return columns;
}

const CellColumns& cell_measure_columns() {
  static const CellColumns columns = {
      {"kernels", "kernels", kEverywhere, true, if_ran([](const CellResult& c) { return report_count(c.kernels); })},
      {"arena KiB (naive)", "", kMarkdown, true, if_ran([](const CellResult& c) {
         return report_text(fmt::format("{} ({})", c.arena_bytes / 1024, c.naive_arena_bytes / 1024));
       })},
      {"", "arena_bytes", kCsv, true, if_ran([](const CellResult& c) { return report_count(c.arena_bytes); })},
      {"", "naive_arena_bytes", kCsv, true,
       if_ran([](const CellResult& c) { return report_count(c.naive_arena_bytes); })},
      {"compile ms (again)", "", kPeople, true, if_ran([](const CellResult& c) {
         return report_text(fmt::format("{:.3f} ({:.3f})", c.compile_ms, c.recompile_ms));
       })},
      {"", "compile_ms", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.compile_ms, 3); })},
      {"", "recompile_ms", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.recompile_ms, 3); })},
      {"time ms [95% CI]", "time_ms", kEverywhere, true, if_ran(time_value)},
      {"", "time_ms_low", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.time.low, 4); })},
      {"", "time_ms_high", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.time.high, 4); })},
      {"", "timed_on_device", kCsv, false,
       if_ran([](const CellResult& c) { return report_text(c.timed_on_device() ? "true" : "false"); })},
      {"", "noisy", kCsv, false, if_ran([](const CellResult& c) { return report_text(c.noisy ? "true" : "false"); })},
      {"min", "time_ms_min", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return report_number(timed_spread(c).min, 4); })},
      {"max", "time_ms_max", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return report_number(timed_spread(c).max, 4); })},
      // On a device backend the host's step (trace, sync, wait) is a figure of
      // its own: launch-bound steps are won or lost there.
      {"host step ms", "host_step_ms", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return report_number(c.step_ms.median, 4); })},
      {"hit sync µs", "hit_sync_us", kEverywhere, true,
       if_ran([](const CellResult& c) { return report_number(c.hit_sync_overhead_us.median, 2); })},
      {"speedup [95% CI]", "speedup", kEverywhere, true, if_ran(speedup_value)},
      {"", "speedup_low", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.speedup.low, 2); })},
      {"", "speedup_high", kCsv, true, if_ran([](const CellResult& c) { return report_number(c.speedup.high, 2); })},
      {"", "speedup_verdict", kCsv, false, if_ran([](const CellResult& c) {
         return report_text(c.speedup.value > 0 ? verdict_name(c.speedup_verdict) : "");
       })},
  };
  return columns;
}

bool probed_in_rounds(const ExperimentResult& result) {
  return std::any_of(result.cells.begin(), result.cells.end(),
                     [](const CellResult& c) { return c.rounds_floor_fraction > 0; });
}

const CellColumns& cell_traffic_columns() {
  static const CellColumns columns = {
      {"MB moved", "bytes_moved", kMarkdown | kCsv, true, if_ran([](const CellResult& c) {
         return ReportValue{fmt::format("{:.1f}", static_cast<double>(c.cost.total_bytes) / 1e6),
                            std::to_string(c.cost.total_bytes)};
       })},
      {"GB/s", "achieved_gb_s", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return report_number(c.achieved_gb_s, 1); })},
      {"% copy bandwidth", "copy_bandwidth_fraction", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return percent(c.copy_bandwidth_fraction); })},
      {"floor ms", "floor_ms", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return report_number(c.floor_ms, 3); })},
      {"% of floor", "floor_fraction", kEverywhere, true,
       if_ran([](const CellResult& c) { return percent(c.floor_fraction); })},
      {"", "rounds_copy_gb_s", kCsv, true,
       if_ran([](const CellResult& c) { return probed_number(c.rounds_copy_gb_s, 1); })},
      {"", "rounds_sgemm_gflop_s", kCsv, true,
       if_ran([](const CellResult& c) { return probed_number(c.rounds_sgemm_gflop_s, 1); })},
      {"floor ms in rounds", "rounds_floor_ms", kMarkdown | kCsv, true,
       if_ran([](const CellResult& c) { return probed_number(c.rounds_floor_ms, 3); }), true},
      {"% of floor in rounds", "rounds_floor_fraction", kEverywhere, true,
       if_ran([](const CellResult& c) { return probed_percent(c.rounds_floor_fraction); }), true},
  };
  return columns;
}

const CellColumns& cell_outcome_columns() {
  static const CellColumns columns = {
      {"correct (max abs err)", "correct", kEverywhere, false,
       [](const CellResult& c) {
         return ReportValue{outcome_text(c), c.status == CellStatus::Ok ? "true" : "false"};
       }},
      {"", "max_abs_error", kCsv, true,
       if_ran([](const CellResult& c) { return report_text(fmt::format("{}", c.correctness.max_abs_error)); })},
      {"max rel err", "max_rel_error", kMarkdown | kCsv, true, if_ran([](const CellResult& c) {
         return ReportValue{fmt::format("{:.2e}", c.correctness.max_rel_error),
                            fmt::format("{}", c.correctness.max_rel_error)};
       })},
      {"", "error", kCsv, false,
       [](const CellResult& c) { return report_text(c.ran() ? c.correctness.problem : c.error); }},
  };
  return columns;
}

CellColumns join_columns(std::initializer_list<const CellColumns*> parts) {
  CellColumns joined;
  for (const CellColumns* part : parts) joined.insert(joined.end(), part->begin(), part->end());
  return joined;
}

namespace {

// A cell's columns, for rows that belong to a cell (a pass of its pipeline).
template <class Row>
std::vector<ReportColumn<Row>> columns_of_cell(const CellColumns& columns, const CellResult& (*cell_of)(const Row&)) {
  std::vector<ReportColumn<Row>> adapted;
  for (const CellColumn& column : columns)
    adapted.push_back({column.heading, column.csv_name, column.shown_in, column.numeric,
                       [read = column.value, cell_of](const Row& row) { return read(cell_of(row)); }});
  return adapted;
}

std::vector<ReportColumn<PassRow>> pass_columns_with_cell() {
  std::vector<ReportColumn<PassRow>> columns =
      columns_of_cell<PassRow>(cell_identity_columns(), [](const PassRow& r) -> const CellResult& { return *r.cell; });
  std::vector<ReportColumn<PassRow>> own = {
      {"pass", "pass", kEverywhere, false, [](const PassRow& r) { return report_text(r.pass->pass); }},
      {"ms", "ms", kEverywhere, true, [](const PassRow& r) { return report_number(r.pass->milliseconds, 3); }},
      {"nodes before → after", "nodes", kEverywhere, true,
       [](const PassRow& r) { return report_text(fmt::format("{} → {}", r.pass->nodes_before, r.pass->nodes_after)); }},
      {"kernels after", "kernels_after", kEverywhere, true,
       [](const PassRow& r) { return report_count(r.pass->kernels_after); }},
  };
  columns.insert(columns.end(), own.begin(), own.end());
  return columns;
}

}  // namespace

const std::vector<ReportColumn<PassRow>>& pass_columns() {
  static const std::vector<ReportColumn<PassRow>> columns = pass_columns_with_cell();
  return columns;
}

double KernelRow::bytes() const {
  return kernel < cell->cost.kernel_bytes.size() ? static_cast<double>(cell->cost.kernel_bytes[kernel]) : 0;
}

double KernelRow::operations() const {
  return kernel < cell->cost.kernel_operations.size() ? static_cast<double>(cell->cost.kernel_operations[kernel]) : 0;
}

double KernelRow::flops() const {
  return kernel < cell->cost.kernel_flops.size() ? static_cast<double>(cell->cost.kernel_flops[kernel]) : 0;
}

std::vector<KernelRow> kernel_rows(const ExperimentResult& result, const CellResult& cell) {
  std::vector<KernelRow> rows;
  for (size_t k = 0; k < cell.kernel_ms.size(); ++k)
    rows.push_back({&cell, k, ceilings_for(result, cell.backend_entry)});
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelRow& a, const KernelRow& b) { return a.seconds() > b.seconds(); });
  return rows;
}

namespace {

double rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

ReportValue share(double part, double whole) {
  return whole > 0 ? report_number(100 * part / whole, 1) : ReportValue{};
}

double kernel_time_ms(const CellResult& cell) {
  double total = 0;
  for (double ms : cell.kernel_ms) total += ms;
  return total;
}

}  // namespace

const std::vector<ReportColumn<KernelRow>>& kernel_columns() {
  static const std::vector<ReportColumn<KernelRow>> columns = {
      {"kernel", "kernel", kEverywhere, false,
       [](const KernelRow& r) { return report_text(fmt::format("k{}", r.kernel)); }},
      {"ops", "ops", kEverywhere, false,
       [](const KernelRow& r) {
         return report_text(r.kernel < r.cell->kernel_labels.size() ? r.cell->kernel_labels[r.kernel] : "");
       }},
      {"ms", "ms", kEverywhere, true, [](const KernelRow& r) { return report_number(r.cell->kernel_ms[r.kernel], 4); }},
      {"% of kernel time", "time_fraction", kEverywhere, true,
       [](const KernelRow& r) { return share(r.cell->kernel_ms[r.kernel], kernel_time_ms(*r.cell)); }},
      {"MB", "bytes", kEverywhere, true,
       [](const KernelRow& r) {
         return ReportValue{fmt::format("{:.3f}", r.bytes() / 1e6), fmt::format("{}", r.bytes())};
       }},
      {"GB/s", "gb_s", kEverywhere, true,
       [](const KernelRow& r) { return report_number(rate(r.bytes(), r.seconds()) / 1e9, 1); }},
      {"% of copy", "copy_fraction", kEverywhere, true,
       [](const KernelRow& r) { return share(rate(r.bytes(), r.seconds()) / 1e9, r.ceilings.copy_gb_s); }},
      {"ops/byte", "intensity", kEverywhere, true,
       [](const KernelRow& r) { return r.bytes() > 0 ? report_number(r.operations() / r.bytes(), 2) : ReportValue{}; }},
      {"Gop/s", "gop_s", kEverywhere, true,
       [](const KernelRow& r) { return report_number(rate(r.operations(), r.seconds()) / 1e9, 2); }},
      {"matmul GFLOP/s", "matmul_gflop_s", kEverywhere, true,
       [](const KernelRow& r) {
         return r.flops() > 0 ? report_number(rate(r.flops(), r.seconds()) / 1e9, 1) : ReportValue{};
       }},
      {"% of matmul", "matmul_fraction", kEverywhere, true,
       [](const KernelRow& r) {
         return r.flops() > 0 ? share(rate(r.flops(), r.seconds()) / 1e9, r.ceilings.gemm_gflop_s) : ReportValue{};
       }},
  };
  return columns;
}

const std::vector<ReportColumn<PeerComparison>>& peer_columns() {
  static const std::vector<ReportColumn<PeerComparison>> columns = {
      {"workload", "workload", kEverywhere, false,
       [](const PeerComparison& r) { return report_text(r.best ? r.best->workload_shown : r.peer_cell->workload); }},
      {"peer", "peer", kEverywhere, false, [](const PeerComparison& r) { return report_text(r.peer->name); }},
      {"clock", "clock", kEverywhere, false,
       [](const PeerComparison& r) { return report_text(std::string(clock_name(r.peer->clock))); }},
      {"peer ms", "peer_ms", kEverywhere, true,
       [](const PeerComparison& r) { return report_number(r.peer_cell->median_ms, 4); }},
      {"fastest lazylab", "lazylab_cell", kEverywhere, false,
       [](const PeerComparison& r) {
         return report_text(r.best ? r.best->pipeline + " / " + r.best->backend_shown : "none correct");
       }},
      {"lazylab ms", "lazylab_ms", kEverywhere, true,
       [](const PeerComparison& r) { return r.best ? report_number(r.lazylab_ms, 4) : ReportValue{}; }},
      {"peer / lazylab", "peer_over_lazylab", kEverywhere, true,
       [](const PeerComparison& r) {
         if (!r.best) return ReportValue{};
         return ReportValue{fmt::format("{:.2f}x", r.ratio()), fmt::format("{}", r.ratio())};
       }},
      {"rounds: peer / lazylab", "round_ratios", kEverywhere, false,
       [](const PeerComparison& r) {
         if (r.round_ratios.empty()) return ReportValue{};
         auto [low, high] = std::minmax_element(r.round_ratios.begin(), r.round_ratios.end());
         return ReportValue{fmt::format("{:.2f}-{:.2f}x over {}", *low, *high, r.round_ratios.size()),
                            fmt::format("{}", fmt::join(r.round_ratios, ";"))};
       },
       true},
  };
  return columns;
}

double CaptureRow::step_with_host_ms() const { return best->step_ms.median + capture->capture.host_ms_per_step; }

std::vector<CaptureRow> capture_rows(const ExperimentResult& result) {
  std::vector<CaptureRow> rows;
  for (const CaptureResult& capture : result.captures) {
    CaptureRow row{&capture, workload_shown(result.experiment, capture.workload_entry), nullptr};
    for (const CellResult& c : result.cells)
      if (c.workload_entry == capture.workload_entry && c.status == CellStatus::Ok &&
          (!row.best || c.step_ms.median < row.best->step_ms.median))
        row.best = &c;
    rows.push_back(std::move(row));
  }
  return rows;
}

const std::vector<ReportColumn<CaptureRow>>& capture_columns() {
  using Row = CaptureRow;
  static const std::vector<ReportColumn<Row>> columns = {
      {"workload", "workload", kEverywhere, false, [](const Row& r) { return report_text(r.workload); }},
      {"capture", "capture", kEverywhere, false, [](const Row& r) { return report_text(r.capture->capture.style); }},
      {"graphs", "graphs", kEverywhere, true,
       [](const Row& r) { return report_count(static_cast<uint64_t>(r.capture->capture.graphs)); }},
      {"aten ops/step", "aten_ops_per_step", kEverywhere, true,
       [](const Row& r) { return report_number(r.capture->capture.aten_ops_per_step, 0); }},
      {"capture ms", "capture_ms", kEverywhere, true,
       [](const Row& r) { return report_number(r.capture->capture.capture_ms, 2); }},
      {"paid", "capture_paid", kEverywhere, false,
       [](const Row& r) { return report_text(r.capture->capture.every_step ? "each step" : "once"); }},
      {"us/aten op", "capture_us_per_aten_op", kEverywhere, true,
       [](const Row& r) { return report_number(r.capture->capture.us_per_aten_op(), 1); }},
      {"baked reads", "baked_reads", kEverywhere, true,
       [](const Row& r) { return report_count(static_cast<uint64_t>(r.capture->capture.baked_reads)); }},
      {"loss vs eager", "loss_relative_error", kEverywhere, true,
       [](const Row& r) {
         double e = r.capture->capture.loss_error;
         return ReportValue{fmt::format("{:.1e}", e), fmt::format("{}", e)};
       }},
      {"state vs eager", "state_scaled_error", kEverywhere, true,
       [](const Row& r) {
         double e = r.capture->capture.state_error;
         return ReportValue{fmt::format("{:.1e}", e), fmt::format("{}", e)};
       }},
      {"fastest cell", "fastest_cell", kEverywhere, false,
       [](const Row& r) {
         return report_text(r.best ? r.best->pipeline + " / " + r.best->backend_shown : "none correct");
       }},
      {"step ms", "step_ms", kEverywhere, true,
       [](const Row& r) { return r.best ? report_number(r.best->step_ms.median, 3) : ReportValue{}; }},
      {"host ms/step", "host_ms_per_step", kEverywhere, true,
       [](const Row& r) { return report_number(r.capture->capture.host_ms_per_step, 3); }},
      {"step + host ms", "step_with_host_ms", kEverywhere, true,
       [](const Row& r) { return r.best ? report_number(r.step_with_host_ms(), 3) : ReportValue{}; }},
  };
  return columns;
}

const CellColumns& refusal_columns() {
  static const CellColumns counts = {{"refusals", "refusals", kEverywhere, false, [](const CellResult& c) {
                                        std::vector<std::string> parts;
                                        for (auto& [code, count] : c.fusion_refusals)
                                          parts.push_back(fmt::format("{} {}", code, count));
                                        return report_text(fmt::format("{}", fmt::join(parts, ", ")));
                                      }}};
  static const CellColumns columns = join_columns({&cell_identity_columns(), &counts});
  return columns;
}

}  // namespace lazylab
