// Memory plans: no two live values overlap, and the peak never exceeds the
// naive plan, for every workload, algorithm and schedule.
#include "core/memory_plan.h"
#include "core/pass_manager.h"
#include "runner/workload.h"
#include "support.h"

using namespace lazylab;

TEST_CASE("every plan is sound and no larger than naive") {
  for (const WorkloadInfo& info : builtin_workloads()) {
    auto workload = make_builtin_workload(info.name, {});
    REQUIRE(workload.ok());
    Context ctx;
    std::vector<Tensor> outputs = (*workload)->step(ctx, bind_inputs(ctx, (*workload)->make_inputs(1)));
    Graph graph = ctx.capture();
    for (const char* algo : {"naive", "linear-scan", "greedy-by-size"})
      for (const char* order : {"program", "memory"})
        for (const char* strategy : {"none", "producer-consumer"}) {
          CAPTURE(info.name);
          CAPTURE(algo);
          CAPTURE(order);
          Module module;
          module.graph = graph;
          std::string text = std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy +
                             "},lower,schedule{order=" + order + "},plan-memory{algo=" + algo + "}";
          REQUIRE(run_pipeline(lazylab::testing::pipeline(text), module).ok());
          const Program& program = *module.program;
          CHECK(check_memory_plan(program) == "");
          CHECK(program.arena_bytes <= program.naive_arena_bytes);
          if (std::string(algo) == "naive") CHECK(program.arena_bytes == program.naive_arena_bytes);
        }
  }
}

TEST_CASE("the checker catches overlapping live values") {
  Module module;
  Context ctx;
  Tensor x = ctx.from_vector<float>({1, 2}, {2});
  Tensor y = exp(x) + neg(x);
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(lazylab::testing::pipeline("fuse,lower"), module).ok());
  Program& program = *module.program;
  REQUIRE(check_memory_plan(program) == "");
  for (ValueInfo& value : program.values)
    if (value.kind == ValueKind::Arena) value.offset = 0;  // exp and neg are both live at add
  CHECK(check_memory_plan(program).find("overlap in the arena while both are live") != std::string::npos);
}
