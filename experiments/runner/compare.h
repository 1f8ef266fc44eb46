// Two runs compared cell by cell, as benchstat or asv compare do: the ratio
// of medians (new / old) with its bootstrap interval and a verdict, so a
// regression can gate CI.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace lazylab {

enum class Change { Faster, Slower, NoSignificantChange, FailedNow, FixedNow, OnlyOld, OnlyNew };
const char* change_name(Change change);

struct CellComparison {
  std::string cell;  // "workload / pipeline / backend"
  Estimate ratio;    // new time / old time; empty unless both ran
  Change change = Change::NoSignificantChange;
  std::string note;  // why a cell did not compare, or what else differs (pipeline text)
};

struct Comparison {
  std::vector<CellComparison> cells;
  double geomean_ratio = 0;  // over cells that compare (both ran)
  size_t count(Change change) const;
  bool regressed() const { return count(Change::Slower) + count(Change::FailedNow) > 0; }
};

// A change smaller than `threshold` (0.05: 5%) is no significant change even
// where the interval excludes 1: on shared machines tiny shifts are real but
// not worth a red build.
Comparison compare_reports(const LoadedReport& old_run, const LoadedReport& new_run, double threshold, uint64_t seed);

std::string comparison_text(const Comparison& comparison, const std::string& old_path, const std::string& new_path,
                            double threshold);

}  // namespace lazylab
