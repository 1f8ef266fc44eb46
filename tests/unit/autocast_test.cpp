// autocast and its precision policies: the casts it puts in, and results
// within the 16-bit dtype's rounding of the f32 program's, on interp and cpu.
#include <doctest/doctest.h>

#include <cmath>

#include "core/graph_builder.h"
#include "core/pass_manager.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

// A layer: relu(x w + b), then a softmax of its rows.
std::vector<Tensor> layer(Context& ctx) {
  std::vector<float> x(8 * 16), w(16 * 32), b(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(static_cast<float>(i) * 0.7f) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  Tensor h = relu(matmul(ctx.from_vector(x, {8, 16}), ctx.from_vector(w, {16, 32})) +
                  broadcast_to(ctx.from_vector(b, {32}), {8, 32}));
  return {h, softmax(h, 1)};
}

size_t count_dtype(const Graph& graph, DType dtype) {
  size_t n = 0;
  for (NodeId id = 0; id < graph.size(); ++id) n += graph.node(id).type.dtype == dtype;
  return n;
}

}  // namespace

TEST_CASE("autocast's policies compute in 16 bits where they say, keep the outputs' dtypes, and stay close") {
  Session reference("decompose,lower");
  std::vector<Tensor> want = layer(reference.ctx);
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  // Tolerances: inputs and products rounded to 8 (bf16) or 11 (f16) bits,
  // sums of 16 such products.
  struct Case {
    const char* policy;
    DType low;
    double rtol, atol;
  };
  for (Case c : {Case{"products", DType::BF16, 1.6e-2, 4e-3}, Case{"products,dtype=f16", DType::F16, 2e-3, 5e-4},
                 Case{"low-but-reductions", DType::BF16, 3.2e-2, 4e-3}}) {
    CAPTURE(c.policy);
    std::string autocast = std::string("autocast{policy=") + c.policy + "}";
    // The graph after autocast: 16-bit values, f32 outputs.
    Context capture;
    std::vector<Tensor> outputs = layer(capture);
    Module module;
    module.graph = capture.capture();
    REQUIRE(run_pipeline(pipeline(autocast + ",decompose,canonicalize,cse,dce"), module).ok());
    CHECK(count_dtype(module.graph, c.low) > 0);
    for (NodeId root : module.graph.roots()) CHECK(module.graph.node(root).type.dtype == DType::F32);
    for (Backend* backend : {reference.backend.get(), cpu->get()}) {
      CAPTURE(backend->name());
      Engine engine(pipeline(autocast + ",decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,"
                                        "plan-memory"),
                    *backend);
      Context ctx(engine);
      std::vector<Tensor> got = layer(ctx);
      for (size_t k = 0; k < got.size(); ++k) {
        std::vector<float> g = values(got[k]), w = values(want[k]);
        REQUIRE(g.size() == w.size());
        for (size_t i = 0; i < w.size(); ++i) CHECK(std::fabs(g[i] - w[i]) <= c.atol + c.rtol * std::fabs(w[i]));
      }
    }
  }
}

TEST_CASE("autocast{policy=f64} computes every op in f64 and rounds the outputs to f32 once") {
  Context capture;
  std::vector<Tensor> outputs = layer(capture);
  Module module;
  module.graph = capture.capture();
  REQUIRE(run_pipeline(pipeline("autocast{policy=f64},decompose,canonicalize,cse,dce"), module).ok());
  std::vector<bool> root(module.graph.size(), false);
  for (NodeId id : module.graph.roots()) {
    root[id] = true;
    CHECK(module.graph.node(id).type.dtype == DType::F32);
    CHECK(module.graph.node(id).op == OpId::Cast);
  }
  for (NodeId id = 0; id < module.graph.size(); ++id) {
    const Node& node = module.graph.node(id);
    // (A bias is broadcast as stored and widened where it is read:
    // canonicalize's widen-after-broadcast.)
    if (root[id] || node.op == OpId::Parameter || node.op == OpId::Constant || node.op == OpId::Broadcast) continue;
    CAPTURE(op_info(node.op).name);
    CHECK(node.type.dtype == DType::F64);
  }
  // The f32 program's results within f32's rounding of the f64 ones.
  Session reference("decompose,lower");
  std::vector<Tensor> want = layer(reference.ctx);
  Session wide("autocast{policy=f64},decompose,canonicalize,cse,dce,lower");
  std::vector<Tensor> got = layer(wide.ctx);
  for (size_t k = 0; k < got.size(); ++k) {
    std::vector<float> g = values(got[k]), w = values(want[k]);
    for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-3));
  }
}

TEST_CASE("an unknown precision policy is an error naming it and the policies there are") {
  auto parsed = parse_pipeline("autocast{policy=fp8}");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().message.find("fp8") != std::string::npos);
  CHECK(parsed.error().message.find("products") != std::string::npos);
}
