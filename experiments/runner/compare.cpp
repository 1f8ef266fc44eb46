#include "compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lazylab {
namespace {

std::string cell_name(const CellResult& c) {
  return fmt::format("{} / {} / {}", c.workload_shown, c.pipeline, c.backend_shown);
}

bool same_cell(const CellResult& a, const CellResult& b) {
  return a.pipeline == b.pipeline && a.same_except_pipeline(b);
}

CellComparison compare_cell(const CellResult& old_cell, const CellResult& new_cell, double threshold, uint64_t seed) {
  CellComparison row{cell_name(new_cell), {}, Change::NoSignificantChange, ""};
  if (!new_cell.ran() || !old_cell.ran()) {
    row.change = new_cell.ran() ? Change::FixedNow : old_cell.ran() ? Change::FailedNow : Change::NoSignificantChange;
    row.note = new_cell.ran() ? "" : fmt::format("{}: {}", status_name(new_cell.status), new_cell.error);
    return row;
  }
  if (!old_cell.time_samples().empty() && !new_cell.time_samples().empty()) {
    row.ratio = bootstrap_ratio(new_cell.time_samples(), old_cell.time_samples(), seed);
  } else {
    double ratio = old_cell.time_ms() > 0 ? new_cell.time_ms() / old_cell.time_ms() : 0;
    row.ratio = {ratio, ratio, ratio};
    row.note = "no raw samples: no interval";
  }
  Verdict verdict = verdict_of(row.ratio);
  bool large = std::fabs(row.ratio.value - 1.0) > threshold;
  if (verdict == Verdict::Higher && large) row.change = Change::Slower;
  if (verdict == Verdict::Lower && large) row.change = Change::Faster;
  if (old_cell.pipeline_text != new_cell.pipeline_text)
    row.note = fmt::format("pipeline text changed: '{}' -> '{}'", old_cell.pipeline_text, new_cell.pipeline_text);
  return row;
}

}  // namespace

const char* change_name(Change change) {
  switch (change) {
    case Change::Faster: return "faster";
    case Change::Slower: return "SLOWER";
    case Change::NoSignificantChange: return "no significant change";
    case Change::FailedNow: return "FAILS NOW";
    case Change::FixedNow: return "runs now";
    case Change::OnlyOld: return "only in old";
    case Change::OnlyNew: return "only in new";
  }
  return "";
}

size_t Comparison::count(Change change) const {
  return static_cast<size_t>(
      std::count_if(cells.begin(), cells.end(), [&](const CellComparison& c) { return c.change == change; }));
}

Comparison compare_reports(const LoadedReport& old_run, const LoadedReport& new_run, double threshold, uint64_t seed) {
  Comparison result;
  double log_sum = 0;
  size_t compared = 0;
  for (const CellResult& new_cell : new_run.cells) {
    auto old_cell = std::find_if(old_run.cells.begin(), old_run.cells.end(),
                                 [&](const CellResult& c) { return same_cell(c, new_cell); });
    if (old_cell == old_run.cells.end()) {
      result.cells.push_back({cell_name(new_cell), {}, Change::OnlyNew, ""});
      continue;
    }
    result.cells.push_back(compare_cell(*old_cell, new_cell, threshold, seed));
    if (result.cells.back().ratio.value > 0) {
      log_sum += std::log(result.cells.back().ratio.value);
      ++compared;
    }
  }
  for (const CellResult& old_cell : old_run.cells)
    if (std::none_of(new_run.cells.begin(), new_run.cells.end(),
                     [&](const CellResult& c) { return same_cell(c, old_cell); }))
      result.cells.push_back({cell_name(old_cell), {}, Change::OnlyOld, ""});
  result.geomean_ratio = compared ? std::exp(log_sum / static_cast<double>(compared)) : 0;
  return result;
}

std::string comparison_text(const Comparison& comparison, const std::string& old_path, const std::string& new_path,
                            double threshold) {
  size_t width = 4;
  for (const CellComparison& c : comparison.cells) width = std::max(width, c.cell.size());
  std::string out = fmt::format("old: {}\nnew: {}\n\n{:<{}}  {:>28}  {}\n", old_path, new_path, "cell", width,
                                "new/old time [95% CI]", "verdict");
  for (const CellComparison& c : comparison.cells) {
    std::string ratio =
        c.ratio.value > 0 ? fmt::format("{:.3f}x [{:.3f}, {:.3f}]", c.ratio.value, c.ratio.low, c.ratio.high) : "-";
    out += fmt::format("{:<{}}  {:>28}  {}{}\n", c.cell, width, ratio, change_name(c.change),
                       c.note.empty() ? "" : " (" + c.note + ")");
  }
  out += fmt::format(
      "\ngeomean new/old {:.3f}x over cells that ran in both; {} faster, {} slower, {} no significant change "
      "(threshold {:.0f}%), {} fail now, {} run now, {} only old, {} only new\n",
      comparison.geomean_ratio, comparison.count(Change::Faster), comparison.count(Change::Slower),
      comparison.count(Change::NoSignificantChange), 100 * threshold, comparison.count(Change::FailedNow),
      comparison.count(Change::FixedNow), comparison.count(Change::OnlyOld), comparison.count(Change::OnlyNew));
  return out;
}

}  // namespace lazylab
