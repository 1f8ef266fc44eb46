// Peers in rounds (`peer-rounds: R`): each peer times each workload it is
// given in R rounds, one before each R-th of the workload's timed rounds,
// with runs / R steps a round after its own warm-up. A peer timed once,
// after every cell, may meet a machine busier or quieter than the cells
// met minutes before (the same training loop's eager step measured 0.77 to
// 1.35 times lazylab's in eight runs on a shared 2-core machine); in rounds
// both sides see the same minutes, and the report gives each round's ratio
// beside the median's. After a round the cells warm up again (as many
// steps as the experiment's warm-up) before their next timed step, as each
// peer's fresh process warmed up before its own: a training step timed
// right after the peers' processes ran 1.5-2x its time five steps later.
#pragma once

#include <string>
#include <vector>

#include "experiment.h"
#include "peers.h"
#include "progress.h"

namespace lazylab {

class PeerRounds {
 public:
  PeerRounds(const Experiment& experiment, std::vector<std::string> environment, Progress* progress);

  // Runs the rounds of workload entry `workload` due before timed step
  // `step` (1-based among the timed steps of `timed_steps`): round r before
  // step 1 + floor(r * timed_steps / R). Returns whether a round ran.
  bool before_step(size_t workload, int64_t step, int64_t timed_steps);
  // Runs the rounds of `workload` not run yet (its cells ran elsewhere, or
  // one after another), one after another.
  void finish(size_t workload);
  // Every peer's result, its cells pooled over their rounds.
  std::vector<PeerResult> take();

 private:
  bool run_round(size_t workload);  // whether the workload is given to the peers

  const Experiment& e_;
  std::vector<std::string> environment_;  // the peers' (run_peer)
  Progress* progress_;
  std::vector<size_t> given_;        // workload entries the peers are given
  std::vector<int64_t> rounds_run_;  // by workload entry
  std::vector<PeerResult> results_;  // by peer
};

}  // namespace lazylab
