// CUDA code generation and NVRTC compilation, without a GPU: every reference
// workload under every fusion strategy, every op of the op table, the shape
// of the generated source, the disk cache's handling of bad entries, and
// the cuBLASLt choices kept there.
#include <fmt/format.h>

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "../unit/attention_variants.h"
#include "../unit/narrow_dtypes.h"
#include "algo_choice.h"
#include "codegen.h"
#include "compiler.h"
#include "core/donation.h"
#include "core/fusion_strategy.h"
#include "core/tensor_ops.h"
#include "lazylab/op_formulas.hpp"
#include "runner/workload.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;
namespace fs = std::filesystem;

namespace {

const std::map<std::string, WorkloadParams> kSmall = {
    {"chain", {{"n", 4096}, {"iters", 5}}},
    {"chain-small", {{"n", 1000}, {"iters", 5}}},
    {"chain-tiny", {{"iters", 5}}},
    {"softmax", {{"rows", 8}, {"cols", 100}}},
    {"layernorm", {{"rows", 8}, {"cols", 96}}},
    {"mlp", {{"batch", 4}, {"d", 16}, {"hidden", 32}}},
    {"attention", {{"batch", 1}, {"heads", 2}, {"seq", 8}, {"head_dim", 4}}},
    {"gpt2-block", {{"batch", 2}, {"seq", 8}, {"channels", 16}, {"heads", 2}}},
    {"mlp-train", {{"batch", 4}, {"d", 16}, {"hidden", 32}}},
    {"gpt2-block-train", {{"batch", 2}, {"seq", 8}, {"channels", 16}, {"heads", 2}}},
};

Graph workload_graph(const std::string& name) {
  auto workload = make_builtin_workload(name, kSmall.at(name));
  REQUIRE(workload.ok());
  Context ctx;
  std::vector<Tensor> inputs = bind_inputs(ctx, (*workload)->make_inputs(1));
  std::vector<Tensor> outputs = (*workload)->step(ctx, inputs);
  return ctx.capture();
}

cuda::ProgramCode generated(const Module& module, const cuda::CodegenOptions& options = {}) {
  ProgramView view(*module.program, module.graph);
  return cuda::generate(view.get(), options);
}

cuda::CompilerOptions no_cache() {
  cuda::CompilerOptions options;
  options.disk_cache = false;
  return options;
}

// Whether `source` defines the __global__ function `name`.
bool defines(const std::string& source, const std::string& name) {
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("extern \"C\" __global__") && line.find(" " + name + "(") != std::string::npos) return true;
  return false;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Each function's registers a thread in a cubin, as ptxas wrote them: the
// ELF's .nv.info section holds attributes of (format, attribute, size)
// headers, register counts (EIATTR_REGCOUNT, 0x2f) as a symbol's index
// and its count. Empty where the ELF is not as expected.
std::map<std::string, uint32_t> function_registers(const std::string& cubin) {
  std::map<std::string, uint32_t> registers;
  auto at = [&](size_t offset, auto value) {
    if (offset + sizeof(value) <= cubin.size()) std::memcpy(&value, cubin.data() + offset, sizeof(value));
    return value;
  };
  const auto header = at(0, Elf64_Ehdr{});
  if (cubin.size() < sizeof(Elf64_Ehdr) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return registers;
  auto section = [&](size_t i) { return at(header.e_shoff + i * sizeof(Elf64_Shdr), Elf64_Shdr{}); };
  auto name_in = [&](const Elf64_Shdr& strings, size_t offset) {
    const size_t from = strings.sh_offset + offset;
    return from < cubin.size() ? std::string(cubin.c_str() + from) : std::string();
  };
  const Elf64_Shdr names = section(header.e_shstrndx);
  Elf64_Shdr symbols{}, info{};
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr s = section(i);
    if (s.sh_type == SHT_SYMTAB) symbols = s;
    if (name_in(names, s.sh_name) == ".nv.info") info = s;
  }
  const Elf64_Shdr symbol_names = section(symbols.sh_link);
  for (size_t offset = info.sh_offset; offset + 4 <= info.sh_offset + info.sh_size;) {
    const auto format = at(offset, uint8_t{}), attribute = at(offset + 1, uint8_t{});
    const auto size = at(offset + 2, uint16_t{});
    if (format == 4 && attribute == 0x2f && size == 8) {
      const auto symbol = at(symbols.sh_offset + at(offset + 4, uint32_t{}) * sizeof(Elf64_Sym), Elf64_Sym{});
      registers[name_in(symbol_names, symbol.st_name)] = at(offset + 8, uint32_t{});
    }
    offset += 4 + (format == 4 ? size : 0);  // EIFMT_SVAL carries `size` bytes, the others none
  }
  return registers;
}

// The warpgroup attention kernels `source` instantiates, in either form.
size_t warpgroup_kernels(const std::string& source) {
  return count(source, "lazylab_attention16::attention_wgmma<") +
         count(source, "lazylab_attention16::attention_wgmma_loaded<");
}

}  // namespace

TEST_CASE("every workload under every fusion strategy generates CUDA that NVRTC compiles for sm_90") {
  for (const WorkloadInfo& info : builtin_workloads()) {
    Graph graph = workload_graph(info.name);
    for (const std::string& strategy : FusionStrategyRegistry::global().names()) {
      CAPTURE(info.name);
      CAPTURE(strategy);
      Module module =
          lowered(graph, "decompose,canonicalize,cse,dce,fuse{strategy=" + strategy + "},lower,plan-memory");
      cuda::ProgramCode code = generated(module);
      REQUIRE(code.kernels.size() == module.program->kernels.size());
      for (const cuda::CompiledModule& unit : cuda::compile_units(code.units, no_cache()))
        CHECK(unit.cubin.size() > 100);
      for (const cuda::KernelCode& kernel : code.kernels)
        for (const cuda::Launch& launch : kernel.launches) {
          REQUIRE(kernel.unit < code.units.size());
          CHECK(defines(code.units[kernel.unit], launch.function));
        }
    }
  }
}

TEST_CASE("a model's kernels compile as translation units of a few kernels each, attention's on its own") {
  // Four layers of gpt2-block (one causal mask, which cse shares): their
  // kernels launch the first layer's functions, dealt out into units; the
  // 16-bit attention, the most work NVRTC does, in a unit alone with its
  // template.
  auto workload = make_builtin_workload("gpt2-block", {{"batch", 2}, {"seq", 64}, {"channels", 128}, {"heads", 2}});
  REQUIRE(workload.ok());
  std::unique_ptr<Workload> stored = with_inputs_stored_in(std::move(*workload), DType::BF16);
  Context ctx;
  std::vector<Tensor> x = bind_inputs(ctx, stored->make_inputs(1));
  for (int layer = 0; layer < 4; ++layer) x[0] = stored->step(ctx, x)[0];
  Module module = lowered(ctx.capture(),
                          "autocast,decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory");
  CHECK(std::count_if(module.program->kernels.begin(), module.program->kernels.end(), [](const Kernel& k) {
          return k.description.kind == KernelKind::Attention;
        }) == 4);  // each layer's
  cuda::ProgramCode code = generated(module);
  REQUIRE(code.kernels_sharing_functions > 0);
  CHECK(code.units.size() > 1);
  size_t attention_units = 0;
  for (const std::string& unit : code.units) {
    CHECK(unit.starts_with("// Generated by lazylab's CUDA backend."));
    size_t kernels = count(unit, "extern \"C\" __global__");
    if (unit.find("namespace lazylab_attention16") != std::string::npos) {
      ++attention_units;
      CHECK(kernels == 1);
    } else {
      CHECK(kernels >= 1);
      CHECK(unit.find("namespace lazylab_attention") == std::string::npos);  // no template it does not instantiate
    }
  }
  CHECK(attention_units == 1);  // the four layers' attention kernels launch one function
  std::vector<cuda::CompiledModule> compiled = cuda::compile_units(code.units, no_cache());
  REQUIRE(compiled.size() == code.units.size());
  for (const cuda::CompiledModule& unit : compiled) CHECK(unit.cubin.size() > 100);
  for (const cuda::KernelCode& kernel : code.kernels)
    for (const cuda::Launch& launch : kernel.launches) CHECK(defines(code.units.at(kernel.unit), launch.function));
}

TEST_CASE("a unit NVRTC refuses is reported after the others, the first one's error") {
  std::vector<std::string> units = {"extern \"C\" __global__ void a() {}\n", "this is not CUDA 1;\n",
                                    "extern \"C\" __global__ void b() { undeclared(); }\n"};
  try {
    cuda::compile_units(units, no_cache());
    FAIL("compiled");
  } catch (const std::runtime_error& error) {
    std::string message = error.what();
    CHECK(message.starts_with("NVRTC could not compile the generated kernels"));
    CHECK(message.find("this is not CUDA") != std::string::npos);  // NVRTC's log quotes the line
    CHECK(message.find("undeclared") == std::string::npos);        // the second failing unit's is not reported
  }
}

TEST_CASE("every op of the op table generates code, opaque kernels op by op") {
  Context ctx;
  Tensor x = ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor i = ctx.from_vector<int32_t>({3, -7, 11, 0, 5, -2}, {2, 3});
  Tensor l = ctx.from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor d = ctx.from_vector<double>({0.5, 1.5, -2.5, 3, 4, 5}, {2, 3});
  std::vector<Tensor> roots = {
      concat({x, exp(x)}, 0),                                         // concat
      ctx.iota(TensorType{DType::I32, {4, 3}}, 1),                    // iota
      sum(x, {0}),                                                    // a reduction over a non-last axis
      max(i, {0, 1}),                                                 // integers, every axis
      mean(d, {1}),                                                   // f64
      matmul(i, transpose(i, 0, 1)),                                  // an integer product
      matmul(d, transpose(d, 0, 1)),                                  // an f64 product
      div(i, ctx.from_vector<int32_t>({2, 0, -1, 3, 3, 3}, {2, 3})),  // integer division, by zero too
      where(lt(l, ctx.full(3, l.type())), l * l, neg(l)),             // i64 compare, select, wrapping ops
      cast(sqrt(abs(x)), DType::I64),                                 // casts
      cast(gt(d, ctx.full(1.0, d.type())), DType::F32),               // bool
      slice(pow(x, x), {0, 1}, {2, 3}, {1, 2}),                       // pow, slice
      reshape(sigmoid(x) - log(x) + rsqrt(x), {3, 2}),                // reshape
      minimum(maximum(x, ctx.full(2.5, x.type())), tanh(x)),          // max, min
      broadcast_to(reshape(relu(x - 3.0), {2, 3, 1}), {2, 3, 4}),     // broadcast
      softmax(x, 0),                                                  // composites, not decomposed
      layernorm(d, ctx.full(0.5, TensorType{DType::F64, {3}}), ctx.full(0.25, TensorType{DType::F64, {3}})),
      gelu(x),
      erf(x),                                                   // erf
      gather(d, ctx.from_vector<int64_t>({1, -2, 0}, {3}), 1),  // gather, negative index
      pad(i, {1, 0}, {0, 2}, 7),                                // pad (integer)
      min(gt(x, ctx.full(2.5, x.type())), {1}),                 // a bool row min and max
      max(gt(x, ctx.full(4.5, x.type())), {0, 1}),
      sum(gt(x, ctx.full(2.5, x.type())), {0, 1}, true),  // bool sums, products, max over size-1 axes
      matmul(gt(x, ctx.full(0.5, x.type())), transpose(gt(x, ctx.full(1.5, x.type())), 0, 1)),
      max(reshape(gt(x, ctx.full(9.5, x.type())), {1, 1, 6}), {0, 1}, true),
      scatter_add(d, ctx.from_vector<int64_t>({1, -2, 1}, {3}), ctx.full(0.5, TensorType{DType::F64, {2, 3}}),
                  1),  // scatter_add, a repeated and a negative index
      conv2d(reshape(x, {1, 1, 2, 3}), ctx.full(0.5, TensorType{DType::F32, {2, 1, 2, 2}}),
             {{1, 1}, {1, 0, 0, 1}, {1, 1}}),                                              // conv2d
      max_pool2d(reshape(d, {1, 2, 3, 1}), {2, 1}, {{1, 1}, {1, 0, 0, 0}, {1, 1}}),        // max pool, f64
      avg_pool2d(reshape(x, {1, 1, 2, 3}), {2, 2}, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, true),  // avg pool
  };
  for (const char* strategy : {"none", "greedy-elementwise", "dominator"}) {
    CAPTURE(strategy);
    Module module = lowered(ctx.capture(), "canonicalize,fuse{strategy=" + std::string(strategy) + "},lower");
    cuda::ProgramCode code = generated(module);
    CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
  }
}

TEST_CASE("bf16, f16, i8 and u8 generate code for every kind of kernel that NVRTC compiles") {
  Context ctx;
  std::vector<Tensor> roots = narrow_dtype_program(ctx);
  Graph graph = ctx.capture();
  for (const char* pipeline_text : {"canonicalize,fuse{strategy=none},lower",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,plan-memory",
                                    "decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory"}) {
    CAPTURE(pipeline_text);
    cuda::ProgramCode code = generated(lowered(graph, pipeline_text));
    CHECK(code.source.find("lazylab_bf16* __restrict__") != std::string::npos);
    CHECK(code.source.find("lazylab_f16") != std::string::npos);
    CHECK(code.source.find("= reinterpret_cast<const uint2*>(p") != std::string::npos);
    CHECK(code.source.find("lazylab_lane<lazylab_bf16>(q") != std::string::npos);
    CHECK(code.source.find("lazylab_pack4<lazylab_f16>(v") != std::string::npos);
    CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
  }
}

TEST_CASE("the generated source has the shape the kernel descriptions ask for") {
  SUBCASE("softmax of 100 columns: one function, a warp per row, both reductions in it by shuffles") {
    Module module = lowered(workload_graph("softmax"), "decompose,fuse{strategy=producer-consumer},lower");
    cuda::ProgramCode code = generated(module);
    REQUIRE(code.kernels.size() == 1);
    CHECK(count(code.source, "__global__") == 1);
    const cuda::Launch& launch = code.kernels[0].launches[0];
    CHECK(launch.block_per_item);
    CHECK(launch.items_per_block == launch.block / 32);
    CHECK(count(code.source, "= lazylab_warp_reduce(a") == 2);
    CHECK(count(code.source, "expf(") >= 1);
    CHECK(count(code.source, "float4 q0[1];") == 1);  // 25 groups of 4: at most one a lane, held in registers
    CHECK(count(code.source, "[1][4];") == 0);        // the max reads x itself: nothing computed is held
  }
  SUBCASE("wide rows: a block per row, held in registers, read from memory once") {
    for (auto [name, params] : std::vector<std::pair<std::string, WorkloadParams>>{
             {"softmax", {{"rows", 4}, {"cols", 8192}}}, {"layernorm", {{"rows", 4}, {"cols", 4096}}}}) {
      CAPTURE(name);
      auto workload = make_builtin_workload(name, params);
      REQUIRE(workload.ok());
      Context ctx;
      std::vector<Tensor> inputs = bind_inputs(ctx, (*workload)->make_inputs(1));
      std::vector<Tensor> outputs = (*workload)->step(ctx, inputs);
      Module module = lowered(ctx.capture(), "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower");
      cuda::ProgramCode code = generated(module);
      REQUIRE(code.kernels.size() == 1);
      const cuda::Launch& launch = code.kernels[0].launches[0];
      CHECK(launch.items_per_block == 1);
      CHECK(count(code.source, "= lazylab_block_reduce(") == 2);
      CHECK(count(code.source, "float4 q0[") == 1);                                     // x, in registers
      CHECK(count(code.source, "reinterpret_cast<const float4*>(p0 + base)[g]") == 1);  // loaded once
      CHECK(count(code.source, "make_float4") == 1);                                    // stored 4-wide
      CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
      if (name != "softmax") continue;
      // 2,048 groups of 4: 256 threads hold eight each; row-block sets the
      // threads, and each holds the row's share (four at 512, two at 1024).
      CHECK(launch.block == 256);
      CHECK(count(code.source, "float4 q0[8];") == 1);
      for (auto [threads, groups] : {std::pair{512, 4}, std::pair{1024, 2}}) {
        CAPTURE(threads);
        cuda::ProgramCode chosen = generated(module, {.row_block_threads = threads});
        CHECK(chosen.kernels[0].launches[0].block == static_cast<uint32_t>(threads));
        CHECK(count(chosen.source, fmt::format("float4 q0[{}];", groups)) == 1);
        CHECK(cuda::compile_cuda(chosen.source, no_cache()).cubin.size() > 100);
      }
    }
  }
  SUBCASE("chain: one elementwise function, four elements a thread with 128-bit loads and stores") {
    Module module = lowered(workload_graph("chain"), "canonicalize,fuse{strategy=greedy-elementwise},lower");
    cuda::ProgramCode code = generated(module);
    REQUIRE(code.kernels.size() == 1);
    CHECK(count(code.source, "__global__") == 1);
    CHECK(count(code.source, "reinterpret_cast<const float4*>") == 1);
    CHECK(count(code.source, "make_float4") == 1);
    CHECK(code.kernels[0].launches[0].work == 4096 / 4);
    CHECK(count(code.source, "const long long t = s;") == 1);  // no product before it: first to last
  }
  SUBCASE("mlp under gemm-epilogue: products on cuBLASLt, a bias alone its BIAS epilogue, bias + gelu generated") {
    Module module = lowered(workload_graph("mlp"), "decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower");
    cuda::ProgramCode code = generated(module);
    REQUIRE(code.kernels.size() == 2);
    for (const cuda::KernelCode& kernel : code.kernels) CHECK(kernel.product);
    CHECK(code.kernels[0].bias == cuda::kNoValue);  // the generated gelu adds it as it reads the product
    CHECK(code.kernels[0].launches.size() == 1);
    CHECK(code.kernels[1].bias != cuda::kNoValue);  // + b2 was all: cuBLASLt writes the output
    CHECK(code.kernels[1].launches.empty());
    CHECK(count(code.source, "expf(") >= 1);  // gelu
    CHECK(count(code.source, "__global__") == 1);
    CHECK(count(code.source, "const long long t = work - 1 - s;") == 1);  // the product's last tiles first
    // What `lazylab show --code` prints: each kernel marked with what runs for it.
    ProgramView view(*module.program, module.graph);
    std::string listing = cuda::annotated_source(code);
    CHECK(count(listing, "// ---- kernel k") == 2);
    CHECK(count(listing, "// cuBLASLt: 1 x [4 x 16] x [16 x 32] -> %") == 1);
    CHECK(count(listing, "// cuBLASLt: 1 x [4 x 32] x [32 x 16] + bias") == 1);
    CHECK(count(listing, "// launch k0: 32 work items, 256 threads a block") == 1);  // 128 elements, four a thread
    CHECK(listing.find(code.kernels[0].source) != std::string::npos);
    // With bias-epilogue=off the last bias is a generated kernel after a plain product.
    cuda::ProgramCode plain = generated(module, {.bias_epilogue = false});
    CHECK(plain.kernels[1].bias == cuda::kNoValue);
    CHECK(plain.kernels[1].launches.size() == 1);
    CHECK(count(plain.source, "__global__") == 2);
    CHECK(cuda::compile_cuda(plain.source, no_cache()).cubin.size() > 100);
  }
}

TEST_CASE("bool sums, products and maxima store whether one is true, from false") {
  // As the reference stores them (found by lazylab fuzz on the H200: a count
  // stored as a byte read 2 or 8, and a max started from INT64_MIN as a bool,
  // which is true).
  Context ctx;
  Tensor a = gt(ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), ctx.full(2.5, TensorType{DType::F32, {2, 3}}));
  std::vector<Tensor> roots = {matmul(a, transpose(a, 0, 1)), sum(a, {0, 1}, true),
                               max(reshape(a, {1, 1, 6}), {0, 1}, true)};
  std::string source = generated(lowered(ctx.capture(), "lower")).source;
  CHECK(count(source, "acc != 0") == 3);      // the product, the sum and the max
  CHECK(count(source, "int acc = 0;") == 1);  // the max, from false
  CHECK(cuda::compile_cuda(source, no_cache()).cubin.size() > 100);
}

TEST_CASE("values repeating along the rows are indexed without a remainder per element") {
  // gpt2-block's causal mask [seq, seq] under the heads: whole rows repeat.
  Module masked =
      lowered(workload_graph("gpt2-block"), "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower");
  std::string source = generated(masked).source;
  CHECK(count(source, "[(row % 8LL) * 8LL + g * ") > 0);
  CHECK(count(source, "i_1 % 64LL") == 0);
  // A bias along the rows of an elementwise epilogue: one remainder for four lanes.
  Module biased =
      lowered(workload_graph("mlp"), "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower");
  std::string epilogue = generated(biased).source;
  CHECK(count(epilogue, "[i_0 % 32LL + 3]") > 0);
  CHECK(count(epilogue, "i_3 % 32LL") == 0);
}

TEST_CASE("a product cuBLASLt does not run goes op by op and says why") {
  Context ctx;
  Tensor product =
      matmul(ctx.from_vector<int64_t>({1, 2, 3, 4}, {2, 2}), ctx.from_vector<int64_t>({1, 0, 0, 1}, {2, 2}));
  Module module = lowered(ctx.capture(), "fuse{strategy=gemm-epilogue},lower");
  cuda::ProgramCode code = generated(module);
  REQUIRE(code.kernels.size() == 1);
  CHECK_FALSE(code.kernels[0].product);
  CHECK(code.kernels[0].op_by_op == "cuBLASLt runs products of f32, bf16 and f16, not of i64");
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
}

// cuBLASLt refuses a product with nothing to compute (a status 13 on an
// H200): op by op, an empty result launches nothing and k = 0 sums to zero.
TEST_CASE("products of no elements or over no depth go op by op and say why") {
  Context ctx;
  Tensor rows = matmul(ctx.from_vector<float>({}, {0, 4}), ctx.from_vector<float>(std::vector<float>(12, 1), {4, 3}));
  Tensor depth = matmul(ctx.from_vector<float>({}, {2, 0}), ctx.from_vector<float>({}, {0, 3}));
  Module module = lowered(ctx.capture(), "fuse{strategy=gemm-epilogue},lower");
  cuda::ProgramCode code = generated(module);
  REQUIRE(code.kernels.size() == 2);
  std::set<std::string> why;
  for (const cuda::KernelCode& kernel : code.kernels) {
    CHECK_FALSE(kernel.product);
    why.insert(kernel.op_by_op);
  }
  CHECK(why == std::set<std::string>{"a product of no elements", "a product over no depth (k = 0)"});
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
}

// Weights stored in bf16 (inputs: bf16) under autocast: no kernel casts a
// weight, and no kernel is a cast alone (a bias or norm weight widened
// where it is read): fewer kernels than with f32 weights.
TEST_CASE("a gpt2-block stored in bf16 has no kernel of casts alone under autocast") {
  auto kernels = [](bool stored) {
    auto made = make_builtin_workload("gpt2-block", kSmall.at("gpt2-block"));
    REQUIRE(made.ok());
    std::unique_ptr<Workload> workload =
        stored ? with_inputs_stored_in(std::move(*made), DType::BF16) : std::move(*made);
    Context ctx;
    std::vector<Tensor> outputs = workload->step(ctx, bind_inputs(ctx, workload->make_inputs(1)));
    Module module = lowered(ctx.capture(),
                            "autocast,decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,"
                            "plan-memory");
    ProgramView view(*module.program, module.graph);
    const lazylab_program& program = view.get();
    int casts_alone = 0;
    for (uint32_t k = 0; k < program.num_kernels; ++k) {
      const lazylab_kernel& kernel = program.kernels[k];
      casts_alone += std::all_of(kernel.ops, kernel.ops + kernel.num_ops,
                                 [](const lazylab_op& op) { return op.op == LAZYLAB_OP_Cast; });
    }
    return std::pair<uint32_t, int>(program.num_kernels, casts_alone);
  };
  auto [f32_kernels, f32_casts] = kernels(false);
  auto [stored_kernels, stored_casts] = kernels(true);
  CHECK(f32_casts == 4);  // the four weights, cast each step
  CHECK(stored_casts == 0);
  CHECK(stored_kernels == f32_kernels - 4);
}

// Under autocast the products are bf16's and cuBLASLt runs them; the casts
// around them fuse: each product's epilogue reads the 16-bit product and
// writes the next product's 16-bit operand.
TEST_CASE("autocast's bf16 products run on cuBLASLt with the casts in their epilogues") {
  Module module = lowered(workload_graph("mlp"),
                          "autocast,decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory");
  cuda::ProgramCode code = generated(module);
  ProgramView view(*module.program, module.graph);
  int products = 0;
  for (size_t k = 0; k < code.kernels.size(); ++k) {
    const lazylab_kernel& kernel = view.get().kernels[k];
    if (kernel.kind != LAZYLAB_KERNEL_CONTRACTION) continue;
    CAPTURE(k);
    ++products;
    CHECK(code.kernels[k].product);
    CHECK(code.kernels[k].op_by_op.empty());
    CHECK(view.get().values[kernel.contraction.matmul].dtype == LAZYLAB_BF16);
    REQUIRE(code.kernels[k].launches.size() == 1);  // the epilogue: cast, bias, gelu (and the cast to bf16)
  }
  CHECK(products == 2);
  CHECK(count(code.source, "lazylab_bf16* __restrict__") > 0);
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
}

// A bias of the product's own dtype is cuBLASLt's epilogue in bf16 too.
TEST_CASE("a bf16 product with a bf16 bias and nothing after leaves the bias to cuBLASLt") {
  Context ctx;
  Tensor x = cast(ctx.from_vector(std::vector<float>(64 * 32, 0.5f), {64, 32}), DType::BF16);
  Tensor w = cast(ctx.from_vector(std::vector<float>(32 * 48, 0.25f), {32, 48}), DType::BF16);
  Tensor b = cast(ctx.from_vector(std::vector<float>(48, 1.0f), {48}), DType::BF16);
  Tensor y = matmul(x, w) + b;
  Module module = lowered(ctx.capture(), "fuse{strategy=gemm-epilogue},lower");
  cuda::ProgramCode code = generated(module);
  int biased = 0;
  for (size_t k = 0; k < code.kernels.size(); ++k)
    if (code.kernels[k].product) {
      biased += code.kernels[k].bias != cuda::kNoValue;
      CHECK(code.kernels[k].launches.empty());
    }
  CHECK(biased == 1);
}

TEST_CASE("a product scaled by a constant leaves the scale to cuBLASLt's alpha") {
  Context ctx;
  Tensor q = ctx.from_vector(std::vector<float>(4 * 8 * 16, 0.5f), {4, 8, 16});
  Tensor k = ctx.from_vector(std::vector<float>(4 * 16 * 8, 0.25f), {4, 16, 8});
  Tensor scaled = matmul(q, k) * 0.125;
  Tensor after = tanh(matmul(k, q) * 0.5);
  Module module = lowered(ctx.capture(), "decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower");
  cuda::ProgramCode code = generated(module);
  REQUIRE(code.kernels.size() == 2);
  const cuda::KernelCode& alone = code.kernels[0];
  CHECK(alone.product);
  CHECK(alone.alpha == 0.125);
  CHECK(alone.launches.empty());  // the scaled product was the whole epilogue
  ProgramView view(*module.program, module.graph);
  const lazylab_kernel& k0 = view.get().kernels[0];
  CHECK(alone.product_out == k0.ops[k0.num_ops - 1].result);  // written where the multiply's result lives
  CHECK(code.kernels[1].alpha == 0.5);
  CHECK(code.kernels[1].launches.size() == 1);  // tanh, reading the scaled product
}

// cuda's epilogue is a pass over the product cuBLASLt wrote (ABI 3.14's
// gemm_epilogue_rereads): attention's scale, mask and (under autocast) cast
// to f32 are the softmax's prologue instead, so the scores are written once,
// as the product, and never as the epilogue's result.
TEST_CASE("an epilogue reaching a softmax is left to the softmax's kernel") {
  for (const char* first : {"", "autocast,"}) {
    CAPTURE(first);
    Module module = lowered(workload_graph("gpt2-block"), std::string(first) +
                                                              "decompose,canonicalize,cse,dce,fuse{strategy=gemm-"
                                                              "epilogue},lower,plan-memory");
    cuda::ProgramCode code = generated(module);
    ProgramView view(*module.program, module.graph);
    int left = 0;
    for (const FusionCandidate& entry : module.fusion_log)
      left += entry.decision.code == RefusalCode::Cost &&
              entry.decision.reason.find("reaches a reduction: left to be its prologue") != std::string::npos;
    CHECK(left >= 2);  // the scores' scale or cast, the projection's residual
    int batched = 0;   // q k^T and p v, by heads: the product alone, its epilogue elsewhere
    for (size_t k = 0; k < code.kernels.size(); ++k) {
      const lazylab_kernel& kernel = view.get().kernels[k];
      if (kernel.kind != LAZYLAB_KERNEL_CONTRACTION || kernel.contraction.batch == 1) continue;
      ++batched;
      CHECK(code.kernels[k].product);
      CHECK(code.kernels[k].launches.empty());
    }
    CHECK(batched == 2);
    // The softmax's max reads the scaled, masked scores it computes, the
    // second layernorm's mean the residual sum: each held in registers from
    // that pass for the next (a float c<v>[groups][4]).
    CHECK(count(code.source, "    float c") == 2);
    CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
  }
}

// gpt2-block's four projections: a weight shared by the batches is one
// product of all their rows (no weight copied per batch), the reshape back to
// the batches folds into the product, and the bias after it is cuBLASLt's.
TEST_CASE("a weight shared by the batches is one product, reshaped in place, a bias alone on cuBLASLt") {
  Module module =
      lowered(workload_graph("gpt2-block"), "decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower");
  cuda::ProgramCode code = generated(module);
  ProgramView view(*module.program, module.graph);
  int projections = 0, biased = 0;
  for (size_t k = 0; k < code.kernels.size(); ++k) {
    const lazylab_kernel& kernel = view.get().kernels[k];
    if (!code.kernels[k].product || kernel.contraction.batch != 1) continue;
    CAPTURE(k);
    ++projections;
    // The QKV projection's bias is its whole epilogue; the others' epilogues
    // go on (a residual, gelu) in a generated kernel, which adds the bias.
    biased += code.kernels[k].bias != cuda::kNoValue;
    // (Past the QKV projection, the epilogue goes on in a generated kernel,
    // or is left to the layernorm it reaches.)
    if (code.kernels[k].bias != cuda::kNoValue) CHECK(code.kernels[k].launches.empty());
    CHECK(kernel.contraction.m == 2 * 8);  // batch x seq rows
  }
  CHECK(projections == 4);
  CHECK(biased == 1);
  for (uint32_t k = 0; k < view.get().num_kernels; ++k) {  // no kernel broadcasts a weight
    const lazylab_kernel& kernel = view.get().kernels[k];
    bool broadcasts = kernel.kind == LAZYLAB_KERNEL_LAYOUT && kernel.ops[0].op == LAZYLAB_OP_Broadcast;
    CHECK_FALSE(broadcasts);
  }
}

TEST_CASE("attention written every way is one attention kernel each, which NVRTC compiles") {
  for (const AttentionShape& shape : kAttentionShapes)
    for (int variant = 0; variant < kAttentionVariants; ++variant) {
      CAPTURE(to_string(shape.q));
      CAPTURE(variant);
      Context ctx;
      std::vector<Tensor> outputs = attention_variant(ctx, variant, shape);
      Module module = lowered(ctx.capture(), "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower");
      std::vector<const Kernel*> attention;
      for (const Kernel& kernel : module.program->kernels)
        if (kernel.description.kind == KernelKind::Attention) attention.push_back(&kernel);
      REQUIRE(attention.size() == 2);
      const Attention &first = attention[0]->description.attention, &second = attention[1]->description.attention;
      if (variant < 4) {
        CHECK(first.causal != second.causal);
      } else {  // one mask read from memory, the score kept where it is false
        CHECK((first.mask == kNoNode) != (second.mask == kNoNode));
        const Attention& masked = first.mask == kNoNode ? second : first;
        CHECK((!masked.mask_keeps && !masked.causal && !first.causal && !second.causal));
      }
      for (const Kernel* kernel : attention) {
        const Attention& a = kernel->description.attention;
        CHECK(a.k_transposed == (variant % 2 == 0));
        CHECK(a.d == shape.q.back());
        CHECK(a.n == shape.n);
        CHECK(a.dv == shape.dv);
        bool masked = a.causal || a.mask != kNoNode;
        CHECK(static_cast<float>(a.scale) == doctest::Approx(attention_scale(variant, masked)));
      }
      cuda::ProgramCode code = generated(module);
      CHECK(count(code.source, "lazylab_attention::attention<") == 2);
      CHECK(count(code.source, "(q, k, v, mask, out") == (variant == 4 ? 1 : 0));
      CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
    }
}

// Under autocast (products in bf16 or f16) the same attention is one 16-bit
// kernel on the tensor cores, where its head dims are multiples of 8 (and n,
// for k given as [d, n]); elsewhere it runs op by op and says why. With
// wgmma (sm_90a) the kernels reading k's rows take the warpgroup products.
TEST_CASE("attention under autocast is one 16-bit tensor-core kernel each, which NVRTC compiles") {
  for (const char* dtype : {"bf16", "f16"})
    for (const AttentionShape& shape : kAttentionShapes)
      for (int variant = 0; variant < kAttentionVariants; ++variant) {
        CAPTURE(dtype);
        CAPTURE(to_string(shape.q));
        CAPTURE(variant);
        Context ctx;
        std::vector<Tensor> outputs = attention_variant(ctx, variant, shape);
        Module module = lowered(ctx.capture(), fmt::format("autocast{{dtype={}}},decompose,canonicalize,cse,dce,"
                                                           "fuse{{strategy=flash-attention}},lower",
                                                           dtype));
        std::vector<uint32_t> attention;
        for (uint32_t k = 0; k < module.program->kernels.size(); ++k)
          if (module.program->kernels[k].description.kind == KernelKind::Attention) attention.push_back(k);
        REQUIRE(attention.size() == 2);
        const Attention& a = module.program->kernels[attention[0]].description.attention;
        CHECK(dtype_name(a.dtype) == std::string(dtype));
        CHECK(a.k_transposed == (variant % 2 == 0));
        // The scale as the 16-bit constant holds it (0.3 and 0.2 are not
        // 16-bit values; the powers of two are).
        double scale = attention_scale(variant, a.causal || a.mask != kNoNode);
        CHECK(a.scale == round_to(a.dtype, scale));
        CHECK((a.scale == scale) == (variant == 2 || variant == 3));
        bool runs = a.d % 8 == 0 && a.dv % 8 == 0 && (a.k_transposed || a.n % 8 == 0);
        cuda::ProgramCode code = generated(module);
        for (uint32_t k : attention) {
          CAPTURE(code.kernels[k].op_by_op);
          CHECK(code.kernels[k].op_by_op.empty() == runs);
        }
        CHECK(count(code.source, "lazylab_attention16::attention<") == (runs ? 2 : 0));
        CHECK(count(code.source, "(q, k, v, mask, out") == (runs && variant == 4 ? 1 : 0));
        if (runs) CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
        if (!runs) continue;
        // On Hopper (wgmma, sm_90a): k as [n, d] on the warpgroup kernel,
        // [d, n] on mma.sync, saying why.
        cuda::CodegenOptions hopper;
        hopper.wgmma = true;
        cuda::ProgramCode warpgroup = generated(module, hopper);
        for (uint32_t k : attention) CHECK(warpgroup.kernels[k].slower_path.empty() == a.k_transposed);
        CHECK(warpgroup_kernels(warpgroup.source) == (a.k_transposed ? 2 : 0));
        CHECK(count(warpgroup.source, "lazylab_attention16::attention<") == (a.k_transposed ? 0 : 2));
        cuda::CompilerOptions sm90a = no_cache();
        sm90a.arch = "sm_90a";
        for (const cuda::CompiledModule& unit : cuda::compile_units(warpgroup.units, sm90a))
          CHECK(unit.cubin.size() > 100);
      }
}

// Up to head dim 64 the warpgroup kernel takes a block of four warpgroups
// (256 rows, one block an SM) where no mask is causal, the rows pad no more
// than in blocks of 128 and there are at least 128 blocks; else two (two
// blocks an SM). The backend's attention-rows sets it instead. Where no
// mask is causal a warpgroup of the block copies K and V (the `loaded`
// form), its registers shared out to the others.
TEST_CASE("the warpgroup attention kernel's block is four warpgroups where no mask is causal and the grid is large") {
  struct Case {
    AttentionShape shape;
    bool large;  // four warpgroups by the rule, where not causal
  };
  for (const Case& c : {Case{{{256, 256, 64}, 100, 64}, true}, Case{{{64, 512, 48}, 64, 64}, true},
                        Case{{{127, 256, 64}, 64, 64}, false}, Case{{{512, 300, 64}, 64, 64}, false},
                        Case{{{256, 256, 72}, 64, 64}, false}})
    for (int variant : {0, 2, 4}) {
      CAPTURE(to_string(c.shape.q));
      CAPTURE(c.shape.dv);
      CAPTURE(variant);
      Context ctx;
      std::vector<Tensor> outputs = attention_variant(ctx, variant, c.shape);
      Module module =
          lowered(ctx.capture(), "autocast,decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower");
      const int64_t plain = variant == 4 ? 2 : 1;  // kernels with no causal mask
      const bool wide = c.shape.q.back() > 64;
      for (int rows : {0, 128, 256}) {
        CAPTURE(rows);
        cuda::CodegenOptions hopper;
        hopper.wgmma = true;
        hopper.wgmma_attention_rows = rows;
        cuda::ProgramCode code = generated(module, hopper);
        const int64_t four = wide ? 0 : rows == 256 ? 2 : rows == 128 ? 0 : c.large ? plain : 0;
        // Where no mask is causal, the form with a warpgroup copying K and V
        // in 32 registers a thread, the others taking the rest of the
        // block's (96 a thread at launch for four, 80 for two blocks an SM
        // of two, 128 for three); a causal kernel the block barrier's form
        // (three warpgroups pipelined).
        const int64_t causal = 2 - plain;
        const int64_t barrier4 = !wide && rows == 256 ? causal : 0, barrier2 = !wide && rows != 256 ? causal : 0;
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma_loaded<4, 32, 112, ") == four - barrier4);
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma<4, false, ") == barrier4);
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma_loaded<2, 32, 104, ") ==
              (wide ? 0 : 2 - four) - barrier2);
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma<2, false, ") == barrier2);
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma_loaded<3, 32, 160, ") == (wide ? plain : 0));
        CHECK(count(code.source, "lazylab_attention16::attention_wgmma<3, true, ") == (wide ? causal : 0));
        // A block is its warpgroups, and in the loaded form the warpgroup
        // that copies (the kernel waits on it: a launch without it would
        // hang), its shared memory Q's rows, three stages of K and V and,
        // loaded, two 8-byte barriers a stage; a loaded launch names the
        // registers a thread it must have been compiled with.
        std::multiset<uint32_t> blocks, expected_blocks;
        std::multiset<std::pair<uint32_t, uint32_t>> registers, expected_registers;
        for (uint32_t k = 0; k < module.program->kernels.size(); ++k)
          if (module.program->kernels[k].description.kind == KernelKind::Attention)
            for (const cuda::Launch& launch : code.kernels[k].launches) {
              blocks.insert(launch.block);
              const bool loaded = launch.registers != 0;
              if (loaded) registers.insert({launch.block, launch.registers});
              const int64_t dp = (c.shape.q.back() + 15) / 16 * 16, dvp = (c.shape.dv + 15) / 16 * 16;
              const int64_t rows = 64 * (launch.block / 128 - (loaded ? 1 : 0));
              CHECK(launch.shared_bytes ==
                    (rows * (std::max(dp, dvp) + 8) + 3 * 64 * (dp + dvp)) * 2 + (loaded ? 48 : 0));
            }
        auto expect = [&](int64_t kernels, uint32_t block, uint32_t launch_registers) {
          for (int64_t i = 0; i < kernels; ++i) {
            expected_blocks.insert(block);
            if (launch_registers) expected_registers.insert({block, launch_registers});
          }
        };
        expect(four - barrier4, 5 * 128, 96);
        expect(barrier4, 4 * 128, 0);
        expect((wide ? 0 : 2 - four) - barrier2, 3 * 128, 80);
        expect(barrier2, 2 * 128, 0);
        expect(wide ? plain : 0, 4 * 128, 128);
        expect(wide ? causal : 0, 3 * 128, 0);
        CHECK(blocks == expected_blocks);
        CHECK(registers == expected_registers);
        // NVRTC compiles the four-warpgroup forms, and the loaded forms of
        // two and of three warpgroups, each loaded kernel to exactly the
        // registers it shares out: with fewer its warpgroups would wait
        // forever (the backend refuses it on loading), with more the
        // shares waste them.
        const bool fours = rows == 256 && variant != 0 && !wide,
                   other_loaded = variant == 4 && rows == (wide ? 0 : 128);
        if (c.shape.q[0] != 256 || !(fours || other_loaded)) continue;
        cuda::CompilerOptions sm90a = no_cache();
        sm90a.arch = "sm_90a";
        const std::vector<cuda::CompiledModule> units = cuda::compile_units(code.units, sm90a);
        for (const cuda::CompiledModule& unit : units) CHECK(unit.cubin.size() > 100);
        size_t loaded_checked = 0;
        for (const cuda::KernelCode& kernel : code.kernels)
          for (const cuda::Launch& launch : kernel.launches)
            if (launch.registers) {
              CAPTURE(launch.function);
              CHECK(function_registers(units.at(kernel.unit).cubin)[launch.function] == launch.registers);
              ++loaded_checked;
            }
        CHECK(loaded_checked == (variant == 4 ? 2 : fours ? 1 : 0));
      }
    }
}

// Heads split from the projections and merged back after (BERT's and
// GPT-2's layouts) are read and written in place: one attention kernel, no
// copies; k's rows read as such (on wgmma too); in 16 bits, heads not 16
// bytes apart go op by op, saying why.
TEST_CASE("attention over heads split from their projections reads and writes them in place, and compiles") {
  for (const char* dtype : {"f32", "bf16"})
    for (const HeadsShape& shape : kHeadsShapes)
      for (bool packed : {false, true})
        for (bool causal : {false, true}) {
          CAPTURE(dtype);
          CAPTURE(shape.d);
          CAPTURE(packed);
          CAPTURE(causal);
          Context ctx;
          Tensor out = attention_heads(ctx, packed, causal, shape);
          std::string autocast = dtype == std::string("f32") ? "" : fmt::format("autocast{{dtype={}}},", dtype);
          Module module =
              lowered(ctx.capture(), autocast + "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower");
          std::vector<uint32_t> attention;
          for (uint32_t k = 0; k < module.program->kernels.size(); ++k) {
            CHECK(module.program->kernels[k].description.kind != KernelKind::Layout);
            if (module.program->kernels[k].description.kind == KernelKind::Attention) attention.push_back(k);
          }
          REQUIRE(attention.size() == 1);
          const Attention& a = module.program->kernels[attention[0]].description.attention;
          CHECK(a.through_views);
          CHECK(a.k_transposed);
          const int64_t width = shape.heads * shape.d, lead = packed ? shape.lead : 0;
          const int64_t row = packed ? lead + 3 * width : width, images = shape.batch == 1 ? 0 : shape.seq;
          CHECK(a.q_view == AttentionView{lead, row, {images * row, shape.d}});
          CHECK(a.k_view == AttentionView{lead + (packed ? width : 0), row, {images * row, shape.d}});
          CHECK(a.output_view == AttentionView{0, width, {images * width, shape.d}});
          cuda::ProgramCode code = generated(module);
          const bool misaligned = dtype != std::string("f32") && lead % 8 != 0;
          CAPTURE(code.kernels[attention[0]].op_by_op);
          const bool refused = code.kernels[attention[0]].op_by_op.find("16 bytes at a time") != std::string::npos;
          CHECK(refused == misaligned);
          if (misaligned) continue;
          CHECK(count(code.source, "struct Views") == 1);
          CHECK(code.source.find(fmt::format("operand == 0 ? {}LL", row)) != std::string::npos);
          CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
          if (dtype == std::string("f32")) continue;
          cuda::CodegenOptions hopper;
          hopper.wgmma = true;
          cuda::ProgramCode warpgroup = generated(module, hopper);
          CHECK(warpgroup.kernels[attention[0]].slower_path.empty());
          CHECK(warpgroup_kernels(warpgroup.source) == 1);
          cuda::CompilerOptions sm90a = no_cache();
          sm90a.arch = "sm_90a";
          for (const cuda::CompiledModule& unit : cuda::compile_units(warpgroup.units, sm90a))
            CHECK(unit.cubin.size() > 100);
        }
}

// A model's layers make the same kernels but for their values: each set of
// functions is generated and compiled once, and the later layers' kernels
// launch the first's (NVRTC's time grows with the distinct kernels, not the
// layers). Five layers launch more than three but define no more functions.
TEST_CASE("kernels that generate the same functions launch one copy of them") {
  struct Count {
    size_t launches = 0, sharing = 0;
    std::set<std::string> functions;
  };
  auto layers = [](int layer_count, const char* strategy) {
    Context ctx;
    auto random = [&](const Dims& dims, double seed) {
      std::vector<float> data(TensorType{DType::F32, dims}.num_elements());
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(std::sin(0.37 * i + seed));
      return ctx.from_vector(data, dims);
    };
    Tensor x = random({2, 16, 32}, 0);
    for (int layer = 0; layer < layer_count; ++layer) {
      Tensor scores = matmul(x, transpose(x, -1, -2)) * 0.125;
      Tensor mixed = matmul(softmax(scores, -1), x);
      x = tanh(matmul(mixed, random({32, 32}, layer + 1)) + random({32}, layer + 7));
    }
    Module module = lowered(ctx.capture(), fmt::format("autocast,decompose,canonicalize,cse,dce,fuse{{strategy={}}},"
                                                       "lower",
                                                       strategy));
    cuda::ProgramCode code = generated(module);
    Count c;
    c.sharing = code.kernels_sharing_functions;
    for (const cuda::KernelCode& kernel : code.kernels)
      for (const cuda::Launch& launch : kernel.launches) {
        ++c.launches;
        c.functions.insert(launch.function);
        // Each launched function is defined once in the translation unit.
        CHECK(count(code.source, " " + launch.function + "(") == 1);
      }
    CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
    return c;
  };
  for (const char* strategy : {"none", "gemm-epilogue", "flash-attention"}) {
    CAPTURE(strategy);
    Count three = layers(3, strategy), five = layers(5, strategy);
    CHECK(five.launches > three.launches);
    CHECK(five.functions.size() == three.functions.size());
    CHECK(five.sharing > three.sharing);
    CHECK(three.sharing > 0);
  }
}

TEST_CASE("the disk cache replaces a corrupt or truncated entry instead of trusting it") {
  fs::path dir = fs::temp_directory_path() / ("lazylab-cache-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  cuda::CompilerOptions options;
  options.cache_dir = dir.string();
  const std::string source = "extern \"C\" __global__ void twice(float* p) { p[threadIdx.x] *= 2.0f; }\n";
  cuda::CompiledModule first = cuda::compile_cuda(source, options);
  CHECK_FALSE(first.from_cache);
  CHECK(first.cache_note == "not cached");
  REQUIRE(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::path entry = fs::directory_iterator(dir)->path();
  cuda::CompiledModule second = cuda::compile_cuda(source, options);
  CHECK(second.from_cache);
  CHECK(second.cubin == first.cubin);
  // A flipped byte in the payload: the checksum catches it.
  {
    std::fstream file(entry, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(100);
    byte = static_cast<char>(byte ^ 0x5a);
    file.write(&byte, 1);
  }
  cuda::CompiledModule flipped = cuda::compile_cuda(source, options);
  CHECK_FALSE(flipped.from_cache);
  CHECK(flipped.cache_note == "corrupt cache entry (checksum), recompiled");
  CHECK(flipped.cubin == first.cubin);
  CHECK(cuda::compile_cuda(source, options).from_cache);  // replaced
  // Truncated: a write that never finished.
  fs::resize_file(entry, fs::file_size(entry) / 2);
  cuda::CompiledModule truncated = cuda::compile_cuda(source, options);
  CHECK_FALSE(truncated.from_cache);
  CHECK(truncated.cache_note == "corrupt cache entry (wrong length), recompiled");
  // Not an entry at all.
  std::ofstream(entry, std::ios::trunc) << "garbage";
  CHECK(cuda::compile_cuda(source, options).cache_note == "corrupt cache entry (bad header), recompiled");
  CHECK(cuda::compile_cuda(source, options).from_cache);
  // Another architecture is another entry, never this one.
  options.arch = "sm_80";
  CHECK_FALSE(cuda::compile_cuda(source, options).from_cache);
  fs::remove_all(dir);
}

TEST_CASE("a translation unit another program compiled comes from the disk cache") {
  // gpt2-block under autocast with its products' epilogues, then with its
  // attention as one kernel: the units before the attention's are the same
  // code, read from the cache; the attention's is new.
  auto workload = make_builtin_workload("gpt2-block", {{"batch", 2}, {"seq", 64}, {"channels", 128}, {"heads", 2}});
  REQUIRE(workload.ok());
  std::unique_ptr<Workload> stored = with_inputs_stored_in(std::move(*workload), DType::BF16);
  Context ctx;
  std::vector<Tensor> outputs = stored->step(ctx, bind_inputs(ctx, stored->make_inputs(1)));
  Graph graph = ctx.capture();
  auto units_of = [&](const char* strategy) {
    return generated(lowered(graph, fmt::format("autocast,decompose,canonicalize,cse,dce,fuse{{strategy={}}},lower,"
                                                "plan-memory",
                                                strategy)))
        .units;
  };
  fs::path dir = fs::temp_directory_path() / ("lazylab-unit-cache-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  cuda::CompilerOptions options;
  options.cache_dir = dir.string();
  for (const cuda::CompiledModule& unit : cuda::compile_units(units_of("gemm-epilogue"), options))
    CHECK_FALSE(unit.from_cache);
  std::vector<std::string> flash = units_of("flash-attention");
  std::vector<cuda::CompiledModule> compiled = cuda::compile_units(flash, options);
  size_t cached = 0;
  for (size_t i = 0; i < flash.size(); ++i) {
    CAPTURE(i);
    cached += compiled[i].from_cache;
    if (flash[i].find("namespace lazylab_attention16") != std::string::npos) CHECK_FALSE(compiled[i].from_cache);
  }
  CHECK(cached > 0);
  CHECK(cached < flash.size());
  fs::remove_all(dir);
}

TEST_CASE("a kernel that does not compile is an error with NVRTC's log and the saved source") {
  try {
    cuda::compile_cuda("extern \"C\" __global__ void broken(float* p) { p[0] = undeclared; }\n", no_cache());
    FAIL("compiled");
  } catch (const std::runtime_error& e) {
    std::string message = e.what();
    CHECK(message.find("NVRTC could not compile the generated kernels") == 0);
    CHECK(message.find("undeclared") != std::string::npos);
    size_t at = message.find("source saved as ") + 16;
    std::string path = message.substr(at, message.find(':', at) - at);
    CHECK(fs::exists(path));
    fs::remove(path);
  }
}

TEST_CASE("a cuBLASLt choice goes to disk and back whole, and a bad entry is never trusted") {
  fs::path dir = fs::temp_directory_path() / ("lazylab-algo-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  cuda::AlgoChoice timed;
  for (size_t w = 0; w < sizeof timed.algo.data / sizeof timed.algo.data[0]; ++w)
    timed.algo.data[w] = 0x0123456789abcdefULL * (w + 1);
  timed.chosen = 2;
  timed.candidate_ms = {1.402f, 1.3906f, 1.371f, -1.0f};
  CHECK(cuda::describe(timed) == "candidate 3 of 4, 1.3710 ms (timed at compile; all: 1.4020 1.3906 1.3710 failed ms)");
  cuda::AlgoChoice searched = timed;  // past 8 candidates: the fastest five and the heuristic's first
  searched.candidate_ms = {1.376f, 1.39f, 1.46f, 1.6f, 1.33f, -1.0f, 1.325f, 1.4f, 1.35f, 1.5f};
  searched.chosen = 6;
  CHECK(cuda::describe(searched) ==
        "candidate 7 of 10, 1.3250 ms (timed at compile; fastest: 1.3250 1.3300 1.3500 1.3760 1.3900 ms; the "
        "heuristic's first: 1.3760 ms)");
  searched.search_ms = 81.26f;  // how long the timing took, where this process timed it
  CHECK(cuda::describe(searched).starts_with("candidate 7 of 10, 1.3250 ms (timed at compile in 81.3 ms; fastest: "));
  searched.timed_alone = 4;  // a graph of many that failed: its candidates timed one by one, said so
  CHECK(
      cuda::describe(searched).starts_with("candidate 7 of 10, 1.3250 ms (timed at compile in 81.3 ms, 4 of them "
                                           "alone: their shared graph failed; fastest: "));
  std::string path = cuda::algo_choice_path(dir.string(), "8192 1024 4096 1024 0 0 0 0|NVIDIA H100|sm_90");
  CHECK(path != cuda::algo_choice_path(dir.string(), "8192 1024 4096 1024 0 0 1 0|NVIDIA H100|sm_90"));
  std::string why;
  CHECK_FALSE(cuda::load_algo_choice(path, why));
  CHECK(why == "not cached");
  cuda::store_algo_choice(path, timed);
  auto loaded = cuda::load_algo_choice(path, why);
  REQUIRE(loaded);
  CHECK(std::memcmp(&loaded->algo, &timed.algo, sizeof timed.algo) == 0);
  CHECK(loaded->chosen == 2);
  CHECK(loaded->candidate_ms == std::vector<float>{1.402f, 1.3906f, 1.371f, -1.0f});
  CHECK(loaded->source == cuda::AlgoChoice::Source::Disk);
  CHECK(cuda::describe(*loaded).ends_with("(from the disk cache; all: 1.4020 1.3906 1.3710 failed ms)"));
  // A compiled kernel's entry at that path is not a choice.
  std::ofstream(path, std::ios::trunc) << "garbage";
  CHECK_FALSE(cuda::load_algo_choice(path, why));
  CHECK(why == "corrupt cache entry (bad header)");
  // Payloads that are not choices: a chosen index past the candidates, a word short.
  CHECK_FALSE(cuda::parse_algo_choice("algo 1 2 3 4 5 6 7 8\nchosen 3\nms 1 2 3\n"));
  CHECK_FALSE(cuda::parse_algo_choice("algo 1 2 3 4 5 6 7\nchosen 0\nms 1\n"));
  CHECK(cuda::parse_algo_choice("algo 1 2 3 4 5 6 7 8\nchosen 0\nms 1\n"));
  cuda::AlgoChoice untimed{timed.algo, 0, {}, cuda::AlgoChoice::Source::Heuristic};
  CHECK(cuda::describe(untimed) == "the heuristic's first (not timed: operands too large, or no candidate ran)");
  fs::remove_all(dir);
}

TEST_CASE("a row's statistic broadcast along the row and stored in full is stored from the row's value") {
  // A layer norm's backward keeps rstd / n per row and hands it on in full
  // (found in a captured GPT training step): the 128-bit store must read the
  // one per-row register, there being no per-lane ones.
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(8 * 64, 1.0f), {8, 64});
  Tensor row_mean = mean(x, {1}, true);
  Tensor spread = broadcast_to(row_mean / ctx.scalar(3.0f), {8, 64});
  Tensor centered = x - spread;
  Module module = lowered(ctx.capture(), "fuse{strategy=producer-consumer},lower");
  cuda::ProgramCode code = generated(module);
  CHECK(count(code.source, "make_float4(v") >= 2);
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a per-channel value over NCHW is read in place, indexed by its row's group, and compiles") {
  // ABI 3.10's ROW_GROUP: [2, 3, 8, 5] has 48 rows of 5; channel c spans
  // rows 8c .. 8c + 7 of each image. In an elementwise kernel and in a row
  // reduction's prologue (batch norm's squared deviations).
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(2 * 3 * 8 * 5, 1.0f), {2, 3, 8, 5});
  Tensor channel_mean =
      broadcast_to(reshape(ctx.from_vector(std::vector<float>{1, 2, 3}, {3}), {1, 3, 1, 1}), {2, 3, 8, 5});
  Tensor centered = x - channel_mean;
  Tensor squares = sum(centered * centered, {3}, false);
  Tensor doubled = centered * ctx.scalar(2.0f);
  Module module = lowered(ctx.capture(), "canonicalize,fuse{strategy=producer-consumer},lower");
  cuda::ProgramCode code = generated(module);
  CHECK(count(code.source, "(r_0 / 8LL) % 3LL") + count(code.source, "(row / 8LL) % 3LL") >= 1);
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a depthwise convolution's epilogue computes it in place unless its output may take the input's memory") {
  // relu(depthwise(x)) has x's shape: donated, the output would be written
  // over windows that neighbouring threads still read, so the convolution
  // is stored first and the epilogue is a launch of its own. The host's
  // planner donates no input a window reads; the backend does not rely on it.
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(2 * 8 * 9 * 9, 0.5f), {2, 8, 9, 9});
  Tensor w = ctx.from_vector(std::vector<float>(8 * 9, 0.25f), {8, 1, 3, 3});
  Tensor y = relu(conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 8));
  (void)y;
  Module module = lowered(ctx.capture(), "canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory");
  auto launches = [&] {
    cuda::ProgramCode code = generated(module);
    REQUIRE(code.kernels.size() == 1);
    return code.kernels[0].launches.size();
  };
  CHECK(launches() == 1);
  CHECK(plan_output_donors(*module.program, module.graph) == std::vector<int64_t>{-1});
  module.program->output_donors = {0};  // x's buffer
  CHECK(launches() == 2);
  CHECK(cuda::compile_cuda(generated(module).source, no_cache()).cubin.size() > 100);
}

TEST_CASE("an update in place is generated without __restrict__ on the pointers it may alias, and compiles") {
  // SGD with momentum: w' = w - lr (0.9 v + g) takes w's memory where the
  // host donates it (ABI 3.8), so the kernel that reads w and writes w' may
  // not promise the compiler that they never alias. Without donors, every
  // pointer is __restrict__.
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(4096, 0.5f), {4096});
  Tensor w = ctx.from_vector(std::vector<float>(4096, 1.0f), {4096});
  Tensor velocity = ctx.from_vector(std::vector<float>(4096, 0.0f), {4096});
  Tensor updated_velocity = velocity * 0.9 + tanh(w * x) * x;
  Tensor updated_w = w - updated_velocity * 0.05;
  Module module = lowered(ctx.capture(), "fuse{strategy=producer-consumer},lower,plan-memory");
  std::string plain = generated(module).source;
  module.program->output_donors = plan_output_donors(*module.program, module.graph);
  REQUIRE(std::count(module.program->output_donors.begin(), module.program->output_donors.end(), -1) <
          static_cast<std::ptrdiff_t>(module.program->output_donors.size()));
  std::string donating = generated(module).source;
  CHECK(count(plain, "__restrict__") >= 5);
  CHECK(count(donating, "__restrict__") == 0);
  cuda::CompiledModule compiled = cuda::compile_cuda(donating, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a reduction of many elements into few outputs takes a block per output, and compiles") {
  // Batch norm's statistics: 8 sums of 16 x 32 x 32 elements; a thread per
  // output summed them one after another. A sum of 4 into 4,096 outputs
  // keeps a thread per output.
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(16 * 8 * 32 * 32, 1.0f), {16, 8, 32, 32});
  Tensor statistics = sum(x, {0, 2, 3});
  Tensor peaks = max(cast(x, DType::I64), {0, 2, 3});
  Tensor few = sum(reshape(x, {4, 4096 * 8}), {0});
  Module module = lowered(ctx.capture(), "lower");
  cuda::ProgramCode code = generated(module);
  CHECK(count(code.source, "lazylab_block_reduce(acc, shared, ") == 2);
  CHECK(count(code.source, "k < 4LL; ++k") == 1);
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a reduction of millions of elements into few outputs splits into chunks, and compiles") {
  // A loss's mean: 8M elements into one took 11 ms in one block on an
  // H200. Chunks of blocks leave partial sums in the device's scratch; a
  // second launch combines each output's in order. The reduced axes
  // innermost: an output's elements are read contiguously.
  Context ctx;
  Tensor x = ctx.from_vector(std::vector<float>(4096 * 2048, 1.0f), {4096, 2048});
  Tensor loss = mean(x * x);
  Tensor columns = sum(reshape(x, {1048576, 8}), {0});  // eight outputs, strided
  Module module = lowered(ctx.capture(), "lower");
  cuda::ProgramCode code = generated(module);
  int splits = 0;
  for (const cuda::KernelCode& kernel : code.kernels)
    for (size_t l = 0; l + 1 < kernel.launches.size(); ++l)
      if (kernel.launches[l].values.back() == cuda::kScratchValue) {
        CHECK(kernel.launches[l + 1].values.front() == cuda::kScratchValue);
        CHECK(kernel.launches[l + 1].function == kernel.launches[l].function + "_finish");
        ++splits;
      }
  CHECK(splits == 2);
  CHECK(count(code.source, "const long long at = base + k;") == 1);    // the mean's, not the columns'
  CHECK(count(code.source, "8388608LL, (chunk + 1) * 16384LL") == 1);  // 512 chunks of 16,384
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a column reduction reads each row's neighbouring outputs a warp at a time, and compiles") {
  // A bias's gradient, [rows, columns] summed over the rows: 32 columns a
  // block, 8 warps down the rows. 96 column groups fill the device in 11
  // chunks of rows, combined in order by a second launch; 1,032 groups take
  // one launch; 8 columns stay a block per output, split.
  Context ctx;
  Tensor rows = ctx.placeholder(TensorType{DType::F32, {16384, 3072}});
  Tensor wide = ctx.placeholder(TensorType{DType::F32, {256, 33000}});
  Tensor counts = ctx.placeholder(TensorType{DType::I32, {7, 300, 40}});
  Tensor bias = sum(rows, {0});
  Tensor peaks = max(wide, {0});
  Tensor totals = sum(counts, {0, 1});
  Tensor narrow = sum(reshape(rows, {6291456, 8}), {0});
  Module module = lowered(ctx.capture(), "lower");
  cuda::ProgramCode code = generated(module);
  CHECK(count(code.source, "__shared__ double partial[8][33];") == 2);
  CHECK(count(code.source, "__shared__ unsigned long long partial[8][33];") == 1);
  CHECK(count(code.source, "[k * 3072LL + t]") == 1);  // a warp's 32 columns of one row
  CHECK(count(code.source, "[k * 33000LL + t]") == 1);
  CHECK(count(code.source, "[k * 40LL + t]") == 1);
  CHECK(count(code.source, "const long long end = min(16384LL, (chunk + 1) * 1490LL);") == 1);  // 11 chunks
  CHECK(count(code.source, "const long long t = item / 1LL * 32 + lane") == 1);                 // wide: one launch
  std::vector<std::string> split;
  for (const cuda::KernelCode& kernel : code.kernels)
    for (const cuda::Launch& launch : kernel.launches)
      if (launch.function.ends_with("_finish")) split.push_back(launch.function);
  CHECK(split.size() == 3);  // rows, counts (2,100 rows in 32 chunks), narrow
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

TEST_CASE("a row kernel's first pass holds what its later passes would compute again at most cost") {
  // A softmax's backward with its probabilities computed again (min-cut's):
  // p = exp(s) / z, t = sum(g p), out = p (g - t). The first pass sums g p,
  // which no later pass reads; the last reads p, an exponential and a
  // division an element: p is held, and the exponential computed once.
  Context ctx;
  Tensor s = ctx.placeholder(TensorType{DType::F32, {64, 256}});
  Tensor g = ctx.placeholder(TensorType{DType::F32, {64, 256}});
  Tensor z = ctx.placeholder(TensorType{DType::F32, {64, 1}});
  Tensor p = exp(s) / broadcast_to(z, {64, 256});
  Tensor t = sum(g * p, {1}, true);
  Tensor out = p * (g - broadcast_to(t, {64, 256}));
  Module module = lowered(ctx.capture(), "fuse{strategy=producer-consumer},lower");
  cuda::ProgramCode code = generated(module);
  REQUIRE(code.kernels.size() == 1);
  CHECK(count(code.source, "expf(") == 4);  // in the first pass alone, a group of four elements
  CHECK(count(code.source, "    float c") == 1);
  CHECK(count(code.source, "[k][0];") == 1);  // and the last pass reads it
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
}

TEST_CASE("a copy keeping its innermost dim moves 16 bytes a thread, with 32-bit indices where they fit") {
  // Attention's heads back in place ([b, h, t, d] -> [b, t, h, d]): d
  // contiguous, four floats or eight bf16 a thread; a small transpose of
  // the innermost dim copies an element a thread; dims the source runs
  // through merge into one.
  Context ctx;
  Tensor heads = ctx.placeholder(TensorType{DType::F32, {16, 12, 1024, 64}});
  Tensor halves = ctx.placeholder(TensorType{DType::BF16, {2, 3, 5, 16}});
  Tensor square = ctx.placeholder(TensorType{DType::F32, {6, 7}});
  Tensor huge = ctx.placeholder(TensorType{DType::F32, {2, 1, (1 << 30) + 1}});
  Tensor keys = ctx.placeholder(TensorType{DType::F32, {16, 1024, 12, 64}});
  std::vector<Tensor> roots = {permute(heads, {0, 2, 1, 3}), permute(halves, {0, 2, 1, 3}), transpose(square, 0, 1),
                               permute(huge, {1, 0, 2}), permute(keys, {0, 2, 3, 1})};
  Module module = lowered(ctx.capture(), "lower");
  cuda::ProgramCode code = generated(module);
  CHECK(count(code.source, "reinterpret_cast<uint4*>") == 2);
  CHECK(count(code.source, "{ const unsigned c = rest % 16u; rest /= 16u; source += c * 1u; }") == 1);  // 64 / 4
  CHECK(count(code.source, "{ const unsigned c = rest % 2u; rest /= 2u; source += c * 1u; }") == 1);    // 16 / 8
  CHECK(count(code.source, "{ const unsigned c = rest % 6u; rest /= 6u; source += c * 7u; }") == 1);
  // 2 x (2^30 + 1) elements, one dim (the unit dims dropped, the rest
  // contiguous), not whole vectors: a float a thread, 64-bit indices.
  CHECK(count(code.source, "long long rest = (long long)t, source = 0LL;\n      source += rest * 1LL;") == 1);
  // k turned over ([b, t, h, d] -> [b, h, d, t]): the innermost dim moved (t,
  // its stride 768), h and d contiguous in the source (merged, 768):
  // 32 x 32 tiles through shared memory, 24 x 32 of them for each of 16 batches.
  CHECK(count(code.source, "__shared__ float tile[32][33];") == 1);
  CHECK(count(code.source, "(l0 + r) * 768LL];") == 1);
  CHECK(count(code.source, "long long b = item / 768LL") == 1);
  cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
  CHECK(compiled.cubin.size() > 100);
}

// mlp with its inputs and weights stored in bf16, under autocast: two
// products, each with its bias, the first with gelu.
Module autocast_mlp_in_bf16() {
  auto made = make_builtin_workload("mlp", kSmall.at("mlp"));
  REQUIRE(made.ok());
  std::unique_ptr<Workload> workload = with_inputs_stored_in(std::move(*made), DType::BF16);
  Context ctx;
  std::vector<Tensor> outputs = workload->step(ctx, bind_inputs(ctx, workload->make_inputs(1)));
  return lowered(ctx.capture(),
                 "autocast,decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory");
}

// A 16-bit elementwise kernel whose memory is all 16-bit moves eight values
// a thread (uint4); one that writes f32 moves four (float4, and uint2 for
// its 16-bit reads). The bias, a bf16 vector broadcast along the rows, is
// read as stored (no rounding of a value already bf16).
TEST_CASE("16-bit elementwise kernels move eight values a load and a store where no f32 is in memory") {
  cuda::ProgramCode code = generated(autocast_mlp_in_bf16());  // gelu-epilogue off, its default
  REQUIRE(code.kernels.size() == 2);
  const std::string& gelu = code.kernels[0].source;
  const std::string& widened = code.kernels[1].source;
  CHECK(count(gelu, "reinterpret_cast<const uint4*>") == 1);
  CHECK(count(gelu, "lazylab_pack8<lazylab_bf16>") == 1);
  CHECK(count(gelu, "t * 8 + 7") == 1);
  CHECK(count(gelu, "lazylab_round_bf16(((float)p") == 0);
  CHECK(count(widened, "reinterpret_cast<const uint2*>") == 1);
  CHECK(count(widened, "make_float4") == 1);
  CHECK(count(widened, "uint4") == 0);
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);
}

// A bf16 linear layer and gelu written out in autocast's form (product and
// bias widened, the gelu in f32, narrowed), with `cubic` as gelu's 0.044715.
Module linear_gelu(double cubic) {
  Context ctx;
  Tensor x = ctx.placeholder(TensorType{DType::BF16, {16, 32}});
  Tensor w = ctx.placeholder(TensorType{DType::BF16, {32, 24}});
  Tensor b = ctx.placeholder(TensorType{DType::BF16, {24}});
  Tensor h = cast(matmul(x, w), DType::F32) + cast(b, DType::F32);
  Tensor inner = (h + h * cubic * h * h) * formulas::kGeluScale;
  Tensor out = cast(h / (exp(inner * -2.0) + 1.0), DType::BF16);
  std::vector<Tensor> inputs;
  auto graph = ctx.capture(std::span<const Tensor>(&out, 1), inputs);
  REQUIRE(graph.ok());
  return lowered(std::move(*graph), "canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower");
}

// With the gelu-epilogue option, autocast's bias and gelu after a bf16
// product are cuBLASLt's GELU_BIAS epilogue: no generated kernel, the
// product written straight into the narrowed gelu's value; the second
// product's bias, added in f32 and written as f32, stays a generated
// epilogue. Not where the option is off (its default), where the gelu runs
// in bf16 itself (each op rounding), or where the function is another (a
// factor changed).
TEST_CASE("with gelu-epilogue, autocast's bias and gelu after a 16-bit product are cuBLASLt's GELU_BIAS") {
  cuda::CodegenOptions on;
  on.gelu_epilogue = true;
  Module module = autocast_mlp_in_bf16();
  ProgramView view(*module.program, module.graph);
  const lazylab_program& program = view.get();
  cuda::ProgramCode code = generated(module, on);
  REQUIRE(code.kernels.size() == 2);
  CHECK(code.kernels[0].gelu);
  CHECK(code.kernels[0].launches.empty());
  CHECK(program.values[code.kernels[0].bias].dtype == LAZYLAB_BF16);
  const lazylab_kernel& first = program.kernels[0];
  CHECK(code.kernels[0].product_out == first.ops[first.num_ops - 1].result);
  CHECK_FALSE(code.kernels[1].gelu);
  CHECK(code.kernels[1].launches.size() == 1);
  CHECK(cuda::compile_cuda(code.source, no_cache()).cubin.size() > 100);

  CHECK_FALSE(generated(module).kernels[0].gelu);

  Context narrow;
  Tensor x = narrow.placeholder(TensorType{DType::BF16, {16, 32}});
  Tensor w = narrow.placeholder(TensorType{DType::BF16, {32, 24}});
  Tensor b = narrow.placeholder(TensorType{DType::BF16, {24}});
  Tensor y = gelu(matmul(x, w) + b);
  std::vector<Tensor> inputs;
  auto graph = narrow.capture(std::span<const Tensor>(&y, 1), inputs);
  REQUIRE(graph.ok());
  Module in_bf16 = lowered(std::move(*graph), "decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower");
  CHECK(generated(in_bf16, on).kernels[0].product);
  CHECK_FALSE(generated(in_bf16, on).kernels[0].gelu);

  CHECK(generated(linear_gelu(formulas::kGeluCubic), on).kernels[0].gelu);
  // gpt2-block's MLP: the gelu read on through a reshape, written there.
  auto block = make_builtin_workload("gpt2-block", kSmall.at("gpt2-block"));
  REQUIRE(block.ok());
  std::unique_ptr<Workload> stored = with_inputs_stored_in(std::move(*block), DType::BF16);
  Context traced;
  std::vector<Tensor> outputs = stored->step(traced, bind_inputs(traced, stored->make_inputs(1)));
  Module gpt2 = lowered(traced.capture(),
                        "autocast,decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory");
  cuda::ProgramCode gpt2_code = generated(gpt2, on);
  CHECK(std::count_if(gpt2_code.kernels.begin(), gpt2_code.kernels.end(),
                      [](const cuda::KernelCode& k) { return k.gelu; }) == 1);
  CHECK(cuda::compile_cuda(gpt2_code.source, no_cache()).cubin.size() > 100);
  CHECK(generated(linear_gelu(0.045), on).kernels[0].product);
  CHECK_FALSE(generated(linear_gelu(0.045), on).kernels[0].gelu);
}

TEST_CASE("convolutions run as cuBLASLt products of their unfolded windows, epilogues after, and compile") {
  // A 3x3 strided, padded convolution of two images with a per-channel
  // bias, a residual and relu (ResNet's block) is one window kernel: its
  // windows unfolded into [C KH KW, OH OW] columns, one product of every
  // image's by the weights (one lhs for every batch), the epilogue after. A
  // pointwise convolution multiplies its input as it is; a depthwise one
  // (groups) runs as the direct kernel, its epilogue in the same launch.
  for (DType dtype : {DType::F32, DType::BF16}) {
    CAPTURE(dtype_name(dtype));
    Context ctx;
    Tensor x = cast(ctx.from_vector(std::vector<float>(2 * 8 * 9 * 9, 0.5f), {2, 8, 9, 9}), dtype);
    Tensor w = cast(ctx.from_vector(std::vector<float>(16 * 8 * 3 * 3, 0.25f), {16, 8, 3, 3}), dtype);
    Tensor bias = broadcast_to(reshape(cast(ctx.from_vector(std::vector<float>(16, 1.0f), {16}), dtype), {1, 16, 1, 1}),
                               {2, 16, 5, 5});
    Tensor skip = cast(ctx.from_vector(std::vector<float>(2 * 16 * 5 * 5, 2.0f), {2, 16, 5, 5}), dtype);
    Tensor block = relu(conv2d(x, w, {{2, 2}, {1, 1, 1, 1}, {1, 1}}) + bias + skip);
    Tensor pointwise = conv2d(block, cast(ctx.from_vector(std::vector<float>(4 * 16, 0.5f), {4, 16, 1, 1}), dtype));
    Tensor depthwise = relu(conv2d(x, cast(ctx.from_vector(std::vector<float>(8 * 9, 0.5f), {8, 1, 3, 3}), dtype),
                                   {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 8));
    // A depthwise weight gradient's shape: 3 x 3 outputs over 16 x 16 taps, a block per output.
    Tensor plane = cast(ctx.from_vector(std::vector<float>(2 * 8 * 18 * 18, 0.5f), {2, 8, 18, 18}), dtype);
    Tensor gradient_like =
        conv2d(plane, cast(ctx.from_vector(std::vector<float>(8 * 16 * 16, 0.5f), {8, 1, 16, 16}), dtype), {}, 8);
    (void)pointwise, (void)depthwise, (void)gradient_like;
    Module module = lowered(ctx.capture(), "canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory");
    cuda::ProgramCode code = generated(module);
    int products = 0, unfolded = 0, direct = 0;
    for (const cuda::KernelCode& kernel : code.kernels) {
      if (kernel.product && kernel.shared_lhs) {
        ++products;
        CHECK(kernel.contraction.batch == 2);
        unfolded += kernel.launches_before_product == 1;
        if (kernel.launches_before_product == 1) {
          CHECK(kernel.contraction.k == 8 * 3 * 3);
          CHECK(kernel.contraction.n == 5 * 5);
          CHECK(kernel.launches.size() == 2);  // the unfolding, then the bias, residual and relu
        } else {
          CHECK(kernel.contraction.k == 16);  // pointwise: the input is the matrix
        }
      }
      // The depthwise convolution's relu computes each element where it reads it: one launch.
      if (kernel.launches.size() == 1 && code.source.find(kernel.launches[0].function + "_at(p") != std::string::npos) {
        ++direct;
        CHECK(kernel.op_by_op.empty());
        CHECK(kernel.launches[0].values.size() == 3);  // x, the weights, the relu's result
      }
    }
    CHECK(products == 2);
    CHECK(unfolded == 1);
    CHECK(direct == 1);
    CHECK(count(code.source, "lazylab_block_reduce(acc, shared, LazylabSum())") == 1);
    CHECK(count(code.source, "const int t = (int)element;") == 1);  // 32-bit indices
    CHECK(count(code.source, "const int e = (int)t;") == 1);        // the unfolding's too
    CHECK(code.columns_bytes == 2 * 72 * 25 * (dtype == DType::F32 ? 4 : 2));
    CHECK(count(cuda::annotated_source(code), "(one for every batch)") == 2);
    cuda::CompiledModule compiled = cuda::compile_cuda(code.source, no_cache());
    CHECK(compiled.cubin.size() > 100);
  }
}
