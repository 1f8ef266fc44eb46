// The cpu backend against the interpreter: every workload x fusion strategy,
// at sizes that take the serial, tiled and parallel paths.
#include "core/fusion_strategy.h"
#include "runner/workload.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

struct Case {
  const char* workload;
  WorkloadParams params;
};

const Case kCases[] = {
    {"chain-tiny", {{"iters", 20}}},
    {"chain", {{"n", 70000}, {"iters", 4}}},  // parallel and tiled
    {"softmax", {{"rows", 3}, {"cols", 7}}},
    {"softmax", {{"rows", 40}, {"cols", 1000}}},  // parallel rows
    {"layernorm", {{"rows", 50}, {"cols", 96}}},
    {"mlp", {{"batch", 4}, {"d", 16}, {"hidden", 24}}},
    {"attention", {{"batch", 1}, {"heads", 2}, {"seq", 6}, {"head_dim", 4}}},
    {"gpt2-block", {{"batch", 1}, {"seq", 5}, {"channels", 8}, {"heads", 2}}},
};

std::vector<std::vector<float>> run(Backend& backend, const Workload& workload, const std::string& pipeline_text) {
  Engine engine(pipeline(pipeline_text), backend);
  Context ctx(engine);
  std::vector<Tensor> outputs = workload.step(ctx, bind_inputs(ctx, workload.make_inputs(3)));
  std::vector<std::vector<float>> result;
  for (const Tensor& t : outputs) result.push_back(values(t));
  return result;
}

}  // namespace

TEST_CASE("cpu matches the interpreter on every workload and fusion strategy") {
  auto cpu = load_backend("cpu");
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  auto interp = interp_backend();
  for (const Case& c : kCases) {
    auto workload = make_builtin_workload(c.workload, c.params);
    REQUIRE(workload.ok());
    auto want = run(*interp, **workload, "lower");
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(c.workload);
      CAPTURE(strategy);
      auto got = run(**cpu, **workload,
                     "decompose,canonicalize,cse,dce,fuse{strategy=" + strategy +
                         "},lower,schedule{order=memory},plan-memory{algo=greedy-by-size}");
      REQUIRE(got.size() == want.size());
      for (size_t o = 0; o < got.size(); ++o)
        for (size_t i = 0; i < got[o].size(); ++i)
          REQUIRE(got[o][i] == doctest::Approx(want[o][i]).epsilon(1e-4).scale(1e-5));
    }
  }
}

TEST_CASE("cpu options are checked and composites must be decomposed") {
  auto bad = load_backend("cpu", "threads=0");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("cpu option threads must be a positive integer, got '0'") != std::string::npos);
  auto unknown = load_backend("cpu", "colour=red");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("cpu has no option 'colour' (options: threads, tile)") != std::string::npos);
  auto cpu = load_backend("cpu", "threads=1,tile=256");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("lower"), **cpu);
  Context ctx(engine);
  Tensor y = softmax(ctx.from_vector<float>({1, 2}, {1, 2}));
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("backend cpu cannot run op 'softmax'") == 0);
}
