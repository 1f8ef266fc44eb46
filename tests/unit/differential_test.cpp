// Every workload through every pass, checked against the interpreter running
// the untransformed graph (composites evaluated directly).
#include <cmath>

#include "runner/workload.h"
#include "support.h"

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
};

std::vector<std::vector<float>> run(const Workload& workload, const std::string& pipeline_text) {
  Session s(pipeline_text);
  std::vector<Tensor> inputs = bind_inputs(s.ctx, workload.make_inputs(7));
  std::vector<Tensor> outputs = workload.step(s.ctx, inputs);
  std::vector<std::vector<float>> result;
  for (const Tensor& t : outputs) result.push_back(values(t));
  return result;
}

}  // namespace

TEST_CASE("every workload x pass agrees with the reference") {
  const char* pipelines[] = {"canonicalize,lower",
                             "cse,lower",
                             "dce,lower",
                             "decompose,lower",
                             "canonicalize,cse,decompose,canonicalize,cse,dce,fuse{strategy=none},lower",
                             "decompose,canonicalize,cse,dce,fuse{strategy=greedy-elementwise},lower",
                             "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower",
                             "decompose,fuse{strategy=producer-consumer},lower,schedule{order=memory},"
                             "plan-memory{algo=greedy-by-size}",
                             "decompose,lower,plan-memory{algo=linear-scan}",
                             "decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower"};
  for (const WorkloadInfo& info : builtin_workloads()) {
    auto workload = make_builtin_workload(info.name, kSmall.at(info.name));
    REQUIRE(workload.ok());
    auto reference = run(**workload, "lower");
    for (const char* pipeline_text : pipelines) {
      CAPTURE(info.name);
      CAPTURE(pipeline_text);
      auto got = run(**workload, pipeline_text);
      REQUIRE(got.size() == reference.size());
      for (size_t o = 0; o < got.size(); ++o)
        for (size_t i = 0; i < got[o].size(); ++i)
          REQUIRE(got[o][i] == doctest::Approx(reference[o][i]).epsilon(1e-4).scale(1e-5));
    }
  }
}

TEST_CASE("random elementwise graphs survive every pipeline") {
  // Random chains over two inputs with constants, so canonicalize and cse
  // find work; results must match the reference bit for bit up to rounding.
  uint64_t state = 12345;
  auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int trial = 0; trial < 20; ++trial) {
    auto program = [&](Context& ctx, uint64_t seed) {
      state = seed;
      Tensor a = ctx.from_vector<float>({0.5f, -1.5f, 2.0f, 0.25f}, {4});
      Tensor b = ctx.from_vector<float>({1.0f, 3.0f, -0.5f, 0.75f}, {4});
      std::vector<Tensor> pool{a, b};
      for (int i = 0; i < 12; ++i) {
        const Tensor& x = pool[next() % pool.size()];
        const Tensor& y = pool[next() % pool.size()];
        switch (next() % 7) {
          case 0: pool.push_back(x + y); break;
          case 1: pool.push_back(x * y); break;
          case 2: pool.push_back(x - 0.0); break;
          case 3: pool.push_back(tanh(x) * 1.0); break;
          case 4: pool.push_back(neg(neg(x))); break;
          case 5: pool.push_back(maximum(x, y)); break;
          default: pool.push_back(x + ctx.full(2.0, x.type()) * ctx.full(3.0, x.type())); break;
        }
      }
      return pool.back();
    };
    uint64_t seed = 1000 + trial;
    Session reference("lower"), optimized("canonicalize,cse,dce,decompose,fuse,lower");
    auto want = values(program(reference.ctx, seed));
    auto got = values(program(optimized.ctx, seed));
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}
