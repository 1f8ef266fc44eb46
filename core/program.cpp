#include "core/program.h"

#include <fmt/format.h>

#include "core/text_format.h"

namespace lazylab {
namespace {

std::string value_list(const std::vector<NodeId>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}%{}", i ? ", " : "", ids[i]);
  return out;
}

}  // namespace

std::string print_program(const Program& program, const Graph& graph) {
  std::string naive =
      program.arena_bytes == program.naive_arena_bytes ? "" : fmt::format(" (naive {})", program.naive_arena_bytes);
  std::string out =
      fmt::format("program {{  // {} kernels, arena {} bytes{}\n", program.kernels.size(), program.arena_bytes, naive);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel& kernel = program.kernels[k];
    out += fmt::format("  kernel @k{}({}) -> ({}) {{\n", k, value_list(kernel.inputs), value_list(kernel.outputs));
    for (NodeId id : kernel.ops) {
      const ValueInfo& value = program.values[id];
      std::string placement = value.kind == ValueKind::Arena
                                  ? fmt::format("  // arena[{}, +{}]", value.offset, value.bytes)
                              : value.kind == ValueKind::Output ? fmt::format("  // output {}", value.ordinal)
                                                                : "";
      out += fmt::format("    %{} = {}{}\n", id, print_node(graph, id), placement);
    }
    out += "  }\n";
  }
  out += fmt::format("  return {}\n}}\n", value_list(program.outputs));
  return out;
}

}  // namespace lazylab
