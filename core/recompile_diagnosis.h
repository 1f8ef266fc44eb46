// Why a graph missed the computation cache when a similar one was compiled
// before: a parameter's type, a constant's value, another attribute, or
// the structure, named with the node and both values. PyTorch/XLA users ask
// this more than anything else about lazy tensors.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "graph.h"

namespace lazylab {

enum class RecompileCause { ParameterType, ConstantValue, Attribute, Structure };

struct RecompileDiagnosis {
  RecompileCause cause = RecompileCause::Structure;
  std::string text;  // "constant at %12 changes: 0.99 -> 0.98"
  // How far the graphs are apart (nodes that differ; structure ranks after
  // any same-shaped difference): the nearest cached graph is the one named.
  size_t distance = 0;
  // What a user can do about it, by cause.
  std::string hint() const;
};

RecompileDiagnosis describe_difference(const Graph& cached, const Graph& now);

// The difference from the nearest of `cached`; none when `cached` is empty.
std::optional<RecompileDiagnosis> diagnose_recompilation(std::span<const Graph* const> cached, const Graph& now);

}  // namespace lazylab
