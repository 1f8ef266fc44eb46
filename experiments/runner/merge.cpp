#include "merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace lazylab {
namespace {

// Every shard of the same N, each once.
Status check_shard_set(const std::vector<LoadedReport>& shards) {
  std::map<size_t, std::string> seen;
  size_t count = 0;
  for (const LoadedReport& shard : shards) {
    auto parsed = parse_shard(shard.shard);
    if (!parsed) return make_error(fmt::format("{}: not a shard's report (run it with --shard I/N)", shard.path));
    if (count && parsed->count != count)
      return make_error(fmt::format("{}: shard {} of a different split than {}/{}", shard.path, shard.shard,
                                    seen.begin()->first, count));
    count = parsed->count;
    auto [it, inserted] = seen.emplace(parsed->index, shard.path);
    if (!inserted)
      return make_error(fmt::format("shard {} given twice: {} and {}", shard.shard, it->second, shard.path));
  }
  for (size_t i = 1; i <= count; ++i)
    if (!seen.count(i)) return make_error(fmt::format("shard {}/{} is missing", i, count));
  return {};
}

size_t pipeline_index(const Experiment& e, const std::string& name) {
  return static_cast<size_t>(
      std::find_if(e.pipelines.begin(), e.pipelines.end(), [&](const PipelineEntry& p) { return p.name == name; }) -
      e.pipelines.begin());
}

}  // namespace

Expected<MergedRun> merge_shards(const std::vector<LoadedReport>& shards, const std::string& experiment_path) {
  if (shards.empty()) return make_error("no reports to merge");
  LAZYLAB_TRY(check_shard_set(shards));
  const LoadedReport& first = shards.front();
  std::string path = experiment_path.empty() ? first.experiment_path : experiment_path;
  auto experiment = load_experiment(path, first.overrides);
  if (!experiment) return experiment.error();
  for (const LoadedReport& shard : shards)
    if (shard.experiment_hash != fmt::format("{:016x}", experiment->hash))
      return make_error(fmt::format("{}: ran a different version of {} (hash {}, the file now hashes {:016x})",
                                    shard.path, path, shard.experiment_hash, experiment->hash));
  MergedRun merged{{*experiment, "", false, first.ceilings, first.device_ceilings_for(*experiment), {}, {}, {}, {}},
                   first.info};
  merged.info.merged_from.clear();
  std::vector<std::string> devices;
  for (const LoadedReport& shard : shards) {
    merged.info.merged_from.push_back(fmt::format("{}: shard {} on {}, started {}", shard.path, shard.shard,
                                                  shard.info.machine, shard.info.started_at));
    for (const std::string& device : shard.info.backend_devices)
      if (std::find(devices.begin(), devices.end(), device) == devices.end()) devices.push_back(device);
    for (const PeerResult& peer : shard.peers) merged.result.peers.push_back(peer);
    // Every shard captures every torch workload; the first shard's stand.
    if (merged.result.captures.empty()) merged.result.captures = shard.captures;
    for (const CellResult& cell : shard.cells) {
      for (const CellResult& earlier : merged.result.cells)
        if (earlier.pipeline == cell.pipeline && earlier.same_except_pipeline(cell))
          return make_error(fmt::format("cell {} / {} / {} is in two shards", cell.workload_shown, cell.pipeline,
                                        cell.backend_shown));
      merged.result.cells.push_back(cell);
    }
  }
  merged.info.backend_devices = devices;
  merged.result.backend_devices = devices;
  std::stable_sort(merged.result.cells.begin(), merged.result.cells.end(),
                   [&](const CellResult& a, const CellResult& b) {
                     return std::tuple(a.workload_entry, a.backend_entry, pipeline_index(*experiment, a.pipeline)) <
                            std::tuple(b.workload_entry, b.backend_entry, pipeline_index(*experiment, b.pipeline));
                   });
  compute_speedups(merged.result.cells, experiment->baseline, experiment->seed);
  return merged;
}

}  // namespace lazylab
