// The cuda backend on a GPU against the interpreter: every workload under
// every fusion strategy (every step's outputs), random graphs, every op of
// the op table, and tensors that stay on the device between steps. Skipped
// (exit 77, from main.cpp) where there is no CUDA device.
#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "../unit/attention_variants.h"
#include "../unit/integer_edges.h"
#include "../unit/narrow_dtypes.h"
#include "../unit/random_program.h"
#include "../unit/support.h"
#include "../unit/workload_steps.h"
#include "core/fusion_strategy.h"
#include "runner/workload.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

const std::map<std::string, WorkloadParams> kCases = {
    {"chain", {{"n", 100003}, {"iters", 4}}},  // odd: no 4-wide path
    {"chain-small", {{"n", 4096}, {"iters", 10}}},
    {"chain-tiny", {{"iters", 20}}},
    {"softmax", {{"rows", 40}, {"cols", 1000}}},
    {"layernorm", {{"rows", 50}, {"cols", 96}}},
    {"mlp", {{"batch", 4}, {"d", 16}, {"hidden", 24}}},
    {"attention", {{"batch", 1}, {"heads", 2}, {"seq", 6}, {"head_dim", 4}}},
    {"gpt2-block", {{"batch", 1}, {"seq", 5}, {"channels", 8}, {"heads", 2}}},
    {"mlp-train", {{"batch", 4}, {"d", 16}, {"hidden", 24}}},
    {"gpt2-block-train", {{"batch", 1}, {"seq", 5}, {"channels", 8}, {"heads", 2}}},
};

std::unique_ptr<Backend> cuda_backend(const std::string& options = "cache=off") {
  auto backend = load_backend("cuda", options);
  REQUIRE_MESSAGE(backend.ok(), (backend.ok() ? "" : backend.error().message));
  return std::move(*backend);
}

// Each output element within `epsilon` of the reference's, relatively (at
// least 0.1 of scale, as doctest's Approx takes it).
void check_outputs_near(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double epsilon) {
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    CAPTURE(o);
    auto g = values(got[o]), w = values(want[o]);
    REQUIRE(g.size() == w.size());
    for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(epsilon).scale(1e-1));
  }
}

// Each result of `program` as the interpreter and as cuda compute it, op by
// op ("lower").
struct BothWays {
  std::vector<std::vector<float>> want, got;
};
BothWays on_interp_and_cuda(const std::function<std::vector<Tensor>(Context&)>& program) {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  BothWays results;
  for (Backend* backend : {interp.get(), cuda.get()}) {
    Engine engine(pipeline("lower"), *backend);
    Context ctx(engine);
    auto& into = backend == interp.get() ? results.want : results.got;
    for (const Tensor& t : program(ctx)) into.push_back(values(t));
  }
  REQUIRE(results.got.size() == results.want.size());
  return results;
}

// A tensor of `shape` in a 16-bit `dtype`, of 23 values from -0.7 to 0.675
// in a pattern `salt` shifts.
Tensor filled_16_bit(Context& ctx, const Dims& shape, int salt, DType dtype) {
  std::vector<float> v(TensorType{DType::F32, shape}.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37 + salt) % 23) * 0.0625f - 0.7f;
  return cast(ctx.from_vector(v, shape), dtype);
}

}  // namespace

TEST_CASE("cuda matches the interpreter on every workload and fusion strategy, every step") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  for (const auto& [name, params] : kCases) {
    auto workload = make_builtin_workload(name, params);
    REQUIRE(workload.ok());
    auto want = run_steps(*interp, **workload, "lower", 1)[0];
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(name);
      CAPTURE(strategy);
      auto steps = run_steps(*cuda, **workload,
                             "decompose,canonicalize,cse,dce,fuse{strategy=" + strategy +
                                 "},lower,schedule{order=memory},plan-memory{algo=greedy-by-size}",
                             3);
      check_steps(steps, want, 1e-4, 1e-2);
    }
  }
}

// Each way a row kernel splits its rows: a warp per row (up to 1024
// columns) or a block, 4-wide or not, the row held in registers or re-read,
// and rows that do not fill the last group of threads; wide rows also with
// each block size the row-block option allows (a thread's share of the row
// then past what it holds in registers, or a fraction of a group).
TEST_CASE("row kernels of every width match the interpreter") {
  auto interp = interp_backend();
  for (const char* row_block : {"auto", "128", "1024"}) {
    auto cuda = cuda_backend(std::string("cache=off,row-block=") + row_block);
    std::vector<int64_t> widths = {1, 7, 100, 768, 1000, 1024, 1028, 4100, 8192, 36000};
    if (std::string(row_block) != "auto") widths = {1028, 4100, 8192, 36000};
    for (int64_t cols : widths) {
      for (const char* name : {"softmax", "layernorm"}) {
        auto workload = make_builtin_workload(name, {{"rows", 33}, {"cols", cols}});
        REQUIRE(workload.ok());
        auto want = run_steps(*interp, **workload, "lower", 1)[0];
        for (const char* strategy : {"producer-consumer", "dominator"}) {
          CAPTURE(row_block);
          CAPTURE(cols);
          CAPTURE(name);
          CAPTURE(strategy);
          auto steps = run_steps(
              *cuda, **workload,
              std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy + "},lower,plan-memory", 2);
          check_steps(steps, want, 1e-4, 1e-2);
        }
      }
    }
  }
}

// Every shape and way of writing attention_variants.h's, each kernel's
// output against the interpreter.
TEST_CASE("attention kernels of every shape match the interpreter") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  for (const AttentionShape& shape : kAttentionShapes) {
    for (int variant = 0; variant < kAttentionVariants; ++variant) {
      CAPTURE(to_string(shape.q));
      CAPTURE(shape.n);
      CAPTURE(shape.dv);
      CAPTURE(variant);
      Engine reference_engine(pipeline("decompose,lower"), *interp);
      Context reference(reference_engine);
      std::vector<Tensor> want = attention_variant(reference, variant, shape);
      Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory"), *cuda);
      Context ctx(engine);
      std::vector<Tensor> got = attention_variant(ctx, variant, shape);
      for (size_t o = 0; o < got.size(); ++o) {
        auto g = values(got[o]), w = values(want[o]);
        REQUIRE(g.size() == w.size());
        // Each output is an average of v's rows (|v| <= 2): its error is
        // absolute, from the exp and the order of the sums.
        for (size_t i = 0; i < w.size(); ++i) REQUIRE(g[i] == doctest::Approx(w[i]).epsilon(2e-5).scale(1.0));
      }
    }
  }
}

// The same under autocast: 16-bit kernels on the tensor cores against the
// interpreter's run of the same mixed program (f64 per op, rounded as the
// dtype dictates). The kernel's f32 sums may round a score to the next
// 16-bit value where the interpreter's f64 sums do not, which moves one
// probability by up to the score's ulp times the scale: a few elements then
// differ by more than the rest, so the bound on each element is loose and
// the mean error is what pins the kernel (a wrong fragment, tile or mask
// moves most elements by tenths).
TEST_CASE("16-bit attention kernels of every shape match the interpreter") {
  auto interp = interp_backend();
  struct Tolerance {
    const char* dtype;
    double each, mean;
  };
  // On Hopper the kernels reading k's rows take wgmma unless it is off (in
  // blocks of 256 rows where attention-rows says so); the others say in the
  // executable's notes why they do not.
  for (const char* products : {"wgmma=on", "wgmma=on,attention-rows=256", "wgmma=off"}) {
    auto cuda = cuda_backend(std::string("cache=off,") + products);
    const bool hopper = std::string(products).starts_with("wgmma=on") &&
                        cuda->device_description().find("(sm_90,") != std::string::npos;
    for (Tolerance tolerance : {Tolerance{"bf16", 0.25, 0.01}, Tolerance{"f16", 0.05, 0.002}})
      for (const AttentionShape& shape : kAttentionShapes) {
        for (int variant = 0; variant < kAttentionVariants; ++variant) {
          CAPTURE(products);
          CAPTURE(tolerance.dtype);
          CAPTURE(to_string(shape.q));
          CAPTURE(shape.n);
          CAPTURE(shape.dv);
          CAPTURE(variant);
          std::string autocast = fmt::format("autocast{{dtype={}}},", tolerance.dtype);
          Engine reference_engine(pipeline(autocast + "decompose,lower"), *interp);
          Context reference(reference_engine);
          std::vector<Tensor> want = attention_variant(reference, variant, shape);
          Engine engine(
              pipeline(autocast + "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory"),
              *cuda);
          Context ctx(engine);
          for (int step = 0; step < 2; ++step) {
            std::vector<Tensor> got = attention_variant(ctx, variant, shape);
            for (size_t o = 0; o < got.size(); ++o) {
              auto g = values(got[o]), w = values(want[o]);
              REQUIRE(g.size() == w.size());
              double worst = 0, total = 0;
              for (size_t i = 0; i < w.size(); ++i) {
                double error = std::abs(g[i] - w[i]);
                REQUIRE(!std::isnan(g[i]));
                worst = std::max(worst, error);
                total += error;
              }
              CAPTURE(worst);
              CHECK(worst <= tolerance.each);
              CHECK(total / static_cast<double>(w.size()) <= tolerance.mean);
            }
          }
          const int64_t d = shape.q.back();
          const bool tensor_cores = d % 8 == 0 && shape.dv % 8 == 0 && (variant % 2 == 0 || shape.n % 8 == 0);
          bool said = false;
          for (const std::string& note : engine.last_compiled()->backend_notes)
            said = said || note.find("16-bit attention on mma.sync: k is given as [d, n]") != std::string::npos;
          CHECK(said == (hopper && tensor_cores && variant % 2 == 1));
        }
      }
  }
}

// Heads split from the projections and merged back (BERT's and GPT-2's
// layouts) read and written in place by the attention kernel, one kernel in
// all: f32 on the CUDA cores, 16 bits on wgmma and mma.sync (a part 4
// values in goes op by op), against the interpreter, two steps each; no
// kernel of its own copies a layout.
TEST_CASE("attention over heads split from their projections matches the interpreter, in place") {
  auto interp = interp_backend();
  for (const char* products : {"wgmma=on", "wgmma=on,attention-rows=256", "wgmma=off"}) {
    auto cuda = cuda_backend(std::string("cache=off,") + products);
    for (const char* dtype : {"f32", "bf16", "f16"})
      for (const HeadsShape& shape : kHeadsShapes)
        for (bool packed : {false, true})
          for (bool causal : {false, true}) {
            CAPTURE(products);
            CAPTURE(dtype);
            CAPTURE(shape.d);
            CAPTURE(packed);
            CAPTURE(causal);
            const bool f32 = dtype == std::string("f32");
            std::string autocast = f32 ? "" : fmt::format("autocast{{dtype={}}},", dtype);
            Engine reference_engine(pipeline(autocast + "decompose,lower"), *interp);
            Context reference(reference_engine);
            std::vector<float> want = values(attention_heads(reference, packed, causal, shape));
            Engine engine(
                pipeline(autocast + "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory"),
                *cuda);
            Context ctx(engine);
            for (int step = 0; step < 2; ++step) {
              std::vector<float> got = values(attention_heads(ctx, packed, causal, shape));
              REQUIRE(got.size() == want.size());
              double worst = 0, total = 0;
              for (size_t i = 0; i < want.size(); ++i) {
                REQUIRE(!std::isnan(got[i]));
                const double error = std::abs(static_cast<double>(got[i]) - want[i]);
                worst = std::max(worst, error);
                total += error;
              }
              CAPTURE(worst);
              CHECK(worst <= (f32 ? 1e-4 : 0.25));
              CHECK(total / static_cast<double>(want.size()) <= (f32 ? 1e-5 : 0.01));
            }
            // The layouts are inside the attention kernel (whose label lists
            // more than four ops), not copies of their own.
            for (const std::string& label : engine.last_compiled()->kernel_labels)
              if (label.find("transpose") != std::string::npos || label.find("slice") != std::string::npos)
                CHECK(label.find("...") != std::string::npos);
          }
  }
}

TEST_CASE("random graphs survive every fusion strategy on cuda") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  for (int trial = 0; trial < 25; ++trial) {
    uint64_t seed = 1000 + trial;
    Engine reference_engine(pipeline("lower"), *interp);
    Context reference(reference_engine);
    std::vector<Tensor> want = random_program(reference, seed);
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(trial);
      CAPTURE(strategy);
      Engine engine(pipeline("canonicalize,cse,dce,fuse{strategy=" + strategy + "},lower,plan-memory"), *cuda);
      Context ctx(engine);
      for (int step = 0; step < 2; ++step) {
        std::vector<Tensor> got = random_program(ctx, seed);
        for (size_t o = 0; o < got.size(); ++o) {
          auto g = values(got[o]), w = values(want[o]);
          for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-1));
        }
      }
    }
  }
}

TEST_CASE("every op of the op table runs on cuda as on the interpreter") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  auto program = [](Context& ctx) {
    Tensor x = ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor i = ctx.from_vector<int32_t>({3, -7, 11, 0, 5, -2}, {2, 3});
    Tensor l = ctx.from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor d = ctx.from_vector<double>({0.5, 1.5, -2.5, 3, 4, 5}, {2, 3});
    return std::vector<Tensor>{
        concat({x, exp(x)}, 0),
        cast(ctx.iota(TensorType{DType::I32, {4, 3}}, 1), DType::F32),
        sum(x, {0}),
        cast(max(i, {0, 1}), DType::F32),
        cast(max(i - 20, {0, 1}), DType::F32),  // of negatives: from i32's least, not INT64_MIN's low bits (0)
        cast(mean(d, {1}), DType::F32),
        cast(matmul(i, transpose(i, 0, 1)), DType::F32),
        cast(matmul(d, transpose(d, 0, 1)), DType::F32),
        cast(div(i, ctx.from_vector<int32_t>({2, 1, -1, 3, 3, 3}, {2, 3})), DType::F32),
        cast(where(lt(l, ctx.full(3, l.type())), l * l, neg(l)), DType::F32),
        cast(cast(sqrt(abs(x)), DType::I64), DType::F32),
        cast(gt(d, ctx.full(1.0, d.type())), DType::F32),
        slice(pow(x, x), {0, 1}, {2, 3}, {1, 2}),
        reshape(sigmoid(x) - log(x) + rsqrt(x), {3, 2}),
        minimum(maximum(x, ctx.full(2.5, x.type())), tanh(x)),
        broadcast_to(reshape(relu(x - 3.0), {2, 3, 1}), {2, 3, 4}),
        softmax(x, 0),
        cast(layernorm(d, ctx.full(0.5, TensorType{DType::F64, {3}}), ctx.full(0.25, TensorType{DType::F64, {3}})),
             DType::F32),
        gelu(x),
        erf(x),
        cast(gather(d, ctx.from_vector<int64_t>({1, -2, 0}, {3}), 1), DType::F32),
        cast(pad(i, {1, 0}, {0, 2}, 7), DType::F32),
        cast(min(gt(x, ctx.full(0.5, x.type())), {1}), DType::F32),  // bool min and max (all true, then mixed)
        cast(max(gt(x, ctx.full(4.5, x.type())), {1}), DType::F32),
        cast(min(gt(x, ctx.full(2.5, x.type())), {0, 1}), DType::F32),
        cast(sum(gt(x, ctx.full(2.5, x.type())), {1}), DType::F32),  // bool sums: whether one is true
        cast(sum(gt(x, ctx.full(2.5, x.type())), {0, 1}, true), DType::F32),
        cast(max(reshape(gt(x, ctx.full(9.5, x.type())), {1, 1, 6}), {0, 1}, true), DType::F32),  // all false
        cast(matmul(gt(x, ctx.full(0.5, x.type())), transpose(gt(x, ctx.full(1.5, x.type())), 0, 1)),
             DType::F32),  // a bool product: whether a pair is true
        scatter_add(x, ctx.from_vector<int64_t>({1, -2, 1, 0}, {2, 2}), reshape(concat({x, exp(x)}, 0), {2, 2, 3}), 0),
        cast(scatter_add(d, ctx.from_vector<int32_t>({2, -1, 0}, {3}), ctx.full(0.25, TensorType{DType::F64, {2, 3}}),
                         1),
             DType::F32),
        conv2d(reshape(x, {1, 1, 2, 3}), ctx.full(0.5, TensorType{DType::F32, {2, 1, 2, 2}}),
               {{1, 1}, {1, 0, 0, 1}, {1, 1}}),
        cast(max_pool2d(reshape(d, {1, 2, 3, 1}), {2, 1}, {{1, 1}, {1, 0, 0, 0}, {1, 1}}), DType::F32),
        avg_pool2d(reshape(x, {1, 1, 2, 3}), {2, 2}, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, true),
        avg_pool2d(reshape(x, {1, 1, 2, 3}), {2, 2}, {{2, 1}, {1, 1, 1, 1}, {1, 1}}, false),
    };
  };
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  std::vector<Tensor> want = program(reference);
  for (const char* strategy : {"none", "greedy-elementwise", "dominator"}) {
    CAPTURE(strategy);
    Engine engine(pipeline(std::string("canonicalize,fuse{strategy=") + strategy + "},lower"), *cuda);
    Context ctx(engine);
    std::vector<Tensor> got = program(ctx);
    check_outputs_near(got, want, 1e-5);
  }
}

// bf16 and f16 compute in f32 between 16-bit loads and stores, where the
// interpreter rounds each op: within two bf16 steps (2^-7) of its result.
TEST_CASE("bf16, f16, i8 and u8 run on cuda as on the interpreter") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  Engine reference_engine(pipeline("decompose,lower"), *interp);
  Context reference(reference_engine);
  std::vector<Tensor> want = narrow_dtype_program(reference);
  for (const char* pipeline_text : {"canonicalize,fuse{strategy=none},lower",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,plan-memory",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory"}) {
    CAPTURE(pipeline_text);
    Engine engine(pipeline(pipeline_text), *cuda);
    Context ctx(engine);
    std::vector<Tensor> got = narrow_dtype_program(ctx);
    check_outputs_near(got, want, 1.6e-2);
  }
}

// bf16 and f16 products run on cuBLASLt (f32 accumulation, one rounding
// into the dtype, as the interpreter's product rounds once): a weight shared
// by the batches, a bias of the product's dtype (cuBLASLt's epilogue), an
// epilogue after it, transposed operands scaled by a constant (alpha), each
// within a 16-bit step of the interpreter; the notes name the dtype.
TEST_CASE("bf16 and f16 products run on cuBLASLt as the interpreter computes them") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  for (DType dtype : {DType::BF16, DType::F16}) {
    auto program = [dtype](Context& ctx) {
      auto filled = [&](Dims shape, int salt) { return filled_16_bit(ctx, shape, salt, dtype); };
      Tensor x = filled({3, 40, 72}, 1), w = filled({72, 56}, 2), b = filled({56}, 3);
      Tensor q = filled({3, 40, 16}, 4), k = filled({3, 48, 16}, 5);
      return std::vector<Tensor>{cast(matmul(x, w) + b, DType::F32), cast(gelu(matmul(x, w) + b), DType::F32),
                                 cast(matmul(q, transpose(k, 1, 2)) * 0.25, DType::F32)};
    };
    Engine reference_engine(pipeline("decompose,lower"), *interp);
    Context reference(reference_engine);
    std::vector<Tensor> want = program(reference);
    std::string name(dtype_name(dtype));
    for (const char* strategy : {"gemm-epilogue", "producer-consumer"}) {
      CAPTURE(name);
      CAPTURE(strategy);
      Engine engine(
          pipeline(std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy + "},lower,plan-memory"),
          *cuda);
      Context ctx(engine);
      std::vector<Tensor> got = program(ctx);
      check_outputs_near(got, want, 1.6e-2);
      int products = 0;
      for (const std::string& note : engine.last_compiled()->backend_notes)
        products += note.find(": cuBLASLt " + name + " ") != std::string::npos;
      CHECK(products >= 2);
    }
  }
}

// Autocast's linear layer and gelu (the product and bias widened, gelu in
// f32, narrowed), read as the 16-bit values it stores. With the
// gelu-epilogue option it is cuBLASLt's GELU_BIAS epilogue, which skips the
// rounding of the f32 sums: within two 16-bit steps (and 2^-9 of the
// largest value) of the interpreter's run of that order (the products in
// f32); without, of the program's own order.
TEST_CASE("autocast's bias and gelu match the interpreter, and on cuBLASLt's GELU_BIAS its f32 sums") {
  auto interp = interp_backend();
  for (DType dtype : {DType::BF16, DType::F16}) {
    auto layer = [dtype](Context& ctx, bool sums_in_f32) {
      Tensor x = filled_16_bit(ctx, {120, 72}, 1, dtype), w = filled_16_bit(ctx, {72, 64}, 2, dtype);
      Tensor b = filled_16_bit(ctx, {64}, 3, dtype);
      Tensor product = sums_in_f32 ? matmul(cast(x, DType::F32), cast(w, DType::F32)) : cast(matmul(x, w), DType::F32);
      return cast(gelu(product + cast(b, DType::F32)), dtype);
    };
    auto as_doubles = [](const Tensor& t) {
      std::vector<double> out;
      visit_dtype(t.dtype(), [&]<class T>(T) {
        for (const T& v : values<T>(t)) out.push_back(static_cast<double>(v));
      });
      return out;
    };
    const double step = dtype == DType::BF16 ? 0x1p-7 : 0x1p-10;
    for (bool gelu_epilogue : {false, true}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(gelu_epilogue);
      Engine reference_engine(pipeline("decompose,lower"), *interp);
      Context reference(reference_engine);
      std::vector<double> want = as_doubles(layer(reference, gelu_epilogue));
      auto cuda = cuda_backend(gelu_epilogue ? "cache=off,gelu-epilogue=on" : "cache=off");
      Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory"), *cuda);
      Context ctx(engine);
      std::vector<double> got = as_doubles(layer(ctx, false));
      REQUIRE(got.size() == want.size());
      double largest = 0;
      for (double v : want) largest = std::max(largest, std::fabs(v));
      for (size_t i = 0; i < want.size(); ++i)
        CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= 2 * step * std::fabs(want[i]) + 0x1p-9 * largest,
                      "element " << i << ": " << got[i] << " against " << want[i]);
      int fused = 0;
      for (const std::string& note : engine.last_compiled()->backend_notes)
        fused += note.find("gelu (GELU_BIAS epilogue") != std::string::npos;
      CHECK(fused == (gelu_epilogue ? 1 : 0));
    }
  }
  // gpt2-block stored in bf16 under autocast, its MLP's gelu written through
  // a reshape: within 2% of each output's largest value of the interpreter's
  // program, two steps running.
  auto made = make_builtin_workload("gpt2-block", kCases.at("gpt2-block"));
  REQUIRE(made.ok());
  std::unique_ptr<Workload> block = with_inputs_stored_in(std::move(*made), DType::BF16);
  auto want = run_steps(*interp, *block, "autocast,decompose,lower", 1)[0];
  auto cuda = cuda_backend("cache=off,gelu-epilogue=on");
  auto steps = run_steps(*cuda, *block,
                         "autocast,decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory", 2);
  for (const auto& got : steps) {
    REQUIRE(got.size() == want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      float largest = 0;
      for (float v : want[o]) largest = std::max(largest, std::fabs(v));
      for (size_t i = 0; i < want[o].size(); ++i)
        CHECK_MESSAGE(std::fabs(got[o][i] - want[o][i]) <= 0.02f * largest, "output " << o << " element " << i);
    }
  }
}

// cuBLASLt refuses products with nothing to compute (status 13 on an H200,
// the cell failing): they run op by op, every step, also replayed.
TEST_CASE("products of no elements or over no depth run as the interpreter's") {
  auto program = [](Context& ctx) {
    Tensor rows = matmul(ctx.from_vector<float>({}, {0, 4}), ctx.from_vector<float>(std::vector<float>(12, 1), {4, 3}));
    Tensor batches = matmul(ctx.from_vector<float>({}, {0, 2, 5}), ctx.from_vector<float>({}, {0, 5, 3}));
    Tensor narrow = matmul(cast(ctx.from_vector<float>({}, {2, 0, 4}), DType::BF16),
                           cast(ctx.from_vector<float>(std::vector<float>(24, 0.5f), {2, 4, 3}), DType::BF16));
    Tensor depth = matmul(ctx.from_vector<float>({}, {2, 0}), ctx.from_vector<float>({}, {0, 3})) + 1.0;
    return std::vector<Tensor>{rows, batches, cast(narrow, DType::F32), depth};
  };
  auto interp = interp_backend();
  Engine reference_engine(pipeline("lower"), *interp);
  Context reference(reference_engine);
  std::vector<Tensor> want = program(reference);
  for (const char* options : {"cache=off,graph=off", "cache=off,graph=on"}) {
    CAPTURE(options);
    auto cuda = cuda_backend(options);
    Engine engine(pipeline("fuse{strategy=gemm-epilogue},lower,plan-memory"), *cuda);
    Context ctx(engine);
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      std::vector<Tensor> got = program(ctx);
      for (size_t o = 0; o < want.size(); ++o) CHECK(values(got[o]) == values(want[o]));
      CHECK(values(got[3]) == std::vector<float>(6, 1.0f));
    }
  }
}

// Reductions of many elements into few outputs take a block per output:
// batch norm's per-channel statistics over [N, C, H, W], a column of a tall
// matrix (strided reads), in f32, f64, i64 and bool, every reduction, with
// NaN and infinities propagating as the reference's. Float sums accumulate
// in double, as the reference's.
TEST_CASE("reductions of many elements into few outputs match the interpreter") {
  auto program = [](Context& ctx) {
    std::vector<float> wave(16 * 8 * 32 * 32), tall(4096 * 8), large(600 * 4096);
    for (size_t i = 0; i < wave.size(); ++i) wave[i] = static_cast<float>((i * 37) % 101) * 0.03f - 1.4f;
    for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<float>((i * 7) % 113) * 0.01f - 0.5f;
    for (size_t i = 0; i < tall.size(); ++i) tall[i] = static_cast<float>((i * 13) % 29) - 14.0f;
    wave[5000] = NAN;               // channel 0
    wave[3 * 1024 + 7] = INFINITY;  // channel 3
    Tensor x = ctx.from_vector(wave, {16, 8, 32, 32});
    Tensor column = ctx.from_vector(tall, {4096, 8});
    Tensor whole = cast(column, DType::I64);
    // Few outputs of millions of elements: split into chunks, combined by a
    // second launch (a loss's mean); the reduced axes innermost or not.
    Tensor big = ctx.from_vector(large, {600, 4096});
    large[1234567] = NAN;
    Tensor with_nan = ctx.from_vector(large, {600, 4096});
    // Column reductions (the reduced axes outermost): chunks of rows
    // combined by a second launch, or one launch where the columns are many.
    Tensor rows = reshape(with_nan, {24576, 100});
    Tensor stack = reshape(big, {30, 1024, 80});
    Tensor many = reshape(big, {300, 8192});
    TensorType grid{DType::F32, {256, 33000}};
    Tensor columns = ctx.iota(grid, 1) * 0.001 - ctx.iota(grid, 0);  // 1,032 groups: one launch
    return std::vector<Tensor>{
        sum(rows, {0}),
        mean(reshape(big, {24576, 100}), {0}),
        max(reshape(big, {24576, 100}), {0}),
        sum(stack, {0, 1}),
        min(stack, {0, 1}),
        sum(many, {0}),
        sum(columns, {0}),
        max(columns, {0}),
        cast(sum(cast(stack * 100.0, DType::I64), {0, 1}), DType::F32),
        cast(max(gt(stack, ctx.full(0.6, stack.type())), {0, 1}), DType::F32),
        sum(big, {0, 1}),
        mean(big, {0, 1}),
        max(big, {0, 1}),
        min(big, {0, 1}),
        sum(reshape(big, {3, 819200}), {1}),
        mean(reshape(big, {819200, 3}), {0}),
        cast(sum(cast(big * 100.0, DType::I64), {0, 1}), DType::F32),
        cast(max(gt(big, ctx.full(0.6, big.type())), {0, 1}), DType::F32),
        max(with_nan, {0, 1}),
        sum(with_nan, {0, 1}),
        sum(x, {0, 2, 3}),
        mean(x, {0, 2, 3}, true),
        max(x, {0, 2, 3}),
        min(x, {0, 2, 3}),
        cast(sum(cast(x, DType::F64), {0, 2, 3}), DType::F32),
        sum(column, {0}),
        mean(column, {0}),
        cast(sum(whole, {0}), DType::F32),
        cast(max(gt(column, ctx.full(13.5, column.type())), {0}), DType::F32),
        cast(min(gt(column, ctx.full(-14.5, column.type())), {0}), DType::F32),
    };
  };
  BothWays results = on_interp_and_cuda(program);
  for (size_t o = 0; o < results.want.size(); ++o) {
    CAPTURE(o);
    const std::vector<float>&g = results.got[o], &w = results.want[o];
    REQUIRE(g.size() == w.size());
    for (size_t k = 0; k < w.size(); ++k) {
      if (std::isnan(w[k]))
        CHECK(std::isnan(g[k]));
      else if (std::isinf(w[k]))
        CHECK(g[k] == w[k]);
      else  // a double sum in another order, rounded to f32: equal but where it lands on a tie
        CHECK(g[k] == doctest::Approx(w[k]).epsilon(1e-6));
    }
  }
}

TEST_CASE("strided copies match the interpreter, 16 bytes a thread or an element at a time") {
  auto program = [](Context& ctx) {
    std::vector<float> wave(3 * 5 * 7 * 8);
    for (size_t i = 0; i < wave.size(); ++i) wave[i] = static_cast<float>((i * 29) % 97) * 0.125f - 6.0f;
    Tensor x = ctx.from_vector(wave, {3, 5, 7, 8});
    Tensor odd = ctx.from_vector(std::vector<float>(wave.begin(), wave.begin() + 3 * 5 * 7 * 6), {3, 5, 7, 6});
    Tensor half = cast(reshape(x, {3, 5, 4, 14}), DType::BF16);
    std::vector<float> long_wave(4 * 40 * 3 * 36);
    for (size_t i = 0; i < long_wave.size(); ++i) long_wave[i] = static_cast<float>((i * 31) % 89) - 44.0f;
    Tensor wide = ctx.from_vector(long_wave, {4, 40, 3, 36});
    return std::vector<Tensor>{
        permute(x, {0, 2, 1, 3}),                                       // the head dim kept: float4s
        permute(x, {3, 1, 0, 2}),                                       // the innermost moved: an element a thread
        permute(odd, {0, 2, 1, 3}),                                     // 6 floats: not whole vectors
        cast(permute(half, {1, 0, 2, 3}), DType::F32),                  // 14 bf16: not whole vectors
        cast(permute(cast(x, DType::BF16), {2, 1, 0, 3}), DType::F32),  // 8 bf16: one uint4
        slice(x, {0, 1, 2, 4}, {3, 4, 7, 8}),                           // an offset of whole vectors
        slice(x, {1, 0, 0, 2}, {3, 5, 7, 6}),                           // an offset of two floats
        slice(x, {0, 0, 0, 0}, {3, 5, 7, 8}, {2, 2, 3, 1}),             // strided outer dims, the innermost whole
        broadcast_to(reshape(slice(x, {0, 0, 0, 0}, {1, 1, 1, 8}), {1, 8}), {6, 8}),
        // The innermost dim moved, both dims past one tile, uneven: 32 x 32 tiles.
        permute(wide, {0, 3, 2, 1}),
        cast(permute(cast(wide, DType::BF16), {2, 3, 0, 1}), DType::F32),
        slice(permute(wide, {1, 3, 0, 2}), {1, 2, 0, 0}, {40, 36, 4, 3}, {3, 1, 1, 1}),
    };
  };
  BothWays results = on_interp_and_cuda(program);
  for (size_t o = 0; o < results.want.size(); ++o) {
    CAPTURE(o);
    CHECK(results.got[o] == results.want[o]);
  }
}

TEST_CASE("constants keep their exact values on cuda: integer edges and a negative zero") {
  auto cuda = cuda_backend();
  for (const char* pipeline_text : {"lower", "fuse{strategy=greedy-elementwise},lower"}) {
    CAPTURE(std::string(pipeline_text));
    auto got = run_graph_text<int64_t>(*cuda, kIntegerEdgesGraph, pipeline_text);
    REQUIRE(got.size() == kIntegerEdgesWant.size());
    for (size_t o = 0; o < kIntegerEdgesWant.size(); ++o)
      for (int64_t v : got[o]) CHECK(v == kIntegerEdgesWant[o]);
  }
  const char* negative_zero = R"(graph @negzero {
  %one = constant {value = 1} : f32[64]
  %negzero = constant {value = -0} : f32[64]
  %inf = div(%one, %negzero) : f32[64]
  return %inf
})";
  for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
    CAPTURE(strategy);
    auto got = run_graph_text(*cuda, negative_zero, "fuse{strategy=" + strategy + "},lower");
    for (float v : got[0]) CHECK(v == -INFINITY);
  }
}

TEST_CASE("on cuda a loop of steps moves no data after the first step, and times itself on the device") {
  auto cuda = cuda_backend();
  Engine engine(pipeline("canonicalize,fuse,lower"), *cuda);
  Context ctx(engine);
  Tensor x = ctx.from_vector<float>(std::vector<float>(1 << 20, 0.25f), {1 << 20});
  Tensor w = ctx.from_vector<float>(std::vector<float>(1 << 20, 1.5f), {1 << 20});
  for (int step = 0; step < 20; ++step) {
    x = tanh(x * w + 0.5);
    REQUIRE(ctx.mark_step().ok());
    REQUIRE(ctx.wait().ok());
    CHECK(engine.metrics().host_to_device_transfers == 2);
    CHECK(engine.metrics().device_to_host_transfers == 0);
    CHECK(engine.metrics().last_device_execute_ms > 0);
  }
  std::vector<float> got = values(x);
  CHECK(engine.metrics().device_to_host_transfers == 1);
  CHECK(engine.metrics().device_to_host_bytes == (1 << 20) * sizeof(float));
  float want = 0.25f;
  for (int step = 0; step < 20; ++step) want = std::tanh(want * 1.5f + 0.5f);
  CHECK(got[12345] == doctest::Approx(want).epsilon(1e-5));
}

// A step replayed as a CUDA graph reads this step's parameters, not those it
// was captured with: x is a new buffer each step, copied into staging.
TEST_CASE("graph replay gives each step's own answer and matches launching one by one") {
  for (const char* graph : {"graph=on", "graph=off"}) {
    CAPTURE(graph);
    auto backend = load_backend("cuda", std::string("cache=off,") + graph);
    REQUIRE(backend.ok());
    Engine engine(pipeline("canonicalize,fuse{strategy=none},lower,plan-memory"), **backend);
    Context ctx(engine);
    Tensor x = ctx.from_vector<float>(std::vector<float>(1000, 0.25f), {1000});
    Tensor w = ctx.from_vector<float>(std::vector<float>(1000, 1.5f), {1000});
    float want = 0.25f;
    for (int step = 0; step < 12; ++step) {
      x = tanh(x * w + 0.5) * 0.75 - 0.125;
      REQUIRE(ctx.mark_step().ok());
      want = std::tanh(want * 1.5f + 0.5f) * 0.75f - 0.125f;
      std::vector<float> got = values(x);
      CHECK(got[999] == doctest::Approx(want).epsilon(1e-5));
    }
  }
  auto graphs = load_backend("cuda", "cache=off,graph=on");
  REQUIRE(graphs.ok());
  auto interp = interp_backend();
  for (const auto& [name, params] : kCases) {
    auto workload = make_builtin_workload(name, params);
    REQUIRE(workload.ok());
    auto want = run_steps(*interp, **workload, "lower", 1)[0];
    for (const char* strategy : {"none", "gemm-epilogue"}) {
      CAPTURE(name);
      CAPTURE(strategy);
      auto steps =
          run_steps(**graphs, **workload,
                    std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy + "},lower,plan-memory", 3);
      check_steps(steps, want, 1e-4, 1e-2);
    }
  }
}

// A staged parameter is copied again only when the step's buffer is another
// one (a buffer's contents never change): the same input over and over, then
// two inputs taking turns, with and without device timing.
TEST_CASE("graph replay stages a parameter only when its buffer changes") {
  auto backend = load_backend("cuda", "cache=off,graph=on");
  REQUIRE(backend.ok());
  Engine engine(pipeline("canonicalize,fuse{strategy=none},lower,plan-memory"), **backend);
  Context ctx(engine);
  Tensor a = ctx.from_vector<float>(std::vector<float>(1000, 0.25f), {1000});
  Tensor b = ctx.from_vector<float>(std::vector<float>(1000, -0.5f), {1000});
  const char sequence[] = "aaabbabab";
  for (int step = 0; sequence[step]; ++step) {
    CAPTURE(step);
    engine.set_device_timing(step % 2 == 0);
    bool use_a = sequence[step] == 'a';
    Tensor y = tanh((use_a ? a : b) * 1.5 + 0.5) * 0.75 - 0.125;
    REQUIRE(ctx.mark_step().ok());
    float p = use_a ? 0.25f : -0.5f;
    CHECK(values(y)[999] == doctest::Approx(std::tanh(p * 1.5f + 0.5f) * 0.75f - 0.125f).epsilon(1e-5));
  }
}

// A parameter past GraphPolicy::kStagedParameterBytes (a model's weights) is
// read where it lies, the graph captured at its address: the same buffer
// replays, a buffer moved for one step captures again, moves on two steps
// running end replay (launches one by one). Every step's answer is its own.
TEST_CASE("graph replay reads large parameters in place and captures again where one moves") {
  auto backend = load_backend("cuda", "cache=off,graph=on");
  REQUIRE(backend.ok());
  Engine engine(pipeline("canonicalize,fuse{strategy=none},lower,plan-memory"), **backend);
  Context ctx(engine);
  const int64_t n = 600000;  // 2.4 MB a weight
  Tensor a = ctx.from_vector<float>(std::vector<float>(n, 1.5f), {n});
  Tensor b = ctx.from_vector<float>(std::vector<float>(n, -0.75f), {n});
  Tensor x = ctx.from_vector<float>(std::vector<float>(n, 0.25f), {n});
  const char sequence[] = "aaabaaabbbababaa";
  for (int step = 0; sequence[step]; ++step) {
    CAPTURE(step);
    bool use_a = sequence[step] == 'a';
    Tensor y = tanh(x * (use_a ? a : b) + 0.5) * 0.75 - 0.125;
    REQUIRE(ctx.mark_step().ok());
    float w = use_a ? 1.5f : -0.75f;
    std::vector<float> got = values(y);
    CHECK(got[0] == doctest::Approx(std::tanh(0.25f * w + 0.5f) * 0.75f - 0.125f).epsilon(1e-5));
    CHECK(got[n - 1] == doctest::Approx(std::tanh(0.25f * w + 0.5f) * 0.75f - 0.125f).epsilon(1e-5));
  }
}

// A replayed graph writes each output at a fixed address; a step's output
// buffer must not be that address, which the next replay overwrites. Outputs
// kept over later steps, and past their executable's eviction from the
// cache, keep their own values; each is read only at the end, after every
// replay that could have overwritten it. (Lending the fixed address to the
// output while no earlier output held it failed here: the replay still
// wrote it.)
TEST_CASE("outputs kept over later graph replays, and past their executable, keep their values") {
  auto backend = load_backend("cuda", "cache=off,graph=on");
  REQUIRE(backend.ok());
  EngineOptions options;
  options.cache_capacity = 1;
  Engine engine(pipeline("canonicalize,fuse{strategy=none},lower,plan-memory"), **backend, options);
  Context ctx(engine);
  auto expected = [](float p) { return std::tanh(p * 1.5f + 0.5f) * 0.75f - 0.125f; };
  std::vector<std::pair<Tensor, float>> held;
  for (int step = 0; step < 12; ++step) {
    CAPTURE(step);
    float p = 0.1f * static_cast<float>(step) - 0.5f;
    Tensor in = ctx.from_vector<float>(std::vector<float>(1000, p), {1000});
    Tensor y = tanh(in * 1.5 + 0.5) * 0.75 - 0.125;
    REQUIRE(ctx.mark_step().ok());
    if (step % 3 != 2) held.emplace_back(y, expected(p));  // two steps in three keep theirs
    if (step == 6) {  // another program evicts this one's executable; the next step compiles it again
      Tensor other = in * 2.0;
      REQUIRE(ctx.mark_step().ok());
      CHECK(values(other)[0] == doctest::Approx(2 * p));
    }
  }
  CHECK(engine.metrics().cache_misses == 3);
  for (const auto& [y, want] : held) {
    std::vector<float> got = values(y);
    CHECK(got[0] == doctest::Approx(want).epsilon(1e-5));
    CHECK(got[999] == doctest::Approx(want).epsilon(1e-5));
  }
}

// Buffer donation on cuda (ABI 3.8): SGD with momentum, whose w and
// velocity each step replaces. Each step gives up both, and a new value
// takes the memory of the old one the host's plan names (one a step here, as
// on cpu): written there by its kernel when launched one by one, copied
// there out of staging in graph replay. The results agree bit for bit (the
// same kernels), and a w held over later steps reads as it was made.
TEST_CASE("a training loop's state is written over its old buffers, launched one by one or replayed") {
  struct Run {
    std::vector<float> w, held;
    uint64_t donated;
  };
  auto train = [](const char* options, int steps, int hold) {
    auto backend = load_backend("cuda", std::string("cache=off,") + options);
    REQUIRE(backend.ok());
    Engine engine(pipeline("canonicalize,fuse{strategy=producer-consumer},lower,plan-memory"), **backend);
    Context ctx(engine);
    std::vector<float> x0(4096), w0(4096);
    for (size_t i = 0; i < x0.size(); ++i) {
      x0[i] = static_cast<float>(i % 9) * 0.25f - 1.0f;
      w0[i] = static_cast<float>(i % 7) * 0.5f - 1.5f;
    }
    Tensor x = ctx.from_vector(x0, {4096}), w = ctx.from_vector(w0, {4096});
    Tensor velocity = ctx.from_vector(std::vector<float>(4096, 0.0f), {4096}), old;
    for (int step = 0; step < steps; ++step) {
      if (step == hold) old = w;
      velocity = velocity * 0.9 + tanh(w * x) * x;
      w = w - velocity * 0.05;
      REQUIRE(ctx.mark_step().ok());
    }
    return Run{values(w), hold >= 0 ? values(old) : std::vector<float>{}, engine.metrics().donated_buffers};
  };
  Run replayed = train("graph=on", 6, -1), launched = train("graph=off", 6, -1), held = train("graph=on", 6, 3);
  MESSAGE("buffers taken over 6 steps: " << replayed.donated);
  CHECK(replayed.donated >= 5);  // the host's plan gives this loop one donor a step (as on cpu)
  CHECK(launched.donated == replayed.donated);
  CHECK(held.donated < replayed.donated + 1);
  CHECK(replayed.w == launched.w);
  CHECK(held.w == replayed.w);
  CHECK(held.held == train("graph=on", 3, -1).w);
}

// Every workload with all its inputs given up computes what it computes
// holding them, launched one by one and replayed as a graph.
TEST_CASE("every workload computes the same on cuda with all its inputs given up") {
  uint64_t taken = 0;
  for (const char* graph : {"graph=off", "graph=on"})
    for (const auto& [name, params] : kCases) {
      CAPTURE(graph);
      CAPTURE(name);
      auto workload = make_builtin_workload(name, params);
      REQUIRE(workload.ok());
      auto backend = cuda_backend(std::string("cache=off,") + graph);
      const std::string text =
          "canonicalize,cse,decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,plan-memory";
      auto run = [&](bool give_up, uint64_t& donated) {
        return run_giving_up_inputs(*backend, **workload, text, give_up, donated);
      };
      uint64_t donated = 0, held = 0;
      auto got = run(true, donated);
      auto want = run(false, held);
      CHECK(held == 0);
      CHECK(got == want);
      taken += donated;
    }
  CHECK(taken > 0);
}

// DLPack import of CUDA memory (ABI 3.7): another library's device memory
// (here a buffer of the backend's own, by its device address) copied on the
// GPU into a new buffer, which later steps read like any other.
TEST_CASE("device memory taken from another owner is copied on the GPU and computes as uploaded data") {
  auto backend = cuda_backend();
  Engine engine(pipeline("canonicalize,fuse{strategy=none},lower,plan-memory"), *backend);
  Context ctx(engine);
  std::vector<float> host(70001);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 97) * 0.5f - 3.0f;
  Tensor produced = ctx.from_vector(host, {70001}) * 2.0;
  REQUIRE(ctx.mark_step().ok());
  auto where = produced.impl()->device->device_data();
  REQUIRE(where.has_value());
  Tensor taken = ctx.from_device_memory(produced.type(), where->pointer, where->dlpack_device_type, 0, 0);
  REQUIRE_MESSAGE(taken.ok(), (taken.ok() ? "" : taken.error()->message));
  Tensor result = taken + 1.0;
  std::vector<float> got = values(result);
  for (size_t i = 0; i < host.size(); i += 997) CHECK(got[i] == host[i] * 2.0f + 1.0f);
  CHECK(engine.metrics().host_to_device_transfers == 1);  // the first upload only
  Tensor wrong_type = ctx.from_device_memory(produced.type(), where->pointer, 1, 0, 0);
  CHECK_FALSE(wrong_type.ok());
  CHECK(wrong_type.error()->message.find("DLPack device type 2 (CUDA), not 1") != std::string::npos);
  Tensor wrong_device = ctx.from_device_memory(produced.type(), where->pointer, 2, 5, 0);
  CHECK_FALSE(wrong_device.ok());
  CHECK(wrong_device.error()->message.find("lies on device 5") != std::string::npos);
}

TEST_CASE("the cuda backend shows the code it generates, each kernel marked") {
  auto cuda = cuda_backend();
  auto workload = make_builtin_workload("softmax", {{"rows", 4}, {"cols", 256}});
  REQUIRE(workload.ok());
  Context ctx;
  std::vector<Tensor> inputs = bind_inputs(ctx, (*workload)->make_inputs(1));
  std::vector<Tensor> outputs = (*workload)->step(ctx, inputs);
  Module module;
  module.graph = ctx.capture();
  module.capabilities = &cuda->capabilities();
  REQUIRE(run_pipeline(pipeline("decompose,fuse{strategy=producer-consumer},lower"), module).ok());
  auto code = cuda->generated_code(*module.program, module.graph);
  REQUIRE(code.ok());
  CHECK(code->find("// ---- kernel k0") != std::string::npos);
  CHECK(code->find("// launch k0: 4 rows, 256 threads a block, 8 rows a block (a warp each)") != std::string::npos);
  CHECK(code->find("extern \"C\" __global__ void k0(") != std::string::npos);
}

// ABI 3.5's notes: what compiling decided. With a disk cache, a second
// backend (a new process's view: an empty in-memory choice table) reads the
// kernels and each product's cuBLASLt choice from disk and times nothing.
TEST_CASE("cuda notes each product's cuBLASLt choice, and a second backend reads it from the disk cache") {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("lazylab-notes-test-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  auto notes_of = [&]() {
    auto cuda = load_backend("cuda", "cache-dir=" + dir);
    REQUIRE_MESSAGE(cuda.ok(), (cuda.ok() ? "" : cuda.error().message));
    Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower"), **cuda);
    Context ctx(engine);
    Tensor x = ctx.from_vector(std::vector<float>(64 * 32, 0.5f), {64, 32});
    Tensor w = ctx.from_vector(std::vector<float>(32 * 48, 0.25f), {32, 48});
    Tensor y = tanh(matmul(x, w));
    REQUIRE(ctx.sync().ok());
    check_close(values(y), std::vector<double>(64 * 48, std::tanh(4.0)));
    return engine.last_compiled()->backend_notes;
  };
  std::vector<std::string> first = notes_of(), second = notes_of();
  REQUIRE(first.size() == 2);
  CHECK(first[0].starts_with("generated kernels: NVRTC, "));
  CHECK(first[1].starts_with("kernel 0: cuBLASLt f32 1 x [64 x 32] x [32 x 48]: candidate "));
  CHECK(first[1].find("(timed at compile in ") != std::string::npos);
  CHECK(first[1].find(" ms; fastest: ") != std::string::npos);
  CHECK(first[1].find(" alone: their shared graph failed") == std::string::npos);  // timed many to a graph
  CHECK(first[1].find(" ms; the heuristic's first: ") != std::string::npos);
  // The heuristic's few candidates and every configuration of cuBLASLt's algorithms.
  CHECK(std::stoi(first[1].substr(first[1].find(" of ") + 4)) > 8);
  REQUIRE(second.size() == 2);
  CHECK(second[0] == "generated kernels: from the disk cache");
  // The same choice, with the same times, now read back.
  std::string timed = first[1], stored = second[1];
  CHECK(stored.substr(0, stored.find(" (")) == timed.substr(0, timed.find(" (")));
  CHECK(stored.find("(from the disk cache; fastest: ") != std::string::npos);
  CHECK(stored.substr(stored.find("fastest: ")) == timed.substr(timed.find("fastest: ")));
  std::filesystem::remove_all(dir);
}

// Per-channel values over NCHW read in place as groups of rows (ABI 3.10):
// batch norm's normalisation (elementwise, 4-wide and not), a per-channel
// bool mask, a per-image factor, and the squared deviations summed along
// the rows (a row reduction's prologue), each step's values against the
// interpreter's.
TEST_CASE("per-channel values read as groups of rows match the interpreter on every step") {
  auto interp = interp_backend();
  auto cuda = cuda_backend();
  const Dims shapes[] = {{2, 3, 4, 5}, {16, 128, 2, 2}, {4, 16, 32, 32}, {3, 5, 7, 1}};
  for (const Dims& shape : shapes) {
    int64_t n = shape[0], c = shape[1], size = TensorType{DType::F32, shape}.num_elements();
    auto program = [&](Context& ctx, int step) {
      std::vector<float> x(size), mean_c(c), scale(c), image(n);
      std::vector<bool> keep(c);
      for (int64_t i = 0; i < size; ++i) x[i] = static_cast<float>((i * 7 + step) % 13) * 0.25f - 1.5f;
      for (int64_t k = 0; k < c; ++k) {
        mean_c[k] = static_cast<float>((k + step) % 5) * 0.125f;
        scale[k] = 1.0f + static_cast<float>((k * 3 + step) % 7) * 0.0625f;
        keep[k] = ((k + step) % 3 != 0);
      }
      for (int64_t i = 0; i < n; ++i) image[i] = 0.5f + static_cast<float>(i + step) * 0.25f;
      auto per_channel = [&](const Tensor& v) { return broadcast_to(reshape(v, {1, c, 1, 1}), shape); };
      Tensor centered = ctx.from_vector(x, shape) - per_channel(ctx.from_vector(mean_c, {c}));
      Tensor y = relu(centered * per_channel(ctx.from_vector(scale, {c}))) *
                 broadcast_to(ctx.from_vector(image, {n, 1, 1, 1}), shape);
      Tensor masked = where(per_channel(ctx.from_vector(keep, {c})), y, ctx.scalar(0.0));
      return std::vector<Tensor>{y, masked, sum(centered * centered, {3}, false)};
    };
    Engine reference_engine(pipeline("lower"), *interp);
    Context reference(reference_engine);
    Engine engine(pipeline("canonicalize,fuse{strategy=producer-consumer},lower,plan-memory"), *cuda);
    Context ctx(engine);
    for (int step = 0; step < 3; ++step) {
      CAPTURE(to_string(shape));
      CAPTURE(step);
      auto want = program(reference, step), got = program(ctx, step);
      for (size_t k = 0; k < want.size(); ++k) {
        auto g = values(got[k]), w = values(want[k]);
        REQUIRE(g.size() == w.size());
        for (size_t i = 0; i < g.size(); ++i) REQUIRE(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

// Convolutions as cuBLASLt products of their unfolded windows, and the
// direct kernel for groups, each with an epilogue (per-channel scale and
// shift, a residual, relu): strided, padded unevenly, dilated, pointwise,
// a 1x1 at stride 2 (a ResNet's shortcut), several images, windows
// reaching past the padding, and a depthwise one of few outputs over many
// taps (a block per output); f32 (cuBLASLt's sums of up to 300 products of
// up to 0.5 in their own order: within 1e-4, or 1e-5 of values under 0.1;
// measured 1.2e-6 off at -0.0102) and bf16 (within two steps), over two
// steps each.
TEST_CASE("convolutions on cuBLASLt match the interpreter, their epilogues too, on every step") {
  auto cuda = cuda_backend();
  auto interp = interp_backend();
  for (DType dtype : {DType::F32, DType::BF16}) {
    auto program = [dtype](Context& ctx) {
      auto filled = [&](Dims shape, int salt) { return filled_16_bit(ctx, shape, salt, dtype); };
      Tensor x = filled({3, 12, 11, 13}, 1);
      auto per_channel = [&](int64_t channels, const Dims& like, int salt) {
        return broadcast_to(reshape(filled({channels}, salt), {1, channels, 1, 1}), like);
      };
      Tensor w = filled({20, 12, 3, 3}, 2);
      Tensor y = conv2d(x, w, {{2, 1}, {1, 0, 2, 1}, {1, 1}});  // [3, 20, 6, 12]
      Dims ys = y.type().shape;
      Tensor block = relu(y * per_channel(20, ys, 3) + per_channel(20, ys, 4) + filled(ys, 5));
      Tensor dilated = conv2d(x, filled({6, 12, 3, 2}, 6), {{1, 1}, {2, 2, 2, 2}, {2, 3}});
      Tensor pointwise = conv2d(block, filled({9, 20, 1, 1}, 7));
      pointwise = pointwise + per_channel(9, pointwise.type().shape, 8);
      Tensor shortcut = conv2d(x, filled({10, 12, 1, 1}, 9), {{2, 2}, {0, 0, 0, 0}, {1, 1}});
      Tensor depthwise = relu(conv2d(x, filled({24, 1, 3, 3}, 10), {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 12));
      // MobileNetV2's: strided, batch norm's scale and shift per channel, then relu6, one launch.
      Tensor strided = conv2d(x, filled({12, 1, 3, 3}, 14), {{2, 2}, {1, 1, 1, 1}, {1, 1}}, 12);  // [3, 12, 6, 7]
      Dims ss = strided.type().shape;
      Tensor shifted = strided * per_channel(12, ss, 15) + per_channel(12, ss, 16);
      Tensor depthwise_bn = minimum(relu(shifted), full_like(shifted, 6.0));
      Tensor one_image = conv2d(slice(x, {0, 0, 0, 0}, {1, 12, 11, 13}, {1, 1, 1, 1}), filled({7, 12, 5, 5}, 11),
                                {{1, 1}, {2, 2, 2, 2}, {1, 1}});
      // A depthwise weight gradient's shape: few outputs over 400 taps each, a block per output.
      Tensor few_outputs = conv2d(filled({2, 6, 22, 22}, 12), filled({6, 1, 20, 20}, 13), {}, 6);  // [2, 6, 3, 3]
      std::vector<Tensor> outs{block, dilated, pointwise, shortcut, depthwise, depthwise_bn, one_image, few_outputs};
      for (Tensor& out : outs) out = cast(out, DType::F32);
      return outs;
    };
    Engine reference_engine(pipeline("decompose,lower"), *interp);
    Context reference(reference_engine);
    std::vector<Tensor> want = program(reference);
    for (const char* strategy : {"gemm-epilogue", "none"}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(strategy);
      Engine engine(
          pipeline(std::string("decompose,canonicalize,cse,dce,fuse{strategy=") + strategy + "},lower,plan-memory"),
          *cuda);
      for (int step = 0; step < 2; ++step) {
        CAPTURE(step);
        Context ctx(engine);
        check_outputs_near(program(ctx), want, dtype == DType::F32 ? 1e-4 : 1.6e-2);
      }
      int products = 0;
      for (const std::string& note : engine.last_compiled()->backend_notes)
        products += note.find(": cuBLASLt ") != std::string::npos;
      CHECK(products == 5);
    }
  }
}
