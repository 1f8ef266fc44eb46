// Programs for the CUDA tests: a workload or graph lowered by a pipeline
// for the cuda backend's capabilities, without a backend.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "core/module.h"
#include "core/pass_manager.h"
#include "core/pipeline.h"
#include "core/program_view.h"

namespace lazylab::testing {

// What the cuda backend declares: every op but parameters, every kind of
// fusion (convolutions with their epilogues too), attention in 16 bits and
// with masks read from memory.
inline const lazylab_capabilities& cuda_capabilities() {
  static uint8_t supported[kNumOps];
  static const lazylab_capabilities caps = [] {
    lazylab_capabilities c{};
    c.struct_size = sizeof c;
    c.num_ops = kNumOps;
    c.supports_op = supported;
    for (int op = 0; op < kNumOps; ++op) supported[op] = op != LAZYLAB_OP_Parameter;
    c.fuses_elementwise = c.fuses_reduction_prologue = c.fuses_gemm_epilogue = c.fuses_layout_views = 1;
    c.fuses_window_epilogue = 1;
    c.attention_max_head_dim = 128;
    c.reads_row_groups = 1;
    c.gemm_epilogue_rereads = 1;
    c.attention_16_bit = 1;
    c.attention_masks = 1;
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
