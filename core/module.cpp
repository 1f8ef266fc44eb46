#include "core/module.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/text_format.h"

namespace lazylab {

const char* refusal_code_name(RefusalCode code) {
  switch (code) {
    case RefusalCode::None: return "none";
    case RefusalCode::Cycle: return "cycle";
    case RefusalCode::Capability: return "capability";
    case RefusalCode::SizeLimit: return "size-limit";
    case RefusalCode::OpKind: return "op-kind";
    case RefusalCode::IterationSpace: return "iteration-space";
    case RefusalCode::SeveralConsumers: return "several-consumers";
    case RefusalCode::Cost: return "cost";
  }
  return "";
}

size_t Module::num_kernels() const {
  if (program) return program->kernels.size();
  if (kernel_of.empty()) return 0;
  return static_cast<size_t>(*std::max_element(kernel_of.begin(), kernel_of.end()) + 1);
}

void replace_graph(Module& module, Graph graph) {
  module.graph = std::move(graph);
  module.kernel_of.clear();
  module.program.reset();
  module.fusion_log.clear();
}

std::string print_module(const Module& module) {
  if (module.program) return print_graph(module.graph, module.name) + print_program(*module.program, module.graph);
  std::string out = print_graph(module.graph, module.name);
  if (module.kernel_of.empty()) return out;
  out += "kernels {\n";
  for (size_t k = 0; k < module.num_kernels(); ++k) {
    out += fmt::format("  @k{} =", k);
    for (NodeId id = 0; id < module.graph.size(); ++id)
      if (module.kernel_of[id] == static_cast<int>(k))
        out += fmt::format(" %{}:{}", id, op_name(module.graph.node(id).op));
    out += "\n";
  }
  return out + "}\n";
}

}  // namespace lazylab
