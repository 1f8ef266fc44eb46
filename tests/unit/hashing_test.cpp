// Hashing rules of DESIGN.md and the computation cache built on them.
#include "core/text_format.h"
#include "core/verifier.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

uint64_t hash_of(const std::function<std::vector<Tensor>(Context&)>& program) {
  Context ctx;
  std::vector<Tensor> outputs = program(ctx);
  return ctx.capture().hash();
}

}  // namespace

TEST_CASE("equal programs hash equal, whatever the data") {
  auto program = [](float value) {
    return [value](Context& ctx) {
      Tensor x = ctx.from_vector<float>({value, value}, {2});
      return std::vector<Tensor>{relu(x * 2.0 + 1.0)};
    };
  };
  CHECK(hash_of(program(1.0f)) == hash_of(program(-7.0f)));
}

TEST_CASE("x + x differs from x + y") {
  uint64_t same = hash_of([](Context& ctx) {
    Tensor x = ctx.from_vector<float>({1}, {1});
    return std::vector<Tensor>{x + x};
  });
  uint64_t different = hash_of([](Context& ctx) {
    Tensor x = ctx.from_vector<float>({1}, {1}), y = ctx.from_vector<float>({1}, {1});
    return std::vector<Tensor>{x + y};
  });
  CHECK(same != different);
}

TEST_CASE("different shapes, dtypes, constants and ops hash differently") {
  auto with = [](Dims shape, double constant, bool use_exp) {
    return hash_of([=](Context& ctx) {
      Tensor x = ctx.from_buffer(TensorType{DType::F32, shape},
                                 std::make_shared<Buffer>(TensorType{DType::F32, shape}.bytes()));
      Tensor y = x * constant;
      return std::vector<Tensor>{use_exp ? exp(y) : tanh(y)};
    });
  };
  uint64_t base = with({4}, 2.0, true);
  CHECK(base == with({4}, 2.0, true));
  CHECK(base != with({5}, 2.0, true));
  CHECK(base != with({2, 2}, 2.0, true));
  CHECK(base != with({4}, 3.0, true));
  CHECK(base != with({4}, 2.0, false));
}

TEST_CASE("dynamic scalars are parameters: the hash ignores their value") {
  auto program = [](double scale) {
    return [scale](Context& ctx) {
      Tensor x = ctx.from_vector<float>({1}, {1});
      return std::vector<Tensor>{x * ctx.dynamic_scalar(scale)};
    };
  };
  CHECK(hash_of(program(0.5)) == hash_of(program(0.25)));
}

TEST_CASE("a loop of 100 steps compiles once and re-hits the cache") {
  Session s;
  Tensor x = s.ctx.from_vector<float>(std::vector<float>(64, 0.5f), {64});
  for (int step = 0; step < 100; ++step) {
    x = relu((x + 1.0) * 0.99);
    REQUIRE(s.ctx.mark_step().ok());
  }
  CHECK(s.ctx.metrics().traces == 100);
  CHECK(s.ctx.metrics().cache_misses == 1);
  CHECK(s.ctx.metrics().cache_hits == 99);
  // x_{n+1} = relu((x_n + 1) * 0.99) from 0.5, computed on the host in f32.
  float expected = 0.5f;
  for (int step = 0; step < 100; ++step) expected = std::max((expected + 1.0f) * 0.99f, 0.0f);
  CHECK(values(x)[0] == doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("a new shape is a new graph: counted as a miss") {
  Session s;
  for (int64_t n : {4, 8, 4, 8}) {
    Tensor x = s.ctx.from_vector<float>(std::vector<float>(n, 1.0f), {n});
    check_close(values(x + 1.0), std::vector<double>(n, 2.0));
  }
  CHECK(s.ctx.metrics().cache_misses == 2);
  CHECK(s.ctx.metrics().cache_hits == 2);
}

TEST_CASE("the LRU evicts the least recently used entry and counts it") {
  EngineOptions options;
  options.cache_capacity = 2;
  Session s("lower", options);
  auto run = [&](int64_t n) { return values(s.ctx.from_vector<float>(std::vector<float>(n, 1.0f), {n}) * 2.0); };
  run(1);
  run(2);
  run(1);  // hit: 1 becomes most recent
  run(3);  // evicts 2
  CHECK(s.ctx.metrics().evictions == 1);
  CHECK(s.engine.cache().size() == 2);
  run(1);  // still cached
  CHECK(s.ctx.metrics().cache_hits == 2);
  run(2);  // was evicted: a miss
  CHECK(s.ctx.metrics().cache_misses == 4);
}

TEST_CASE("cache hits do not run passes; verify-hits checks structure") {
  EngineOptions options;
  options.verify_cache_hits = true;
  Session s("canonicalize,cse,lower", options);
  for (int step = 0; step < 5; ++step) values(s.ctx.from_vector<float>({1, 2}, {2}) * 2.0);
  CHECK(s.ctx.metrics().cache_misses == 1);
  CHECK(s.ctx.metrics().cache_hits == 4);
  REQUIRE(s.engine.last_compiled());
  CHECK(s.engine.last_compiled()->pass_stats.size() == 3);
}

TEST_CASE("the key includes the pipeline: same graph, two pipelines, two compilations") {
  auto backend = interp_backend();
  Engine a(pipeline("lower"), *backend), b(pipeline("cse,lower"), *backend);
  CHECK(a.cache_key(42) != b.cache_key(42));
  CHECK(a.cache_key(42) == Engine(pipeline("lower"), *backend).cache_key(42));
}

namespace {

// Adds a node the way the tracer does: taken back from before the last
// clear() when it is the same node, else typed here and hashed by the graph.
NodeId trace_node(Graph& graph, OpId op, const TensorType& type, Operands operands, Attrs attrs = {}) {
  bool declared = op_info(op).type_rule == TypeRule::Declared;
  NodeId kept = graph.reuse(op, std::span(operands.data(), operands.size()), attrs, declared ? &type : nullptr);
  return kept != kNoNode ? kept : graph.add(op, type, std::move(operands), std::move(attrs));
}

// [x, c, x*c, relu(x*c), relu(x*c) + x] over x: f32[n], with c a splat of `scale`.
void trace_program(Graph& graph, int64_t n, double scale) {
  TensorType type{DType::F32, {n}};
  Attrs ordinal, value;
  value[0].f = scale;
  NodeId x = trace_node(graph, OpId::Parameter, type, {}, ordinal);
  NodeId c = trace_node(graph, OpId::Constant, type, {}, value);
  NodeId product = trace_node(graph, OpId::Mul, type, {x, c});
  NodeId relu = trace_node(graph, OpId::Relu, type, {product});
  graph.add_root(trace_node(graph, OpId::Add, type, {relu, x}));
}

Graph fresh_program(int64_t n, double scale) {
  Graph graph;
  trace_program(graph, n, scale);
  return graph;
}

}  // namespace

TEST_CASE("a trace that repeats the last one takes its nodes back, and one that differs is hashed afresh") {
  Graph trace;
  // The same program twice, then one whose constant differs (so everything
  // after it must be rehashed), one of another size (the parameter's type
  // differs), and the first again.
  for (auto [n, scale] : {std::pair{4, 2.0}, {4, 2.0}, {4, 0.5}, {8, 0.5}, {4, 2.0}}) {
    CAPTURE(n);
    CAPTURE(scale);
    trace.clear();
    trace_program(trace, n, scale);
    Graph fresh = fresh_program(n, scale);
    REQUIRE(verify(trace).ok());  // every node's type and hash is what it would be afresh
    REQUIRE(trace.size() == fresh.size());
    for (NodeId id = 0; id < trace.size(); ++id) {
      CHECK(trace.node(id).type == fresh.node(id).type);
      CHECK(trace.node(id).hash == fresh.node(id).hash);
    }
    CHECK(trace.hash() == fresh.hash());
  }
  CHECK(fresh_program(4, 2.0).hash() != fresh_program(4, 0.5).hash());
}

TEST_CASE("a kept node is taken back only while the trace repeats the last one") {
  Graph trace;
  trace_program(trace, 4, 2.0);
  trace.clear();
  TensorType type{DType::F32, {4}};
  Attrs ordinal, other_value;
  other_value[0].f = 3.0;
  NodeId x = trace.reuse(OpId::Parameter, {}, ordinal, &type);
  CHECK(x == 0);
  // A declared type that differs, or none where the op declares one, is no match.
  TensorType wider{DType::F32, {5}};
  CHECK(trace.reuse(OpId::Constant, {}, Attrs{}, &wider) == kNoNode);
  CHECK(trace.reuse(OpId::Constant, {}, other_value, &type) == kNoNode);
  // Position 1 now holds another constant: the product that reads it, the
  // same op on the same operand ids as before, must be typed and hashed afresh.
  NodeId c = trace.add(OpId::Constant, type, {}, other_value);
  NodeId operands[] = {x, c};
  CHECK(trace.reuse(OpId::Mul, operands, Attrs{}, nullptr) == kNoNode);
  trace.add(OpId::Mul, type, {x, c});
  CHECK(trace.size() == 3);
  trace.add_root(2);
  Status verified = verify(trace);
  CHECK_MESSAGE(verified.ok(), verified.error().message);
}

TEST_CASE("a loop whose trace changes between steps computes each step's own program") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1.0f, -2.0f}, {2});
  std::vector<double> expected = {1.0, -2.0};
  // Alternating scales make every other trace differ in a middle constant;
  // a stale hash would hit the other program's compiled graph.
  for (int step = 0; step < 6; ++step) {
    double scale = step % 2 ? 0.5 : 3.0;
    x = relu(x * scale) + x;
    for (double& v : expected) v = std::max(static_cast<double>(static_cast<float>(v * scale)), 0.0) + v;
    check_close(values(x), expected);
  }
  CHECK(s.ctx.metrics().cache_misses == 2);
  CHECK(s.ctx.metrics().cache_hits == 4);
}
