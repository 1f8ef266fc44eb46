// What a cell's result says: its shard, its identity's comparisons, its
// speedup over the baseline, its samples summarised and its status.
#include <fmt/format.h>

#include <algorithm>

#include "runner.h"
#include "statistics.h"

namespace lazylab {

Expected<RunOptions::Shard> parse_shard(const std::string& text) {
  RunOptions::Shard shard;
  char slash = 0;
  std::istringstream in(text);
  if (!(in >> shard.index >> slash >> shard.count) || slash != '/' || !in.eof() || shard.index < 1 ||
      shard.index > shard.count)
    return make_error(fmt::format("--shard '{}': expected I/N with 1 <= I <= N (e.g. 2/4)", text));
  return shard;
}

bool CellIdentity::same_except_pipeline(const CellIdentity& other) const {
  // workload_shown tells apart one workload's entries with other inputs.
  return workload == other.workload && workload_shown == other.workload_shown &&
         workload_params == other.workload_params && backend == other.backend &&
         backend_options == other.backend_options && label == other.label;
}

void compute_speedups(std::vector<CellResult>& cells, const std::string& baseline_pipeline, uint64_t seed) {
  for (CellResult& cell : cells) {
    cell.speedup = {};
    cell.speedup_verdict = Verdict::NoSignificantDifference;
    if (!cell.ran() || cell.time_ms() <= 0) continue;
    for (const CellResult& base : cells) {
      if (base.pipeline != baseline_pipeline || !base.same_except_pipeline(cell) || !base.ran()) continue;
      if (&base == &cell) {
        cell.speedup = {1, 1, 1};
      } else if (!base.time_samples().empty() && !cell.time_samples().empty()) {
        cell.speedup = bootstrap_ratio(base.time_samples(), cell.time_samples(), seed);
        cell.speedup_verdict = verdict_of(cell.speedup);
      } else {  // summaries without samples (older reports)
        double ratio = base.time_ms() / cell.time_ms();
        cell.speedup = {ratio, ratio, ratio};
      }
    }
  }
}

std::string recompile_warning(const CellResult& cell, int64_t steps) {
  uint64_t recompiles = cell.metrics.cache_misses > 0 ? cell.metrics.cache_misses - 1 : 0;
  if (recompiles == 0 || 2 * recompiles < static_cast<uint64_t>(steps - 1)) return "";
  std::string first =
      cell.metrics.recompile_diagnoses.empty() ? "no diagnosis kept" : cell.metrics.recompile_diagnoses.front();
  return fmt::format("recompiled {} times in {} steps: {}", recompiles, steps, first);
}

void summarize_samples(CellResult& cell, uint64_t seed) {
  cell.time = bootstrap_median(cell.time_samples(), seed);
  cell.noisy = cell.time.relative_width() > kNoisyRelativeWidth;
}

CellResult CellResult::failure(CellStatus status, std::string error) {
  CellResult cell;
  cell.status = status;
  cell.error = std::move(error);
  return cell;
}

const char* status_name(CellStatus status) {
  switch (status) {
    case CellStatus::Ok: return "ok";
    case CellStatus::Mismatch: return "mismatch";
    case CellStatus::Failed: return "failed";
    case CellStatus::Crashed: return "crashed";
  }
  return "";
}

bool ExperimentResult::all_correct() const {
  return std::all_of(cells.begin(), cells.end(), [](const CellResult& c) { return c.status == CellStatus::Ok; });
}

size_t ExperimentResult::cells_with(CellStatus status) const {
  return static_cast<size_t>(
      std::count_if(cells.begin(), cells.end(), [&](const CellResult& c) { return c.status == status; }));
}

}  // namespace lazylab
