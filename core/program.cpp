#include "core/program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text_format.h"

namespace lazylab {
namespace {

std::string value_list(const std::vector<NodeId>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}%{}", i ? ", " : "", ids[i]);
  return out;
}

std::string_view access_name(Access kind) {
  switch (kind) {
    case Access::Full: return "full";
    case Access::PerRow: return "per-row";
    case Access::Splat: return "splat";
    case Access::Scalar: return "scalar";
    case Access::Repeat: return "repeat";
    case Access::RowGroup: return "row-group";
  }
  return "?";
}

// "full", "repeat 8 of %3": how a value's elements are indexed.
std::string describe_access(const ValueAccess& a) {
  std::string how = a.kind == Access::Repeat || a.kind == Access::RowGroup
                        ? fmt::format("{} {}", access_name(a.kind), a.period)
                        : std::string(access_name(a.kind));
  return a.source == a.value ? how : fmt::format("{} of %{}", how, a.source);
}

// How the kernel reads each input, where the description says.
std::string describe_inputs(const Kernel& kernel) {
  std::string out;
  for (NodeId input : kernel.inputs)
    if (const ValueAccess* a = kernel.description.access_of(input))
      out += fmt::format("{}%{} {}", out.empty() ? "; reads " : ", ", input, describe_access(*a));
  return out;
}

// "row-reduction [4 x 8]": the kind and iteration space.
std::string describe_space(const KernelDescription& d) {
  switch (d.kind) {
    case KernelKind::Elementwise:
    case KernelKind::Window:
    case KernelKind::RowReduction: return fmt::format("{} [{} x {}]", kind_name(d.kind), d.rows, d.cols);
    case KernelKind::Contraction:
      return fmt::format("contraction {} x [{} x {}] x [{} x {}]{}{}", d.contraction.batch, d.contraction.m,
                         d.contraction.k, d.contraction.k, d.contraction.n,
                         d.contraction.lhs_transposed ? ", lhs^T" : "", d.contraction.rhs_transposed ? ", rhs^T" : "");
    case KernelKind::Attention: {  // "attention 48 x softmax([256 x 64] x [64 x 256] * 0.125, causal) x [256 x 64],
                                   // k^T"
      const Attention& a = d.attention;
      std::string mask = a.causal ? ", causal"
                         : a.mask != kNoNode
                             ? fmt::format(", kept where %{} is {}", a.mask, a.mask_keeps ? "true" : "false")
                             : "";
      return fmt::format("attention {} x softmax([{} x {}] x [{} x {}] * {}{}) x [{} x {}]{}{}{}", a.batch, a.m, a.d,
                         a.d, a.n, a.scale, mask, a.n, a.dv, a.k_transposed ? ", k^T" : "",
                         a.dtype == DType::F32 ? "" : fmt::format(", in {}", dtype_name(a.dtype)),
                         a.through_views ? ", through views" : "");
    }
    case KernelKind::Layout:
      return fmt::format("layout [{}] strides [{}] offset {}", fmt::join(d.layout.shape, ","),
                         fmt::join(d.layout.strides, ","), d.layout.offset);
    default: return std::string(kind_name(d.kind));
  }
}

}  // namespace

std::string print_program(const Program& program, const Graph& graph) {
  std::string naive =
      program.arena_bytes == program.naive_arena_bytes ? "" : fmt::format(" (naive {})", program.naive_arena_bytes);
  std::string out =
      fmt::format("program {{  // {} kernels, arena {} bytes{}\n", program.kernels.size(), program.arena_bytes, naive);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel& kernel = program.kernels[k];
    out += fmt::format("  kernel @k{}({}) -> ({}) {{  // {}{}\n", k, value_list(kernel.inputs),
                       value_list(kernel.outputs), describe_space(kernel.description), describe_inputs(kernel));
    for (NodeId id : kernel.ops) {
      const ValueInfo& value = program.values[id];
      std::string placement = value.kind == ValueKind::Arena
                                  ? fmt::format("  // arena[{}, +{}]", value.offset, value.bytes)
                              : value.kind == ValueKind::Output ? fmt::format("  // output {}", value.ordinal)
                                                                : "";
      const ValueAccess* view = kernel.description.access_of(id);
      if (view && view->source != id)
        placement += fmt::format("{}view: {}", placement.empty() ? "  // " : "; ", describe_access(*view));
      out += fmt::format("    %{} = {}{}\n", id, print_node(graph, id), placement);
    }
    out += "  }\n";
  }
  out += fmt::format("  return {}\n}}\n", value_list(program.outputs));
  return out;
}

}  // namespace lazylab
