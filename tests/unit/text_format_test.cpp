// .lzir: round trips keep the hash; errors name line and column.
#include <fmt/format.h>

#include <limits>

#include "core/text_format.h"
#include "core/verifier.h"
#include "runner/workload.h"
#include "support.h"

using namespace lazylab;

namespace {

std::string parse_error(const std::string& text) {
  auto parsed = parse_graph(text, "t.lzir");
  REQUIRE_FALSE(parsed.ok());
  return parsed.error().message;
}

}  // namespace

TEST_CASE("every built-in workload prints and parses back to an equal graph") {
  for (const WorkloadInfo& info : builtin_workloads()) {
    CAPTURE(info.name);
    auto workload = make_builtin_workload(
        info.name, info.name == "gpt2-block" ? WorkloadParams{{"channels", 16}, {"heads", 2}, {"seq", 4}, {"batch", 1}}
                                             : WorkloadParams{});
    REQUIRE(workload.ok());
    Context ctx;
    std::vector<Tensor> inputs;
    for (const HostTensor& input : (*workload)->make_inputs(1))
      inputs.push_back(ctx.from_buffer(input.type, input.data));
    std::vector<Tensor> outputs = (*workload)->step(ctx, inputs);
    Graph graph = ctx.capture();
    REQUIRE(verify(graph).ok());
    std::string text = print_graph(graph);
    auto parsed = parse_graph(text);
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
    CHECK(parsed->graph.hash() == graph.hash());
    CHECK(structurally_equal(parsed->graph, graph));
    CHECK(print_graph(parsed->graph) == text);
  }
}

TEST_CASE("attributes of every kind round-trip, including inf and exact floats") {
  std::string text = R"(graph @g {
  %0 = parameter {ordinal = 0} : f32[2,3]
  %1 = constant {value = -inf} : f32[2,3]
  %2 = constant {value = 0.1} : f64[]
  %3 = max(%0, %1) : f32[2,3]
  %4 = reduce_sum(%3) {axes = [0, 1], keepdim = true} : f32[1,1]
  %5 = slice(%0) {start = [0, 1], limit = [2, 3], stride = [1, 2]} : f32[2,1]
  return %4, %5, %2
}
)";
  auto parsed = parse_graph(text);
  REQUIRE(parsed.ok());
  CHECK(print_graph(parsed->graph, "g") == text);
  CHECK(parsed->graph.node(2).attrs[0].f == 0.1);
}

TEST_CASE("integer constants hold every value of their type exactly, in the text and the verifier") {
  std::string text = R"(graph @g {
  %0 = constant {value = -9223372036854775808} : i64[2]
  %1 = constant {value = 9223372036854775807} : i64[2]
  %2 = constant {value = 9007199254740993} : i64[2]
  %3 = constant {value = -2147483648} : i32[2]
  %4 = constant {value = 1} : bool[2]
  %5 = parameter {ordinal = 0} : i64[2]
  %6 = pad(%5) {low = [1], high = [0], value = -9223372036854775807} : i64[3]
  return %0, %1, %2, %3, %4, %6
}
)";
  auto parsed = parse_graph(text);
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
  CHECK(print_graph(parsed->graph, "g") == text);
  CHECK(verify(parsed->graph).ok());
  const Graph& g = parsed->graph;
  CHECK(g.node(0).attrs[0].i == std::numeric_limits<int64_t>::min());
  CHECK(g.node(2).attrs[0].i == 9007199254740993);
  CHECK(g.node(2).attrs[0].f == 9007199254740992.0);  // the nearest double, for ABI 3.5 plugins
  CHECK(g.node(6).attrs[2].i == -9223372036854775807);
  // Two values one double apart are two constants.
  CHECK(g.node(2).hash != parse_graph("graph @g {\n  %0 = constant {value = 9007199254740992} : i64[2]\n  return %0\n}")
                              ->graph.node(0)
                              .hash);
  // An earlier printer's float spelling of an integer is read exactly.
  auto legacy = parse_graph("graph @g {\n  %0 = constant {value = 1e+16} : i64[1]\n  return %0\n}");
  REQUIRE(legacy.ok());
  CHECK(legacy->graph.node(0).attrs[0].i == 10000000000000000);
  for (auto [value, type] : {std::pair{"2147483648", "i32"},
                             {"3", "bool"},
                             {"1.5", "i64"},
                             {"9223372036854775808", "i64"},
                             {"inf", "i32"},
                             {"true", "i64"}}) {
    CAPTURE(value);
    CHECK(
        parse_error(fmt::format("graph @g {{\n  %0 = constant {{value = {}}} : {}[1]\n  return %0\n}}", value, type)) ==
        fmt::format("t.lzir:2:26: expected a value of {}, found '{}'", type, value));
  }
  // A node made around the builders (a plugin's pass, say) that holds a
  // value past its type is the verifier's to refuse.
  Graph bad;
  Attrs attrs;
  attrs[0].i = int64_t{1} << 40;
  attrs[0].f = static_cast<double>(attrs[0].i);
  bad.add(OpId::Constant, TensorType{DType::I32, {1}}, {}, attrs);
  bad.set_roots({0});
  REQUIRE_FALSE(verify(bad).ok());
  CHECK(verify(bad).error().message ==
        "verifier: %0 = constant {value = 1099511627776} : i32[1]: attribute 'value': 1099511627776 is not a value of "
        "i32");
}

TEST_CASE("names are free-form and comments are ignored") {
  auto parsed = parse_graph(
      "// leading comment\ngraph @n { %x = parameter {ordinal = 0} : i32[2] // trailing\n %double_x = add(%x, %x) : "
      "i32[2]\n return %double_x }");
  REQUIRE(parsed.ok());
  CHECK(parsed->name == "n");
  CHECK(parsed->graph.size() == 2);
}

TEST_CASE("parse errors name the line and column") {
  CHECK(parse_error("graph @g {\n  %0 = frobnicate : f32[1]\n  return %0\n}") == "t.lzir:2:8: unknown op 'frobnicate'");
  CHECK(parse_error("graph @g {\n  %0 = neg(%1) : f32[1]\n  return %0\n}") == "t.lzir:2:12: use of undefined value %1");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f33[1]\n  return %0\n}") ==
        "t.lzir:2:34: unknown dtype 'f33'");
  CHECK(parse_error("graph @g {\n  %0 = parameter : f32[1]\n  return %0\n}") ==
        "t.lzir:2:18: op 'parameter' needs attribute 'ordinal'");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = 0, axis = 1} : f32[1]\n  return %0\n}") ==
        "t.lzir:2:32: op 'parameter' has no attribute 'axis'");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = x} : f32[1]\n  return %0\n}") ==
        "t.lzir:2:29: expected an integer, found 'x'");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f32[1]\n  %0 = neg(%0) : f32[1]\n  return %0\n}") ==
        "t.lzir:3:3: value %0 defined twice");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f32[1]\n") ==
        "t.lzir:3:1: unexpected end of input inside graph");
  CHECK(parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f32[1]\n  return %0\n} extra") ==
        "t.lzir:4:3: unexpected text after the graph");
}

TEST_CASE("type errors in the text are reported at the op") {
  std::string message = parse_error(
      "graph @g {\n  %0 = parameter {ordinal = 0} : f32[2]\n  %1 = parameter {ordinal = 1} : f32[3]\n  %2 = add(%0, "
      "%1) : f32[2]\n  return %2\n}");
  CHECK(message == "t.lzir:4:8: add: operand types differ: f32[2] vs f32[3]");
  message = parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f32[2]\n  %1 = exp(%0) : f32[3]\n  return %1\n}");
  CHECK(message == "t.lzir:3:8: exp: declared type f32[3] but operands give f32[2]");
  message =
      parse_error("graph @g {\n  %0 = parameter {ordinal = 0} : f32[2]\n  %1 = reshape(%0) : f32[3]\n  return %1\n}");
  CHECK(message == "t.lzir:3:8: reshape: cannot reshape f32[2] to f32[3]");
}

TEST_CASE("a parsed file keeps line numbers when split") {
  auto parsed = parse_graph("graph @g {\n  %0 = nope : f32[1]\n  return %0 }", "f.lzir", 10);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().message == "f.lzir:11:8: unknown op 'nope'");
}

TEST_CASE("a shape whose size overflows is a parse error at its line") {
  CHECK(parse_error("graph @g {\n  %x = parameter {ordinal = 0} : f32[4294967296,4294967296]\n  return %x\n}\n") ==
        "t.lzir:2:8: parameter: f32[4294967296,4294967296] has more than 72057594037927936 bytes (2^56), the most a "
        "tensor may have");
}

// Found by the lzir-parser libFuzzer target: with a 0 dim last, the element
// count was 0 but the product before it overflowed int64 (UBSan).
TEST_CASE("an empty shape whose other dims overflow is a parse error too") {
  CHECK(parse_error("graph @g {\n  %x = parameter {ordinal = 0} : f32[4294967296,4294967296,0]\n  return %x\n}\n") ==
        "t.lzir:2:8: parameter: f32[4294967296,4294967296,0] has more than 72057594037927936 bytes (2^56), the most a "
        "tensor may have");
  auto empty = parse_graph("graph @g {\n  %x = parameter {ordinal = 0} : f32[1024,0,1024]\n  return %x\n}\n", "t.lzir");
  REQUIRE(empty.ok());
  CHECK(empty->graph.node(0).type.num_elements() == 0);
}
