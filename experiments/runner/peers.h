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
// `workload` and `step_ms` {median, min, max} (and `inputs`, "bf16" where it
// stored the inputs so; see PeerCell); workloads it does not know are
// left out. The report compares each peer with lazylab on the peer's clock. With --flush-mib (the experiment's
// repeat.flush), the peer writes that many MiB before each timed step, outside its timing, as lazylab does: both sides
// start each step with cold caches. Built-in workloads are given by name, ONNX models by their path
// (bench/peers/torch_models.py rebuilds the network beside it). A workload listed several times is passed once, with
// the parameters of its first entry. It runs with the environment the host backend asks of peers (its ceilings'
// peer_environment: OPENBLAS_CORETYPE set to the OpenBLAS kernels the cpu backend runs), so both sides use the same
// BLAS code.
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
  // In rounds (peer-rounds): each round's median, in the order they ran;
  // median_ms is theirs. Empty when the peer ran once.
  std::vector<double> round_ms;
  // The dtype the peer stored the workload's f32 inputs in (its cell's
  // optional "inputs"; empty: f32): it compares with the workload's entry
  // of the same `inputs`.
  std::string inputs = {};
  // The training step the peer timed (its cell's optional "train",
  // "LOSS/OPTIMIZER"; empty: the forward): it compares with the workload's
  // entry of the same `train`.
  std::string train = {};
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

// The workload entries a peer is given: ONNX models, PyTorch programs and
// built-in workloads (not .lzir files), each name's first entry only.
std::vector<size_t> peer_workloads(const Experiment& experiment);

// One round of peer-rounds: the peer times one workload entry, `runs` steps
// after its warm-up.
struct PeerRound {
  size_t workload;
  int64_t runs;
};

// Never fails the experiment: a peer that cannot run reports why in `error`.
// Every workload of peer_workloads with repeat.runs steps, or one round.
PeerResult run_peer(const PeerEntry& peer, const Experiment& experiment, const std::vector<std::string>& environment,
                    const PeerRound* round = nullptr);

// Adds a round's result to the peer's (an empty `total` takes its name,
// command, description and clock): its cell joins the workload's rounds;
// the first round that fails gives its error and stderr.
void add_round(PeerResult& total, PeerResult round);

}  // namespace lazylab
