// What a pass pipeline transforms: the graph, the kernel partition chosen by
// fusion, and finally the lowered Program.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph.h"
#include "lazylab/backend_abi.h"
#include "program.h"

namespace lazylab {

// Why a strategy declined a pair, as a small closed set so reports can
// count refusals by kind; the decision's text gives the detail.
enum class RefusalCode : uint8_t {
  None,              // fused
  Cycle,             // kernels would depend on each other in a cycle
  Capability,        // the backend cannot run or fuse this
  SizeLimit,         // the merged kernel would pass the backend's size limit
  OpKind,            // the strategy does not fuse these kinds of ops
  IterationSpace,    // shapes or iteration spaces differ
  SeveralConsumers,  // a value with other users would be recomputed or split
  Cost,              // legal, but the strategy judges it unprofitable
};
inline constexpr int kRefusalCodes = 8;
const char* refusal_code_name(RefusalCode code);

// A fusion strategy's answer for one producer/consumer pair; every "no"
// carries its code and reason (XLA's FusionDecision).
struct FusionDecision {
  bool fuse = true;
  RefusalCode code = RefusalCode::None;
  std::string reason;  // why not; empty when fusing
  static FusionDecision yes() { return {}; }
  static FusionDecision no(RefusalCode code, std::string why) { return {false, code, std::move(why)}; }
  explicit operator bool() const { return fuse; }
};

struct FusionCandidate {
  NodeId producer, consumer;
  FusionDecision decision;
};

struct Module {
  std::string name = "main";  // printed as graph @name
  Graph graph;
  // Kernel id per node, set by a fusion strategy; -1 for nodes in no kernel
  // (parameters, dead nodes). Empty until fusion runs.
  std::vector<int> kernel_of;
  std::optional<Program> program;
  // What the target backend can run and fuse; null means anything.
  const lazylab_capabilities* capabilities = nullptr;
  // Candidate pairs a fusion strategy considered, with its decisions.
  std::vector<FusionCandidate> fusion_log;
  // Set by remat: root `*loss_root` is a joint graph's loss, its ancestors
  // the forward, every other node the backward. Fusion then keeps the two
  // in kernels of their own, as Inductor compiles AOTAutograd's forward and
  // backward apart: a backward value made in a forward kernel would be kept
  // from the forward on, undoing what remat chose to recompute. Rewrites
  // keep it (they keep the roots in order).
  std::optional<size_t> loss_root;

  size_t num_kernels() const;
};

// Replaces the graph after a rewrite; a partition or Program made for the old
// graph no longer applies.
void replace_graph(Module& module, Graph graph);

// The module's IR as text: the graph, then the partition or Program if set.
std::string print_module(const Module& module);

}  // namespace lazylab
