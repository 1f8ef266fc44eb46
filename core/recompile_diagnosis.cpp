#include "core/recompile_diagnosis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "core/text_format.h"

namespace lazylab {
namespace {

constexpr size_t kStructural = std::numeric_limits<size_t>::max() / 2;

bool same_shape_of_node(const Node& a, const Node& b) { return a.op == b.op && a.operands == b.operands; }

// Two nodes of the same op and operands: their first attribute that differs.
std::optional<RecompileDiagnosis> attribute_difference(const Node& a, const Node& b, NodeId id) {
  const OpInfo& info = op_info(a.op);
  for (int k = 0; k < info.num_attrs; ++k) {
    if (a.attrs[k] == b.attrs[k]) continue;
    std::string before = print_attr(info.attrs[k].kind, a.attrs[k], a.type.dtype);
    std::string after = print_attr(info.attrs[k].kind, b.attrs[k], b.type.dtype);
    if (a.op == OpId::Constant)
      return RecompileDiagnosis{RecompileCause::ConstantValue,
                                fmt::format("constant at %{} changes: {} -> {}", id, before, after), 0};
    return RecompileDiagnosis{
        RecompileCause::Attribute,
        fmt::format("attribute '{}' of %{} ({}) changes: {} -> {}", info.attrs[k].name, id, info.name, before, after),
        0};
  }
  return std::nullopt;
}

std::optional<RecompileDiagnosis> type_difference(const Node& a, const Node& b, NodeId id) {
  if (a.type == b.type) return std::nullopt;
  if (a.op == OpId::Parameter)
    return RecompileDiagnosis{RecompileCause::ParameterType,
                              fmt::format("parameter {} (%{}) changes type: {} -> {}", a.attrs[0].i, id,
                                          to_string(a.type), to_string(b.type)),
                              0};
  return RecompileDiagnosis{RecompileCause::Attribute,
                            fmt::format("the type of %{} ({}) changes: {} -> {}", id, op_info(a.op).name,
                                        to_string(a.type), to_string(b.type)),
                            0};
}

RecompileDiagnosis structural_difference(const Graph& cached, const Graph& now, NodeId first) {
  auto line = [](const Graph& g, NodeId id) {
    return id < g.size() ? fmt::format("%{} = {}", id, print_node(g, id)) : std::string("(no node)");
  };
  return {RecompileCause::Structure,
          fmt::format("the structure differs from the cached graph at %{}: it was `{}`, now `{}`", first,
                      line(cached, first), line(now, first)),
          kStructural + (std::max(cached.size(), now.size()) - first)};
}

}  // namespace

std::string RecompileDiagnosis::hint() const {
  switch (cause) {
    case RecompileCause::ParameterType: return "pad or bucket the inputs to a few shapes";
    case RecompileCause::ConstantValue: return "make it a dynamic scalar (a parameter) instead of a constant";
    case RecompileCause::Attribute: return "keep the attribute fixed across steps";
    case RecompileCause::Structure: return "the traced program itself changes between steps";
  }
  return "";
}

RecompileDiagnosis describe_difference(const Graph& cached, const Graph& now) {
  size_t common = std::min(cached.size(), now.size());
  std::optional<RecompileDiagnosis> first;
  size_t differing = 0;
  for (NodeId id = 0; id < common; ++id) {
    const Node& a = cached.node(id);
    const Node& b = now.node(id);
    if (!same_shape_of_node(a, b)) return structural_difference(cached, now, id);
    auto found = type_difference(a, b, id);
    if (!found || a.op != OpId::Parameter) {
      auto attr = attribute_difference(a, b, id);
      if (attr) found = attr;
    }
    if (!found) continue;
    // A parameter's new type changes every type after it: count and name
    // the cause, not its consequences.
    if (found->cause == RecompileCause::Attribute && first && first->cause == RecompileCause::ParameterType &&
        found->text.starts_with("the type"))
      continue;
    ++differing;
    if (!first) first = std::move(found);
  }
  if (cached.size() != now.size() || cached.roots() != now.roots()) return structural_difference(cached, now, common);
  if (!first) return {RecompileCause::Structure, "no difference from a cached graph (a hash collision?)", 0};
  first->distance = differing;
  return *first;
}

std::optional<RecompileDiagnosis> diagnose_recompilation(std::span<const Graph* const> cached, const Graph& now) {
  std::optional<RecompileDiagnosis> nearest;
  for (const Graph* graph : cached) {
    RecompileDiagnosis d = describe_difference(*graph, now);
    if (!nearest || d.distance < nearest->distance) nearest = std::move(d);
  }
  return nearest;
}

}  // namespace lazylab
