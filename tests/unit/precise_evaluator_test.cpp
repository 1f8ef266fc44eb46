// The fuzzer's independent evaluator on graphs whose values are known by
// hand: if it shared a bug with the interpreter, these would catch it.
#include <cmath>
#include <cstring>

#include "core/text_format.h"
#include "fuzz/precise_evaluator.h"
#include "support.h"

using namespace lazylab;

namespace {

template <class T>
HostTensor tensor(DType dtype, Dims shape, std::vector<T> values) {
  auto buffer = std::make_shared<Buffer>(values.size() * sizeof(T));
  std::memcpy(buffer->data(), values.data(), values.size() * sizeof(T));
  return {TensorType{dtype, std::move(shape)}, std::move(buffer)};
}

Expected<ReferenceOutputs> evaluate(const std::string& body, const std::vector<HostTensor>& inputs) {
  auto parsed = parse_graph("graph @g {\n" + body + "}\n", "t.lzir");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  return evaluate_precisely(parsed->graph, inputs);
}

std::vector<double> values_of(const std::string& body, const std::vector<HostTensor>& inputs) {
  auto outputs = evaluate(body, inputs);
  REQUIRE_MESSAGE(outputs.ok(), outputs.error().message);
  return outputs->values.at(0);
}

}  // namespace

TEST_CASE("precise: a [1,3] row broadcast to [3,3] repeats the row") {
  auto x = tensor<float>(DType::F32, {1, 3}, {1, 2, 3});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : f32[1,3]\n"
                  "  %1 = broadcast(%0) {dims = [0, 1]} : f32[3,3]\n  return %1\n",
                  {x}) == std::vector<double>{1, 2, 3, 1, 2, 3, 1, 2, 3});
}

TEST_CASE("precise: reductions over a leading axis, keepdim, NaN") {
  auto x = tensor<float>(DType::F32, {2, 3}, {1, 2, 3, 10, 20, 30});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : f32[2,3]\n"
                  "  %1 = reduce_sum(%0) {axes = [0], keepdim = true} : f32[1,3]\n  return %1\n",
                  {x}) == std::vector<double>{11, 22, 33});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : f32[2,3]\n"
                  "  %1 = reduce_mean(%0) {axes = [1], keepdim = false} : f32[2]\n  return %1\n",
                  {x}) == std::vector<double>{2, 20});
  auto with_nan = tensor<float>(DType::F32, {3}, {1, NAN, 3});
  auto max = values_of(
      "  %0 = parameter {ordinal = 0} : f32[3]\n"
      "  %1 = reduce_max(%0) {axes = [0], keepdim = false} : f32[]\n  return %1\n",
      {with_nan});
  CHECK(std::isnan(max.at(0)));
}

TEST_CASE("precise: batched matmul and transpose") {
  auto a = tensor<float>(DType::F32, {2, 1, 2}, {1, 2, 3, 4});
  auto b = tensor<float>(DType::F32, {2, 2, 1}, {5, 6, 7, 8});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : f32[2,1,2]\n  %1 = parameter {ordinal = 1} : f32[2,2,1]\n"
                  "  %2 = matmul(%0, %1) : f32[2,1,1]\n  return %2\n",
                  {a, b}) == std::vector<double>{1 * 5 + 2 * 6, 3 * 7 + 4 * 8});
  auto m = tensor<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : f32[2,3]\n"
                  "  %1 = transpose(%0) {perm = [1, 0]} : f32[3,2]\n  return %1\n",
                  {m}) == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("precise: integers wrap and division by zero is an error") {
  auto x = tensor<int32_t>(DType::I32, {2}, {2147483647, -2147483647 - 1});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : i32[2]\n  %1 = constant {value = 1} : i32[2]\n"
                  "  %2 = add(%0, %1) : i32[2]\n  return %2\n",
                  {x}) == std::vector<double>{-2147483648.0, -2147483647.0});
  CHECK(values_of("  %0 = parameter {ordinal = 0} : i32[2]\n  %1 = neg(%0) : i32[2]\n  return %1\n", {x}) ==
        std::vector<double>{-2147483647.0, -2147483648.0});
  auto divided = evaluate(
      "  %0 = parameter {ordinal = 0} : i32[2]\n  %1 = constant {value = 0} : i32[2]\n"
      "  %2 = div(%0, %1) : i32[2]\n  return %2\n",
      {x});
  REQUIRE_FALSE(divided.ok());
  CHECK(divided.error().message == "integer division by zero");
}

TEST_CASE("precise: composites by their definitions") {
  auto x = tensor<float>(DType::F32, {1, 2}, {0, static_cast<float>(std::log(3.0))});
  auto softmax = values_of(
      "  %0 = parameter {ordinal = 0} : f32[1,2]\n"
      "  %1 = softmax(%0) {axis = 1} : f32[1,2]\n  return %1\n",
      {x});
  CHECK(softmax.at(0) == doctest::Approx(0.25).epsilon(1e-6));
  CHECK(softmax.at(1) == doctest::Approx(0.75).epsilon(1e-6));
  auto row = tensor<float>(DType::F32, {2}, {1, 3});
  auto w = tensor<float>(DType::F32, {2}, {2, 2});
  auto b = tensor<float>(DType::F32, {2}, {0.5, 0.5});
  auto normed = values_of(
      "  %0 = parameter {ordinal = 0} : f32[2]\n  %1 = parameter {ordinal = 1} : f32[2]\n"
      "  %2 = parameter {ordinal = 2} : f32[2]\n"
      "  %3 = layernorm(%0, %1, %2) {eps = 0} : f32[2]\n  return %3\n",
      {row, w, b});
  CHECK(normed == std::vector<double>{-1.5, 2.5});  // (x - 2) / 1 * 2 + 0.5
}
