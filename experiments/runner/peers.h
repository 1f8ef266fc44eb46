// Peers: other systems timed on the same workloads in the same run, so the
// report places them beside lazylab's pipelines (machines are shared and
// noisy; only figures from one run compare).
//
// A peer is a program named in the experiment (`peers: {NAME: [argv...]}`,
// run in the experiment file's folder) that takes
//   --workloads a,b,... --param WORKLOAD.NAME=INT ... --warmup N --runs N
//   --threads N --seed N --out FILE [--flush-mib N]
// and writes to FILE a JSON report with `peer` (a description), `clock`
// ("device" when its times are GPU time by device events, "host", the
// default, when they are wall time on the host) and `cells`, each with
// `workload` and `step_ms` {median, min, max}; workloads it does not know are
// left out. The report compares each peer with lazylab on the peer's clock. With --flush-mib (the experiment's
// repeat.flush), the peer writes that many MiB before each timed step, outside its timing, as lazylab does: both sides
// start each step with cold caches. Built-in workloads are given by name, ONNX models by their path
// (bench/peers/torch_models.py rebuilds the network beside it). A workload listed several times is passed once, with
// the parameters of its first entry. It runs with OPENBLAS_CORETYPE set to the OpenBLAS kernels lazylab measured, so
// both sides use the same BLAS code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "experiment.h"

namespace lazylab {

enum class PeerClock { Host, Device };
std::string_view clock_name(PeerClock clock);

struct PeerCell {
  std::string workload;
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

struct PeerResult {
  std::string name;
  std::vector<std::string> command;  // as run, with the protocol's arguments
  std::string description;           // the peer's own, from its report
  std::string error;                 // why it produced no cells (one line); empty when it ran
  std::string stderr_text;           // what a peer that failed wrote to stderr (its last 1 MiB)
  std::vector<PeerCell> cells;
  PeerClock clock = PeerClock::Host;  // what its cells' step_ms measure
};

// Never fails the experiment: a peer that cannot run reports why in `error`.
PeerResult run_peer(const PeerEntry& peer, const Experiment& experiment, const std::string& blas_core);

}  // namespace lazylab
