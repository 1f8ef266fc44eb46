// Runs a Pipeline over a Module: times each pass, records node and kernel
// counts, prints IR after chosen passes and verifies after each when asked.
#pragma once

#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "pipeline.h"

namespace lazylab {

struct PassStat {
  std::string pass;  // canonical invocation
  double milliseconds = 0;
  size_t nodes_before = 0, nodes_after = 0;
  size_t kernels_before = 0, kernels_after = 0;
  bool changed = false;
};

struct PassManagerOptions {
  bool verify_each = false;
  bool print_after_all = false;
  std::set<std::string> print_after;  // pass names
  std::ostream* ir_out = nullptr;     // where printed IR goes
};

Expected<std::vector<PassStat>> run_pipeline(const Pipeline& pipeline, Module& module,
                                             const PassManagerOptions& options = {});

}  // namespace lazylab
