// Micro-benchmarks of the framework's own costs: tracing, hashing, the
// cache-hit sync path and the .lzir text format, at 1k, 10k and 100k nodes
// so growth is visible. Backend execution is excluded where it would hide
// them (the sync counters subtract the backend's execute time).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "core/backend.h"
#include "core/engine.h"
#include "core/hash.h"
#include "core/pass_manager.h"
#include "core/pipeline.h"
#include "core/tensor_ops.h"
#include "core/text_format.h"

namespace lazylab {
namespace {

// A chain of elementwise ops over `params` inputs of 1 element: add, mul,
// relu in turn, each reading the running value and one input.
Tensor trace_chain(const std::vector<Tensor>& params, int64_t nodes) {
  Tensor x = params[0];
  for (int64_t i = 0; i < nodes; ++i) {
    const Tensor& p = params[i % params.size()];
    switch (i % 3) {
      case 0: x = add(x, p); break;
      case 1: x = mul(x, p); break;
      default: x = relu(x); break;
    }
  }
  return x;
}

std::vector<Tensor> make_params(Context& ctx, int64_t count) {
  std::vector<Tensor> params;
  for (int64_t i = 0; i < count; ++i) params.push_back(ctx.from_vector<float>({0.5f}, {1}));
  return params;
}

void BM_TraceElementwise(benchmark::State& state) {
  Context ctx;
  std::vector<Tensor> params = make_params(ctx, 3);
  for (auto _ : state) {
    Tensor out = trace_chain(params, state.range(0));
    benchmark::DoNotOptimize(out.impl());
    state.PauseTiming();
    ctx.discard_pending();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_TraceElementwise)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

// chain-tiny's step, x = relu((x + 1) * 0.99), traced from each of `sizes`
// in turn: a scalar in two ops of three, so the splat constants' cost shows.
// As `statements`, it is written as the workload writes it: each op's result
// is assigned back to x, so no operand is a spare handle and every op makes
// a new tensor and drops the last.
void trace_scalar_chain(benchmark::State& state, std::initializer_list<int64_t> sizes, bool statements = false) {
  Context ctx;
  std::vector<Tensor> inputs;
  for (int64_t n : sizes) inputs.push_back(ctx.from_vector<float>(std::vector<float>(n, 0.5f), {n}));
  size_t step = 0;
  for (auto _ : state) {
    Tensor x = inputs[step++ % inputs.size()];
    for (int64_t i = 0; i < state.range(0); ++i) {
      if (!statements) {
        x = relu((x + 1.0) * 0.99);
        continue;
      }
      x = x + 1.0;
      x = x * 0.99;
      x = relu(x);
    }
    benchmark::DoNotOptimize(x.impl());
    state.PauseTiming();
    ctx.discard_pending();
    state.ResumeTiming();
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0) * 3),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

// Each trace repeats the last, as a training loop's does, so its nodes are
// taken back (Graph::reuse).
void BM_TraceScalarChain(benchmark::State& state) { trace_scalar_chain(state, {64}); }
BENCHMARK(BM_TraceScalarChain)->Arg(100)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_TraceChainStatements(benchmark::State& state) { trace_scalar_chain(state, {64}, /*statements=*/true); }
BENCHMARK(BM_TraceChainStatements)->Arg(100)->Arg(10000)->Unit(benchmark::kMicrosecond);

// No trace repeats the last (the input's size alternates), so every node is
// typed, hashed and built afresh: a first step.
void BM_TraceScalarChainFresh(benchmark::State& state) { trace_scalar_chain(state, {64, 65}); }
BENCHMARK(BM_TraceScalarChainFresh)->Arg(100)->Arg(10000)->Unit(benchmark::kMicrosecond);

Graph chain_graph(int64_t nodes) {
  Context ctx;
  std::vector<Tensor> params = make_params(ctx, 3);
  Tensor out = trace_chain(params, nodes);
  return ctx.capture();
}

void BM_HashNodes(benchmark::State& state) {
  Graph graph = chain_graph(state.range(0));
  for (auto _ : state) {
    uint64_t combined = 0;
    for (const Node& node : graph.nodes()) combined ^= hash_node(node, graph.nodes());
    benchmark::DoNotOptimize(combined);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(graph.size()));
}
BENCHMARK(BM_HashNodes)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_GraphHash(benchmark::State& state) {
  Graph graph = chain_graph(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(graph.hash());
}
BENCHMARK(BM_GraphHash)->Arg(1000)->Arg(10000)->Arg(100000);

// One step of a training loop on a cache hit: trace, sync (hit), execute.
// Counters: trace_us and sync_overhead_us (sync minus the backend's execute).
void BM_CacheHitStep(benchmark::State& state) {
  auto backend = load_backend("interp");
  if (!backend) {
    state.SkipWithError(backend.error().message.c_str());
    return;
  }
  Engine engine(*parse_pipeline("lower"), **backend);
  Context ctx(engine);
  std::vector<Tensor> params = make_params(ctx, state.range(1));
  double trace_s = 0, sync_s = 0, execute_ms_before = 0;
  (void)ctx.sync();
  {
    Tensor warm = trace_chain(params, state.range(0));
    (void)ctx.sync();
  }
  execute_ms_before = engine.metrics().execute_ms;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor out = trace_chain(params, state.range(0));
    auto t1 = std::chrono::steady_clock::now();
    Status status = ctx.sync();
    auto t2 = std::chrono::steady_clock::now();
    if (!status) state.SkipWithError(status.error().message.c_str());
    trace_s += std::chrono::duration<double>(t1 - t0).count();
    sync_s += std::chrono::duration<double>(t2 - t1).count();
  }
  double n = static_cast<double>(state.iterations());
  double execute_s = (engine.metrics().execute_ms - execute_ms_before) / 1e3;
  state.counters["trace_us"] = trace_s / n * 1e6;
  state.counters["sync_us"] = sync_s / n * 1e6;
  state.counters["sync_overhead_us"] = (sync_s - execute_s) / n * 1e6;
  state.counters["misses"] = static_cast<double>(engine.metrics().cache_misses);
}
BENCHMARK(BM_CacheHitStep)
    ->Args({300, 3})
    ->Args({1000, 3})
    ->Args({10000, 3})
    ->Args({100000, 3})
    ->Args({300, 1})
    ->Args({300, 30})
    ->Args({300, 300})
    ->Unit(benchmark::kMicrosecond);

// The whole pass pipeline (decompose .. fuse{STRATEGY} .. lower, plan-memory)
// on an elementwise chain of 5k, 50k and 500k nodes: growth must stay
// linear for every strategy (a 50k chain once took 52-91 s, against 2 s
// wanted). Backend compilation is left out.
const char* const kStrategies[] = {"none",          "greedy-elementwise", "producer-consumer",
                                   "gemm-epilogue", "horizontal",         "dominator"};

void BM_CompilePasses(benchmark::State& state) {
  std::string strategy = kStrategies[state.range(1)];
  auto pipeline = parse_pipeline("decompose,canonicalize,cse,dce,fuse{strategy=" + strategy + "},lower,plan-memory");
  Graph graph = chain_graph(state.range(0));
  for (auto _ : state) {
    Module module;
    module.graph = graph;
    auto stats = run_pipeline(*pipeline, module, {});
    if (!stats) state.SkipWithError(stats.error().message.c_str());
    benchmark::DoNotOptimize(module.program);
  }
  state.SetLabel(strategy);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_CompilePasses)
    ->ArgsProduct({{5000, 50000, 500000}, {0, 1, 2, 3, 4, 5}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_PrintLzir(benchmark::State& state) {
  Graph graph = chain_graph(state.range(0));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = print_graph(graph);
    bytes += text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(graph.size()));
}
BENCHMARK(BM_PrintLzir)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_ParseLzir(benchmark::State& state) {
  std::string text = print_graph(chain_graph(state.range(0)));
  for (auto _ : state) {
    auto parsed = parse_graph(text);
    if (!parsed) state.SkipWithError(parsed.error().message.c_str());
    benchmark::DoNotOptimize(parsed->graph.size());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ParseLzir)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lazylab

BENCHMARK_MAIN();
