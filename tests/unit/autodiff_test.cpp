// Reverse-mode gradients (core/autodiff.h) against central finite
// differences in f64 on the interpreter: every vector-Jacobian rule, through
// broadcasts, reductions, products and layout ops, and the suite's mlp with
// a squared-error loss through `decompose` (gelu) and the `grad` pass.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "core/autodiff.h"
#include "core/pass_manager.h"
#include "core/pipeline.h"
#include "core/tensor_ops.h"
#include "support.h"

namespace lazylab::testing {
namespace {

using Values = std::vector<double>;

// The graph a function of placeholders of `shapes` (f64) computes, its loss first.
Graph traced(const std::vector<Dims>& shapes, const std::function<std::vector<Tensor>(std::vector<Tensor>&)>& f) {
  Context ctx;
  std::vector<Tensor> inputs;
  for (const Dims& shape : shapes) inputs.push_back(ctx.placeholder(TensorType{DType::F64, shape}));
  std::vector<Tensor> roots = f(inputs);
  std::vector<Tensor> bound;
  auto graph = ctx.capture(roots, bound);
  REQUIRE_MESSAGE(graph.ok(), (graph.ok() ? "" : graph.error().message));
  return std::move(*graph);
}

// Every root of `graph` at `inputs`, on the interpreter after `pipeline_text`.
std::vector<Values> evaluate(const Graph& graph, const std::vector<Values>& inputs,
                             const std::string& pipeline_text = "lower") {
  auto backend = interp_backend();
  Engine engine(pipeline(pipeline_text), *backend);
  Context ctx(engine);
  std::vector<Tensor> bound;
  std::vector<NodeId> parameters = graph.parameters();
  for (size_t i = 0; i < parameters.size(); ++i)
    bound.push_back(ctx.from_vector<double>(inputs[i], graph.node(parameters[i]).type.shape));
  auto outputs = ctx.call(graph, bound);
  REQUIRE_MESSAGE(outputs.ok(), (outputs.ok() ? "" : outputs.error().message));
  std::vector<Values> results;
  for (const Tensor& t : *outputs) results.push_back(values<double>(t));
  return results;
}

// Inputs for `graph`'s parameters (by ordinal, the order of their first
// use, not of the placeholders), drawn from [low, high).
std::vector<Values> draws(const Graph& graph, uint32_t seed, double low = -1.5, double high = 1.5) {
  std::vector<Dims> shapes;
  for (NodeId parameter : graph.parameters()) shapes.push_back(graph.node(parameter).type.shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(low, high);
  std::vector<Values> inputs;
  for (const Dims& shape : shapes) {
    Values v(TensorType{DType::F64, shape}.num_elements());
    for (double& x : v) x = u(rng);
    inputs.push_back(std::move(v));
  }
  return inputs;
}

// The gradient of root 0 with respect to every parameter, by the `grad`
// transformation, against central differences of the loss at each element.
void check_gradients(const Graph& forward, const std::vector<Values>& inputs,
                     const std::string& pipeline_text = "lower") {
  auto joint = differentiate(forward, GradRequest{});
  REQUIRE_MESSAGE(joint.ok(), (joint.ok() ? "" : joint.error().message));
  std::vector<Values> outputs = evaluate(*joint, inputs, pipeline_text);
  size_t first_gradient = forward.roots().size();
  REQUIRE(outputs.size() == first_gradient + inputs.size());
  for (size_t p = 0; p < inputs.size(); ++p) {
    for (size_t i = 0; i < inputs[p].size(); ++i) {
      double h = 1e-6 * std::max(1.0, std::fabs(inputs[p][i]));
      std::vector<Values> plus = inputs, minus = inputs;
      plus[p][i] += h;
      minus[p][i] -= h;
      double difference =
          (evaluate(forward, plus, pipeline_text)[0][0] - evaluate(forward, minus, pipeline_text)[0][0]) / (2 * h);
      CAPTURE(p);
      CAPTURE(i);
      // Central differences lose about 2e-16 |loss| / h to rounding: the
      // absolute part of the tolerance is 45 times that.
      double got = outputs[first_gradient + p][i];
      CHECK(std::fabs(got - difference) <= 1e-6 * std::fabs(difference) + 1e-8 * (1 + std::fabs(outputs[0][0])));
    }
  }
}

// A loss of one value: the sum of `y` weighted by fixed, uneven weights (so
// each element's gradient differs), made of iotas (a constant, not a
// parameter of the graph).
Tensor weighted_sum(const Tensor& y) {
  Tensor weights = y.context().full(0.5, y.type());
  for (int64_t axis = 0; axis < y.type().rank(); ++axis)
    weights = weights + y.context().iota(y.type(), axis) * (0.3 + 0.1 * static_cast<double>(axis));
  return sum(y * weights);
}

}  // namespace

TEST_CASE("grad: every elementwise derivative against central differences") {
  Graph unary = traced({{2, 3}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor positive = x * x + 0.5;
    Tensor y = exp(x) + log(positive) + sqrt(positive) + rsqrt(positive) + tanh(x) + sigmoid(x) + relu(x) + erf(x) +
               abs(x) + neg(x) * 0.5;
    return std::vector<Tensor>{weighted_sum(y)};
  });
  check_gradients(unary, draws(unary, 1));
  Graph binary = traced({{2, 3}, {2, 3}}, [](std::vector<Tensor>& in) {
    Tensor a = in[0], b = in[1];
    Tensor y = a * b + a / (b * b + 1.0) - b + pow(a * a + 0.25, b) + maximum(a, b) + minimum(a * 2.0, b);
    return std::vector<Tensor>{weighted_sum(y)};
  });
  check_gradients(binary, draws(binary, 2));
  Graph selected = traced({{2, 3}, {2, 3}}, [](std::vector<Tensor>& in) {
    Tensor y = where(gt(in[0], in[1]), in[0] * in[1], exp(in[1])) + cast(cast(in[0], DType::F32), DType::F64) * 0.0;
    return std::vector<Tensor>{weighted_sum(y)};
  });
  check_gradients(selected, draws(selected, 3));
}

TEST_CASE("grad: broadcasts, reductions and products against central differences") {
  Graph reduced = traced({{2, 3, 4}, {4}, {3, 1}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0] + in[1] + in[2];  // broadcasts: new leading axes, and a size-1 axis
    return std::vector<Tensor>{weighted_sum(sum(x * x, {2})) + weighted_sum(mean(x, {1})) + weighted_sum(max(x, {0})) +
                               weighted_sum(min(x, {2}, true)) + mean(x)};
  });
  check_gradients(reduced, draws(reduced, 4));
  Graph products = traced({{2, 3, 4}, {2, 4, 5}, {3, 4}, {4, 2}}, [](std::vector<Tensor>& in) {
    return std::vector<Tensor>{weighted_sum(matmul(in[0], in[1])) + weighted_sum(matmul(in[2], in[3]))};
  });
  check_gradients(products, draws(products, 5));
}

TEST_CASE("grad: layout ops against central differences") {
  Graph layout = traced({{2, 3, 4}, {2, 2, 4}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0], z = in[1];
    Tensor y = permute(x, {2, 0, 1});                          // [4, 2, 3]
    Tensor r = reshape(y, {8, 3});                             // [8, 3]
    Tensor s = slice(x, {0, 1, 1}, {2, 3, 3});                 // [2, 2, 2]
    Tensor c = concat({x, z}, 1);                              // [2, 5, 4]
    Tensor p = pad(transpose(x, 1, 2), {1, 0, 0}, {0, 2, 1});  // [3, 6, 4]
    // Rows taken twice, from the end, and not at all: their gradients add, or are 0.
    std::vector<Tensor> rows;  // constants, not a parameter of the graph
    for (int64_t row : {2, -1, 0, 2}) rows.push_back(x.context().full_integer(row, TensorType{DType::I64, {1}}));
    Tensor gathered = gather(x, concat(rows, 0), 1);  // [2, 4, 4]
    return std::vector<Tensor>{weighted_sum(r * r) + weighted_sum(exp(s)) + weighted_sum(c * c) + weighted_sum(p) +
                               weighted_sum(gathered * gathered)};
  });
  check_gradients(layout, draws(layout, 6));
}

TEST_CASE("grad: strided slices and scatter_add against central differences") {
  Graph strided = traced({{5, 7, 4}, {5, 3, 4}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0], u = in[1];
    // Strides that end on x's last element and short of it, and a stride past the extent.
    Tensor a = slice(x, {0, 1, 0}, {5, 7, 4}, {2, 3, 1});  // [3, 2, 4]
    Tensor b = slice(x, {1, 0, 1}, {4, 6, 4}, {2, 4, 5});  // [2, 2, 1]
    // Indices repeated, so updates add up at a row, and rows no update reaches.
    std::vector<Tensor> rows;
    for (int64_t row : {6, 2, 6}) rows.push_back(x.context().full_integer(row, TensorType{DType::I64, {1}}));
    Tensor scattered = scatter_add(x * x, concat(rows, 0), exp(u), 1);  // [5, 7, 4]
    return std::vector<Tensor>{weighted_sum(a * a) + weighted_sum(exp(b)) + weighted_sum(scattered * scattered)};
  });
  check_gradients(strided, draws(strided, 7));
}

// Slices side by side (attention's q, k and v cut from one product): their
// cotangents join as one concatenation, or one pad of it where they leave a
// margin; slices that overlap, leave a gap or differ on two axes add pads.
TEST_CASE("grad: the cotangents of slices side by side are one concatenation") {
  auto joins = [](const Graph& joint) {  // those the roots read
    std::vector<bool> live = live_nodes(joint);
    size_t concats = 0, pads = 0;
    for (NodeId id = 0; id < joint.size(); ++id) {
      concats += live[id] && joint.node(id).op == OpId::Concat;
      pads += live[id] && joint.node(id).op == OpId::Pad;
    }
    return std::pair{concats, pads};
  };
  Graph thirds = traced({{2, 3, 12}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor q = slice(x, {0, 0, 0}, {2, 3, 4}), k = slice(x, {0, 0, 4}, {2, 3, 8}), v = slice(x, {0, 0, 8}, {2, 3, 12});
    return std::vector<Tensor>{weighted_sum(exp(v) * 0.5 + k * k + tanh(q))};
  });
  check_gradients(thirds, draws(thirds, 14));
  auto joint = differentiate(thirds, GradRequest{});
  REQUIRE(joint.ok());
  CHECK(joins(*joint) == std::pair<size_t, size_t>{1, 0});
  Graph margins = traced({{4, 9}}, [](std::vector<Tensor>& in) {
    Tensor x = in[0];
    // Overlapping, on two axes (traced first, so differentiated after a and b,
    // which join: a share joins the cotangent so far where that is a pad).
    Tensor c = slice(x, {0, 0}, {2, 2}), d = slice(x, {1, 1}, {4, 3});
    Tensor a = slice(x, {1, 2}, {3, 5}), b = slice(x, {1, 5}, {3, 6});  // side by side, inside a margin
    return std::vector<Tensor>{weighted_sum(a * a) + weighted_sum(exp(b)) + weighted_sum(c * 3.0) +
                               weighted_sum(d * d)};
  });
  check_gradients(margins, draws(margins, 15));
  joint = differentiate(margins, GradRequest{});
  REQUIRE(joint.ok());
  CHECK(joins(*joint) == std::pair<size_t, size_t>{1, 3});  // a and b's pad of their concatenation; c's, d's
}

TEST_CASE("grad: conv2d against central differences, strided, padded, dilated and grouped") {
  struct Case {
    Dims x, w;
    Window2d window;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {}, 1},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {{2, 1}, {1, 0, 1, 1}, {1, 2}}, 1},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {{2, 2}, {1, 1, 0, 0}, {2, 1}}, 1},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {{3, 2}, {2, 1, 2, 0}, {1, 1}}, 1},
      {{2, 4, 7, 6}, {6, 2, 3, 2}, {{2, 1}, {1, 1, 1, 0}, {1, 1}}, 2},  // two groups
      {{2, 3, 6, 5}, {3, 1, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}}, 3},  // depthwise, as MobileNetV2's
      {{1, 2, 4, 5}, {3, 2, 1, 2}, {{1, 2}, {2, 1, 3, 2}, {1, 1}}, 1},  // pads past the window
  };
  for (const Case& c : cases) {
    CAPTURE(c.window.strides[0]);
    CAPTURE(c.window.pads[0]);
    CAPTURE(c.window.dilations[0]);
    CAPTURE(c.groups);
    Graph convolved = traced({c.x, c.w}, [&](std::vector<Tensor>& in) {
      return std::vector<Tensor>{weighted_sum(conv2d(in[0], in[1], c.window, c.groups))};
    });
    check_gradients(convolved, draws(convolved, 8));
  }
}

TEST_CASE("grad: avg_pool2d and max_pool2d against central differences, strided, padded and dilated") {
  struct Case {
    bool max;
    std::vector<int64_t> kernel;
    Window2d window;
    bool count_include_pad = false;
  };
  const std::vector<Case> cases = {
      {false, {2, 2}, {{2, 2}, {0, 0, 0, 0}, {1, 1}}},
      {false, {3, 2}, {{2, 1}, {1, 0, 1, 1}, {1, 1}}, false},  // windows over the padding count what they cover
      {false, {3, 2}, {{2, 1}, {1, 0, 1, 1}, {1, 1}}, true},   // ... or the whole window
      {true, {2, 2}, {{2, 2}, {0, 0, 0, 0}, {1, 1}}},
      {true, {3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}}},         // ResNet-18's stem pool
      {true, {2, 3}, {{1, 2}, {1, 1, 0, 0}, {2, 1}}},         // dilated
      {false, {1, 2}, {{1, 1}, {0, 1, 0, 1}, {1, 1}}, true},  // a pad past the window, counted
  };
  for (const Case& c : cases) {
    CAPTURE(c.max);
    CAPTURE(c.kernel[0]);
    CAPTURE(c.window.strides[0]);
    CAPTURE(c.window.pads[0]);
    CAPTURE(c.count_include_pad);
    Graph pooled = traced({{2, 3, 7, 6}}, [&](std::vector<Tensor>& in) {
      Tensor y =
          c.max ? max_pool2d(in[0], c.kernel, c.window) : avg_pool2d(in[0], c.kernel, c.window, c.count_include_pad);
      return std::vector<Tensor>{weighted_sum(y)};
    });
    check_gradients(pooled, draws(pooled, 9));
  }
}

// Softmax kept whole has a fused rule, p (g - sum(g p)): along either axis,
// masked to -inf as attention's causal scores are (a masked element's
// gradient 0), evaluated whole and decomposed; no reduce_max in the joint
// graph but the forward's.
TEST_CASE("grad: softmax's fused rule against central differences, masked, along either axis") {
  Graph forward = traced({{3, 5}, {3, 5}}, [](std::vector<Tensor>& in) {
    Context& ctx = in[0].context();
    TensorType type{DType::F64, {3, 5}};
    Tensor causal = ge(ctx.iota(TensorType{DType::I32, {3, 5}}, 0), ctx.iota(TensorType{DType::I32, {3, 5}}, 1));
    Tensor scores = where(causal, in[0] * in[1], full_like(in[0], -std::numeric_limits<double>::infinity()));
    Tensor y = softmax(scores, 1) * 2.0 + softmax(in[0] + in[1], 0);
    return std::vector<Tensor>{weighted_sum(y * y)};
  });
  check_gradients(forward, draws(forward, 12));
  check_gradients(forward, draws(forward, 13), "decompose,lower");
  auto joint = differentiate(forward, GradRequest{});
  REQUIRE(joint.ok());
  size_t maxima = 0, softmaxes = 0;
  for (const Node& node : joint->nodes()) {
    maxima += node.op == OpId::ReduceMax;
    softmaxes += node.op == OpId::Softmax;
  }
  CHECK(maxima == 0);
  CHECK(softmaxes == 2);
}

TEST_CASE("grad: the mlp's squared error through decompose and the grad pass against central differences") {
  Graph forward = traced({{3, 4}, {4, 6}, {6}, {6, 4}, {4}, {3, 4}}, [](std::vector<Tensor>& in) {
    Tensor out = matmul(gelu(matmul(in[0], in[1]) + in[2]), in[3]) + in[4];
    Tensor error = out - in[5];
    return std::vector<Tensor>{mean(error * error), softmax(out, 1), layernorm(out, in[4], in[4])};
  });
  Module module;
  module.graph = forward;
  auto decomposed = parse_pipeline("decompose");
  REQUIRE(decomposed.ok());
  REQUIRE(run_pipeline(*decomposed, module).ok());
  Graph primitives = module.graph;
  check_gradients(primitives, draws(primitives, 7));
  // The pass: gradients of parameters 1 and 3 (the weights) only, after the roots.
  auto with_grad = parse_pipeline("decompose,grad{wrt=1:3}");
  REQUIRE(with_grad.ok());
  Module joint;
  joint.graph = forward;
  REQUIRE(run_pipeline(*with_grad, joint).ok());
  REQUIRE(joint.graph.roots().size() == forward.roots().size() + 2);
  CHECK(joint.graph.node(joint.graph.roots()[3]).type == forward.node(forward.parameters()[1]).type);
  CHECK(joint.graph.node(joint.graph.roots()[4]).type == forward.node(forward.parameters()[3]).type);
  // Layernorm must be decomposed first (softmax and gelu have fused rules).
  Graph normalized = traced({{3, 4}, {4}, {4}}, [](std::vector<Tensor>& in) {
    return std::vector<Tensor>{weighted_sum(layernorm(in[0], in[1], in[2]))};
  });
  auto undecomposed = differentiate(normalized, GradRequest{});
  REQUIRE_FALSE(undecomposed.ok());
  CHECK(undecomposed.error().message ==
        "grad: 'layernorm' is differentiated through its decomposition: run decompose "
        "(decompose{keep=fused-gradient} keeps softmax and gelu, whose rules are fused) before grad");
  // The mlp's gelu whole: its fused rule against central differences too.
  check_gradients(forward, draws(forward, 8));
  auto not_scalar = differentiate(primitives, GradRequest{1, {}});
  REQUIRE_FALSE(not_scalar.ok());
  CHECK(not_scalar.error().message == "grad: root 1 is f64[3,4], not a float scalar to differentiate");
}

}  // namespace lazylab::testing

namespace lazylab::testing {

// grad() on traced tensors: the mlp's squared error with respect to its
// weights, against central differences computed through the same API; an
// input the loss does not read gets zeros; a computed tensor is an error.
TEST_CASE("grad of traced tensors: the mlp's weights against central differences, through Context") {
  const std::vector<Dims> shapes = {{3, 4}, {4, 6}, {6}, {6, 4}, {4}, {3, 4}, {2}};
  std::vector<Values> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::mt19937 rng(static_cast<uint32_t>(11 + i));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Values v(TensorType{DType::F64, shapes[i]}.num_elements());
    for (double& x : v) x = u(rng);
    inputs.push_back(std::move(v));
  }
  auto backend = interp_backend();
  Engine engine(pipeline("decompose,canonicalize,cse,dce,lower"), *backend);
  auto loss_of = [&](Context& ctx, const std::vector<Values>& at, std::vector<Tensor>& bound) {
    bound.clear();
    for (size_t i = 0; i < shapes.size(); ++i) bound.push_back(ctx.from_vector<double>(at[i], shapes[i]));
    Tensor out = matmul(gelu(matmul(bound[0], bound[1]) + bound[2]), bound[3]) + bound[4];
    Tensor error = out - bound[5];
    return mean(error * error);
  };
  Context ctx(engine);
  std::vector<Tensor> bound;
  Tensor loss = loss_of(ctx, inputs, bound);
  std::vector<Tensor> weights = {bound[1], bound[2], bound[3], bound[4], bound[6]};
  auto gradients = grad(loss, weights);
  REQUIRE_MESSAGE(gradients.ok(), (gradients.ok() ? "" : gradients.error().message));
  REQUIRE(gradients->size() == weights.size());
  const std::vector<size_t> ordinals = {1, 2, 3, 4};
  for (size_t w = 0; w < ordinals.size(); ++w) {
    Values got = values<double>((*gradients)[w]);
    size_t p = ordinals[w];
    REQUIRE(got.size() == inputs[p].size());
    for (size_t i = 0; i < inputs[p].size(); ++i) {
      std::vector<Values> plus = inputs, minus = inputs;
      plus[p][i] += 1e-6;
      minus[p][i] -= 1e-6;
      Context probe(engine);
      std::vector<Tensor> unused;
      double up = values<double>(loss_of(probe, plus, unused))[0];
      double down = values<double>(loss_of(probe, minus, unused))[0];
      CAPTURE(p);
      CAPTURE(i);
      CHECK(got[i] == doctest::Approx((up - down) / 2e-6).epsilon(1e-6).scale(1e-6));
    }
  }
  CHECK(values<double>((*gradients)[4]) == Values{0, 0});  // the loss does not read it
  auto read_already = grad(loss, weights);
  REQUIRE_FALSE(read_already.ok());
  CHECK(read_already.error().message.find("the loss is computed already") != std::string::npos);
  Context again(engine);
  Tensor pending = loss_of(again, inputs, bound);
  auto computed = grad(pending, std::vector<Tensor>{bound[1] * 2.0});
  REQUIRE_FALSE(computed.ok());
  CHECK(computed.error().message ==
        "grad: tensor 0 of wrt (f64[4,6]) is computed in this trace, not an input of it: gradients are taken with "
        "respect to inputs (from_vector, from_buffer, or a result after sync)");
}

// grad() keeps softmax and gelu whole for their fused rules but records
// primitives only: the gradient of a loss whose forward tensors are gone
// runs on the cpu under a pipeline without decompose (which cannot run a
// composite), as the interpreter computes it.
TEST_CASE("grad of traced tensors records primitives only: the cpu runs it without decompose") {
  auto gradient_on = [](Backend& backend) {
    Engine engine(pipeline("lower"), backend);
    Context ctx(engine);
    Tensor x = ctx.from_vector<double>({0.5, -1.0, 2.0, 0.25, 1.5, -0.75}, {2, 3});
    Tensor w = ctx.from_vector<double>({1.0, -0.5, 0.25, 0.75, 0.5, -1.25, 2.0, 0.125, -0.375}, {3, 3});
    auto gradients = grad(sum(softmax(matmul(x, w), 1) * gelu(x) * 3.0), std::vector<Tensor>{w});
    REQUIRE_MESSAGE(gradients.ok(), (gradients.ok() ? "" : gradients.error().message));
    return values<double>((*gradients)[0]);
  };
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  auto interp = interp_backend();
  Values want = gradient_on(*interp), got = gradient_on(**cpu);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace lazylab::testing
