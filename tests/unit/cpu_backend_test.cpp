// The cpu backend against the interpreter: every workload x fusion strategy,
// at sizes that take the serial, tiled and parallel paths.
#include <dlfcn.h>

#include <bit>
#include <cmath>

#include <array>

#include "attention_variants.h"
#include "backends/cpu/prefetch_queue.h"
#include "core/fusion_strategy.h"
#include "core/pass_manager.h"
#include "narrow_dtypes.h"
#include "runner/workload.h"
#include "support.h"
#include "workload_steps.h"

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
    {"softmax", {{"rows", 40}, {"cols", 1000}}},  // parallel rows; prefetches spread over the exp run
    {"layernorm", {{"rows", 50}, {"cols", 96}}},
    {"mlp", {{"batch", 4}, {"d", 16}, {"hidden", 24}}},
    {"attention", {{"batch", 1}, {"heads", 2}, {"seq", 6}, {"head_dim", 4}}},
    {"gpt2-block", {{"batch", 2}, {"seq", 5}, {"channels", 8}, {"heads", 2}}},  // weights shared by 2 batches
    {"mlp-train", {{"batch", 4}, {"d", 16}, {"hidden", 24}}},
    {"gpt2-block-train", {{"batch", 2}, {"seq", 5}, {"channels", 8}, {"heads", 2}}},
};

// Each float's bits: NaN payloads and signed zeros compared too.
std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits;
  for (float f : v) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

// Quotients bit for bit the interpreter's, except within one subnormal step
// where the quotient is subnormal (and some are).
void check_quotients(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  int64_t subnormal = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(std::isnan(got[i]) == std::isnan(want[i]));
    if (std::isnan(want[i])) continue;
    if (std::fpclassify(want[i]) == FP_SUBNORMAL) {  // within one subnormal step there
      ++subnormal;
      CHECK(std::fabs(got[i] - want[i]) <= std::numeric_limits<float>::denorm_min());
    } else {
      CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]));
    }
  }
  CHECK(subnormal > 0);
}

}  // namespace

// OpenBLAS's thread count is one per process: two cpu backends with other
// `threads` in one experiment each step at their own (before, a step ran at
// whichever count the last backend set: measured, a two-thread mlp cell
// beside a one-thread one took 49 ms a step instead of 27).
TEST_CASE("each cpu backend's step runs OpenBLAS at its own thread count") {
  auto one = load_backend("cpu", "threads=1");
  auto two = load_backend("cpu", "threads=2");
  REQUIRE((one.ok() && two.ok()));
  void* library = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library);
  auto get_num_threads = reinterpret_cast<int (*)()>(dlsym(library, "openblas_get_num_threads"));
  REQUIRE(static_cast<bool>(get_num_threads));
  auto workload = make_builtin_workload("mlp", {{"batch", 4}, {"d", 16}, {"hidden", 24}});
  REQUIRE(workload.ok());
  Backend *single = one->get(), *pair = two->get();
#if defined(__SANITIZE_THREAD__)
  const int pair_threads = 1;  // OpenBLAS on the calling thread only (openblas_runtime.cpp says why)
#else
  const int pair_threads = 2;
#endif
  for (Backend* backend : {single, pair, single}) {
    run_steps(*backend, **workload, "decompose,lower", 1);
    CHECK(get_num_threads() == (backend == single ? 1 : pair_threads));
  }
  dlclose(library);
}

TEST_CASE("cpu matches the interpreter on every workload and fusion strategy") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  auto interp = interp_backend();
  for (const Case& c : kCases) {
    auto workload = make_builtin_workload(c.workload, c.params);
    REQUIRE(workload.ok());
    auto want = run_steps(*interp, **workload, "lower", 1)[0];
    std::string name = c.workload;
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(name);
      CAPTURE(strategy);
      auto steps = run_steps(**cpu, **workload,
                             "decompose,canonicalize,cse,dce,fuse{strategy=" + strategy +
                                 "},lower,schedule{order=memory},plan-memory{algo=greedy-by-size}",
                             4);
      // Absolute 1e-7 near zero: an ulp of the unit-sized terms whose
      // cancellation makes a layernorm output of 1e-5 (summation order
      // differs from the interpreter's).
      check_steps(steps, want, 1e-4, 1e-3);
    }
  }
}

TEST_CASE("cpu options are checked and composites must be decomposed") {
  auto bad = load_backend("cpu", "threads=-1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "backend 'cpu': option 'threads' must be at least 0, got '-1'");
  auto zero_tile = load_backend("cpu", "tile=0");
  REQUIRE_FALSE(zero_tile.ok());
  CHECK(zero_tile.error().message == "backend 'cpu': option 'tile' must be at least 1, got '0'");
  auto unknown = load_backend("cpu", "colour=red");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message ==
        "backend 'cpu' has no option 'colour' (options: threads, tile, stream, strict, "
        "row-groups, direct-conv, openblas-core)");
  auto typo = load_backend("cpu", "strct=on");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().message.find("has no option 'strct' (did you mean 'strict'?)") != std::string::npos);
  auto twice = load_backend("cpu", "tile=8,tile=16");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message == "backend 'cpu': option 'tile' is given twice");
  // Two spellings of one configuration are one backend identity (and so one
  // set of cache entries); another value is another.
  auto spelled = load_backend("cpu", "strict=1,threads=1");
  auto defaults = load_backend("cpu", "threads=1,strict=on,row-groups=true,tile=4096");
  auto other = load_backend("cpu", "threads=1,strict=on,tile=256");
  REQUIRE((spelled.ok() && defaults.ok() && other.ok()));
  CHECK((*spelled)->fingerprint() == (*defaults)->fingerprint());
  CHECK((*spelled)->fingerprint() != (*other)->fingerprint());
  auto never = load_backend("cpu", "stream=9223372036854775807");  // KiB: more bytes than an int64 holds
  REQUIRE(never.ok());
  auto cpu = load_backend("cpu", "threads=1,tile=256");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("lower"), **cpu);
  Context ctx(engine);
  Tensor y = softmax(ctx.from_vector<float>({1, 2}, {1, 2}));
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("backend cpu cannot run op 'softmax'") == 0);
}

// strict=1 names every kernel that would run on the reference kernels, not
// the first, and why: an i64 scalar's increment (a batch norm's step count)
// and a bool compared with a bool, each a kernel of its own beside a
// product. The executable's notes (which reports show) say the same without
// strict.
TEST_CASE("cpu strict=1 names every kernel without a fast plan") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("lower"), **cpu);
  Context ctx(engine);
  Tensor count = ctx.from_vector<int64_t>({3}, {}) + 1.0;
  Tensor x = ctx.from_vector<float>({1, -1}, {2}), zeros = ctx.from_vector<float>({0, 0}, {2});
  Tensor mask = eq(gt(x, zeros), lt(x, zeros));
  Tensor product = matmul(ctx.from_vector<float>({1, 2, 3, 4}, {2, 2}), ctx.from_vector<float>({1, 0, 0, 1}, {2, 2}));
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  const std::string& message = status.error().message;
  CAPTURE(message);
  CHECK(message.find("cpu (strict): kernels with no fast plan, which would run on the reference kernels:\n") !=
        std::string::npos);
  CHECK(message.find(
            "\n  kernel 1 (elementwise: row loops declined: op 'add' (%2): the loops hold f32, bf16 and f16 values") !=
        std::string::npos);
  CHECK(message.find("\n  kernel 4 (elementwise: row loops declined: op 'eq' (%7): ") != std::string::npos);
  CHECK(message.find("contraction") == std::string::npos);
}

TEST_CASE("cpu's notes say which kernels run on the reference kernels, and why") {
  auto cpu = load_backend("cpu", "threads=1");
  REQUIRE(cpu.ok());
  Context ctx;
  Tensor count = ctx.from_vector<int64_t>({3}, {}) + 1.0;  // i64: the reference kernels
  Tensor y = exp(ctx.from_vector<float>({1, 2}, {2}));     // the row loops
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline("fuse,lower,plan-memory"), module).ok());
  auto executable = (*cpu)->compile(*module.program, module.graph);
  REQUIRE(executable.ok());
  auto notes = (*executable)->notes();
  REQUIRE(notes.ok());
  std::string text;
  for (const std::string& line : *notes) text += line + "\n";
  CAPTURE(text);
  CHECK(text.find(" on the reference kernels (elementwise: row loops declined: op 'add' (%") != std::string::npos);
  CHECK(text.find("exp") == std::string::npos);
}

// A register run (register_run.h) for every op it holds, with the running
// value as first and second operand, against a scalar, a full tensor, a row
// broadcast and itself, over edge values (NaN, signed zeros, infinities) and
// a length with a partial strip and a scalar tail: bit for bit the
// interpreter's results (rsqrt within 2 ulp; exp, inline on AVX2 and
// AVX-512, and tanh, which ends a run and runs as a SLEEF loop, too).
TEST_CASE("register runs match the interpreter bit for bit") {
  auto cpu = load_backend("cpu", "threads=2,tile=1000");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  const int64_t rows = 3, cols = 333;  // 1000-element segments: strips, vectors and a tail
  std::vector<float> data(rows * cols), other(rows * cols), per_row(rows);
  const float edges[] = {NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 1e-38f, -2.5f, 3.0f};
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = i % 7 == 0 ? edges[i / 7 % 8] : std::sin(static_cast<float>(i)) * 4;
    other[i] = i % 5 == 0 ? edges[i / 5 % 8] : std::cos(static_cast<float>(i)) * 3;
  }
  for (int64_t r = 0; r < rows; ++r) per_row[r] = r == 1 ? NAN : 0.5f + r;
  auto program = [&](Context& ctx) {
    Tensor x = ctx.from_vector<float>(data, {rows, cols});
    Tensor y = ctx.from_vector<float>(other, {rows, cols});
    Tensor row = broadcast_to(reshape(ctx.from_vector<float>(per_row, {rows}), {rows, 1}), {rows, cols});
    Tensor c = full_like(x, 0.75);
    // Short chains, each its own output, so that no later op hides an
    // earlier one's mistake.
    return std::vector<Tensor>{
        sub(c, add(x, c)),            // scalar, running second
        div(y, mul(x, c)),            // full operand, running second
        div(mul(x, y), c),            // full operand, running first
        maximum(neg(x), row),         // per-row scalar, NaN from either side
        minimum(row, abs(x)),         // the same, operands swapped
        maximum(abs(x), y),           // full operand, NaN from either side
        minimum(y, neg(x)),           // the same, operands swapped
        sqrt(abs(mul(x, x))),         // the running value as both operands
        relu(sub(x, y)),              // relu of NaN and of -0
        sub(mul(add(x, c), c), row),  // a longer run
        // Within 2 ulp from here on: rsqrt is 1 / sqrt in float, exp and tanh
        // within 1 ulp, where the interpreter rounds from double.
        mul(rsqrt(add(abs(x), c)), c),
        mul(exp(sub(x, row)), c),
        add(tanh(mul(x, c)), c),
    };
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  std::vector<Tensor> want = program(reference);
  Engine engine(pipeline("fuse{strategy=producer-consumer},lower"), **cpu);  // ops as written
  Context ctx(engine);
  std::vector<Tensor> got = program(ctx);
  for (size_t o = 0; o < want.size(); ++o) {
    auto g = values(got[o]), w = values(want[o]);
    CHECK(std::count_if(w.begin(), w.end(), [](float f) { return std::isnan(f); }) < w.size() / 2);
    for (size_t i = 0; i < w.size(); ++i) {
      CAPTURE(o);
      CAPTURE(i);
      if (std::isnan(w[i]))
        CHECK(std::isnan(g[i]));
      else
        CHECK(std::abs(int64_t{std::bit_cast<int32_t>(g[i])} - std::bit_cast<int32_t>(w[i])) <=
              (o + 3 >= want.size() ? 2 : 0));
    }
  }
}

// Row max and min: NaN anywhere in a row gives NaN (in any lane, or in the
// tail), infinities and the lowest and highest values win; the same values
// as the interpreter.
TEST_CASE("cpu row max and min match the interpreter, NaN included") {
  auto cpu = load_backend("cpu", "threads=2");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  const int64_t rows = 6, cols = 37;  // two 16-lane blocks and a 5-element tail
  std::vector<float> data(rows * cols);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::sin(static_cast<float>(i)) * 10;
  data[1 * cols + 3] = NAN;         // in a lane
  data[2 * cols + 35] = NAN;        // in the tail
  data[3 * cols + 20] = INFINITY;   // the max
  data[3 * cols + 21] = -INFINITY;  // the min
  data[4 * cols + 36] = 1e30f;      // the max, in the tail
  for (int64_t c = 0; c < cols; ++c) data[5 * cols + c] = c % 2 ? 0.0f : -0.0f;
  auto program = [&](Context& ctx) {
    Tensor x = ctx.from_vector<float>(data, {rows, cols});
    return std::vector<Tensor>{max(x, {1}), min(x, {1})};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  std::vector<Tensor> want = program(reference);
  Engine engine(pipeline("fuse{strategy=producer-consumer},lower"), **cpu);
  Context ctx(engine);
  std::vector<Tensor> got = program(ctx);
  for (size_t o = 0; o < want.size(); ++o) {
    auto g = values(got[o]), w = values(want[o]);
    for (size_t r = 0; r < w.size(); ++r) {
      CAPTURE(o);
      CAPTURE(r);
      CHECK(std::isnan(g[r]) == std::isnan(w[r]));
      if (!std::isnan(w[r])) CHECK(g[r] == w[r]);
    }
    CHECK(std::isnan(w[1]));
    CHECK(std::isnan(w[2]));
  }
}

// A division by one value a row (softmax's normalisation) is a product with
// the reciprocal plus a correction: it must round as the division does.
// Also where the quotient goes past the caches, divided as the deferred
// copy of a run's result goes (stream=1; -(-x) makes the run, whose row sum
// keeps the division out of it).
TEST_CASE("cpu division by a row's scalar matches the interpreter bit for bit") {
  auto interp = interp_backend();
  const std::vector<float> divisors = {1.0f, 3.0f, -7.0f, 1e30f, 1e38f, 0.5f, 1.1f, INFINITY};
  const int64_t rows = static_cast<int64_t>(divisors.size()), cols = 4101;  // a tail after 256 vectors
  std::vector<float> data(rows * cols);
  uint32_t state = 12345;
  for (float& v : data) {  // wide exponents and every mantissa pattern
    state = state * 1664525u + 1013904223u;
    float mantissa = 1.0f + static_cast<float>(state >> 9) / 8388608.0f;
    v = std::ldexp(state & 1 ? -mantissa : mantissa, static_cast<int>(state >> 24) % 120 - 60);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = data.data() + r * cols;
    row[5] = INFINITY, row[6] = -INFINITY, row[7] = NAN, row[8] = 0.0f, row[9] = -0.0f;
    row[10] = 1e-40f, row[11] = 3e38f, row[cols - 1] = 1e-38f;  // subnormal, near the largest, the tail
  }
  for (const char* options : {"threads=2", "threads=2,stream=1"})
    for (bool through_run : {false, true}) {
      CAPTURE(std::string(options));
      CAPTURE(through_run);
      auto cpu = load_backend("cpu", options);
      REQUIRE(cpu.ok());
      auto program = [&](Context& ctx) {
        Tensor x = ctx.from_vector<float>(data, {rows, cols});
        Tensor d = ctx.from_vector<float>(divisors, {rows, 1});
        if (!through_run) return std::vector<Tensor>{x / d};
        Tensor y = -(-x);
        Tensor row_sum = sum(y, {1}, true);  // traced first: the division ends the kernel
        return std::vector<Tensor>{y / d, row_sum};
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      Engine engine(pipeline("fuse{strategy=producer-consumer},lower"), **cpu);
      Context ctx(engine);
      check_quotients(values(program(ctx)[0]), values(program(reference)[0]));
    }
}

TEST_CASE("a negative-zero constant keeps its sign in every fused loop") {
  // Found from outside: 1 / -0 came out +inf in vector loops (16 elements and
  // more), whose splat added +0 to the constant.
  const char* text = R"(graph @negzero {
  %x = parameter {ordinal = 0} : f32[8,67]
  %one = constant {value = 1} : f32[8,67]
  %negzero = constant {value = -0} : f32[8,67]
  %inf = div(%one, %negzero) : f32[8,67]
  %quotient = div(%x, %negzero) : f32[8,67]
  %product = mul(%x, %negzero) : f32[8,67]
  %relu = relu(%product) : f32[8,67]
  %sum = reduce_sum(%product) {axes = [1], keepdim = true} : f32[8,1]
  %shifted = add(%negzero, %negzero) : f32[8,67]
  return %inf, %quotient, %product, %relu, %sum, %shifted
})";
  auto interp = interp_backend();
  auto want = run_graph_text(*interp, text, "lower");
  CHECK(std::signbit(want[0][0]));
  for (const char* options : {"threads=1", "threads=2,stream=1"}) {
    auto cpu = load_backend("cpu", options);
    REQUIRE(cpu.ok());
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(std::string(options));
      CAPTURE(strategy);
      auto got = run_graph_text(**cpu, text, "fuse{strategy=" + strategy + "},lower");
      REQUIRE(got.size() == want.size());
      for (size_t o = 0; o < want.size(); ++o)
        for (size_t i = 0; i < want[o].size(); ++i) {
          CAPTURE(o);
          CAPTURE(i);
          REQUIRE(std::bit_cast<uint32_t>(got[o][i]) == std::bit_cast<uint32_t>(want[o][i]));
        }
    }
  }
}

TEST_CASE("streamed outputs are bit for bit the ones written through the caches") {
  // Odd row counts on two threads: the deferred division's two buffer sets
  // meet chunk ends at either parity.
  const Case cases[] = {
      {"softmax", {{"rows", 41}, {"cols", 4100}}},    // the division in the deferred copy
      {"layernorm", {{"rows", 41}, {"cols", 1000}}},  // a run storing past the caches; x - mean recomputed
      {"chain", {{"n", 70001}, {"iters", 3}}},        // tiles of runs
      {"gpt2-block", {{"batch", 2}, {"seq", 33}, {"channels", 64}, {"heads", 2}}},
  };
  auto cached = load_backend("cpu", "threads=2"), streamed = load_backend("cpu", "threads=2,stream=1");
  REQUIRE(cached.ok());
  REQUIRE(streamed.ok());
  const char* kPipeline = "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory";
  for (const Case& c : cases) {
    CAPTURE(std::string(c.workload));
    auto workload = make_builtin_workload(c.workload, c.params);
    REQUIRE(workload.ok());
    auto want = run_steps(**cached, **workload, kPipeline, 3), got = run_steps(**streamed, **workload, kPipeline, 3);
    for (size_t step = 0; step < want.size(); ++step)
      for (size_t o = 0; o < want[step].size(); ++o) {
        CAPTURE(step);
        CAPTURE(o);
        REQUIRE(got[step][o].size() == want[step][o].size());
        size_t differing = 0;
        for (size_t i = 0; i < want[step][o].size(); ++i)
          differing += std::bit_cast<uint32_t>(got[step][o][i]) != std::bit_cast<uint32_t>(want[step][o][i]);
        CHECK(differing == 0);
      }
  }
}

TEST_CASE("batched GEMM epilogues run per batch on several threads and match on every step") {
  // 64 small products run one per thread, each applying its bias + tanh/relu
  // epilogue as soon as its matrix is written; the epilogue's scratch was once
  // shared between the threads (wrong values in about one run in three).
  auto cpu = load_backend("cpu", "threads=4");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx, bool use_relu) {
    std::vector<float> a(64 * 8 * 16), b(64 * 16 * 8), bias(8);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * static_cast<float>(i) - 1.0f;
    Tensor product = matmul(ctx.from_vector(a, {64, 8, 16}), ctx.from_vector(b, {64, 16, 8}));
    Tensor biased = product + broadcast_to(ctx.from_vector(bias, {8}), product.shape());
    return use_relu ? relu(biased) : tanh(biased);
  };
  for (const char* strategy : {"gemm-epilogue", "dominator"})
    for (bool use_relu : {false, true}) {
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      std::vector<float> want = values(program(reference, use_relu));
      Engine engine(pipeline(std::string("fuse{strategy=") + strategy + "},lower,plan-memory"), **cpu);
      Context ctx(engine);
      for (int step = 0; step < 40; ++step) {
        CAPTURE(strategy);
        CAPTURE(use_relu);
        CAPTURE(step);
        std::vector<float> got = values(program(ctx, use_relu));
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(0.1));
      }
    }
}

// Every shape and way of writing attention_variants.h's, on four threads
// (blocks of rows on each), every step's outputs against the interpreter.
// strict=1: an attention kernel without its plan would fail here.
TEST_CASE("attention kernels of every shape match the interpreter on every step") {
  auto cpu = load_backend("cpu", "threads=4,strict=1");
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  auto interp = interp_backend();
  for (const AttentionShape& shape : kAttentionShapes)
    for (int variant = 0; variant < kAttentionVariants; ++variant) {
      Engine reference_engine(pipeline("decompose,lower"), *interp);
      Context reference(reference_engine);
      std::vector<Tensor> want = attention_variant(reference, variant, shape);
      Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory"), **cpu);
      Context ctx(engine);
      for (int step = 0; step < 3; ++step) {
        CAPTURE(to_string(shape.q));
        CAPTURE(variant);
        CAPTURE(step);
        std::vector<Tensor> got = attention_variant(ctx, variant, shape);
        for (size_t o = 0; o < got.size(); ++o) {
          auto g = values(got[o]), w = values(want[o]);
          REQUIRE(g.size() == w.size());
          // Each output is an average of v's rows (|v| <= 2): its error is absolute.
          for (size_t i = 0; i < w.size(); ++i) REQUIRE(g[i] == doctest::Approx(w[i]).epsilon(2e-5).scale(1.0));
        }
      }
    }
}

TEST_CASE("fused broadcasts read their source as the result's layout says, whatever its element count") {
  // A [1, N] source broadcast to [N, N] repeats one row; it was once read as
  // one value per row because it has N elements (ONNX's argmax tests found it).
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  const int64_t n = 6;
  struct Source {
    Dims shape;
    Dims target;
  };
  const Source sources[] = {{{1, n}, {n, n}},       {{n, 1}, {n, n}},       {{n}, {n, n}},
                            {{1, n, 1}, {n, n, n}}, {{n, 1, 1}, {n, n, n}}, {{1, 1, n}, {n, n, n}},
                            {{n, n}, {2, n, n}},    {{n, 1, n}, {n, n, n}}};
  for (const Source& source : sources)
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      auto program = [&](Context& ctx) {
        TensorType small{DType::F32, source.shape}, big{DType::F32, source.target};
        std::vector<float> x(small.num_elements()), y(big.num_elements());
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 1.0f;
        for (size_t i = 0; i < y.size(); ++i) y[i] = 0.5f * static_cast<float>(i % 7);
        Tensor wide = broadcast_to(exp(ctx.from_vector(x, source.shape) * 0.1), source.target);
        return wide * ctx.from_vector(y, source.target) + wide;
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      Engine engine(pipeline("fuse{strategy=" + strategy + "},lower"), **cpu);
      Context ctx(engine);
      CAPTURE(to_string(source.shape));
      CAPTURE(to_string(source.target));
      CAPTURE(strategy);
      auto want = values(program(reference)), got = values(program(ctx));
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(0.1));
    }
}

// A reshape that keeps the last dimension is a view of its operand's local
// buffer: the buffer must outlive the view, or the result written in place
// of its operand's last direct use (the product here) would be read through
// the view. Rows of 4000 elements make several segments and the parallel
// path; one kernel (the dominator strategy leaves the last reshape to a
// layout kernel).
TEST_CASE("reshapes inside a kernel read their operand's buffer for as long as they are read") {
  auto cpu = load_backend("cpu", "threads=2,tile=1000");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> data(2 * 3 * 4000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::sin(0.01f * static_cast<float>(i));
    Tensor x = ctx.from_vector(data, {2, 3, 4000});
    Tensor e = exp(x);
    Tensor viewed = reshape(e, {6, 4000});
    Tensor doubled = reshape(e * 2.0, {6, 4000});  // e's last direct use: may take e's buffer
    return std::vector<Tensor>{viewed - doubled, reshape(viewed, {3, 2, 4000})};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  for (const char* strategy : {"producer-consumer", "gemm-epilogue", "dominator"}) {
    CAPTURE(strategy);
    Engine engine(pipeline(std::string("fuse{strategy=") + strategy + "},lower,plan-memory"), **cpu);
    Context ctx(engine);
    auto got = program(ctx);
    auto g0 = values(got[0]);  // runs the step
    REQUIRE(engine.last_compiled());
    if (std::string(strategy) != "dominator") CHECK(engine.last_compiled()->num_kernels == 1);
    for (size_t o = 0; o < want.size(); ++o) {
      auto g = values(got[o]), w = values(want[o]);
      REQUIRE(g.size() == w.size());
      for (size_t i = 0; i < g.size(); ++i) REQUIRE(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-3));
    }
  }
}

// Outputs written past the caches (stream=1: from 1 KiB of output) give the
// same results as cached stores: rows of 1025 and 4100 columns start at
// every alignment, so the non-temporal loop's scalar head and tail run too,
// and several rows make the parallel path. Repeated steps, since a missing
// fence would show in some only.
TEST_CASE("kernels that write past the caches match the interpreter") {
  auto cpu = load_backend("cpu", "threads=2,stream=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int64_t cols : {1025, 4100}) {
    CAPTURE(cols);
    for (const char* name : {"softmax", "layernorm"}) {
      CAPTURE(std::string(name));
      auto workload = make_builtin_workload(name, {{"rows", 40}, {"cols", cols}});
      REQUIRE(workload.ok());
      auto want = run_steps(*interp, **workload, "lower", 1)[0];
      auto steps = run_steps(**cpu, **workload, "decompose,canonicalize,fuse{strategy=producer-consumer},lower", 8);
      check_steps(steps, want, 1e-4, 1e-2);  // f32 sums of 4100 terms: absolute 1e-6 near zero
    }
  }
}

// A streamed output that the kernel reads again (a row's max of softmax's
// numerator here) must reach memory before that read: only an output read
// by nothing later may have its copy deferred to the next row's run.
TEST_CASE("a streamed output that the kernel reads again is in memory when it is read") {
  auto cpu = load_backend("cpu", "threads=2,stream=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> data(16 * 2048);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::sin(0.37f * static_cast<float>(i)) * 4;
    Tensor x = ctx.from_vector(data, {16, 2048});
    Tensor numerator = exp(x - max(x, {1}, true));
    return std::vector<Tensor>{numerator, max(numerator * numerator, {1}, true)};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  Engine engine(pipeline("decompose,canonicalize,fuse{strategy=producer-consumer},lower,plan-memory"), **cpu);
  Context ctx(engine);
  auto got = program(ctx);
  for (int step = 0; step < 4; ++step) {
    auto g1 = values(got[1]);  // runs the step
    REQUIRE(engine.last_compiled());
    CHECK(engine.last_compiled()->num_kernels == 1);
    for (size_t o = 0; o < want.size(); ++o) {
      auto g = values(got[o]), w = values(want[o]);
      REQUIRE(g.size() == w.size());
      for (size_t i = 0; i < g.size(); ++i) REQUIRE(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-3));
    }
    got = program(ctx);
  }
}

// The cpu backend's vector exp (inline on AVX-512 and AVX2, libm's otherwise) within
// one ulp of exp rounded from double, over its whole range: results that
// overflow, underflow to zero or land among the subnormals included, and
// NaN, infinities and zeros exact.
TEST_CASE("exp is within an ulp everywhere") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  std::vector<float> x = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.72f, 88.73f, -87.3f, -103.9f, -104.5f};
  for (int i = 0; i <= 1000000; ++i) x.push_back(-110.0f + 202.0f * static_cast<float>(i) / 1000000);
  Engine engine(pipeline("lower"), **cpu);
  Context ctx(engine);
  std::vector<float> got = values(exp(ctx.from_vector(x, {static_cast<int64_t>(x.size())})));
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    if (std::isnan(want)) {
      CHECK(std::isnan(got[i]));
      continue;
    }
    CHECK(std::abs(int64_t{std::bit_cast<int32_t>(got[i])} - std::bit_cast<int32_t>(want)) <= 1);
  }
}

// The cpu backend's vector erf (inline on AVX2, SLEEF's on AVX-512, libm's
// otherwise) within one ulp of erf rounded from double: both sides of the
// switch at |x| = 1 and of the saturation at 4, subnormals, NaN,
// infinities and signed zeros. Also inside a chain (GELU's), where the
// register run holds it.
TEST_CASE("erf is within an ulp everywhere") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  std::vector<float> x = {NAN,  INFINITY, -INFINITY,   0.0f,        -0.0f, 1e-40f, -1e-45f,
                          1.0f, -1.0f,    0.99999994f, 1.00000012f, 4.0f,  -4.0f,  3.99999976f};
  for (int i = 0; i <= 1000000; ++i) x.push_back(-6.0f + 12.0f * static_cast<float>(i) / 1000000);
  Engine engine(pipeline("fuse{strategy=producer-consumer},lower"), **cpu);
  Context ctx(engine);
  Tensor input = ctx.from_vector(x, {static_cast<int64_t>(x.size())});
  Tensor gelu = input * 0.5 * (erf(input * 0.70710678118654752) + 1.0);
  std::vector<float> got = values(erf(input)), got_gelu = values(gelu);
  int64_t gelu_off = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    float want = static_cast<float>(std::erf(static_cast<double>(x[i])));
    if (std::isnan(want)) {
      CHECK(std::isnan(got[i]));
      continue;
    }
    CHECK(std::abs(int64_t{std::bit_cast<int32_t>(got[i])} - std::bit_cast<int32_t>(want)) <= 1);
    double gelu_want = 0.5 * x[i] * (1.0 + std::erf(x[i] * 0.70710678118654752));
    gelu_off += std::abs(got_gelu[i] - gelu_want) > 1e-6 * std::max(1.0, std::abs(gelu_want));
  }
  CHECK(gelu_off == 0);
}

// Chains of layout ops as one strided copy (ABI 3.3): heads split from a
// fused projection and merged back, a strided slice under a transpose, a
// reshape that splits a dim then permutes it, and one whose merge of dims
// apart in memory ends the chain. Every element against the interpreter.
TEST_CASE("chains of layout ops copy what the ops one by one would") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> data(2 * 6 * 36);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    Tensor qkv = ctx.from_vector(data, {2, 6, 36});
    Tensor heads = permute(reshape(slice(qkv, {0, 0, 12}, {2, 6, 24}), {2, 6, 3, 4}), {0, 2, 1, 3});
    Tensor merged = reshape(permute(heads * 2.0, {0, 2, 1, 3}), {2, 6, 12});
    Tensor strided = transpose(slice(qkv, {1, 1, 3}, {2, 6, 36}, {1, 2, 5}), 1, 2);
    Tensor split = permute(reshape(transpose(qkv, 1, 2), {2, 6, 6, 6}), {3, 1, 0, 2});
    Tensor ended = transpose(reshape(transpose(qkv, 0, 1), {12, 36}), 0, 1);
    return std::vector<Tensor>{heads, merged, strided, split, ended};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  for (const char* strategy : {"producer-consumer", "gemm-epilogue", "dominator", "horizontal"}) {
    CAPTURE(strategy);
    Engine engine(pipeline(std::string("fuse{strategy=") + strategy + "},lower,plan-memory"), **cpu);
    Context ctx(engine);
    auto got = program(ctx);
    for (size_t o = 0; o < want.size(); ++o) {
      CAPTURE(o);
      CHECK(values(got[o]) == values(want[o]));
    }
  }
}

// Transposes of the last two dims copy tile by tile, and so do transposes
// of two dims above a short contiguous one (a weight's channels swapped, its
// 3x3 taps a unit): sizes that are not a multiple of the tile, batches of
// them, units of 3 to 16 elements, and each read through a slice (an offset
// and strides of its own; sliced units are no longer whole rows and go row
// by row).
TEST_CASE("transposes copy what the interpreter does, in tiles") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  struct Case {
    Dims shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {{{256, 256}, {1, 0}},
                        {{37, 50}, {1, 0}},
                        {{3, 37, 50}, {0, 2, 1}},
                        {{2, 3, 40, 17}, {0, 1, 3, 2}},
                        {{300, 500}, {1, 0}},
                        {{5, 16, 16}, {0, 2, 1}},
                        {{128, 128, 3, 3}, {1, 0, 2, 3}},
                        {{20, 37, 5}, {1, 0, 2}},
                        {{2, 17, 40, 3}, {0, 2, 1, 3}},
                        {{33, 16, 16}, {1, 0, 2}}};
  for (const Case& c : cases)
    for (bool sliced : {false, true}) {
      auto program = [&](Context& ctx) {
        Dims shape = c.shape;
        if (sliced) shape.back() += 3;
        std::vector<float> x(TensorType{DType::F32, shape}.num_elements());
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
        Tensor input = ctx.from_vector(x, shape);
        if (sliced) {
          std::vector<int64_t> start(shape.size(), 0), limit(shape.begin(), shape.end()), step(shape.size(), 1);
          start.back() = 2;
          limit.back() = 2 + c.shape.back();
          input = slice(input, start, limit, step);
        }
        return permute(input, c.perm);
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      Engine engine(pipeline("fuse{strategy=producer-consumer},lower,plan-memory"), **cpu);
      Context ctx(engine);
      CAPTURE(to_string(c.shape));
      CAPTURE(sliced);
      CHECK(values(program(ctx)) == values(program(reference)));
    }
}

TEST_CASE("pads of every rank and dtype copy rows into their fill as the interpreter does") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> data(3 * 4 * 5 * 2);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) - 7.5f;
    Tensor x = ctx.from_vector(data, {3, 4, 5, 2});
    Tensor row = reshape(x, {120});
    std::vector<int64_t> counts(12);
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>(i) * 1000000007LL;
    Tensor integers = ctx.from_vector(counts, {3, 4});
    return std::vector<Tensor>{
        pad(x, {0, 1, 0, 3}, {2, 0, 1, 0}, -1.5),  // every dim, the last one too
        pad(x, {1, 0, 0, 0}, {0, 0, 0, 0}),        // a leading dim only: whole rows of fill
        pad(row, {3}, {4}, 2.0),                   // rank 1
        pad(reshape(x, {3, 4, 5, 1, 2, 1}), {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}),  // the stride's dilation
        pad(integers, {1, 2}, {0, 1}, -3),                                            // i64, exact
    };
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  Engine engine(pipeline("fuse{strategy=producer-consumer},lower,plan-memory"), **cpu);
  Context ctx(engine);
  auto got = program(ctx);
  for (size_t o = 0; o + 1 < want.size(); ++o) {
    CAPTURE(o);
    CHECK(values(got[o]) == values(want[o]));
  }
  CHECK(values<int64_t>(got.back()) == values<int64_t>(want.back()));
  CHECK(values<int64_t>(got.back())[0] == -3);
}

TEST_CASE("a product whose epilogue compares runs in the row loops as the interpreter does") {
  // relu's backward after a product: select(h > 0, grad, 0), a bool inside
  // the gemm-epilogue kernel, held by the row loops as 1s and 0s (strict:
  // nothing falls back to the reference kernels).
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> a(24 * 16), b(16 * 20), h(24 * 20);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(i % 3) - 1.0f;
    Tensor grad = matmul(ctx.from_vector(a, {24, 16}), ctx.from_vector(b, {16, 20}));
    Tensor kept = where(gt(ctx.from_vector(h, {24, 20}), ctx.scalar(0.0)), grad * 2.0, ctx.scalar(0.0));
    return std::vector<Tensor>{kept, grad};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  Engine engine(pipeline("fuse{strategy=gemm-epilogue},lower,plan-memory"), **cpu);
  Context ctx(engine);
  auto got = program(ctx);
  CHECK(values(got[0]) == values(want[0]));  // sums of exact products of small numbers: exact in any order
  CHECK(values(got[1]) == values(want[1]));
}

// Max pooling's gradient picks each window's first maximum with bools: a
// constant false, selects of bools ("taken", "first") and comparisons. The
// row loops hold them as 1s and 0s (strict: nothing on the reference
// kernels; in ResNet-18's training step a bool constant sent a whole
// convolution and its epilogue there, 27 ms of a 58 ms step). The weight's
// gradient only: the input's reverses the weights with i64 indices, which
// the reference kernels compute.
TEST_CASE("max pooling's gradient runs its bools in the row loops as the interpreter does") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> x(2 * 3 * 9 * 9), w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i * 7 % 11) - 5.0f;  // ties in most windows
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
    Tensor input = ctx.from_vector(x, {2, 3, 9, 9});
    Tensor weight = ctx.from_vector(w, {4, 3, 3, 3});
    Tensor pooled =
        max_pool2d(relu(conv2d(input, weight, {{1, 1}, {1, 1, 1, 1}, {1, 1}})), {3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}});
    Tensor loss = sum(pooled * pooled);
    auto gradients = grad(loss, std::vector<Tensor>{weight});
    REQUIRE_MESSAGE(gradients.ok(), (gradients.ok() ? "" : gradients.error().message));
    return *gradients;
  };
  const char* stages = "decompose,canonicalize,cse,dce,";
  Engine reference_engine(pipeline(std::string(stages) + "lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  for (const char* strategy : {"greedy-elementwise", "gemm-epilogue"}) {
    CAPTURE(strategy);
    Engine engine(pipeline(std::string(stages) + "fuse{strategy=" + strategy + "},lower,plan-memory"), **cpu);
    Context ctx(engine);
    auto got = program(ctx);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      std::vector<float> expected = values(want[i]);
      check_close(values(got[i]), std::vector<double>(expected.begin(), expected.end()), 1e-5);
    }
  }
}

// Products with no elements (no rows, or no batches), in f32 and bf16, and
// one summing over nothing: they ran into a division by zero that killed
// the process; now the empty ones are declined (the reference kernels
// write nothing) and the sum of nothing is zeros.
TEST_CASE("products of no elements or over no depth run as the interpreter's") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    Tensor rows = matmul(ctx.from_vector<float>({}, {0, 4}), ctx.from_vector<float>(std::vector<float>(12, 1), {4, 3}));
    Tensor batches = matmul(ctx.from_vector<float>({}, {0, 2, 5}), ctx.from_vector<float>({}, {0, 5, 3}));
    Tensor narrow = matmul(cast(ctx.from_vector<float>({}, {2, 0, 4}), DType::BF16),
                           cast(ctx.from_vector<float>(std::vector<float>(24, 0.5f), {2, 4, 3}), DType::BF16));
    Tensor depth = matmul(ctx.from_vector<float>({}, {2, 0}), ctx.from_vector<float>({}, {0, 3}));
    return std::vector<Tensor>{rows, batches, cast(narrow, DType::F32), depth};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  Engine engine(pipeline("fuse{strategy=gemm-epilogue},lower,plan-memory"), **cpu);
  Context ctx(engine);
  auto got = program(ctx);
  for (size_t o = 0; o < want.size(); ++o) {
    CAPTURE(o);
    CHECK(values(got[o]) == values(want[o]));
  }
  CHECK(values(got[3]) == std::vector<float>(6, 0.0f));
}

TEST_CASE("products split between threads, by k, by bands of rows or as vector products, match the interpreter") {
  // A weight gradient's shape (16 x 16 over 4100 positions, then 20 x 12
  // over 3001 with an epilogue), every transposition, on 3 threads: the
  // slices of k are uneven; small integers keep every sum exact. A small
  // product of 100 rows: bands of 34, 34 and 32 rows, each band's epilogue
  // on its own thread. Products of one row on sgemv: a classifier's 1000
  // columns in three bands (334, 334, 332), 7 columns in one, a deep sum
  // that would otherwise split k.
  auto cpu = load_backend("cpu", "threads=3,strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    std::vector<float> a(m * k), b(k * n), bias(n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 3);
    Tensor lhs = ta ? transpose(ctx.from_vector(a, {k, m}), 0, 1) : ctx.from_vector(a, {m, k});
    Tensor rhs = tb ? transpose(ctx.from_vector(b, {n, k}), 0, 1) : ctx.from_vector(b, {k, n});
    Tensor product = matmul(lhs, rhs);
    return std::vector<Tensor>{product, relu(product + broadcast_to(ctx.from_vector(bias, {n}), product.shape()))};
  };
  for (auto [m, n, k] :
       {std::array<int64_t, 3>{16, 16, 4100}, std::array<int64_t, 3>{20, 12, 3001}, std::array<int64_t, 3>{100, 24, 40},
        std::array<int64_t, 3>{1, 1000, 512}, std::array<int64_t, 3>{1, 7, 33}, std::array<int64_t, 3>{1, 40, 5000}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(ta);
        CAPTURE(tb);
        Engine reference_engine(pipeline("lower"), *interp);
        Context reference(reference_engine);
        auto want = program(reference, m, n, k, ta, tb);
        Engine engine(pipeline("canonicalize,fuse{strategy=gemm-epilogue},lower,plan-memory"), **cpu);
        Context ctx(engine);
        for (int step = 0; step < 3; ++step) {
          auto got = program(ctx, m, n, k, ta, tb);
          CHECK(values(got[0]) == values(want[0]));
          CHECK(values(got[1]) == values(want[1]));
        }
      }
}

// A causal mask spread over the batch inside a batched product's epilogue,
// and also an output (the backward reads it): the bytes are written out and
// the select reads the view (strict: no reference kernels).
TEST_CASE("a bool view that leaves a product's epilogue is written out as bytes") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    std::vector<float> q(4 * 8 * 5), k(4 * 5 * 8);
    std::vector<bool> causal(8 * 8);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 7) * 0.5f - 1.5f;
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i % 3) - 1.0f;
    for (size_t i = 0; i < causal.size(); ++i) causal[i] = i % 8 > i / 8;
    Tensor scores = matmul(ctx.from_vector(q, {4, 8, 5}), ctx.from_vector(k, {4, 5, 8})) * 0.25;
    Tensor mask = broadcast_to(ctx.from_vector(causal, {8, 8}), {4, 8, 8});
    return std::vector<Tensor>{where(mask, ctx.scalar(-1e9), scores), mask};
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  Engine engine(pipeline("fuse{strategy=gemm-epilogue},lower,plan-memory"), **cpu);
  Context ctx(engine);
  auto got = program(ctx);
  CHECK(values(got[0]) == values(want[0]));
  CHECK(values<bool>(got[1]) == values<bool>(want[1]));
}

// Short rows (a 3x3 kernel's weights) run as one flat array, segments
// crossing rows; comparisons leave as bytes and are read as predicates.
// Sizes take the serial and the parallel paths, with and without a value
// per row (which keeps the rows).
TEST_CASE("short-row kernels and their comparisons match the interpreter bit for bit") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int64_t rows : {int64_t{5}, int64_t{7}, int64_t{30011}})
    for (bool per_row : {false, true}) {
      auto program = [&](Context& ctx) {
        std::vector<float> w(rows * 3), g(rows * 3), r(rows);
        for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 11) * 0.125f - 0.5f;
        for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
        for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i % 3) - 1.0f;
        Tensor weight = ctx.from_vector(w, {rows, 3}), grad = ctx.from_vector(g, {rows, 3});
        Tensor scale = per_row ? broadcast_to(ctx.from_vector(r, {rows, 1}), {rows, 3}) : ctx.scalar(0.01);
        Tensor updated = weight - (grad + weight * 1e-4) * scale;
        Tensor positive = gt(updated, ctx.scalar(0.0));
        return std::vector<Tensor>{updated, positive, where(positive, grad, ctx.scalar(0.0))};
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      auto want = program(reference);
      Engine engine(pipeline("fuse{strategy=producer-consumer},lower,plan-memory"), **cpu);
      Context ctx(engine);
      auto got = program(ctx);
      CAPTURE(rows);
      CAPTURE(per_row);
      CHECK(values(got[0]) == values(want[0]));
      CHECK(values<bool>(got[1]) == values<bool>(want[1]));
      CHECK(values(got[2]) == values(want[2]));
    }
}

// Three steps of `program(ctx, step)`, each with its own values, on `backend`
// and on the interpreter: bit for bit, from one graph compiled once.
template <class Program>
void check_steps_bit_for_bit(Program& program, Backend& backend, Backend& interp, const char* text) {
  Engine reference_engine(pipeline("lower"), interp);
  Context reference(reference_engine);
  Engine engine(pipeline(text), backend);
  Context ctx(engine);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    auto want = program(reference, step), got = program(ctx, step);
    for (size_t k = 0; k < want.size(); ++k) CHECK(values(got[k]) == values(want[k]));
  }
  CHECK(engine.metrics().cache_hits >= 2);
}

// Per-channel values over NCHW (batch norm's mean, scale and shift; a
// per-channel bool mask; a per-image factor), read in place as groups of
// rows (ABI 3.10): floats spread along each segment, bools one a row. Small
// images make the pattern shorter than a segment (written once a chunk); a
// large one takes the parallel path; each step's new values must be read,
// not the last run's pattern.
TEST_CASE("per-channel values read as groups of rows match the interpreter bit for bit on every step") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  const Dims shapes[] = {{2, 3, 4, 5}, {16, 128, 2, 2}, {4, 16, 32, 32}, {3, 5, 7, 1}};
  for (const Dims& shape : shapes) {
    int64_t n = shape[0], c = shape[1], size = TensorType{DType::F32, shape}.num_elements();
    auto program = [&](Context& ctx, int step) {
      std::vector<float> x(size), mean(c), scale(c), shift(c), image(n);
      std::vector<bool> keep(c);
      for (int64_t i = 0; i < size; ++i) x[i] = static_cast<float>((i * 7 + step) % 13) * 0.25f - 1.5f;
      for (int64_t k = 0; k < c; ++k) {
        mean[k] = static_cast<float>((k + step) % 5) * 0.125f;
        scale[k] = 1.0f + static_cast<float>((k * 3 + step) % 7) * 0.0625f;
        shift[k] = static_cast<float>(k % 3) * 0.5f - 0.25f * static_cast<float>(step);
        keep[k] = ((k + step) % 3 != 0);
      }
      for (int64_t i = 0; i < n; ++i) image[i] = 0.5f + static_cast<float>(i + step) * 0.25f;
      auto per_channel = [&](const Tensor& v) { return broadcast_to(reshape(v, {1, c, 1, 1}), shape); };
      Tensor input = ctx.from_vector(x, shape);
      Tensor normed = (input - per_channel(ctx.from_vector(mean, {c}))) * per_channel(ctx.from_vector(scale, {c}));
      Tensor y = relu(normed + per_channel(ctx.from_vector(shift, {c}))) *
                 broadcast_to(ctx.from_vector(image, {n, 1, 1, 1}), shape);
      Tensor masked = where(per_channel(ctx.from_vector(keep, {c})), y, ctx.scalar(0.0));
      return std::vector<Tensor>{y, masked, per_channel(ctx.from_vector(scale, {c}))};
    };
    CAPTURE(to_string(shape));
    check_steps_bit_for_bit(program, **cpu, *interp, "canonicalize,fuse{strategy=producer-consumer},lower,plan-memory");
  }
}

// Values repeating over the leading dims (a suffix of the shape: max
// pooling's window offsets over rows of 16) keep the loops flat: tiled into
// scratch per segment, floats and bools, with comparisons and selects as
// max pooling's backward makes them. Patterns that divide a segment (written
// once a chunk), that do not, and one longer than a segment; each step's
// new values must be read.
TEST_CASE("values repeating over leading dims match the interpreter bit for bit on every step") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  const Dims shapes[] = {{2, 3, 4, 5}, {16, 16, 16, 16}, {3, 7, 9, 7}, {2, 2, 80, 80}};
  for (const Dims& shape : shapes) {
    int64_t c = shape[1], h = shape[2], w = shape[3], size = TensorType{DType::F32, shape}.num_elements();
    auto program = [&](Context& ctx, int step) {
      std::vector<float> x(size), offsets(h * w), plane(c * h * w);
      std::vector<bool> keep(h * w);
      for (int64_t i = 0; i < size; ++i) x[i] = static_cast<float>((i * 5 + step) % 9);
      for (int64_t i = 0; i < h * w; ++i) {
        offsets[i] = static_cast<float>((i + step) % 9);
        keep[i] = ((i + step) % 4 != 0);
      }
      for (int64_t i = 0; i < c * h * w; ++i) plane[i] = static_cast<float>(i % 13) * 0.125f - static_cast<float>(step);
      Tensor input = ctx.from_vector(x, shape);
      Tensor offset = broadcast_to(ctx.from_vector(offsets, {h, w}), shape);
      Tensor chosen = where(eq(input, offset), broadcast_to(ctx.from_vector(plane, {c, h, w}), shape), input * 0.5);
      Tensor masked = where(broadcast_to(ctx.from_vector(keep, {h, w}), shape), chosen, ctx.scalar(-1.0));
      return std::vector<Tensor>{chosen, masked, offset + 1.0};
    };
    CAPTURE(to_string(shape));
    check_steps_bit_for_bit(program, **cpu, *interp, "fuse{strategy=producer-consumer},lower,plan-memory");
  }
}

// Casts between f32 and i64 in the row loops: an i64 made from floats is
// held as floats (whole numbers, exact), one in memory converted as the
// reference loads it (through double), and out-of-range values and NaN
// cast to 0 as the reference casts them.
TEST_CASE("casts between floats and i64 in fused kernels match the interpreter bit for bit") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int64_t rows : {int64_t{3}, int64_t{5000}}) {
    auto program = [&](Context& ctx) {
      const float specials[] = {-2.5f, 2.5f, 3e9f, -0.0f, 1e20f, -1e20f, NAN, 16777217.0f, 8388607.5f};
      std::vector<float> x(rows * 16);
      std::vector<int64_t> y(rows * 16);
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = i % 5 == 0 ? specials[(i / 5) % 9] : static_cast<float>(i % 41) * 0.37f - 7.0f;
        // 2^60 + 2^36 + 1 rounds up to a float directly, but to the tie
        // 2^60 + 2^36 through double and then to even, down: as the reference.
        y[i] = i % 7 == 0 ? (int64_t{1} << 60) + (int64_t{1} << 36) + 1
                          : (int64_t{1} << 40) + static_cast<int64_t>(i) * 1234567 - 99;
      }
      Tensor input = ctx.from_vector(x, {rows, 16});
      Tensor whole = cast(input, DType::I64);
      Tensor back = cast(whole, DType::F32) * 0.5;
      Tensor read = cast(ctx.from_vector(y, {rows, 16}), DType::F32) + input;
      // An i64 a row (a cross entropy's labels) cast, kept, and spread over
      // its row.
      std::vector<int64_t> labels(y.begin(), y.begin() + rows);
      Tensor label = cast(ctx.from_vector(labels, {rows}), DType::F32);
      Tensor spread = abs(input - reshape(label, {rows, 1}));
      return std::vector<Tensor>{whole, back, read, label, spread};
    };
    Engine reference_engine(pipeline("lower"), *interp);
    Context reference(reference_engine);
    auto want = program(reference);
    for (const char* strategy : {"producer-consumer", "gemm-epilogue"}) {
      Engine engine(pipeline(std::string("canonicalize,fuse{strategy=") + strategy + "},lower,plan-memory"), **cpu);
      Context ctx(engine);
      auto got = program(ctx);
      CAPTURE(rows);
      CAPTURE(strategy);
      CHECK(values<int64_t>(got[0]) == values<int64_t>(want[0]));
      for (size_t o = 1; o < want.size(); ++o) {
        CAPTURE(o);
        CHECK(float_bits(values(got[o])) == float_bits(values(want[o])));
      }
    }
  }
}

// Concats along every axis, of two or three operands of different sizes
// and dtypes, with a block of one element (taps stacked on a new last axis;
// two floats: a stride-2 gradient's phases interleaved).
TEST_CASE("concats along any axis copy what the interpreter does") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int64_t axis : {0, 1, 2})
    for (int64_t count : {2, 3})
      for (DType dtype : {DType::F32, DType::I64}) {
        auto program = [&](Context& ctx) {
          std::vector<Tensor> parts;
          for (int64_t k = 1; k <= count; ++k) {
            Dims shape{40, 30, 1};
            shape[axis] = axis == 2 ? 1 : k * 7;
            std::vector<float> x(TensorType{DType::F32, shape}.num_elements());
            for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i * k % 97);
            parts.push_back(cast(ctx.from_vector(x, shape), dtype));
          }
          return cast(concat(parts, axis), DType::F32);
        };
        Engine reference_engine(pipeline("lower"), *interp);
        Context reference(reference_engine);
        Engine engine(pipeline("lower,plan-memory"), **cpu);
        Context ctx(engine);
        CAPTURE(axis);
        CAPTURE(count);
        CHECK(values(program(ctx)) == values(program(reference)));
      }
}

// Gathers along each axis, with negative indices, match the interpreter;
// an index out of range is the same error, not a read past the data.
TEST_CASE("gathers along any axis pick what the interpreter does, and refuse what it refuses") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (int64_t axis : {0, 1, 2})
    for (bool out_of_range : {false, true}) {
      auto program = [&](Context& ctx) {
        std::vector<float> x(60 * 50 * 4);
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1013);
        std::vector<int64_t> picks{3, -1, 0, 2, -3, 1};
        if (out_of_range) picks[2] = 4;  // axis 2 has 4 elements
        Tensor indices = ctx.from_vector(picks, {2, 3});
        return gather(ctx.from_vector(x, {60, 50, 4}), indices, axis);
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      Engine engine(pipeline("lower,plan-memory"), **cpu);
      Context ctx(engine);
      CAPTURE(axis);
      CAPTURE(out_of_range);
      Tensor want = program(reference), got = program(ctx);
      auto want_values = want.to_vector<float>();
      auto got_values = got.to_vector<float>();
      REQUIRE(want_values.ok() == got_values.ok());
      if (want_values.ok())
        CHECK(*got_values == *want_values);
      else
        CHECK(got_values.error().message.find("gather: index 4 is out of range for a dimension of 4") !=
              std::string::npos);
    }
}

// Sums and means over leading (and trailing) axes around a kept middle run
// as column sums; other axis sets stay on the reference kernels. Sizes
// take the serial and the parallel paths.
TEST_CASE("sums and means over leading axes match the interpreter") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  struct Case {
    Dims shape;
    std::vector<int64_t> axes;
  };
  const Case cases[] = {{{64, 256}, {0}},
                        {{5000, 300}, {0}},
                        {{4, 16, 96}, {0, 1}},
                        {{16, 16, 8, 8}, {0, 2, 3}},
                        {{32, 64, 32, 32}, {0, 2, 3}},
                        {{3, 5, 7}, {1, 2}},
                        {{6, 4, 5, 3}, {0, 2}},
                        {{2, 3, 4}, {}}};
  for (const Case& c : cases)
    for (bool mean_of : {false, true}) {
      auto program = [&](Context& ctx) {
        std::vector<float> x(TensorType{DType::F32, c.shape}.num_elements());
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) * 0.001f - 0.4f;
        Tensor input = ctx.from_vector(x, c.shape);
        return mean_of ? mean(input, c.axes) : sum(input, c.axes);
      };
      Engine reference_engine(pipeline("lower"), *interp);
      Context reference(reference_engine);
      Engine engine(pipeline("lower,plan-memory"), **cpu);
      Context ctx(engine);
      CAPTURE(to_string(c.shape));
      CAPTURE(mean_of);
      auto want = values(program(reference)), got = values(program(ctx));
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1.0));
    }
}

TEST_CASE("gelu keeps float's relative accuracy far into its negative tail") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("decompose,lower"), **cpu);
  Context ctx(engine);
  const std::vector<float> x = {-3, -4, -5, -6, -8};
  std::vector<float> got = values(gelu(ctx.from_vector<float>(x, {5})));
  for (size_t i = 0; i < x.size(); ++i) {
    double u = 0.7978845608028654 * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    double want = 0.5 * x[i] * (1 + std::tanh(u));
    CAPTURE(x[i]);
    CHECK(got[i] == doctest::Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("a prefetch queue hands out each range's lines once, in order, a few at a time") {
  std::vector<float> first(100), second(16);
  lazylab::cpu::PrefetchQueue queue;
  queue.add(first.data(), 100 * sizeof(float));  // 400 bytes: 7 lines, the last one partial
  queue.add(second.data(), 16 * sizeof(float));  // 1 line
  queue.add(second.data(), 0);                   // nothing
  CHECK(queue.lines_left() == 8);
  queue.issue(3);
  CHECK(queue.lines_left() == 5);
  queue.issue(5);  // across the end of the first range
  CHECK(queue.lines_left() == 0);
  queue.issue(4);  // none left: nothing to do
  CHECK(queue.lines_left() == 0);
  queue.clear();
  queue.add(first.data(), 64);
  CHECK(queue.lines_left() == 1);
  queue.issue_all();
  CHECK(queue.lines_left() == 0);
}

// A reshape inside a fused kernel views its source's buffer; the buffer is
// freed once, by its owner, when neither is read any more. Freed by both, two
// later values shared it and s / exp(s) came out 1 (found by lazylab fuzz).
TEST_CASE("a reshape's buffer is freed once: later values of the kernel do not share it") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    Tensor s = sqrt(reshape(exp(ctx.from_vector<float>({0.5f, -1.0f, 2.0f}, {1, 3})), {3}));
    Tensor g = gelu(relu(reshape(-ctx.from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {1, 4}), {4})));
    return std::vector<Tensor>{s / exp(s), g};
  };
  Engine reference_engine(pipeline("decompose,lower"), *interp);
  Context reference(reference_engine);
  auto want = program(reference);
  for (const char* strategy : {"producer-consumer", "dominator"}) {
    CAPTURE(strategy);
    Engine engine(
        pipeline(std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy + "},lower,plan-memory"),
        **cpu);
    Context ctx(engine);
    auto got = program(ctx);
    for (size_t k = 0; k < want.size(); ++k) {
      std::vector<double> expected;
      for (float v : values(want[k])) expected.push_back(v);
      check_close(values(got[k]), expected, 1e-6);
    }
  }
}

namespace {

// What the cpu says runs on the reference kernels for `program` after
// `pipeline_text`: empty where every kernel has a fast plan.
std::string reference_notes(Backend& cpu, const std::function<std::vector<Tensor>(Context&)>& program,
                            const std::string& pipeline_text) {
  Context ctx;
  std::vector<Tensor> roots = program(ctx);  // kept: the capture holds what is live
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline(pipeline_text), module).ok());
  auto executable = cpu.compile(*module.program, module.graph);
  REQUIRE(executable.ok());
  auto notes = (*executable)->notes();
  REQUIRE(notes.ok());
  std::string text;
  for (const std::string& line : *notes) text += line + "\n";
  return text;
}

// f32 values around every 16-bit value of `dtype`: each one, the ties
// halfway to its neighbour and an f32 step either side of them, NaNs with
// payloads, subnormals of f32 and of the 16-bit format, and overflow.
std::vector<float> around_every_16_bit_value(DType dtype) {
  auto value = [&](uint16_t bits) {
    return dtype == DType::BF16 ? static_cast<double>(BFloat16::from_bits(bits))
                                : static_cast<double>(Float16::from_bits(bits));
  };
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x7fff; ++bits) {
    double low = value(static_cast<uint16_t>(bits)), high = value(static_cast<uint16_t>(bits + 1));
    if (std::isnan(low) || std::isnan(high)) continue;
    auto tie = static_cast<float>((low + high) / 2);  // exact in f32
    for (float f : {static_cast<float>(low), tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)})
      x.insert(x.end(), {f, -f});
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffa5a5a5u, 0x7fffffffu}) x.push_back(std::bit_cast<float>(nan));
  x.insert(x.end(), {std::numeric_limits<float>::denorm_min(), -1e-40f, 3.4e38f, -3.4e38f, 65520.0f, 65519.0f, INFINITY,
                     -INFINITY, 1e-8f, 5.96e-8f, 2.98e-8f, 2.99e-8f});
  return x;
}

}  // namespace

// f32 rounded into bf16 and f16 and back, and one 16-bit format into the
// other, in fused kernels and one op a kernel: bit for bit the interpreter's
// (nearest even, once; subnormals, infinities and NaN payloads kept), with
// vector bodies and scalar tails.
TEST_CASE("casts into and out of bf16 and f16 on the cpu round as the interpreter does, bit for bit") {
  auto cpu = load_backend("cpu", "threads=2");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::vector<float> x = around_every_16_bit_value(dtype);
    DType other = dtype == DType::BF16 ? DType::F16 : DType::BF16;
    auto program = [&](Context& ctx) {
      Tensor input = ctx.from_vector(x, {static_cast<int64_t>(x.size())});
      Tensor narrow = cast(input, dtype);
      return std::vector<Tensor>{cast(narrow, DType::F32), cast(cast(narrow, other), DType::F32)};
    };
    Engine reference_engine(pipeline("lower"), *interp);
    Context reference(reference_engine);
    auto want = program(reference);
    for (const char* pipeline_text : {"lower,plan-memory", "fuse{strategy=producer-consumer},lower,plan-memory"}) {
      CAPTURE(dtype);
      CAPTURE(pipeline_text);
      Engine engine(pipeline(pipeline_text), **cpu);
      Context ctx(engine);
      auto got = program(ctx);
      for (size_t o = 0; o < want.size(); ++o) CHECK(float_bits(values(got[o])) == float_bits(values(want[o])));
      CHECK(reference_notes(**cpu, program, pipeline_text) == "");
    }
  }
}

// bf16 and f16 elementwise chains, softmax, layernorm and sums in the row
// loops (each op's result rounded to its dtype, as the interpreter rounds
// it; 16-bit values read per element, per row, repeating over rows and as
// one number), none of it on the reference kernels; and the program of every
// kind of kernel in the narrow dtypes within two bf16 steps (2^-7) of the
// interpreter under three fusion strategies.
TEST_CASE("bf16 and f16 kernels run in the cpu's row loops as on the interpreter") {
  auto cpu = load_backend("cpu", "threads=2");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  auto rows = [](Context& ctx) {
    std::vector<Tensor> out;
    for (DType dtype : {DType::BF16, DType::F16}) {
      std::vector<float> v(37 * 70);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 29) % 31) * 0.125f - 1.9f;
      Tensor x = cast(ctx.from_vector(v, {37, 70}), dtype);
      Tensor bias = cast(ctx.from_vector(std::vector<float>(v.begin(), v.begin() + 70), {70}), dtype);
      Tensor per_row = cast(ctx.from_vector(std::vector<float>(v.begin(), v.begin() + 37), {37, 1}), dtype);
      Tensor scale = cast(ctx.scalar(0.3), dtype);
      out.insert(out.end(), {cast(exp(x) * x + broadcast_to(bias, x.shape()), DType::F32),
                             cast(x * broadcast_to(per_row, x.shape()) - broadcast_to(scale, x.shape()), DType::F32),
                             exp(x) + 1.0, softmax(x, 1), layernorm(x, bias, bias), sum(x * x, {1})});
    }
    return out;
  };
  const std::string fused = "decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory";
  CHECK(reference_notes(**cpu, rows, fused) == "");
  Engine reference_engine(pipeline("decompose,lower"), *interp);
  Context reference(reference_engine);
  auto want = rows(reference);
  Engine engine(pipeline(fused), **cpu);
  Context ctx(engine);
  for (int step = 0; step < 2; ++step) {
    auto got = rows(ctx);
    REQUIRE(got.size() == want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      CAPTURE(o);
      auto g = values(cast(got[o], DType::F32)), w = values(cast(want[o], DType::F32));
      for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1.6e-2).scale(1e-1));
    }
  }
  auto want_all = narrow_dtype_program(reference);
  // Its convolutions, max pools and scatter_adds are of bf16 and f16 only:
  // none declined for their dtype (its i8 and u8 kernels are, and what has no
  // fast plan in f32 either).
  std::string notes = reference_notes(**cpu, narrow_dtype_program, fused);
  CAPTURE(notes);
  for (const char* declined : {"convolution declined", "pool declined", "scatter-add declined"})
    CHECK(notes.find(declined) == std::string::npos);
  CHECK(notes.find("kernel") != std::string::npos);  // the i8 and u8 ones
  for (const char* pipeline_text : {"decompose,canonicalize,fuse{strategy=none},lower",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,plan-memory",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory"}) {
    CAPTURE(pipeline_text);
    Engine all_engine(pipeline(pipeline_text), **cpu);
    Context all(all_engine);
    auto got = narrow_dtype_program(all);
    REQUIRE(got.size() == want_all.size());
    for (size_t o = 0; o < want_all.size(); ++o) {
      CAPTURE(o);
      auto g = values(got[o]), w = values(want_all[o]);
      for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1.6e-2).scale(1e-1));
    }
  }
}

// bf16 and f16 products on sgemm over operands widened to f32 panels, the
// sums rounded once into the dtype (as the interpreter's product): split by
// k, in bands of rows, batches in parallel and one large product, with
// transposed operands and an epilogue; small integers keep every sum exact,
// so the results are the interpreter's bit for bit, on every step.
TEST_CASE("bf16 and f16 products on the cpu round sgemm's sums once, as the interpreter does") {
  auto cpu = load_backend("cpu", "threads=2");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (DType dtype : {DType::BF16, DType::F16})
    for (auto [batches, m, n, k] : {std::array<int64_t, 4>{1, 8, 8, 2100}, std::array<int64_t, 4>{1, 96, 40, 72},
                                    std::array<int64_t, 4>{3, 20, 24, 16}, std::array<int64_t, 4>{1, 256, 160, 260}})
      for (bool transposed : {false, true}) {
        auto program = [&](Context& ctx) {
          std::vector<float> a(batches * m * k), b(batches * k * n), bias(n);
          for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
          for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
          for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 3);
          Tensor lhs = cast(ctx.from_vector(a, {batches, m, k}), dtype);
          Tensor rhs = transposed ? transpose(cast(ctx.from_vector(b, {batches, n, k}), dtype), 1, 2)
                                  : cast(ctx.from_vector(b, {batches, k, n}), dtype);
          Tensor product = matmul(lhs, rhs);
          Tensor shifted = product + broadcast_to(cast(ctx.from_vector(bias, {n}), dtype), product.shape());
          return std::vector<Tensor>{cast(product, DType::F32), cast(relu(shifted), DType::F32)};
        };
        CAPTURE(dtype);
        CAPTURE(m);
        CAPTURE(transposed);
        Engine reference_engine(pipeline("lower"), *interp);
        Context reference(reference_engine);
        auto want = program(reference);
        const std::string fused = "canonicalize,fuse{strategy=gemm-epilogue},lower,plan-memory";
        Engine engine(pipeline(fused), **cpu);
        Context ctx(engine);
        for (int step = 0; step < 2; ++step) {
          auto got = program(ctx);
          CHECK(float_bits(values(got[0])) == float_bits(values(want[0])));
          CHECK(float_bits(values(got[1])) == float_bits(values(want[1])));
        }
        CHECK(reference_notes(**cpu, program, fused) == "");
      }
}

// Sums and means of bf16 and f16 values over leading axes (a bias's
// gradient), into their dtype or f32: the values widened, summed in double
// as the interpreter sums, rounded once; exact sums here, so bit for bit.
TEST_CASE("sums of bf16 and f16 over leading axes run as column sums, as the interpreter sums them") {
  auto cpu = load_backend("cpu", "threads=2");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (DType dtype : {DType::BF16, DType::F16})
    for (auto [shape, axes] :
         {std::pair{Dims{3000, 40}, std::vector<int64_t>{0}}, std::pair{Dims{16, 24, 9}, std::vector<int64_t>{0, 2}}})
      for (bool mean_of : {false, true}) {
        auto program = [&](Context& ctx) {
          std::vector<float> x(TensorType{DType::F32, shape}.num_elements());
          for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 64) * 0.125f - 3.0f;
          Tensor input = cast(ctx.from_vector(x, shape), dtype);
          Tensor into_dtype = mean_of ? mean(input, axes) : sum(input, axes);
          Tensor into_f32 = sum(cast(input, DType::F32), axes);
          return std::vector<Tensor>{cast(into_dtype, DType::F32), into_f32};
        };
        CAPTURE(dtype);
        CAPTURE(to_string(shape));
        CAPTURE(mean_of);
        Engine reference_engine(pipeline("lower"), *interp);
        Context reference(reference_engine);
        auto want = program(reference);
        Engine engine(pipeline("lower,plan-memory"), **cpu);
        Context ctx(engine);
        auto got = program(ctx);
        for (size_t o = 0; o < want.size(); ++o) CHECK(float_bits(values(got[o])) == float_bits(values(want[o])));
        CHECK(reference_notes(**cpu, program, "lower,plan-memory") == "");
      }
}
