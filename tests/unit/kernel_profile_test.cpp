// Per-kernel times (ABI 2.2): a profiled execution times each kernel of its
// Program, in order, on every backend that runs kernel by kernel; an
// execution not asked to is not profiled; a plugin without the optional
// event_kernel_times simply gives none.
#include <algorithm>

#include "attention_variants.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

std::unique_ptr<Backend> backend_named(const std::string& name) {
  auto backend = load_backend(name);
  REQUIRE_MESSAGE(backend.ok(), (backend.ok() ? "" : backend.error().message));
  return std::move(*backend);
}

// One step of y = tanh(x * w + 0.5) with softmax rows: several kernels
// unfused, of every kind the cpu backend plans.
Engine::KernelTimes profiled_step(Backend& backend, bool profile, size_t* kernels) {
  Engine engine(pipeline("decompose,lower"), backend);
  engine.set_profile_kernels(profile);
  Context ctx(engine);
  Tensor x = ctx.from_vector(std::vector<float>(64, 0.25f), {8, 8});
  Tensor w = ctx.from_vector(std::vector<float>(64, 1.5f), {8, 8});
  Tensor y = softmax(tanh(matmul(x, w) + 0.5), 1);
  REQUIRE(ctx.sync().ok());
  REQUIRE(ctx.wait().ok());
  *kernels = engine.last_compiled()->num_kernels;
  Engine::KernelTimes times = engine.last_kernel_times();
  CHECK((times.graph == nullptr || times.graph == engine.last_compiled().get()));
  check_close(values(y), std::vector<double>(64, 1.0 / 8));
  return times;
}

}  // namespace

TEST_CASE("a profiled execution times each kernel of its Program, in order") {
  for (std::string name : {std::string("interp"), std::string("cpu"), test_backend_plugin("counting")}) {
    CAPTURE(name);
    auto backend = backend_named(name);
    size_t kernels = 0;
    Engine::KernelTimes times = profiled_step(*backend, true, &kernels);
    CHECK(kernels > 3);
    REQUIRE(times.ms.size() == kernels);
    for (double ms : times.ms) CHECK(ms >= 0);
    CHECK(times.graph != nullptr);
  }
}

TEST_CASE("an execution not asked to time its kernels gives no kernel times") {
  auto backend = backend_named("cpu");
  size_t kernels = 0;
  CHECK(profiled_step(*backend, false, &kernels).ms.empty());
}

TEST_CASE("a plugin without event_kernel_times loads, runs, and gives no kernel times") {
  auto backend = backend_named(test_backend_plugin("olderminor"));
  CHECK(backend->device_description() == "host CPU, built for ABI 3.0");
  size_t kernels = 0;
  CHECK(profiled_step(*backend, true, &kernels).ms.empty());
  CHECK(kernels > 3);
}

TEST_CASE("each kernel's operations add up to the Program's FLOPs and elementwise work") {
  Session s("decompose,lower");
  Tensor x = s.ctx.from_vector(std::vector<float>(6, 1.0f), {2, 3});
  Tensor w = s.ctx.from_vector(std::vector<float>(12, 1.0f), {3, 4});
  Tensor y = exp(matmul(x, w)) * 2.0;
  REQUIRE(s.ctx.sync().ok());
  const ProgramCost& cost = s.engine.last_compiled()->cost;
  REQUIRE(cost.kernel_operations.size() == s.engine.last_compiled()->num_kernels);
  uint64_t total = 0;
  for (uint64_t ops : cost.kernel_operations) total += ops;
  CHECK(cost.flops == 2 * 2 * 4 * 3);
  CHECK(total == cost.flops + cost.elementwise_ops);
  CHECK(cost.kernel_operations[0] == cost.flops);  // the matmul's kernel comes first
  CHECK(cost.kernel_flops[0] == cost.flops);
  for (size_t k = 1; k < cost.kernel_flops.size(); ++k) CHECK(cost.kernel_flops[k] == 0);
  CHECK(s.engine.last_compiled()->kernel_labels[0] == "matmul");
}

TEST_CASE("a causal attention needs only the products over the pairs its mask keeps") {
  Session s("decompose,lower");
  AttentionShape shape{{2, 63, 64}, 63, 64};
  std::vector<Tensor> outputs = attention_variant(s.ctx, 0, shape);  // one causal attention, one plain
  REQUIRE(s.ctx.sync().ok());
  const ProgramCost& cost = s.engine.last_compiled()->cost;
  uint64_t dense = 2 * 2 * 63 * 63 * (64 + 64);  // both products of one attention, every pair
  uint64_t causal = 2 * 2 * (63 * 64 / 2) * (64 + 64);
  CHECK(cost.flops == 2 * dense);  // the interpreter runs every product whole
  CHECK(cost.minimum_flops == dense + causal);

  // Fused, each attention kernel counts what it computes.
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory"), **cpu);
  Context ctx(engine);
  std::vector<Tensor> fused = attention_variant(ctx, 0, shape);
  REQUIRE(ctx.sync().ok());
  const ProgramCost& fused_cost = engine.last_compiled()->cost;
  CHECK(fused_cost.flops == dense + causal);
  CHECK(fused_cost.minimum_flops == dense + causal);
  std::vector<uint64_t> attention_flops;
  for (uint64_t flops : fused_cost.kernel_flops)
    if (flops) attention_flops.push_back(flops);
  std::sort(attention_flops.begin(), attention_flops.end());
  CHECK(attention_flops == std::vector<uint64_t>{causal, dense});
}

TEST_CASE("a backend's notes on what it decided at compile reach the compiled graph; an older plugin has none") {
  for (auto [name, want] : {std::pair{test_backend_plugin("counting"),
                                      std::vector<std::string>{"reference kernels: 2", "no candidates timed"}},
                            std::pair{test_backend_plugin("olderminor"), std::vector<std::string>{}}}) {
    CAPTURE(name);
    auto backend = backend_named(name);
    Engine engine(pipeline("decompose,lower"), *backend);
    Context ctx(engine);
    Tensor x = ctx.from_vector(std::vector<float>(4, 0.25f), {4});
    Tensor y = tanh(exp(x));
    REQUIRE(ctx.sync().ok());
    CHECK(engine.last_compiled()->backend_notes == want);
  }
}
