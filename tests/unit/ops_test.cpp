// Op semantics against hand-computed values, through the interpreter.
#include <cmath>
#include <limits>

#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

TEST_CASE("elementwise unary ops") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({-2.0f, -0.5f, 0.25f, 4.0f}, {4});
  check_close(values(neg(x)), {2, 0.5, -0.25, -4});
  check_close(values(abs(x)), {2, 0.5, 0.25, 4});
  check_close(values(relu(x)), {0, 0, 0.25, 4});
  check_close(values(exp(x)), {std::exp(-2.0), std::exp(-0.5), std::exp(0.25), std::exp(4.0)});
  check_close(values(tanh(x)), {std::tanh(-2.0), std::tanh(-0.5), std::tanh(0.25), std::tanh(4.0)});
  check_close(values(sigmoid(x)),
              {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)), 1 / (1 + std::exp(-0.25)), 1 / (1 + std::exp(-4.0))});
  Tensor p = s.ctx.from_vector<float>({0.25f, 1.0f, 4.0f, 9.0f}, {4});
  check_close(values(sqrt(p)), {0.5, 1, 2, 3});
  check_close(values(rsqrt(p)), {2, 1, 0.5, 1.0 / 3});
  check_close(values(log(p)), {std::log(0.25), 0, std::log(4.0), std::log(9.0)});
  // gelu, tanh form: 0.5x(1 + tanh(0.7978845608(x + 0.044715x^3)))
  auto gelu_ref = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
  check_close(values(gelu(x)), {gelu_ref(-2), gelu_ref(-0.5), gelu_ref(0.25), gelu_ref(4)});
}

TEST_CASE("elementwise binary ops and comparisons") {
  Session s;
  Tensor a = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor b = s.ctx.from_vector<float>({4, 2, 1, 0.5}, {4});
  check_close(values(a + b), {5, 4, 4, 4.5});
  check_close(values(a - b), {-3, 0, 2, 3.5});
  check_close(values(a * b), {4, 4, 3, 2});
  check_close(values(a / b), {0.25, 1, 3, 8});
  check_close(values(pow(a, b)), {1, 4, 3, 2});
  check_close(values(maximum(a, b)), {4, 2, 3, 4});
  check_close(values(minimum(a, b)), {1, 2, 1, 0.5});
  CHECK(values<bool>(lt(a, b)) == std::vector<bool>{1, 0, 0, 0});
  CHECK(values<bool>(eq(a, b)) == std::vector<bool>{0, 1, 0, 0});
  CHECK(values<bool>(ge(a, b)) == std::vector<bool>{0, 1, 1, 1});
  check_close(values(where(gt(a, b), a, b)), {4, 2, 3, 4});
  check_close(values(2.0 - a), {1, 0, -1, -2});
}

TEST_CASE("integer ops are exact and integer division by zero is an error") {
  Session s;
  Tensor a = s.ctx.from_vector<int64_t>({7, -7, 9007199254740993LL}, {3});
  Tensor b = s.ctx.from_vector<int64_t>({2, 2, 1}, {3});
  CHECK(values<int64_t>(div(a, b)) == std::vector<int64_t>{3, -3, 9007199254740993LL});
  CHECK(values<int64_t>(a + b) == std::vector<int64_t>{9, -5, 9007199254740994LL});
  Tensor zero = s.ctx.from_vector<int64_t>({0, 1, 1}, {3});
  Tensor q = div(a, zero);
  auto v = q.to_vector<int64_t>();
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().message.find("division by zero") != std::string::npos);
}

TEST_CASE("integer overflow wraps, in the interpreter and in constant folding alike") {
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  for (const char* pipeline_text : {"lower", "canonicalize,lower"}) {
    CAPTURE(pipeline_text);
    Session s(pipeline_text);
    Tensor a = s.ctx.from_vector<int64_t>({lowest, lowest, 5}, {3});
    Tensor minus_one = s.ctx.from_vector<int64_t>({-1, -1, -1}, {3});
    // The one quotient that overflows (SIGFPE on x86 when computed in C).
    CHECK(values<int64_t>(div(a, minus_one)) == std::vector<int64_t>{lowest, lowest, -5});
    CHECK(values<int64_t>(neg(a)) == std::vector<int64_t>{lowest, lowest, -5});
    // A sum of 10^10 over 10^6 elements: 10^16 exceeds a double's exact
    // integers, so folding leaves it to the runtime; within them it folds.
    Tensor big = s.ctx.full(1e10, TensorType{DType::I64, {1000, 1000}});
    CHECK(values<int64_t>(sum(big)) == std::vector<int64_t>{10000000000000000LL});
    Tensor fits = s.ctx.full(3, TensorType{DType::I32, {1000, 1000}});
    CHECK(values<int32_t>(sum(fits)) == std::vector<int32_t>{3000000});
    Tensor wraps = s.ctx.full(3000, TensorType{DType::I32, {1000, 1000}});  // 3e9 wraps in 32 bits
    CHECK(values<int32_t>(sum(wraps)) == std::vector<int32_t>{static_cast<int32_t>(3000000000LL - 4294967296LL)});
  }
}

TEST_CASE("cast rounds toward zero into integers") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({-1.75f, 2.5f, 3.0f}, {3});
  CHECK(values<int32_t>(cast(x, DType::I32)) == std::vector<int32_t>{-1, 2, 3});
  check_close(values(cast(cast(x, DType::F64), DType::F32)), {-1.75, 2.5, 3.0});
}

TEST_CASE("layout ops: broadcast, reshape, transpose, slice, concat, iota") {
  Session s;
  Tensor m = s.ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_close(values(reshape(m, {3, 2})), {1, 2, 3, 4, 5, 6});
  check_close(values(transpose(m, 0, 1)), {1, 4, 2, 5, 3, 6});
  check_close(values(slice(m, {0, 1}, {2, 3})), {2, 3, 5, 6});
  check_close(values(slice(m, {0, 0}, {2, 3}, {1, 2})), {1, 3, 4, 6});
  check_close(values(concat({m, m * 10.0}, 0)), {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  check_close(values(concat({m, m}, 1)), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  Tensor row = s.ctx.from_vector<float>({10, 20, 30}, {3});
  check_close(values(broadcast_to(row, {2, 3})), {10, 20, 30, 10, 20, 30});
  Tensor column = s.ctx.from_vector<float>({1, 2}, {2, 1});
  check_close(values(broadcast_to(column, {2, 3})), {1, 1, 1, 2, 2, 2});
  CHECK(values<int32_t>(s.ctx.iota(TensorType{DType::I32, {2, 3}}, 1)) == std::vector<int32_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("reductions over any axes with keepdim") {
  Session s;
  Tensor m = s.ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_close(values(sum(m, {1})), {6, 15});
  check_close(values(sum(m, {0})), {5, 7, 9});
  check_close(values(sum(m)), {21});
  check_close(values(max(m, {1})), {3, 6});
  check_close(values(min(m, {0})), {1, 2, 3});
  check_close(values(mean(m, {-1})), {2, 5});
  Tensor kept = sum(m, {1}, true);
  CHECK(kept.shape() == Dims{2, 1});
  Tensor cube = s.ctx.from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  check_close(values(sum(cube, {0, 2})), {1 + 2 + 5 + 6, 3 + 4 + 7 + 8});
}

TEST_CASE("batched matmul") {
  Session s;
  Tensor a = s.ctx.from_vector<float>({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
  Tensor b = s.ctx.from_vector<float>({5, 6, 7, 8, 2, 3, 4, 5}, {2, 2, 2});
  check_close(values(matmul(a, b)), {19, 22, 43, 50, 2, 3, 4, 5});
  // A rank-2 right operand broadcasts over the batch.
  Tensor w = s.ctx.from_vector<float>({1, 0, 0, 2}, {2, 2});
  check_close(values(matmul(a, w)), {1, 4, 3, 8, 1, 0, 0, 2});
}

TEST_CASE("composites: softmax and layernorm match their definitions") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 1000, 1000, 1000}, {2, 3});
  double e1 = std::exp(-2.0), e2 = std::exp(-1.0), total = e1 + e2 + 1;
  check_close(values(softmax(x, -1)), {e1 / total, e2 / total, 1 / total, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  Tensor w = s.ctx.from_vector<float>({1, 2, 1}, {3});
  Tensor b = s.ctx.from_vector<float>({0, 0, 1}, {3});
  Tensor y = s.ctx.from_vector<float>({1, 2, 3}, {1, 3});
  double inv_std = 1 / std::sqrt(2.0 / 3 + 1e-5);
  check_close(values(layernorm(y, w, b, 1e-5)), {-inv_std, 0, inv_std + 1});
}

// The 16-bit floats compute in f64 and round each op's result into their
// format, ties to even; the 8-bit integers wrap. On interp and on cpu (its
// reference path) alike.
TEST_CASE("bf16 and f16 round each op's result; i8 and u8 wrap; interp and cpu agree bit for bit") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  for (Backend* backend : {interp.get(), cpu->get()}) {
    CAPTURE(backend->name());
    Engine engine(pipeline("decompose,canonicalize,fuse{strategy=producer-consumer},lower,plan-memory"), *backend);
    Context ctx(engine);
    Tensor one = ctx.from_vector<BFloat16>({BFloat16(1.0), BFloat16(1.0), BFloat16(-3.0)}, {3});
    Tensor step = ctx.from_vector<BFloat16>(
        {BFloat16(std::ldexp(1.0, -8)), BFloat16(3 * std::ldexp(1.0, -8)), BFloat16(0.5)}, {3});
    // 1 + 2^-8 is a tie: to 1; 1 + 3 * 2^-8: to 1 + 2^-6; -3 + 0.5 exactly.
    auto sum = (one + step).to_vector<BFloat16>();
    REQUIRE(sum.ok());
    CHECK((*sum)[0].bits == BFloat16(1.0).bits);
    CHECK((*sum)[1].bits == BFloat16(1.0 + std::ldexp(1.0, -6)).bits);
    CHECK(static_cast<double>((*sum)[2]) == -2.5);
    // f16 overflows to infinity past 65504 and keeps NaN.
    Tensor big = ctx.from_vector<Float16>({Float16(60000.0), Float16(1.0)}, {2});
    auto doubled = (big * 2.0).to_vector<Float16>();
    REQUIRE(doubled.ok());
    CHECK(std::isinf(static_cast<double>((*doubled)[0])));
    CHECK(static_cast<double>((*doubled)[1]) == 2.0);
    auto wrapped_u8 =
        (ctx.from_vector<uint8_t>({200, 7}, {2}) + ctx.from_vector<uint8_t>({100, 1}, {2})).to_vector<uint8_t>();
    REQUIRE(wrapped_u8.ok());
    CHECK(*wrapped_u8 == std::vector<uint8_t>{44, 8});
    auto wrapped_i8 = (ctx.from_vector<int8_t>({100, -100}, {2}) * 2).to_vector<int8_t>();
    REQUIRE(wrapped_i8.ok());
    CHECK(*wrapped_i8 == std::vector<int8_t>{-56, 56});
    // A softmax of bf16 sums in f32 (decompose) and rounds once: its three
    // equal entries are bf16's nearest third.
    Tensor x = ctx.from_vector<BFloat16>({BFloat16(2.0), BFloat16(2.0), BFloat16(2.0)}, {1, 3});
    auto third = softmax(x, 1).to_vector<BFloat16>();
    REQUIRE(third.ok());
    for (BFloat16 v : *third) CHECK(v.bits == BFloat16(1.0 / 3.0).bits);
  }
}
