// Rematerialization strategies: what the forward of a joint forward-backward
// graph (core/autodiff.h) keeps for its backward, and what the backward
// computes again from what was kept. Selected with remat{strategy=NAME}
// (passes/remat.cpp) and registered like fusion strategies (built in, or
// from a pass plugin), so "save or recompute" is one experiment. A
// recomputed value is computed again right before its first backward
// reader, where fusion can take it into the backward's kernels; its forward
// copy then lives only as long as the forward reads it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph.h"
#include "pass.h"
#include "registry.h"

namespace lazylab {

// A joint graph seen from root `of` (the loss): the forward is every node
// that root depends on, the backward every other live node.
struct JointSplit {
  std::vector<bool> forward;  // per node
  std::vector<bool> live;     // per node: reachable from the roots
  // Forward values the backward reads (parameters aside: those are alive
  // throughout): what a strategy that recomputes nothing keeps.
  std::vector<NodeId> saved;
};
Expected<JointSplit> split_joint(const Graph& graph, size_t of);

// Whether a node is cheap to compute again: elementwise ops, constants,
// iota and layout ops but gather and scatter_add (AOTAutograd's
// "fusible" ops); never a parameter.
bool cheap_to_recompute(const Node& node);

class RematStrategy {
 public:
  virtual ~RematStrategy() = default;
  // Per node: whether the backward computes it again (forward nodes only;
  // each from kept values and other recomputed ones).
  virtual Expected<std::vector<bool>> recompute(const Graph& graph, const JointSplit& split) = 0;
};

struct RematStrategyInfo {
  std::string name;
  std::string summary;  // one line: what it keeps, what it recomputes
  std::function<std::unique_ptr<RematStrategy>(const PassOptions&)> create;
  std::vector<PassOptionSpec> options = {};
  std::string provenance = {};  // "plugin NAME VERSION"; empty for built-ins
};

using RematStrategyRegistry = Registry<RematStrategyInfo>;
extern template class Registry<RematStrategyInfo>;
using RematStrategyRegistrar = Registrar<RematStrategyInfo>;

// `graph` with each backward read of a `recompute` node reading a copy
// computed before that reader instead (one copy a node, made where the
// first backward node needs it); nodes in the original order otherwise.
Graph rematerialize(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute);

// What rematerialize's graph would hold, without building it: its arena's
// peak, the most bytes of values alive at once running its nodes in order
// (each from its node to its last reader; the outputs and parameters,
// which live outside the arena, aside), an estimate before fusion and
// memory planning that counts no value fusion would keep in registers (an
// elementwise op's, a splat's, a broadcast's or reshape's, read only by
// such ops and reductions, and not kept); and the forward values the
// backward or a recomputation reads (parameters aside): the kept ones.
struct RematSchedule {
  uint64_t peak_bytes = 0;
  std::vector<bool> kept;  // per node of the joint graph
};
RematSchedule remat_schedule(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute);

}  // namespace lazylab
