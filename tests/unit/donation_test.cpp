// Buffer donation (core/donation.h, ABI 3.8): which parameter each output
// may be written over, and that a step whose old state is given up writes
// its new state in place and computes exactly what it computes without.
#include <cstring>

#include "core/donation.h"
#include "core/pass_manager.h"
#include "core/text_format.h"
#include "runner/workload.h"
#include "support.h"
#include "workload_steps.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

// The donors `text` plans for the pending tensors (the roots, in node
// order), as "p,p,...": each output's parameter ordinal or -1.
std::string donors_of(Context& ctx, const std::string& text) {
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline(text), module).ok());
  std::string listed;
  for (int64_t donor : plan_output_donors(*module.program, module.graph)) {
    if (!listed.empty()) listed += ',';
    listed += std::to_string(donor);
  }
  return listed;
}

}  // namespace

TEST_CASE("an update in place takes the buffer of the parameter it replaces") {
  Context ctx;
  Tensor w = ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor g = ctx.from_vector<float>({1, 1, 1, 1}, {4});
  Tensor updated = w - g * 0.1;  // g * 0.1 is traced first: g is parameter 0, w parameter 1
  // g too is read only at and before `updated` is made, but w is read by
  // its own op: w's buffer.
  CHECK(donors_of(ctx, "fuse,lower") == "1");
}

TEST_CASE("a parameter read after the output is made is not given to it") {
  Context ctx;
  Tensor w = ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor g = ctx.from_vector<float>({1, 1, 1, 1}, {4});
  Tensor first = w - g;     // made before w's last read in the kernel
  Tensor second = w * 3.0;  // reads w after `first` is written
  // One elementwise kernel: `first` may take g (read only at and before it),
  // `second` takes w (every read of w is at or before it).
  CHECK(donors_of(ctx, "fuse,lower") == "1,0");
  // Each op its own kernel: w is read by the kernel after first's.
  CHECK(donors_of(ctx, "lower") == "1,0");
}

TEST_CASE("no donor across a reduction or a type change; a broadcast operand only to a later kernel") {
  {
    Context ctx;
    Tensor w = ctx.from_vector<float>({1, 2, 3, 4}, {2, 2});
    Tensor centred = w - sum(w, {1}, true);
    // One row-reduction kernel reads w's row twice: never in place.
    CHECK(donors_of(ctx, "fuse{strategy=producer-consumer},lower") == "-1");
    // The sum a kernel before the subtraction's: w is read element for element.
    CHECK(donors_of(ctx, "lower") == "0");
  }
  {
    Context ctx;
    Tensor row = ctx.from_vector<float>({1, 2}, {2});
    Tensor grid = ctx.from_vector<float>({1, 2, 3, 4}, {2, 2});
    Tensor spread = grid + row;  // row is traced first (its broadcast): parameter 0
    Tensor doubled = row * 2.0;
    // spread takes grid; row, broadcast where spread is made, only doubled,
    // a later kernel reading it element for element.
    CHECK(donors_of(ctx, "fuse,lower") == "1,0");
  }
  {
    Context ctx;
    Tensor w = ctx.from_vector<float>({1, 2, 3, 4}, {4});
    Tensor as_int = cast(w, DType::I32);
    CHECK(donors_of(ctx, "fuse,lower") == "-1");
  }
}

TEST_CASE("a parameter that is also returned is never given to an output") {
  auto parsed = parse_graph(R"(graph @step {
  %w = parameter {ordinal = 0} : f32[4]
  %g = parameter {ordinal = 1} : f32[4]
  %u = sub(%w, %g) : f32[4]
  return %w, %u
})");
  REQUIRE(parsed.ok());
  Module module;
  module.graph = parsed->graph;
  REQUIRE(run_pipeline(pipeline("fuse,lower"), module).ok());
  // Output 1 (u) may take g, not w: w's copy into output 0 is made after the kernels.
  CHECK(plan_output_donors(*module.program, module.graph) == std::vector<int64_t>{-1, 1});
}

namespace {

// SGD with momentum on a fixed batch: the state (w, velocity) is replaced
// each step, as a training loop's is. Where `hold` is given, the w that step
// `hold` replaces stays held (so it must not be given up) and is returned as
// it reads after the last step.
struct Trained {
  std::vector<float> w, held;
};

Trained sgd(Context& ctx, int steps, int hold = -1) {
  Tensor x = ctx.from_vector<float>({0.5f, -1, 2, 0.25f, 1, -0.5f, 3, 1.5f}, {8});
  Tensor w = ctx.from_vector<float>({1, 2, 3, 4, -1, -2, -3, -4}, {8});
  Tensor velocity = ctx.from_vector<float>(std::vector<float>(8, 0), {8});
  Tensor old;
  for (int step = 0; step < steps; ++step) {
    if (step == hold) old = w;
    Tensor grad = tanh(w * x) * x;
    velocity = velocity * 0.9 + grad;
    w = w - velocity * 0.05;
    REQUIRE(ctx.mark_step().ok());
  }
  return {values(w), hold >= 0 ? values(old) : std::vector<float>{}};
}

const char* const kPipelines[] = {"lower", "canonicalize,fuse,lower", "fuse{strategy=producer-consumer},lower"};

}  // namespace

TEST_CASE("a training loop's state is written in place, with the same results") {
  for (const char* name : {"cpu", "interp"})
    for (const char* text : kPipelines) {
      CAPTURE(name);
      CAPTURE(text);
      auto backend = load_backend(name);
      REQUIRE_MESSAGE(backend.ok(), (backend.ok() ? "" : backend.error().message));
      auto train = [&](int steps, int hold, uint64_t* donated) {
        Engine engine(pipeline(text), **backend);
        Context ctx(engine);
        Trained result = sgd(ctx, steps, hold);
        if (donated) *donated = engine.metrics().donated_buffers;
        return result;
      };
      uint64_t donated = 0, holding = 0;
      Trained got = train(6, -1, &donated);
      // Step 0 reads host data the backend aliases (never taken); each later
      // step gives up the last step's w and velocity.
      CHECK(donated == 2 * 5);
      Trained held = train(6, 3, &holding);
      CHECK(holding == 2 * 5 - 1);                  // all but the w held at step 3
      CHECK(got.w == held.w);                       // bit for bit: the same kernels, in place or not
      CHECK(held.held == train(3, -1, nullptr).w);  // the held w reads as it was made
    }
}

TEST_CASE("every built-in workload computes the same with all its inputs given up") {
  for (const char* name : {"cpu", "interp"})
    for (const WorkloadInfo& info : builtin_workloads()) {
      CAPTURE(name);
      CAPTURE(info.name);
      auto workload = make_builtin_workload(info.name, {});
      REQUIRE(workload.ok());
      uint64_t input_bytes = 0;
      for (const HostTensor& input : (*workload)->make_inputs(1)) input_bytes += input.type.bytes();
      if (std::string(name) == "interp" && input_bytes > (uint64_t{1} << 20)) continue;  // minutes on interp
      auto backend = load_backend(name);
      REQUIRE(backend.ok());
      // Inputs in the backend's own memory (host data it would alias is
      // never taken): each one the abs of its seeded values, by a step of its own.
      const std::string text = "canonicalize,cse,decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower";
      auto run = [&](bool give_up, uint64_t& donated) {
        return run_giving_up_inputs(**backend, **workload, text, give_up, donated);
      };
      uint64_t donated = 0, held = 0;
      auto got = run(true, donated);
      auto want = run(false, held);
      CHECK(held == 0);
      // Bit for bit: the same kernels, in place or not.
      REQUIRE(got.size() == want.size());
      for (size_t o = 0; o < got.size(); ++o) {
        REQUIRE(got[o].size() == want[o].size());
        CHECK(std::memcmp(got[o].data(), want[o].data(), got[o].size() * sizeof(float)) == 0);
      }
    }
}
