// The tensor API: NumPy broadcasting, errors as values, lazy syncs.
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

TEST_CASE("broadcast_shapes follows NumPy") {
  CHECK(*broadcast_shapes({3, 1}, {1, 4}) == Dims{3, 4});
  CHECK(*broadcast_shapes({4}, {2, 3, 4}) == Dims{2, 3, 4});
  CHECK(*broadcast_shapes({}, {5}) == Dims{5});
  auto bad = broadcast_shapes({3}, {4});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "shapes [3] and [4] do not broadcast");
}

TEST_CASE("binary ops insert broadcast nodes and compute NumPy results") {
  Session s;
  Tensor column = s.ctx.from_vector<float>({1, 2}, {2, 1});
  Tensor row = s.ctx.from_vector<float>({10, 20, 30}, {3});
  Tensor sum = column + row;
  CHECK(sum.shape() == Dims{2, 3});
  check_close(values(sum), {11, 21, 31, 12, 22, 32});
}

TEST_CASE("shape mismatch is an error value that propagates") {
  Session s;
  Tensor a = s.ctx.from_vector<float>({1, 2, 3}, {3});
  Tensor b = s.ctx.from_vector<float>({1, 2}, {2});
  Tensor c = a + b;
  REQUIRE_FALSE(c.ok());
  CHECK(c.error()->message == "add: shapes [3] and [2] do not broadcast");
  Tensor d = exp(c) * 2.0;
  REQUIRE_FALSE(d.ok());
  CHECK(d.error()->message == c.error()->message);
  auto read = d.to_vector<float>();
  REQUIRE_FALSE(read.ok());
  // The failed ops recorded nothing: the context still works.
  check_close(values(a * 2.0), {2, 4, 6});
}

TEST_CASE("dtype mismatch and bad axes are errors") {
  Session s;
  Tensor f = s.ctx.from_vector<float>({1}, {1});
  Tensor i = s.ctx.from_vector<int32_t>({1}, {1});
  Tensor mixed = f + i;
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error()->message.find("operand types differ") != std::string::npos);
  Tensor bad_axis = sum(f, {3});
  REQUIRE_FALSE(bad_axis.ok());
  CHECK(bad_axis.error()->message == "reduce_sum: axis 3 out of range for rank 1");
  Tensor needs_float = exp(i);
  REQUIRE_FALSE(needs_float.ok());
  CHECK(needs_float.error()->message.find("floating-point") != std::string::npos);
  Tensor bad_matmul = matmul(s.ctx.from_vector<float>({1, 2}, {1, 2}), s.ctx.from_vector<float>({1, 2, 3}, {3, 1}));
  REQUIRE_FALSE(bad_matmul.ok());
  CHECK(bad_matmul.error()->message.find("contracting dimensions differ") != std::string::npos);
}

TEST_CASE("nothing runs until a sync point; a host read syncs") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2}, {2});
  Tensor y = relu(x * 3.0 - 4.0);
  CHECK(y.pending());
  CHECK(s.ctx.metrics().traces == 0);
  CHECK(s.ctx.pending_nodes() > 0);
  check_close(values(y), {0, 2});
  CHECK_FALSE(y.pending());
  CHECK(s.ctx.metrics().traces == 1);
  CHECK(s.ctx.pending_nodes() == 0);
}

TEST_CASE("sync computes every live pending tensor in one graph") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2}, {2});
  Tensor a = x + 1.0, b = x * 2.0;
  REQUIRE(s.ctx.sync().ok());
  CHECK_FALSE(a.pending());
  CHECK_FALSE(b.pending());
  CHECK(s.ctx.metrics().cache_misses == 1);
  check_close(values(a), {2, 3});
  check_close(values(b), {2, 4});
  CHECK(s.ctx.metrics().traces == 1);
}

// A pending tensor's type is its node's: an op must read its operands'
// types only after the trace has grown for all of them (a new parameter for
// a later operand may move the nodes), and a tensor that leaves the trace
// takes its type along. The trace's first growth lands on a parameter with
// one leading op or the other (ASan sees a stale read).
TEST_CASE("a pending tensor's type survives the trace growing under it and the trace ending") {
  for (int leading_ops : {0, 1}) {
    CAPTURE(leading_ops);
    Session s;
    Tensor acc = s.ctx.from_vector<float>({1, 2, 3}, {3});
    for (int i = 0; i < leading_ops; ++i) acc = relu(acc);
    Tensor first = acc + 0.5;
    for (int i = 0; i < 1500; ++i) acc = acc + s.ctx.from_vector<float>({1, 0, -1}, {3});
    REQUIRE(acc.ok());
    CHECK(acc.shape() == Dims{3});
    Tensor doubled = first * 2.0;
    check_close(values(acc), {1501, 2, -1497});
    CHECK(first.shape() == Dims{3});
    CHECK(doubled.shape() == Dims{3});  // computed too: it was live at the sync
    Tensor dropped = acc - 1.0;
    s.ctx.discard_pending();
    CHECK(dropped.shape() == Dims{3});
    CHECK_FALSE(dropped.ok());
  }
}

// An operand handed over by value gives its tensor to the result only when
// no other handle sees it: a shared one keeps its own value.
TEST_CASE("an elementwise op takes over a temporary operand's tensor, never a shared one") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2}, {2});
  Tensor shifted = x + 1.0;
  Tensor alias = shifted;
  TensorImpl* shared = shifted.impl();
  Tensor doubled = std::move(alias) * 2.0;
  CHECK(doubled.impl() != shared);
  Tensor temporary = x * 3.0;
  TensorImpl* given = temporary.impl();
  Tensor chained = relu(std::move(temporary) - 4.0);
  CHECK(chained.impl() == given);
  Tensor both = (x + 0.5) * (x - 0.5);
  Tensor accumulated = x;
  accumulated += both;
  check_close(values(shifted), {2, 3});
  check_close(values(doubled), {4, 6});
  check_close(values(chained), {0, 2});
  check_close(values(both), {0.75f, 3.75f});
  check_close(values(accumulated), {1.75f, 5.75f});
  check_close(values(x), {1, 2});
}

// A training loop's step repeats the last trace, and each op then takes
// back the node the last trace had (with its scalar's constant) and the
// object of a tensor the statement before dropped. Each change below breaks
// the repetition at one op of the last iteration, after ops that repeated;
// every value must still be this step's own.
TEST_CASE(
    "statements repeating the last trace take its nodes back only while they match, and compute this step's values") {
  Session s;
  Tensor a = s.ctx.from_vector<float>({1, -2, 3}, {3});
  Tensor b = s.ctx.from_vector<float>({-1, 2, -3, 4}, {2, 2});
  const double shift = -1, scale = 0.5;
  struct Step {
    const Tensor* input;
    double last_scale;       // the last iteration's
    bool last_scalar_first;  // the last iteration's shift: shift - x, not x - shift
    DType cast_to;
  };
  const Step steps[] = {
      {&a, 0.5, false, DType::F64},  {&a, 0.5, false, DType::F64},  // repeated
      {&a, 0.25, false, DType::F64},                                // a constant already traced, then another
      {&a, 0.25, true, DType::F64},                                 // the scalar first
      {&a, 0.25, true, DType::F32},                                 // another declared type
      {&b, 0.25, true, DType::F32},                                 // another input shape
      {&a, 0.5, false, DType::F64},                                 // the first again
  };
  for (const Step& step : steps) {
    CAPTURE(step.last_scale);
    CAPTURE(step.last_scalar_first);
    uint64_t traced_before = s.ctx.metrics().nodes_traced;
    Tensor x = *step.input;
    Tensor kept_midway;
    for (int i = 0; i < 3; ++i) {
      bool last = i == 2;
      x = last && step.last_scalar_first ? shift - x : x - shift;
      x = x * (last ? step.last_scale : scale);
      if (i == 1) kept_midway = x;  // a second handle: its object is not recycled under it
      x = relu(x);
    }
    Tensor cast_back = cast(cast(x, step.cast_to), DType::F32);
    // The parameter, two or three constants, nine ops and two casts; each
    // but the parameter counted once as traced.
    size_t constants = step.last_scale == scale ? 2 : 3;
    CHECK(s.ctx.pending_nodes() == 12 + constants);
    CHECK(s.ctx.metrics().nodes_traced - traced_before == 11 + constants);
    std::vector<double> want_x, want_midway;
    for (float v : values(*step.input)) want_x.push_back(v);
    for (int i = 0; i < 3; ++i) {
      bool last = i == 2;
      for (double& v : want_x) {
        v = last && step.last_scalar_first ? shift - v : v - shift;
        v *= last ? step.last_scale : scale;
      }
      if (i == 1) want_midway = want_x;
      for (double& v : want_x) v = std::max(v, 0.0);
    }
    check_close(values(x), want_x);
    check_close(values(kept_midway), want_midway);
    check_close(values(cast_back), want_x);
  }
}

TEST_CASE("an op that repeats the last trace's op and constant on another operand is recorded afresh") {
  Session s;
  Tensor a = s.ctx.from_vector<float>({1, 3}, {2});
  for (bool reads_last : {true, false, true}) {
    CAPTURE(reads_last);
    Tensor t = a - 1.0;
    Tensor u = t * 0.5;
    Tensor v = (reads_last ? u : t) * 0.5;  // the same op and constant as last trace's, on u or on t
    check_close(values(v), reads_last ? std::vector<double>{0, 0.5} : std::vector<double>{0, 1});
  }
}

TEST_CASE("x += y rebinds; the IR stays functional") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2}, {2});
  Tensor original = x;
  x += x;
  check_close(values(x), {2, 4});
  check_close(values(original), {1, 2});
}

TEST_CASE("a capture-only context reports that it cannot run") {
  Context ctx;
  Tensor x = ctx.from_vector<float>({1}, {1});
  Tensor y = x + 1.0;
  Graph graph = ctx.capture();
  CHECK(graph.roots().size() == 1);
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("no engine") != std::string::npos);
}

TEST_CASE("sizes that overflow are errors, never a wrapped small buffer") {
  Session s;
  // 2^32 x 2^32 elements wrap to 0 in int64 arithmetic without a check.
  Tensor wraps = s.ctx.full(1.0, TensorType{DType::F32, {int64_t{1} << 32, int64_t{1} << 32}});
  REQUIRE_FALSE(wraps.ok());
  CHECK(
      wraps.error()->message ==
      "constant: f32[4294967296,4294967296] has more than 72057594037927936 bytes (2^56), the most a tensor may have");
  Tensor negative = s.ctx.iota(TensorType{DType::I32, {4, -2}}, 0);
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error()->message == "iota: i32[4,-2] has a negative dimension");
  // Each operand is representable; their concatenation is not.
  Tensor half = s.ctx.full(1.0, TensorType{DType::F64, {int64_t{1} << 52}});
  REQUIRE(half.ok());
  Tensor joined =
      concat({half, half, half, half, half, half, half, half, half, half, half, half, half, half, half, half, half}, 0);
  REQUIRE_FALSE(joined.ok());
  CHECK(joined.error()->message.find("has more than") != std::string::npos);
  Tensor bad_vector = s.ctx.from_vector<float>({1.0f}, {int64_t{1} << 62, 4});
  REQUIRE_FALSE(bad_vector.ok());
}

TEST_CASE("a value over the engine's buffer limit is refused at compile, naming it") {
  EngineOptions options;
  options.max_buffer_bytes = 1000;
  Session s("lower", options);
  Tensor small = s.ctx.full(1.0, TensorType{DType::F32, {10}}) + 1.0;
  check_close(values(small), std::vector<double>(10, 2.0));
  Tensor big = s.ctx.full(1.0, TensorType{DType::F32, {1000}}) + 1.0;
  auto read = big.to_vector<float>();
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message.find("needs 4000 bytes, over the limit of 1000 bytes for one buffer") !=
        std::string::npos);
}

TEST_CASE("an execution over the memory limit is refused at compile with its figures") {
  EngineOptions options;
  options.max_memory_bytes = 1500;
  options.resident_bytes = 100;
  Session s("lower", options);
  // 400 bytes in, 400 out, 448 of arena (the constant), 100 beside.
  Tensor fits = s.ctx.from_vector<float>(std::vector<float>(100, 1.0f), {100}) + 1.0;
  check_close(values(fits), std::vector<double>(100, 2.0));
  Tensor over = s.ctx.from_vector<float>(std::vector<float>(120, 1.0f), {120}) + 1.0;
  auto read = over.to_vector<float>();
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message ==
        "an execution would hold 1.5 KiB (1572 bytes) at once, over the limit of 1.5 KiB (1500 bytes) "
        "(limits.memory-bytes): inputs 480 bytes, outputs 480 bytes, arena 512 bytes, and 100 bytes held beside "
        "them (the reference's outputs)");
}

TEST_CASE("a trace past its node limit stops with an error naming the limit, and the next trace starts afresh") {
  EngineOptions options;
  options.max_trace_nodes = 50;
  Session s("lower", options);
  CHECK(s.ctx.max_trace_nodes() == 50);
  Tensor x = s.ctx.from_vector<float>({1, 2}, {2});
  for (int i = 0; i < 100; ++i) x = x * 0.5 + 1.0;
  REQUIRE_FALSE(x.ok());
  CHECK(x.error()->message.starts_with("the trace reached 50 nodes without a sync, its limit (limits.trace-nodes"));
  CHECK(s.ctx.pending_nodes() == 50);
  REQUIRE(s.ctx.sync().ok());  // nothing of it is live: the trace empties
  CHECK(s.ctx.pending_nodes() == 0);
  // A loop that syncs stays under it.
  Tensor y = s.ctx.from_vector<float>({1, 2}, {2});
  for (int i = 0; i < 100; ++i) {
    y = y * 0.5 + 1.0;
    if (i % 10 == 9) REQUIRE(s.ctx.sync().ok());
  }
  check_close(values(y), {2, 2});
}

TEST_CASE("a placeholder traces as an input and refuses to run") {
  Context capture;
  Tensor x = capture.placeholder(TensorType{DType::F32, {1 << 20, 1 << 10}});  // 4 GiB, never allocated
  Tensor y = relu(x + 1.0);
  Graph graph = capture.capture();
  CHECK(graph.parameters().size() == 1);
  CHECK(graph.node(graph.roots()[0]).type == TensorType{DType::F32, {1 << 20, 1 << 10}});
  Session s;
  Tensor p = s.ctx.placeholder(TensorType{DType::F32, {4}});
  auto read = (p * 2.0).to_vector<float>();
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message == "an input made by Context::placeholder (f32[4]) has no data to run with");
  CHECK_FALSE(p.to_vector<float>().ok());  // a host read of it is an error too, not a crash
}

TEST_CASE("host backends refuse device memory, as do older plugins and a context without an engine") {
  float data[4] = {1, 2, 3, 4};
  TensorType type{DType::F32, {4}};
  for (const char* name : {"interp", "cpu"}) {
    auto backend = load_backend(name);
    REQUIRE(backend.ok());
    Engine engine(pipeline("lower"), **backend);
    Context ctx(engine);
    Tensor taken = ctx.from_device_memory(type, data, 2, 0, 0);
    REQUIRE_FALSE(taken.ok());
    CHECK(taken.error()->message.find("this backend keeps its data in host memory: it cannot take device memory "
                                      "(DLPack device type 2)") != std::string::npos);
  }
  auto older = load_backend(test_backend_plugin("olderminor"));
  REQUIRE(older.ok());
  Engine engine(pipeline("lower"), **older);
  Context ctx(engine);
  Tensor taken = ctx.from_device_memory(type, data, 2, 0, 0);
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.error()->message ==
        "backend olderminor (plugin ABI 3.0) cannot take device memory (DLPack device type 2); copy it to the host "
        "first");
  Context capture;
  CHECK_FALSE(capture.from_device_memory(type, data, 2, 0, 0).ok());
}

TEST_CASE("a splat constant is one node per trace and type; the values stay right") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor y = x;
  for (int i = 0; i < 3; ++i) y = (y + 1.0) * 0.5;
  // A parameter, two constants and six ops.
  CHECK(s.ctx.pending_nodes() == 9);
  Tensor z = 0.5 - x;                                       // the same 0.5, now the first operand
  Tensor w = s.ctx.full(0.5, TensorType{DType::F32, {2}});  // another shape: its own node
  Tensor v = x * -0.0;                                      // -0.0 is not 0.0
  Tensor u = x * 0.0;
  CHECK(s.ctx.pending_nodes() == 9 + 1 + 1 + 2 + 2);
  check_close(values(y), {1, 1.125, 1.25, 1.375});
  check_close(values(z), {-0.5, -1.5, -2.5, -3.5});
  check_close(values(w), {0.5, 0.5});
  // The next trace starts empty: an earlier trace's constants are not reused.
  Tensor again = x * 0.5;
  CHECK(s.ctx.pending_nodes() == 3);
  check_close(values(again), {0.5, 1, 1.5, 2});
}

TEST_CASE("a captured graph of chosen roots is called as a function on the trace and hits the cache") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3}, {3});
  Tensor w = s.ctx.from_vector<float>({10, 20, 30}, {3});
  Tensor product = x * w, total = sum(x * w + 1.0);
  std::vector<Tensor> roots = {total, product}, inputs;
  auto graph = s.ctx.capture(roots, inputs);
  REQUIRE(graph.ok());
  CHECK(graph->roots().size() == 2);
  REQUIRE(inputs.size() == 2);  // x and w, by the graph's parameter ordinals
  s.ctx.discard_pending();

  Tensor a = s.ctx.from_vector<float>({1, 1, 1}, {3}), b = s.ctx.from_vector<float>({2, 3, 4}, {3});
  for (int step = 0; step < 2; ++step) {
    auto outputs = s.ctx.call(*graph, std::vector<Tensor>{a, b});
    REQUIRE(outputs.ok());
    check_close(values((*outputs)[0]), {12});  // in the roots' order: total, then product
    check_close(values((*outputs)[1]), {2, 3, 4});
  }
  CHECK(s.ctx.metrics().cache_misses == 1);
  CHECK(s.ctx.metrics().cache_hits == 1);

  auto wrong = s.ctx.call(*graph, std::vector<Tensor>{a});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "call: the graph takes 2 inputs, 1 given");
  Tensor longer = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  wrong = s.ctx.call(*graph, std::vector<Tensor>{a, longer});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "call: input 1 is f32[4], the graph's parameter 1 is f32[3]");
  std::vector<Tensor> computed = {a};
  auto not_pending = s.ctx.capture(computed, inputs);
  REQUIRE_FALSE(not_pending.ok());
  CHECK(not_pending.error().message == "capture: root 0 is not pending on this context (computed, or another's)");
}
