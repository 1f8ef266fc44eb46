#include "core/pass_manager.h"

#include <fmt/format.h>

#include <chrono>
#include <ostream>

#include "core/verifier.h"

namespace lazylab {
namespace {

bool wants_print(const PassManagerOptions& options, const std::string& name) {
  return options.ir_out && (options.print_after_all || options.print_after.count(name));
}

Expected<PassStat> run_one(const PassInvocation& invocation, Module& module, const PassManagerOptions& options) {
  PassStat stat{invocation.canonical};
  stat.nodes_before = module.graph.size();
  stat.kernels_before = module.num_kernels();
  auto start = std::chrono::steady_clock::now();
  auto changed = invocation.create()->run(module);
  stat.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!changed) return make_error(fmt::format("pass {}: {}", invocation.canonical, changed.error().message));
  stat.changed = *changed;
  stat.nodes_after = module.graph.size();
  stat.kernels_after = module.num_kernels();
  if (options.verify_each) {
    Status status = verify(module.graph);
    if (!status) return make_error(fmt::format("after pass {}: {}", invocation.canonical, status.error().message));
  }
  if (wants_print(options, invocation.info->name))
    *options.ir_out << "// -----// IR after " << invocation.canonical << " //----- //\n" << print_module(module);
  return stat;
}

}  // namespace

Expected<std::vector<PassStat>> run_pipeline(const Pipeline& pipeline, Module& module,
                                             const PassManagerOptions& options) {
  std::vector<PassStat> stats;
  for (const PassInvocation& invocation : pipeline.passes) {
    auto stat = run_one(invocation, module, options);
    if (!stat) return stat.error();
    stats.push_back(std::move(*stat));
  }
  return stats;
}

}  // namespace lazylab
