// Every workload through every pass, checked against the interpreter running
// the untransformed graph (composites evaluated directly).
#include <cmath>

#include "core/fusion_strategy.h"
#include "core/remat_strategy.h"
#include "integer_edges.h"
#include "random_program.h"
#include "runner/workload.h"
#include "support.h"
#include "workload_steps.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

const std::map<std::string, WorkloadParams> kSmall = {
    {"chain", {{"n", 16}, {"iters", 5}}},
    {"chain-small", {{"n", 16}, {"iters", 5}}},
    {"chain-tiny", {{"iters", 5}}},
    {"softmax", {{"rows", 3}, {"cols", 7}}},
    {"layernorm", {{"rows", 3}, {"cols", 10}}},
    {"mlp", {{"batch", 2}, {"d", 8}, {"hidden", 12}}},
    {"attention", {{"batch", 1}, {"heads", 2}, {"seq", 5}, {"head_dim", 4}}},
    {"gpt2-block", {{"batch", 1}, {"seq", 4}, {"channels", 8}, {"heads", 2}}},
    {"mlp-train", {{"batch", 2}, {"d", 8}, {"hidden", 12}}},
    {"gpt2-block-train", {{"batch", 1}, {"seq", 4}, {"channels", 8}, {"heads", 2}}},
};

}  // namespace

TEST_CASE("every workload x pass agrees with the reference") {
  std::vector<std::string> pipelines = {"canonicalize,lower",
                                        "cse,lower",
                                        "dce,lower",
                                        "decompose,lower",
                                        "canonicalize,cse,decompose,canonicalize,cse,dce,fuse{strategy=none},lower",
                                        "decompose,fuse{strategy=producer-consumer},lower,schedule{order=memory},"
                                        "plan-memory{algo=greedy-by-size}",
                                        "decompose,lower,plan-memory{algo=linear-scan}"};
  for (const std::string& strategy : FusionStrategyRegistry::global().names())
    pipelines.push_back("decompose,canonicalize,cse,dce,fuse{strategy=" + strategy + "},lower");
  for (const std::string& strategy : RematStrategyRegistry::global().names())
    pipelines.push_back("decompose,canonicalize,cse,dce,remat{strategy=" + strategy +
                        (strategy == "memory-budget" ? ",percent={budget}" : "") +
                        "},fuse{strategy=gemm-epilogue},lower,plan-memory");
  auto interp = interp_backend();
  for (const WorkloadInfo& info : builtin_workloads()) {
    auto workload = make_builtin_workload(info.name, kSmall.at(info.name));
    REQUIRE(workload.ok());
    auto reference = run_steps(*interp, **workload, "lower", 1, 7)[0];
    // memory-budget with a budget the workload reaches: the small
    // mlp-train's save-all peak is already its lowest (its gelu's gradient
    // reads x alone), gpt2-block-train's reaches 75%.
    const std::string budget = info.name == "mlp-train" ? "100" : "75";
    for (std::string pipeline_text : pipelines) {
      if (size_t at = pipeline_text.find("{budget}"); at != std::string::npos) pipeline_text.replace(at, 8, budget);
      CAPTURE(info.name);
      CAPTURE(pipeline_text);
      check_steps(run_steps(*interp, **workload, pipeline_text, 3, 7), reference, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("random graphs survive every fusion strategy on every backend") {
  // Random DAGs over two inputs with constants, broadcasts and row
  // reductions, so canonicalize, cse and every fusion strategy find work;
  // results must match the interpreter running the graph untransformed.
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int trial = 0; trial < 25; ++trial) {
    uint64_t seed = 1000 + trial;
    Engine reference_engine(pipeline("lower"), *interp);
    Context reference(reference_engine);
    std::vector<Tensor> want = random_program(reference, seed);
    for (Backend* backend : {interp.get(), cpu->get()})
      for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
        CAPTURE(trial);
        CAPTURE(backend->name());
        CAPTURE(strategy);
        Engine engine(
            pipeline("canonicalize,cse,dce,fuse{strategy=" + strategy + "},lower,schedule{order=memory},plan-memory"),
            *backend);
        Context ctx(engine);
        for (int step = 0; step < 2; ++step) {
          CAPTURE(step);
          std::vector<Tensor> got = random_program(ctx, seed);
          for (size_t o = 0; o < got.size(); ++o) {
            auto g = values(got[o]), w = values(want[o]);
            for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-6));
          }
        }
      }
  }
}

TEST_CASE("integer constants at their dtype's edges compute exactly on every backend") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (Backend* backend : {interp.get(), cpu->get()})
    for (const char* pipeline_text : {"lower", "fuse{strategy=greedy-elementwise},lower", "canonicalize,lower"}) {
      CAPTURE(backend->name());
      CAPTURE(std::string(pipeline_text));
      auto outputs = run_graph_text<int64_t>(*backend, kIntegerEdgesGraph, pipeline_text);
      REQUIRE(outputs.size() == kIntegerEdgesWant.size());
      for (size_t o = 0; o < kIntegerEdgesWant.size(); ++o)
        for (int64_t v : outputs[o]) CHECK(v == kIntegerEdgesWant[o]);
    }
}
