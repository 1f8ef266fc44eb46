#include "peer_rounds.h"

#include <fmt/format.h>

#include <algorithm>

namespace lazylab {

PeerRounds::PeerRounds(const Experiment& experiment, std::vector<std::string> environment, Progress* progress)
    : e_(experiment),
      environment_(std::move(environment)),
      progress_(progress),
      given_(peer_workloads(experiment)),
      rounds_run_(experiment.workloads.size(), 0),
      results_(experiment.peers.size()) {
  for (size_t p = 0; p < e_.peers.size(); ++p) results_[p].name = e_.peers[p].name;
}

bool PeerRounds::before_step(size_t workload, int64_t step, int64_t timed_steps) {
  bool ran = false;
  while (rounds_run_[workload] < e_.peer_rounds && 1 + rounds_run_[workload] * timed_steps / e_.peer_rounds <= step)
    ran = run_round(workload) || ran;
  return ran;
}

void PeerRounds::finish(size_t workload) {
  while (rounds_run_[workload] < e_.peer_rounds) run_round(workload);
}

bool PeerRounds::run_round(size_t workload) {
  int64_t round = rounds_run_[workload]++;
  if (std::find(given_.begin(), given_.end(), workload) == given_.end()) return false;
  PeerRound what{workload, std::max<int64_t>(1, e_.runs / e_.peer_rounds)};
  for (size_t p = 0; p < e_.peers.size(); ++p) {
    if (progress_)
      progress_->working_on(fmt::format("peer {}, {}, round {} of {}", e_.peers[p].name, e_.workloads[workload].name,
                                        round + 1, e_.peer_rounds));
    PeerResult result = run_peer(e_.peers[p], e_, environment_, &what);
    if (!result.error.empty())
      result.error = fmt::format("{}, round {}: {}", e_.workloads[workload].name, round + 1, result.error);
    add_round(results_[p], std::move(result));
  }
  return true;
}

std::vector<PeerResult> PeerRounds::take() { return std::move(results_); }

}  // namespace lazylab
