// Programs for the CUDA tests: a workload or graph lowered by a pipeline
// for the cuda backend's capabilities, without a backend.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "codegen.h"
#include "core/module.h"
#include "core/pass_manager.h"
#include "core/pipeline.h"
#include "core/program_view.h"

namespace lazylab::testing {

// What the cuda backend declares (codegen.h's declare_capabilities, its
// `row-groups` option on, the default).
inline const lazylab_capabilities& cuda_capabilities() {
  static uint8_t ops[kNumOps], dtypes[LAZYLAB_DTYPE_COUNT];
  static const lazylab_capabilities caps = [] {
    lazylab_capabilities c{};
    c.struct_size = sizeof c;
    c.num_ops = kNumOps;
    c.supports_op = ops;
    c.num_dtypes = LAZYLAB_DTYPE_COUNT;
    c.supports_dtype = dtypes;
    cuda::declare_capabilities(c, /*row_groups=*/true);
    return c;
  }();
  return caps;
}

inline Module lowered(Graph graph, const std::string& pipeline_text) {
  Module module;
  module.graph = std::move(graph);
  module.capabilities = &cuda_capabilities();
  auto pipeline = parse_pipeline(pipeline_text);
  REQUIRE_MESSAGE(pipeline.ok(), (pipeline.ok() ? "" : pipeline.error().message));
  auto stats = run_pipeline(*pipeline, module);
  REQUIRE_MESSAGE(stats.ok(), (stats.ok() ? "" : stats.error().message));
  REQUIRE(module.program.has_value());
  return module;
}

}  // namespace lazylab::testing
