#include "gradient_check.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "core/autodiff.h"
#include "core/engine.h"
#include "core/graph_builder.h"
#include "core/pass_manager.h"
#include "core/pipeline.h"
#include "core/tensor.h"
#include "core/verifier.h"
#include "runner/output_check.h"
#include "runner/workload.h"

namespace lazylab {
namespace {

constexpr int kElementsPerGraph = 3;

TensorType in_f64(TensorType type) {
  if (is_float(type.dtype)) type.dtype = DType::F64;
  return type;
}

// sum(root * w), w = 0.5 + sum over axes a of (0.3 + 0.1 a) iota(a): each
// element weighed apart, so a gradient sent to the wrong element shows.
Expected<NodeId> weighted_sum(GraphBuilder& b, NodeId root) {
  const TensorType type = b.type(root);
  std::optional<Error> error;
  auto add = [&](OpId op, Operands operands, const Attrs& attrs = {}, const TensorType* declared = nullptr) {
    auto id = error ? Expected<NodeId>(NodeId{0}) : b.add(op, std::move(operands), attrs, declared);
    if (!id) error = id.error();
    return id ? *id : NodeId{0};
  };
  NodeId weights = b.constant(0.5, type);
  Attrs all;
  for (int64_t axis = 0; axis < type.rank(); ++axis) {
    Attrs along;
    along[0].i = axis;
    NodeId iota = add(OpId::Iota, {}, along, &type);
    weights =
        add(OpId::Add, {weights, add(OpId::Mul, {iota, b.constant(0.3 + 0.1 * static_cast<double>(axis), type)})});
    all[0].ints.push_back(axis);
  }
  NodeId sum = add(OpId::Mul, {root, weights});
  if (type.rank() > 0) sum = add(OpId::ReduceSum, {sum}, all);
  if (error) return *error;
  return sum;
}

// `inputs` with element `element` of input `input` moved by `step`.
std::vector<HostTensor> moved(const std::vector<HostTensor>& inputs, size_t input, int64_t element, double step) {
  std::vector<HostTensor> result = inputs;
  auto buffer = std::make_shared<Buffer>(inputs[input].type.bytes());
  std::memcpy(buffer->data(), inputs[input].data->data(), buffer->bytes());
  reinterpret_cast<double*>(buffer->data())[element] += step;
  result[input].data = std::move(buffer);
  return result;
}

class Checker {
 public:
  Checker(const Graph& loss, const Graph& joint, Backend& interp)
      : loss_(loss), joint_(joint), engine_(lower(), interp) {}

  Expected<ReferenceOutputs> evaluate(const Graph& graph, const std::vector<HostTensor>& inputs) {
    Context context(engine_);
    std::vector<Tensor> bound = bind_inputs(context, inputs);
    auto outputs = context.call(graph, bound);
    if (!outputs) return outputs.error();
    return read_outputs(*outputs);
  }

  // The loss at `inputs` with one element moved; NaN where it fails.
  double loss_at(const std::vector<HostTensor>& inputs, size_t input, int64_t element, double step) {
    auto outputs = evaluate(loss_, moved(inputs, input, element, step));
    return outputs ? outputs->values[0][0] : std::nan("");
  }

  const Graph& loss() const { return loss_; }
  const Graph& joint() const { return joint_; }

 private:
  static Pipeline lower() { return *parse_pipeline("lower"); }

  const Graph& loss_;
  const Graph& joint_;
  Engine engine_;
};

// `graph` returning each of its live float values, and the factors of the
// derivatives that are infinite where their op is not differentiable:
// 1 / sqrt(x) for a sqrt, a^(b - 1) for a pow's base and log(a) for its
// exponent, where what they differentiate varies. Where one is not finite
// the loss is no smooth function there: a NaN that a relu or a comparison
// hides from the loss still poisons its gradient (as PyTorch's), sqrt(x - x)
// is constant but has no derivative at 0, a^b none in b for a <= 0.
Graph every_value(const Graph& graph) {
  Graph probe = graph;
  std::vector<bool> live = live_nodes(graph), varies(graph.size(), false);
  std::vector<NodeId> roots;
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node node = graph.node(id);  // a copy: adding nodes to the probe may move its nodes
    varies[id] = node.op == OpId::Parameter && is_float(node.type.dtype);
    for (NodeId operand : node.operands) varies[id] = varies[id] || varies[operand];
    if (!live[id] || !is_float(node.type.dtype) || node.type.num_elements() == 0) continue;
    roots.push_back(id);
    const TensorType& type = node.type;
    if (node.op == OpId::Sqrt && varies[node.operands[0]])
      roots.push_back(probe.add(OpId::Rsqrt, type, {node.operands[0]}));
    if (node.op == OpId::Pow && varies[node.operands[1]])
      roots.push_back(probe.add(OpId::Log, type, {node.operands[0]}));
    if (node.op == OpId::Pow && varies[node.operands[0]]) {
      Attrs one;
      one[0] = scalar_attr(type.dtype, 1);
      NodeId lower = probe.add(OpId::Sub, type, {node.operands[1], probe.add(OpId::Constant, type, {}, one)});
      roots.push_back(probe.add(OpId::Pow, type, {node.operands[0], lower}));
    }
  }
  probe.set_roots(std::move(roots));
  return probe;
}

bool all_finite(const ReferenceOutputs& outputs) {
  for (const std::vector<double>& values : outputs.values)
    for (double v : values)
      if (!std::isfinite(v)) return false;
  return true;
}

// Whether two estimates of one derivative agree: relatively, or within the
// rounding that differences of a loss of this size at this step carry.
bool agree(double a, double b, double loss, double h) {
  return std::fabs(a - b) <= 1e-4 * std::max(std::fabs(a), std::fabs(b)) + 1e-10 * (1 + std::fabs(loss)) / h;
}

}  // namespace

Expected<Graph> f64_loss_graph(const Graph& graph) {
  GraphBuilder b;
  std::vector<NodeId> mapped(graph.size());
  std::vector<bool> varies(graph.size(), false);  // depends on a float parameter
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    Operands operands;
    for (NodeId operand : node.operands) {
      operands.push_back(mapped[operand]);
      varies[id] = varies[id] || varies[operand];
    }
    if (node.op == OpId::Parameter) varies[id] = is_float(node.type.dtype);
    mapped[id] = b.add_typed(node.op, in_f64(node.type), operands, node.attrs);
  }
  std::optional<NodeId> loss;
  for (NodeId root : graph.roots()) {
    const TensorType& type = graph.node(root).type;
    if (!is_float(type.dtype) || !varies[root] || type.num_elements() == 0) continue;
    auto term = weighted_sum(b, mapped[root]);
    if (term && loss) term = b.add(OpId::Add, {*loss, *term});
    if (!term) return term.error();
    loss = *term;
  }
  if (!loss) return Graph{};
  b.graph().set_roots({*loss});
  Graph result = std::move(b.graph());
  if (auto problem = verify(result); !problem)
    return make_error("its f64 copy does not verify: " + problem.error().message);
  return result;
}

GradientCheck check_gradient(const Graph& graph, uint64_t seed, Backend& interp) {
  GradientCheck check;
  auto loss_graph = f64_loss_graph(graph);
  if (!loss_graph) return {false, 0, loss_graph.error().message};
  if (loss_graph->size() == 0) return check;
  Module module;
  module.graph = std::move(*loss_graph);
  if (auto decomposed = run_pipeline(*parse_pipeline("decompose{keep=fused-gradient}"), module); !decomposed)
    return {false, 0, "decompose: " + decomposed.error().message};
  auto joint = differentiate(module.graph, GradRequest{});
  if (!joint) {
    const std::string& message = joint.error().message;
    bool no_rule = message.find("no vector-Jacobian rule") != std::string::npos;
    return {false, 0, no_rule ? "" : message};
  }
  Checker checker(module.graph, *joint, interp);
  std::vector<HostTensor> inputs = make_graph_workload("fuzz-grad", module.graph)->make_inputs(seed);
  if (!checker.evaluate(module.graph, inputs)) return check;  // the f64 forward refuses them: nothing to say
  check.differentiated = true;
  auto at_inputs = checker.evaluate(*joint, inputs);
  if (!at_inputs) {  // where the forward runs, its joint graph must too
    check.problem = "the joint graph fails: " + at_inputs.error().message;
    return check;
  }
  const double loss = at_inputs->values[0][0];
  auto values = checker.evaluate(every_value(module.graph), inputs);
  if (!std::isfinite(loss) || !values || !all_finite(*values)) return check;
  std::vector<size_t> differentiable;  // float inputs, by ordinal: differentiate's gradients, in order
  for (size_t input = 0; input < inputs.size(); ++input)
    if (is_float(inputs[input].type.dtype)) differentiable.push_back(input);
  std::mt19937_64 rng(seed ^ 0x67726164);
  for (int k = 0; k < kElementsPerGraph && !differentiable.empty(); ++k) {
    size_t which = rng() % differentiable.size(), input = differentiable[which];
    if (inputs[input].type.num_elements() == 0) continue;
    int64_t element = static_cast<int64_t>(rng() % static_cast<uint64_t>(inputs[input].type.num_elements()));
    double x = reinterpret_cast<const double*>(inputs[input].data->data())[element];
    double h = 1e-5 * std::max(1.0, std::fabs(x));
    double near = (checker.loss_at(inputs, input, element, h) - checker.loss_at(inputs, input, element, -h)) / (2 * h);
    double far =
        (checker.loss_at(inputs, input, element, 2 * h) - checker.loss_at(inputs, input, element, -2 * h)) / (4 * h);
    if (!std::isfinite(near) || !std::isfinite(far) || !agree(near, far, loss, h)) continue;  // not smooth here
    double got = at_inputs->values[1 + which][static_cast<size_t>(element)];
    ++check.elements;
    if (!agree(got, near, loss, h)) {
      check.problem =
          fmt::format("d(loss)/d(parameter {})[{}] is {} by grad, {} by central differences (h {}, loss {})", input,
                      element, got, near, h, loss);
      return check;
    }
  }
  return check;
}

}  // namespace lazylab
