// Shards of one experiment (lazylab run --shard I/N) joined into one report
// with the content a single run would have written, up to timings: every
// cell once, in the experiment's order, speedups recomputed across them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report.h"

namespace lazylab {

struct MergedRun {
  ExperimentResult result;
  RunInfo info;
};

// The experiment file is the shards' own (as recorded in them) unless
// `experiment_path` names it; its content and --set overrides must hash as
// the shards recorded. Each shard I/N of one N must be given exactly once.
Expected<MergedRun> merge_shards(const std::vector<LoadedReport>& shards, const std::string& experiment_path);

}  // namespace lazylab
