// The ops real networks need (erf, gather, pad, conv2d, max_pool2d,
// avg_pool2d) against hand-computed values through the interpreter, the cpu
// backend against the interpreter through every fusion strategy, and their
// verifier errors.
#include <cmath>
#include <functional>
#include <numeric>

#include "core/fusion_strategy.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

std::vector<float> iota_values(int64_t n, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = offset + scale * static_cast<float>(i);
  return v;
}

// Varied values: not symmetric, so a transposed or shifted window shows.
std::vector<float> wavy(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) + 0.01f * i;
  return v;
}

std::string error_of(const Tensor& t) {
  REQUIRE_FALSE(t.ok());
  return t.error()->message;
}

}  // namespace

TEST_CASE("erf") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({-2.0f, -0.5f, 0.0f, 0.75f}, {4});
  check_close(values(erf(x)), {std::erf(-2.0), std::erf(-0.5), 0.0, std::erf(0.75)});
}

TEST_CASE("gather picks slices along an axis; negative indices count from the end") {
  Session s;
  Tensor data = s.ctx.from_vector<float>(iota_values(6), {3, 2});
  Tensor rows = s.ctx.from_vector<int64_t>({2, 0, -1, 1}, {2, 2});
  Tensor picked = gather(data, rows, 0);
  CHECK(picked.type().shape == Dims{2, 2, 2});
  check_close(values(picked), {4, 5, 0, 1, 4, 5, 2, 3});
  Tensor columns = gather(data, s.ctx.from_vector<int32_t>({1}, {1}), 1);
  CHECK(columns.type().shape == Dims{3, 1});
  check_close(values(columns), {1, 3, 5});
  auto outside = gather(data, s.ctx.from_vector<int64_t>({3}, {1}), 0).to_vector<float>();
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message.find("gather: index 3 is out of range for a dimension of 3") != std::string::npos);
  CHECK(error_of(gather(data, s.ctx.from_vector<float>({0}, {1}), 0)) ==
        "gather: indices must be i32 or i64, got f32[1]");
}

TEST_CASE("scatter_add adds slices of updates where indices point, repeats and negatives included") {
  Session s;
  Tensor data = s.ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor rows = s.ctx.from_vector<int64_t>({2, 0, -1, 2}, {2, 2});  // row 2 three times, row 0 once
  Tensor updates = s.ctx.from_vector<float>({10, 20, 30, 40, 50, 60, 70, 80}, {2, 2, 2});
  check_close(values(scatter_add(data, rows, updates, 0)), {1 + 30, 2 + 40, 3, 4, 5 + 10 + 50 + 70, 6 + 20 + 60 + 80});
  Tensor columns = s.ctx.from_vector<int32_t>({1, 1}, {2});
  Tensor along = s.ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  check_close(values(scatter_add(data, columns, along, 1)), {1, 2 + 1 + 2, 3, 4 + 3 + 4, 5, 6 + 5 + 6});
  // Out of range: the reference's error, as gather's.
  auto outside = scatter_add(data, s.ctx.from_vector<int64_t>({3}, {1}), s.ctx.from_vector<float>({1, 1}, {1, 2}), 0)
                     .to_vector<float>();
  REQUIRE(!outside.ok());
  CHECK(outside.error().message.find("scatter_add: index 3 is out of range for a dimension of 3") != std::string::npos);
  CHECK(error_of(scatter_add(data, rows, data, 0)) ==
        "scatter_add: updates must be f32[2,2,2] (data f32[3,2], indices i64[2,2], axis 0), got f32[3,2]");
  CHECK(error_of(scatter_add(s.ctx.from_vector<int64_t>({1, 2}, {2}), s.ctx.from_vector<int64_t>({0}, {1}),
                             s.ctx.from_vector<int64_t>({1}, {1}), 0)) ==
        "scatter_add: needs floating-point data, got i64[2]");
}

TEST_CASE("pad surrounds each dim with the value") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor y = pad(x, {1, 0}, {0, 2}, -1.0);
  CHECK(y.type().shape == Dims{3, 4});
  check_close(values(y), {-1, -1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1});
  CHECK(error_of(pad(x, {-1, 0}, {0, 0})) == "pad: negative padding in dimension 0");
}

TEST_CASE("conv2d: stride, padding, dilation and groups") {
  Session s;
  Tensor x = s.ctx.from_vector<float>(iota_values(9, 1, 1), {1, 1, 3, 3});  // 1..9
  Tensor ones = s.ctx.from_vector<float>({1, 1, 1, 1}, {1, 1, 2, 2});
  check_close(values(conv2d(x, ones)), {12, 16, 24, 28});
  // Padding 1 all round, stride 2: windows at rows/cols -1 and 1.
  Tensor padded = conv2d(x, ones, {{2, 2}, {1, 1, 1, 1}, {1, 1}});
  CHECK(padded.type().shape == Dims{1, 1, 2, 2});
  check_close(values(padded), {1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9});
  // Dilation 2: the four corners.
  check_close(values(conv2d(x, ones, {{1, 1}, {0, 0, 0, 0}, {2, 2}})), {1 + 3 + 7 + 9});
  // Two groups: channel 0 to filter 0, channel 1 (x * 10) to filter 1.
  std::vector<float> two(iota_values(9, 1, 1));
  for (float v : iota_values(9, 10, 10)) two.push_back(v);
  Tensor pair = s.ctx.from_vector<float>(two, {1, 2, 3, 3});
  Tensor taps = s.ctx.from_vector<float>({1, 0, 0, 0, 0, 0, 0, 1}, {2, 1, 2, 2});
  check_close(values(conv2d(pair, taps, {}, 2)), {1, 2, 4, 5, 50, 60, 80, 90});
}

TEST_CASE("conv2d refuses weights that do not fit the input") {
  Session s;
  Tensor x = s.ctx.from_vector<float>(iota_values(18), {1, 2, 3, 3});
  Tensor w = s.ctx.from_vector<float>(iota_values(12), {3, 1, 2, 2});
  CHECK(error_of(conv2d(x, w, {}, 2)) == "conv2d: 2 groups do not split input f32[1,2,3,3] and weight f32[3,1,2,2]");
  Tensor big = s.ctx.from_vector<float>(iota_values(32), {1, 2, 4, 4});
  CHECK(error_of(conv2d(x, big)) == "conv2d: window of 4 does not fit the padded input 3");
  CHECK(error_of(conv2d(x, s.ctx.from_vector<float>(iota_values(8), {1, 2, 2, 2}), {{0, 1}})) ==
        "conv2d: kernel sizes, strides and dilations must be in [1, 2^31]");
}

TEST_CASE("max and average pooling; padding is never the maximum and counts only when asked") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 1, 3, 3});
  Window2d padded{{1, 1}, {1, 1, 0, 0}, {1, 1}};
  check_close(values(max_pool2d(x, {2, 2}, padded)), {-1, -1, -2, -1, -1, -2, -4, -4, -5});
  check_close(values(max_pool2d(x, {2, 2})), {-1, -2, -4, -5});
  check_close(values(avg_pool2d(x, {2, 2})), {-3, -4, -6, -7});
  // The corner window holds one input element and three padded positions.
  CHECK(values(avg_pool2d(x, {2, 2}, padded, false))[0] == doctest::Approx(-1.0));
  CHECK(values(avg_pool2d(x, {2, 2}, padded, true))[0] == doctest::Approx(-0.25));
  Tensor nan = s.ctx.from_vector<float>({1, NAN, 3, 4}, {1, 1, 2, 2});
  CHECK(std::isnan(values(max_pool2d(nan, {2, 2}))[0]));
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("lower"), **cpu);
  Context ctx(engine);
  Tensor nans = ctx.from_vector<float>({1, NAN, 3, 4, NAN, 2}, {1, 1, 2, 3});
  std::vector<float> pooled = values(max_pool2d(nans, {2, 2}, {{1, 1}, {0, 0, 0, 0}, {1, 1}}));
  CHECK((std::isnan(pooled[0]) && std::isnan(pooled[1])));  // cpu's pool plan: a NaN in the window wins
  // Equal values: the first in the window's order wins, as the reference's
  // (+0 before -0 stays +0; -0 before +0 stays -0).
  Tensor zeros = ctx.from_vector<float>({0.0f, -0.0f, 0.0f, 0.0f, 7.0f, 0.0f}, {1, 1, 2, 3});
  std::vector<float> firsts = values(max_pool2d(zeros, {1, 2}, {{1, 1}, {0, 0, 0, 0}, {1, 1}}));
  REQUIRE(firsts.size() == 4);
  CHECK((!std::signbit(firsts[0]) && std::signbit(firsts[1]) && firsts[2] == 7.0f && firsts[3] == 7.0f));
}

// Each case's outputs on cpu, through every fusion strategy, against interp.
TEST_CASE("cpu runs the network ops as the interpreter does, through every fusion strategy") {
  using Build = std::function<std::vector<Tensor>(Context&)>;
  const std::pair<const char*, Build> cases[] = {
      {"conv stride 2, pad, groups, bias and relu",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(2 * 4 * 7 * 6), {2, 4, 7, 6});
         Tensor w = c.from_vector<float>(wavy(6 * 2 * 3 * 3), {6, 2, 3, 3});
         Tensor b = c.from_vector<float>(wavy(6), {1, 6, 1, 1});
         return std::vector<Tensor>{relu(conv2d(x, w, {{2, 1}, {1, 0, 1, 2}, {1, 1}}, 2) + b)};
       }},
      {"three images unfolded side by side: stride, dilation, asymmetric pads, epilogue",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 4 * 9 * 7), {3, 4, 9, 7});
         Tensor w = c.from_vector<float>(wavy(5 * 4 * 3 * 2), {5, 4, 3, 2});
         Tensor b = c.from_vector<float>(wavy(5), {1, 5, 1, 1});
         return std::vector<Tensor>{relu(conv2d(x, w, {{2, 1}, {2, 0, 1, 3}, {2, 3}}) + b)};
       }},
      {"images unfolded side by side in two chunks (4 MiB of columns each), padded: one sgemm a chunk",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(12 * 32 * 20 * 20), {12, 32, 20, 20}) * 0.1;
         Tensor w = c.from_vector<float>(wavy(8 * 32 * 3 * 3), {8, 32, 3, 3});
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}})};
       }},
      {"stride 1, rows of whole registers: computed directly; a block of six filters and part of one, asymmetric pads",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 7 * 5 * 15), {3, 7, 5, 15});
         Tensor w = c.from_vector<float>(wavy(8 * 7 * 3 * 2), {8, 7, 3, 2});
         Tensor b = c.from_vector<float>(wavy(8), {1, 8, 1, 1});
         Tensor small = c.from_vector<float>(wavy(2 * 4 * 5 * 8), {2, 4, 5, 8});
         Tensor filters = c.from_vector<float>(wavy(3 * 4 * 3 * 3), {3, 4, 3, 3});
         // 10 registers of output a plane (tiles of 2), and 5 (2, 2, 1); 6 filters a block
         return std::vector<Tensor>{relu(conv2d(x, w, {{1, 1}, {2, 1, 0, 1}, {1, 1}}) + b),   // [3, 8, 5, 16]
                                    conv2d(small, filters, {{1, 1}, {1, 1, 1, 1}, {1, 1}})};  // [2, 3, 5, 8]
       }},
      {"one image: batch norm, residual and relu as the convolution's epilogue",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 9 * 8), {1, 3, 9, 8});
         Tensor w = c.from_vector<float>(wavy(5 * 3 * 3 * 3), {5, 3, 3, 3});
         Tensor scale = c.from_vector<float>(wavy(5), {5, 1, 1}), shift = c.from_vector<float>(wavy(5), {5, 1, 1});
         Tensor y = conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}});
         Tensor residual = c.from_vector<float>(wavy(5 * 9 * 8), {1, 5, 9, 8});
         return std::vector<Tensor>{relu(y * scale + shift + residual)};
       }},
      {"few output positions: a weight gradient's image-sized kernel, rows of 7, asymmetric pads",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(6 * 5 * 9 * 9), {6, 5, 9, 9});
         Tensor w = c.from_vector<float>(wavy(4 * 5 * 8 * 7), {4, 5, 8, 7});
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {1, 1, 0, 0}, {1, 1}})};  // 3x4 positions
       }},
      {"few output positions: a strided gradient as dilation, strides, and an epilogue",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(4 * 3 * 8 * 8), {4, 3, 8, 8});
         Tensor w = c.from_vector<float>(wavy(5 * 3 * 4 * 4), {5, 3, 4, 4});
         Tensor small = c.from_vector<float>(wavy(3 * 12 * 2 * 2), {3, 12, 2, 2});
         Tensor filters = c.from_vector<float>(wavy(7 * 12 * 3 * 3), {7, 12, 3, 3});
         Tensor b = c.from_vector<float>(wavy(7), {1, 7, 1, 1});
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {1, 1, 0, 0}, {2, 2}}),
                                    conv2d(x, w, {{2, 1}, {1, 1, 0, 2}, {2, 2}}),
                                    relu(conv2d(small, filters, {{1, 1}, {1, 1, 1, 1}, {1, 1}}) + b)};
       }},
      {"few output positions and a large kernel, each output one dot product: kernel rows of 16, 8, 4 and 2 floats",
       [](Context& c) {
         // 5 columns (tasks of 3 and 2), 6 filters (a block of four and part
         // of one), two registers a row, an epilogue; 160 rows of 8 (the sums
         // in three chunks); rows of 4 two to a register, 9 filters; rows of 2
         // four to a register, crossing channels, 7 columns (3, 3 and 1).
         // Each pads little enough for more than 90% of its taps to reach
         // the input (else FewPositionsConv takes it by images).
         Tensor wide = c.from_vector<float>(wavy(3 * 5 * 9 * 18), {3, 5, 9, 18});
         Tensor w16 = c.from_vector<float>(wavy(6 * 5 * 8 * 16), {6, 5, 8, 16});
         Tensor b = c.from_vector<float>(wavy(6), {1, 6, 1, 1});
         Tensor deep = c.from_vector<float>(wavy(2 * 20 * 9 * 9), {2, 20, 9, 9});
         Tensor w8 = c.from_vector<float>(wavy(3 * 20 * 8 * 8), {3, 20, 8, 8});
         Tensor small = c.from_vector<float>(wavy(4 * 3 * 5 * 4), {4, 3, 5, 4});
         Tensor w4 = c.from_vector<float>(wavy(9 * 3 * 4 * 4), {9, 3, 4, 4});
         Tensor tiny = c.from_vector<float>(wavy(5 * 6 * 9 * 7), {5, 6, 9, 7});
         Tensor w2 = c.from_vector<float>(wavy(3 * 6 * 8 * 2), {3, 6, 8, 2});
         return std::vector<Tensor>{relu(conv2d(wide, w16, {{1, 1}, {1, 1, 0, 1}, {1, 1}}) + b),  // [3, 6, 3, 5]
                                    conv2d(deep, w8, {{1, 1}, {0, 0, 0, 1}, {1, 1}}),             // [2, 3, 2, 3]
                                    conv2d(small, w4, {{1, 1}, {1, 0, 0, 0}, {1, 1}}),            // [4, 9, 3, 1]
                                    conv2d(tiny, w2, {{1, 1}, {0, 1, 0, 0}, {1, 1}})};            // [5, 3, 2, 7]
       }},
      {"few output positions at stride 1, the filters in the lanes: tiles of 6 to 1 positions or images, blocks of "
       "16 filters",
       [](Context& c) {
         // By images (most taps over the border): 16 positions of 3 images
         // and 20 filters (16 and 4), an epilogue; 2x2 of 2 images, 17
         // filters; a 2x2 kernel at 3x3 of 5 images; 2x2 of 7 images (6 and
         // 1) over 320 inside taps (the sums in two chunks); weight
         // gradients' large kernels over a padded border: 4x4 at 3x3 (69% of
         // the taps inside), 8x8 at 3x3 of 7 images and 18 filters (84%). By
         // positions:
         // one image at 4x4 (6, 6, 4) over its border; 5, 1 and 11 (6, 5)
         // positions.
         Tensor x = c.from_vector<float>(wavy(3 * 20 * 4 * 4), {3, 20, 4, 4});
         Tensor w = c.from_vector<float>(wavy(20 * 20 * 3 * 3), {20, 20, 3, 3});
         Tensor b = c.from_vector<float>(wavy(20), {1, 20, 1, 1});
         Tensor deep = c.from_vector<float>(wavy(2 * 40 * 2 * 2), {2, 40, 2, 2});
         Tensor w17 = c.from_vector<float>(wavy(17 * 40 * 3 * 3), {17, 40, 3, 3});
         Tensor tiny = c.from_vector<float>(wavy(5 * 6 * 2 * 2), {5, 6, 2, 2});
         Tensor w2 = c.from_vector<float>(wavy(3 * 6 * 2 * 2), {3, 6, 2, 2});
         Tensor row = c.from_vector<float>(wavy(2 * 8 * 3 * 13), {2, 8, 3, 13});
         Tensor w18 = c.from_vector<float>(wavy(18 * 8 * 3 * 3), {18, 8, 3, 3});
         Tensor five = c.from_vector<float>(wavy(2 * 8 * 3 * 7), {2, 8, 3, 7});
         Tensor one = c.from_vector<float>(wavy(2 * 8 * 3 * 3), {2, 8, 3, 3});
         Tensor seven = c.from_vector<float>(wavy(7 * 80 * 2 * 2), {7, 80, 2, 2});
         Tensor w80 = c.from_vector<float>(wavy(17 * 80 * 3 * 3), {17, 80, 3, 3});
         Tensor lone = c.from_vector<float>(wavy(20 * 4 * 4), {1, 20, 4, 4});
         Tensor small = c.from_vector<float>(wavy(4 * 3 * 4 * 4), {4, 3, 4, 4});
         Tensor w4 = c.from_vector<float>(wavy(9 * 3 * 4 * 4), {9, 3, 4, 4});
         Tensor eights = c.from_vector<float>(wavy(7 * 5 * 8 * 8), {7, 5, 8, 8});
         Tensor w8 = c.from_vector<float>(wavy(18 * 5 * 8 * 8), {18, 5, 8, 8});
         return std::vector<Tensor>{relu(conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}) + b),  // [3, 20, 4, 4]
                                    conv2d(seven, w80, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),      // [7, 17, 2, 2]
                                    conv2d(small, w4, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),       // [4, 9, 3, 3]
                                    conv2d(eights, w8, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),      // [7, 18, 3, 3]
                                    conv2d(lone, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),         // [1, 20, 4, 4]
                                    conv2d(deep, w17, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),       // [2, 17, 2, 2]
                                    conv2d(tiny, w2, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),        // [5, 3, 3, 3]
                                    conv2d(row, w18, {{1, 1}, {0, 0, 0, 0}, {1, 1}}),        // [2, 18, 1, 11]
                                    conv2d(five, w18, {{1, 1}, {0, 0, 0, 0}, {1, 1}}),       // [2, 18, 1, 5]
                                    conv2d(one, w18, {{1, 1}, {0, 0, 0, 0}, {1, 1}})};       // [2, 18, 1, 1]
       }},
      {"few output positions: no input channels (zeros)",
       [](Context& c) {
         Tensor x = c.from_vector<float>({}, {2, 0, 6, 6});
         Tensor w = c.from_vector<float>({}, {3, 0, 4, 4});
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {0, 0, 0, 0}, {1, 1}}) + 1.0};
       }},
      {"few output positions, too many taps to take directly (9 x 16 x 59520 products), windows packed as rows: "
       "channels in two chunks, summed",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(2 * 64 * 32 * 33), {2, 64, 32, 33}) * 0.1;
         Tensor w = c.from_vector<float>(wavy(16 * 64 * 30 * 31), {16, 64, 30, 31}) * 0.001;
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {0, 0, 0, 0}, {1, 1}})};  // 3x3
       }},
      {"few output positions, dilated (no direct kernel takes it): packed windows multiplied in bands of rows (70 "
       "filters) and of columns (16 images x 9 positions) on the threads",
       [](Context& c) {
         Tensor many = c.from_vector<float>(wavy(2 * 3 * 8 * 8), {2, 3, 8, 8});
         Tensor w70 = c.from_vector<float>(wavy(70 * 3 * 4 * 4), {70, 3, 4, 4});
         Tensor images = c.from_vector<float>(wavy(16 * 3 * 8 * 8), {16, 3, 8, 8});
         Tensor w8 = c.from_vector<float>(wavy(8 * 3 * 4 * 4), {8, 3, 4, 4});
         return std::vector<Tensor>{conv2d(many, w70, {{1, 1}, {1, 1, 1, 1}, {2, 2}}),    // [2, 70, 3, 3]
                                    conv2d(images, w8, {{1, 1}, {1, 1, 1, 1}, {2, 2}})};  // [16, 8, 3, 3]
       }},
      {"one input channel and no groups (a one-image weight gradient: the channels are its batch): products, "
       "not depthwise sums",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(6 * 1 * 9 * 9), {6, 1, 9, 9});
         Tensor g = c.from_vector<float>(wavy(5 * 1 * 8 * 8), {5, 1, 8, 8});
         Tensor g4 = c.from_vector<float>(wavy(5 * 1 * 4 * 4), {5, 1, 4, 4});
         Tensor w = c.from_vector<float>(wavy(7 * 1 * 3 * 3), {7, 1, 3, 3});
         return std::vector<Tensor>{conv2d(x, g, {{1, 1}, {1, 1, 1, 1}, {1, 1}}),         // [6, 5, 4, 4]
                                    conv2d(x, g4, {{1, 1}, {0, 0, 0, 0}, {2, 2}}) * 2.0,  // [6, 5, 3, 3], dilated
                                    relu(conv2d(x, w, {{2, 2}, {1, 1, 1, 1}, {1, 1}}))};  // [6, 7, 5, 5]
       }},
      {"depthwise convs, summed directly: strides 2, 3 and past the row, asymmetric pads, dilation, a channel "
       "multiplier",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(2 * 3 * 11 * 10), {2, 3, 11, 10});
         Tensor w = c.from_vector<float>(wavy(3 * 1 * 3 * 3), {3, 1, 3, 3});
         Tensor doubled = c.from_vector<float>(wavy(6 * 1 * 2 * 3), {6, 1, 2, 3});
         Tensor narrow = c.from_vector<float>(wavy(2 * 3 * 6 * 5), {2, 3, 6, 5});
         return std::vector<Tensor>{conv2d(x, w, {{2, 2}, {1, 0, 2, 1}, {1, 1}}, 3),
                                    conv2d(x, doubled, {{1, 3}, {0, 2, 1, 0}, {2, 1}}, 3),
                                    conv2d(x, w, {{3, 3}, {2, 1, 0, 2}, {1, 2}}, 3),        // columns in 3 phases
                                    conv2d(narrow, w, {{2, 7}, {1, 1, 1, 1}, {1, 1}}, 3)};  // a stride past the row
       }},
      {"direct convolutions over phase planes: strides 2 and 3, dilation, asymmetric pads, a 1x1 at stride 2 (one "
       "phase of four), 13 filters (a block of 8 and part of one), images",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(2 * 5 * 17 * 19), {2, 5, 17, 19});
         Tensor w = c.from_vector<float>(wavy(13 * 5 * 3 * 3), {13, 5, 3, 3});
         Tensor b = c.from_vector<float>(wavy(13), {1, 13, 1, 1});
         Tensor w1 = c.from_vector<float>(wavy(9 * 5 * 1 * 1), {9, 5, 1, 1});
         Tensor w5 = c.from_vector<float>(wavy(4 * 5 * 2 * 5), {4, 5, 2, 5});
         return std::vector<Tensor>{relu(conv2d(x, w, {{2, 2}, {1, 0, 2, 1}, {1, 1}}) + b),  // [2, 13, 9, 10]
                                    conv2d(x, w1, {{2, 2}, {0, 0, 0, 0}, {1, 1}}),           // [2, 9, 9, 10]
                                    conv2d(x, w5, {{3, 2}, {2, 1, 0, 3}, {2, 3}})};          // [2, 4, 6, 11]
       }},
      {"direct convolutions over phase planes: two bands of outputs, channels in chunks (the sums kept between "
       "them), batch norm, residual and relu applied to each band",
       [](Context& c) {
         // 30 rows of 32 columns: 60 registers (bands of 36); 40 channels
         // of 30x32 planes, chunks of 38 and 2.
         Tensor x = c.from_vector<float>(wavy(40 * 30 * 30), {1, 40, 30, 30}) * 0.1;
         Tensor w = c.from_vector<float>(wavy(11 * 40 * 3 * 3), {11, 40, 3, 3});
         Tensor scale = c.from_vector<float>(wavy(11), {11, 1, 1}), shift = c.from_vector<float>(wavy(11), {11, 1, 1});
         Tensor residual = c.from_vector<float>(wavy(11 * 30 * 30), {1, 11, 30, 30});
         return std::vector<Tensor>{relu(conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}) * scale + shift + residual)};
       }},
      {"1x1 convolutions read as they lie: outputs that end inside a register (35 and 15 an image), images",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(7 * 5 * 7), {1, 7, 5, 7});
         Tensor w = c.from_vector<float>(wavy(9 * 7), {9, 7, 1, 1});
         Tensor images = c.from_vector<float>(wavy(3 * 4 * 3 * 5), {3, 4, 3, 5});
         Tensor w4 = c.from_vector<float>(wavy(17 * 4), {17, 4, 1, 1});
         Tensor b = c.from_vector<float>(wavy(17), {1, 17, 1, 1});
         return std::vector<Tensor>{conv2d(x, w), relu(conv2d(images, w4) + b)};
       }},
      {"depthwise 3x3 convolutions in tiles of rows: stride 1 and 2, planes of more outputs than a block and of "
       "few (several a task), asymmetric pads, a channel multiplier, batch norm and relu6",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 70 * 66), {1, 3, 70, 66});
         Tensor w = c.from_vector<float>(wavy(3 * 1 * 3 * 3), {3, 1, 3, 3});
         Tensor scale = c.from_vector<float>(wavy(3), {3, 1, 1}) * 4.0;
         Tensor shift = c.from_vector<float>(wavy(3), {3, 1, 1});
         Tensor y = conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 3) * scale + shift;  // [1, 3, 70, 66]
         Tensor relu6 = minimum(relu(y), c.full(6.0, y.type()));
         Tensor small = c.from_vector<float>(wavy(2 * 10 * 9 * 13), {2, 10, 9, 13});
         Tensor doubled = c.from_vector<float>(wavy(20 * 1 * 3 * 3), {20, 1, 3, 3});
         return std::vector<Tensor>{relu6, conv2d(x, w, {{2, 2}, {1, 0, 1, 1}, {1, 1}}, 3),      // [1, 3, 35, 33]
                                    conv2d(small, doubled, {{2, 2}, {0, 1, 1, 0}, {1, 1}}, 10),  // [2, 20, 4, 6]
                                    conv2d(small, doubled, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 10)};
       }},
      {"depthwise 3x3 with an infinite weight: the padding takes no part (no NaN at the borders)",
       [](Context& c) {
         Tensor x = exp(c.from_vector<float>(wavy(2 * 6 * 7), {1, 2, 6, 7}));  // positive: inf times it stays inf
         std::vector<float> taps = wavy(2 * 9);
         taps[0] = INFINITY;  // filter 0's top left tap, over the padding for the first row and column
         Tensor w = c.from_vector<float>(taps, {2, 1, 3, 3});
         return std::vector<Tensor>{conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, 2),
                                    conv2d(x, w, {{2, 2}, {1, 1, 1, 1}, {1, 1}}, 2)};
       }},
      {"pointwise conv (the input is the matrix)",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 5 * 4), {1, 3, 5, 4});
         return std::vector<Tensor>{conv2d(x, c.from_vector<float>(wavy(8 * 3), {8, 3, 1, 1}))};
       }},
      {"dilated conv",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(2 * 9 * 9), {1, 2, 9, 9});
         return std::vector<Tensor>{
             conv2d(x, c.from_vector<float>(wavy(3 * 2 * 9), {3, 2, 3, 3}), {{1, 1}, {2, 2, 2, 2}, {2, 3}})};
       }},
      {"pools after an elementwise op",
       [](Context& c) {
         Tensor x = exp(c.from_vector<float>(wavy(2 * 3 * 8 * 8), {2, 3, 8, 8}));
         Window2d w{{2, 2}, {1, 1, 1, 1}, {1, 1}};
         return std::vector<Tensor>{max_pool2d(x, {3, 3}, w), avg_pool2d(x, {3, 3}, w, false) * 2.0,
                                    avg_pool2d(x, {3, 3}, w, true)};
       }},
      {"max pools of their own: stride, dilation, asymmetric pads, negative values",
       [](Context& c) {
         Tensor x = c.from_vector<float>(wavy(3 * 2 * 9 * 7), {3, 2, 9, 7}) - 5.0;
         return std::vector<Tensor>{max_pool2d(x, {3, 2}, {{2, 1}, {1, 0, 2, 1}, {2, 3}}),
                                    max_pool2d(x, {2, 2}, {{2, 2}, {0, 0, 0, 0}, {1, 1}})};
       }},
      {"an embedding's gradient: scatter_add with repeated and negative indices, after an elementwise op",
       [](Context& c) {
         Tensor table = c.from_vector<float>(wavy(10 * 6), {10, 6});
         Tensor ids = c.from_vector<int64_t>({3, 9, 0, 3, -2, 3}, {2, 3});
         Tensor grads = tanh(c.from_vector<float>(wavy(2 * 3 * 6), {2, 3, 6}));
         Tensor sideways = c.from_vector<int32_t>({5, 0, 5}, {3});
         return std::vector<Tensor>{scatter_add(table * 0.5, ids, grads, 0),
                                    scatter_add(table, sideways, c.from_vector<float>(wavy(10 * 3), {10, 3}), 1)};
       }},
      {"embedding lookup, pad and erf-gelu",
       [](Context& c) {
         Tensor table = c.from_vector<float>(wavy(10 * 6), {10, 6});
         Tensor ids = c.from_vector<int64_t>({3, 9, 0, 3, -2}, {1, 5});
         Tensor e = gather(table, ids, 0);
         Tensor gelu_exact = e * 0.5 * (erf(e / std::sqrt(2.0)) + 1.0);
         return std::vector<Tensor>{pad(gelu_exact, {0, 1, 2}, {1, 0, 0}, 0.5)};
       }},
  };
  // In f32, and in mixed precision: convolutions in bf16 (the interpreter
  // rounds each op's result to bf16 as the cpu does, summing in f64 where
  // the cpu sums in f32: within a bf16 step), every op but sums in f16.
  struct Precision {
    const char* passes;
    double epsilon;
  };
  const Precision precisions[] = {
      {"", 1e-4}, {"autocast,", 1.6e-2}, {"autocast{policy=low-but-reductions,dtype=f16},", 2e-3}};
  // The convolutions computed directly (phase_conv.h, depthwise_conv.h) and
  // as they were before (unfolded products, depthwise sums a tap at a
  // time), which builds without AVX-512 run.
  auto cpu = load_backend("cpu");
  auto unfolding = load_backend("cpu", "direct-conv=off");
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  REQUIRE_MESSAGE(unfolding.ok(), (unfolding.ok() ? "" : unfolding.error().message));
  for (const auto& [label, build] : cases)
    for (const auto& [passes, epsilon] : precisions) {
      std::string name = label;
      CAPTURE(name);
      CAPTURE(passes);
      Session reference(std::string(passes) + "decompose,lower");
      std::vector<std::vector<float>> want;
      for (const Tensor& t : build(reference.ctx)) want.push_back(values(cast(t, DType::F32)));
      for (const std::string& strategy : FusionStrategyRegistry::global().names())
        for (Backend* backend : {cpu->get(), unfolding->get()}) {
          CAPTURE(strategy);
          CAPTURE(backend == unfolding->get());
          Engine engine(pipeline(std::string(passes) + "decompose,canonicalize,cse,dce,fuse{strategy=" + strategy +
                                 "},lower,plan-memory"),
                        *backend);
          Context ctx(engine);
          for (int step = 0; step < 2; ++step) {  // the second step runs the cached executable
            std::vector<Tensor> got = build(ctx);
            for (size_t o = 0; o < want.size(); ++o) {
              CAPTURE(o);
              CAPTURE(step);
              std::vector<float> v = values(cast(got[o], DType::F32));
              REQUIRE(v.size() == want[o].size());
              // Relative 1e-4, and 1e-6 absolute: a sum of unit-sized products in
              // f32, in another order than the interpreter's, is that far off
              // where it cancels (a 2x2 kernel over 6 channels, -0.00141 off by
              // 2.4e-7).
              for (size_t i = 0; i < v.size(); ++i)  // (f16 overflows to the same infinity)
                REQUIRE((v[i] == want[o][i] || v[i] == doctest::Approx(want[o][i]).epsilon(epsilon).scale(1e-2)));
            }
          }
        }
    }
}

TEST_CASE("on cpu a convolution and its epilogue are one window kernel") {
  auto cpu = load_backend("cpu", "strict=1");
  REQUIRE(cpu.ok());
  Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse{strategy=gemm-epilogue},lower,plan-memory"), **cpu);
  Context ctx(engine);
  Tensor x = ctx.from_vector<float>(wavy(2 * 6 * 6), {1, 2, 6, 6});
  Tensor w = ctx.from_vector<float>(wavy(4 * 2 * 3 * 3), {4, 2, 3, 3});
  Tensor bias = ctx.from_vector<float>(wavy(4), {4, 1, 1});
  Tensor y = relu(conv2d(x, w, {{1, 1}, {1, 1, 1, 1}, {1, 1}}) + bias);
  REQUIRE(ctx.sync().ok());
  CHECK(engine.last_compiled()->num_kernels == 1);
  Session reference;
  Tensor want =
      relu(conv2d(reference.ctx.from_vector<float>(wavy(2 * 6 * 6), {1, 2, 6, 6}),
                  reference.ctx.from_vector<float>(wavy(4 * 2 * 3 * 3), {4, 2, 3, 3}), {{1, 1}, {1, 1, 1, 1}, {1, 1}}) +
           reference.ctx.from_vector<float>(wavy(4), {4, 1, 1}));
  std::vector<float> got = values(y), expected = values(want);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-4).scale(1e-4));
}

TEST_CASE("a conv2d counts two FLOPs per weight tap of each result element") {
  Session s("lower");
  Tensor x = s.ctx.from_vector<float>(wavy(1 * 4 * 5 * 5), {1, 4, 5, 5});
  Tensor w = s.ctx.from_vector<float>(wavy(6 * 2 * 3 * 3), {6, 2, 3, 3});
  Tensor y = conv2d(x, w, {}, 2);  // [1, 6, 3, 3], each from 2 x 3 x 3 taps
  REQUIRE(s.ctx.sync().ok());
  const ProgramCost& cost = s.engine.last_compiled()->cost;
  CHECK(cost.flops == 2 * (6 * 3 * 3) * (2 * 3 * 3));
  CHECK(cost.kernel_flops[0] == cost.flops);
}
