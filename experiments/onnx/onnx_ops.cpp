// Each ONNX op the importer implements (opsets 13-17), as lazylab nodes:
// elementwise ops broadcast NumPy-style first, shape operands are read at
// import, and ops lazylab has no row for are built from the ones it has.
#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "core/tensor_ops.h"
#include "onnx_node.h"

namespace lazylab::onnx_import_detail {
namespace {

Converter unary(OpId op) {
  return [op](OnnxNode& node) -> Status {
    auto x = node.input(0);
    if (!x) return x.error();
    auto y = node.add(op, {*x});
    if (!y) return y.error();
    return node.set_output(0, *y);
  };
}

// Two or more operands (Max, Min, Sum take any number), folded left.
Converter binary(OpId op) {
  return [op](OnnxNode& node) -> Status {
    std::vector<NodeId> operands;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      auto x = node.input(i);
      if (!x) return x.error();
      operands.push_back(*x);
    }
    if (operands.empty()) return node.invalid("has no inputs");
    auto widened = node.broadcast_together(operands);
    if (!widened) return widened.error();
    NodeId result = (*widened)[0];
    for (size_t k = 1; k < widened->size(); ++k) {
      auto next = node.add(op, {result, (*widened)[k]});
      if (!next) return next.error();
      result = *next;
    }
    return node.set_output(0, result);
  };
}

Status identity(OnnxNode& node) {
  if (const NamedTensor* known = node.find_known(0)) return node.set_known_output(0, *known);
  auto x = node.input(0);
  if (!x) return x.error();
  return node.set_output(0, *x);
}

Status reciprocal(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  auto y = node.add(OpId::Div, {node.splat(1.0, node.type(*x)), *x});
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Status leaky_relu(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  TensorType t = node.type(*x);  // a copy: adding nodes moves the graph's
  auto scaled = node.add(OpId::Mul, {*x, node.splat(node.attr_float("alpha", 0.01), t)});
  if (!scaled) return scaled.error();
  auto positive = node.add(OpId::Ge, {*x, node.splat(0.0, t)});
  if (!positive) return positive.error();
  auto y = node.add(OpId::Select, {*positive, *x, *scaled});
  if (!y) return y.error();
  return node.set_output(0, *y);
}

// Clip: min and max as optional inputs (opset 11 on).
Status clip(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  NodeId y = *x;
  for (auto [index, op] : {std::pair{size_t{1}, OpId::Max}, std::pair{size_t{2}, OpId::Min}}) {
    if (!node.has_input(index)) continue;
    auto bound = node.input(index);
    if (!bound) return bound.error();
    auto widened = node.broadcast(*bound, node.type(y).shape);
    if (!widened) return widened.error();
    auto next = node.add(op, {y, *widened});
    if (!next) return next.error();
    y = *next;
  }
  return node.set_output(0, y);
}

// Pow's exponent may have another type than its base: it is cast to the
// base's (lazylab's pow takes one floating-point type).
Status power(OnnxNode& node) {
  auto base = node.input(0), exponent = node.input(1);
  if (!base) return base.error();
  if (!exponent) return exponent.error();
  DType dtype = node.type(*base).dtype;
  if (!is_float(dtype)) return node.unsupported(fmt::format("Pow of an integer base ({})", dtype_name(dtype)));
  NodeId e = *exponent;
  if (node.type(e).dtype != dtype) {
    TensorType declared{dtype, node.type(e).shape};
    auto cast_exponent = node.add(OpId::Cast, {e}, {}, &declared);
    if (!cast_exponent) return cast_exponent.error();
    e = *cast_exponent;
  }
  auto widened = node.broadcast_together({*base, e});
  if (!widened) return widened.error();
  auto y = node.add(OpId::Pow, {(*widened)[0], (*widened)[1]});
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Status where(OnnxNode& node) {
  std::vector<NodeId> operands;
  for (size_t i = 0; i < 3; ++i) {
    auto x = node.input(i);
    if (!x) return x.error();
    operands.push_back(*x);
  }
  auto widened = node.broadcast_together(operands);
  if (!widened) return widened.error();
  auto y = node.add(OpId::Select, {(*widened)[0], (*widened)[1], (*widened)[2]});
  if (!y) return y.error();
  return node.set_output(0, *y);
}

// ONNX MatMul is NumPy's: a 1-D operand gains a dim that the result drops,
// and batch dims broadcast.
Status matmul(OnnxNode& node) {
  auto a = node.input(0), b = node.input(1);
  if (!a) return a.error();
  if (!b) return b.error();
  Dims sa = node.type(*a).shape, sb = node.type(*b).shape;
  if (sa.empty() || sb.empty()) return node.invalid("MatMul needs operands of rank 1 or more");
  bool vector_a = sa.size() == 1, vector_b = sb.size() == 1;
  if (vector_a) sa.insert(sa.begin(), 1);
  if (vector_b) sb.push_back(1);
  Dims batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  auto batch = broadcast_shapes(batch_a, batch_b);
  if (!batch) return node.invalid(batch.error().message);
  Dims full_a = *batch, full_b = *batch;
  full_a.insert(full_a.end(), sa.end() - 2, sa.end());
  full_b.insert(full_b.end(), sb.end() - 2, sb.end());
  Dims ra(batch_a), rb(batch_b);
  ra.insert(ra.end(), sa.end() - 2, sa.end());
  rb.insert(rb.end(), sb.end() - 2, sb.end());
  auto lhs = node.reshape(*a, ra), rhs = node.reshape(*b, rb);
  if (!lhs) return lhs.error();
  if (!rhs) return rhs.error();
  auto wide_lhs = node.broadcast(*lhs, full_a), wide_rhs = node.broadcast(*rhs, full_b);
  if (!wide_lhs) return wide_lhs.error();
  if (!wide_rhs) return wide_rhs.error();
  auto product = node.add(OpId::Matmul, {*wide_lhs, *wide_rhs});
  if (!product) return product.error();
  Dims out = node.type(*product).shape;
  if (vector_b) out.pop_back();
  if (vector_a) out.erase(out.end() - (vector_b ? 1 : 2));
  auto y = node.reshape(*product, out);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Expected<NodeId> transpose_2d(OnnxNode& node, NodeId id) {
  Attrs attrs;
  attrs[0].ints = {1, 0};
  return node.add(OpId::Transpose, {id}, attrs);
}

// Gemm: alpha * A' B' + beta * C, C broadcast to the product.
Status gemm(OnnxNode& node) {
  auto a = node.input(0), b = node.input(1);
  if (!a) return a.error();
  if (!b) return b.error();
  if (node.type(*a).rank() != 2 || node.type(*b).rank() != 2) return node.invalid("Gemm needs 2-D A and B");
  NodeId lhs = *a, rhs = *b;
  if (node.attr_int("transA", 0)) {
    auto t = transpose_2d(node, lhs);
    if (!t) return t.error();
    lhs = *t;
  }
  if (node.attr_int("transB", 0)) {
    auto t = transpose_2d(node, rhs);
    if (!t) return t.error();
    rhs = *t;
  }
  auto product = node.add(OpId::Matmul, {lhs, rhs});
  if (!product) return product.error();
  NodeId y = *product;
  TensorType t = node.type(y);
  if (double alpha = node.attr_float("alpha", 1.0); alpha != 1.0) {
    auto scaled = node.add(OpId::Mul, {y, node.splat(alpha, t)});
    if (!scaled) return scaled.error();
    y = *scaled;
  }
  if (node.has_input(2)) {
    auto c = node.input(2);
    if (!c) return c.error();
    auto widened = node.broadcast(*c, node.type(y).shape);
    if (!widened) return widened.error();
    NodeId bias = *widened;
    if (double beta = node.attr_float("beta", 1.0); beta != 1.0) {
      auto scaled = node.add(OpId::Mul, {bias, node.splat(beta, node.type(bias))});
      if (!scaled) return scaled.error();
      bias = *scaled;
    }
    auto sum = node.add(OpId::Add, {y, bias});
    if (!sum) return sum.error();
    y = *sum;
  }
  return node.set_output(0, y);
}

Status transpose(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  int64_t rank = node.type(*x).rank();
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto given = node.attr_ints("perm")) perm = *given;
  Attrs attrs;
  attrs[0].ints = Ints(perm.begin(), perm.end());
  auto y = node.add(OpId::Transpose, {*x}, attrs);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

// Reshape, Flatten, Squeeze and Unsqueeze on a known tensor stay known (shape
// arithmetic); on a traced one they are one reshape.
Status reshaped(OnnxNode& node, const Dims& shape) {
  if (const NamedTensor* known = node.find_known(0)) {
    NamedTensor out = *known;
    out.type.shape = shape;
    return node.set_known_output(0, std::move(out));
  }
  auto x = node.input(0);
  if (!x) return x.error();
  auto y = node.reshape(*x, shape);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Expected<TensorType> input_type(OnnxNode& node, size_t i) {
  if (const NamedTensor* known = node.find_known(i)) return known->type;
  auto x = node.input(i);
  if (!x) return x.error();
  return node.type(*x);
}

Status reshape(OnnxNode& node) {
  auto in = input_type(node, 0);
  if (!in) return in.error();
  auto target = node.known_input(1);
  if (!target) return target.error();
  std::vector<int64_t> dims = tensor_ints(*target);
  bool allow_zero = node.attr_int("allowzero", 0) != 0;
  Dims shape;
  int64_t known = 1, inferred = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t size = dims[d];
    if (size == 0 && !allow_zero) {
      if (d >= in->shape.size()) return node.invalid(fmt::format("shape dim {} copies a dim the input lacks", d));
      size = in->shape[d];
    }
    if (size == -1) {
      if (inferred >= 0) return node.invalid("the shape has two -1 dims");
      inferred = static_cast<int64_t>(d);
      shape.push_back(1);
      continue;
    }
    if (size < 0) return node.invalid(fmt::format("shape dim {} is {}", d, size));
    shape.push_back(size);
    if (__builtin_mul_overflow(known, size, &known)) return node.invalid("the shape's size overflows");
  }
  if (inferred >= 0) {
    if (known == 0 || in->num_elements() % known != 0)
      return node.invalid(fmt::format("cannot reshape {} to {}", to_string(*in), to_string(shape)));
    shape[static_cast<size_t>(inferred)] = in->num_elements() / known;
  }
  TensorType out{in->dtype, shape};
  if (out.num_elements() != in->num_elements())
    return node.invalid(fmt::format("cannot reshape {} to {}", to_string(*in), to_string(shape)));
  return reshaped(node, shape);
}

Status flatten(OnnxNode& node) {
  auto in = input_type(node, 0);
  if (!in) return in.error();
  int64_t rank = in->rank();
  int64_t axis = node.attr_int("axis", 1);
  if (axis < -rank || axis > rank) return node.invalid(fmt::format("axis {} is out of range", axis));
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= in->shape[static_cast<size_t>(d)];
  return reshaped(node, {outer, inner});
}

// Axes from the second input (opset 13 on) or, before, the attribute.
Expected<std::vector<int64_t>> axes_of(OnnxNode& node, size_t input) {
  if (node.has_input(input)) {
    auto axes = node.known_input(input);
    if (!axes) return axes.error();
    return tensor_ints(*axes);
  }
  return node.attr_ints("axes").value_or(std::vector<int64_t>{});
}

Status squeeze(OnnxNode& node) {
  auto in = input_type(node, 0);
  if (!in) return in.error();
  auto axes = axes_of(node, 1);
  if (!axes) return axes.error();
  std::vector<bool> drop(in->shape.size(), axes->empty());
  if (axes->empty())
    for (size_t d = 0; d < in->shape.size(); ++d) drop[d] = in->shape[d] == 1;
  for (int64_t axis : *axes) {
    auto a = node.normalize_axis(axis, in->rank());
    if (!a) return a.error();
    if (in->shape[static_cast<size_t>(*a)] != 1) return node.invalid(fmt::format("axis {} has size != 1", axis));
    drop[static_cast<size_t>(*a)] = true;
  }
  Dims shape;
  for (size_t d = 0; d < in->shape.size(); ++d)
    if (!drop[d]) shape.push_back(in->shape[d]);
  return reshaped(node, shape);
}

Status unsqueeze(OnnxNode& node) {
  auto in = input_type(node, 0);
  if (!in) return in.error();
  auto axes = axes_of(node, 1);
  if (!axes) return axes.error();
  int64_t rank = in->rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t axis : *axes) {
    auto a = node.normalize_axis(axis, rank);
    if (!a) return a.error();
    if (inserted[static_cast<size_t>(*a)]) return node.invalid(fmt::format("axis {} repeated", axis));
    inserted[static_cast<size_t>(*a)] = true;
  }
  Dims shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(inserted[static_cast<size_t>(d)] ? 1 : in->shape[next++]);
  return reshaped(node, shape);
}

Status concat(OnnxNode& node) {
  std::vector<NodeId> operands;
  for (size_t i = 0; i < node.num_inputs(); ++i) {
    auto x = node.input(i);
    if (!x) return x.error();
    operands.push_back(*x);
  }
  if (operands.empty()) return node.invalid("has no inputs");
  auto axis = node.normalize_axis(node.attr_int("axis", 0), node.type(operands[0]).rank());
  if (!axis) return axis.error();
  Attrs attrs;
  attrs[0].i = *axis;
  auto y = node.add(OpId::Concat, Operands(operands.begin(), operands.end()), attrs);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Status softmax_like(OnnxNode& node, bool log) {
  auto x = node.input(0);
  if (!x) return x.error();
  auto axis = node.normalize_axis(node.attr_int("axis", -1), node.type(*x).rank());
  if (!axis) return axis.error();
  Attrs attrs;
  attrs[0].i = *axis;
  auto y = node.add(OpId::Softmax, {*x}, attrs);
  if (!y) return y.error();
  if (log) {
    y = node.add(OpId::Log, {*y});
    if (!y) return y.error();
  }
  return node.set_output(0, *y);
}

// Reductions: axes from an input (ReduceSum from opset 13) or the attribute;
// none means all, unless noop_with_empty_axes.
Converter reduction(OpId op, bool axes_input) {
  return [op, axes_input](OnnxNode& node) -> Status {
    auto x = node.input(0);
    if (!x) return x.error();
    int64_t rank = node.type(*x).rank();
    auto axes = axes_input ? axes_of(node, 1)
                           : Expected<std::vector<int64_t>>(node.attr_ints("axes").value_or(std::vector<int64_t>{}));
    if (!axes) return axes.error();
    if (axes->empty()) {
      if (node.attr_int("noop_with_empty_axes", 0)) return node.set_output(0, *x);
      axes->resize(static_cast<size_t>(rank));
      std::iota(axes->begin(), axes->end(), 0);
    }
    Attrs attrs;
    for (int64_t axis : *axes) {
      auto a = node.normalize_axis(axis, rank);
      if (!a) return a.error();
      attrs[0].ints.push_back(*a);
    }
    std::sort(attrs[0].ints.begin(), attrs[0].ints.end());
    attrs[1].i = node.attr_int("keepdims", 1) != 0;
    auto y = node.add(op, {*x}, attrs);
    if (!y) return y.error();
    return node.set_output(0, *y);
  };
}

// Input 0 as `to`; the same value where it already is.
Status cast_to(OnnxNode& node, DType to) {
  auto x = node.input(0);
  if (!x) return x.error();
  TensorType declared{to, node.type(*x).shape};
  if (node.type(*x).dtype == to) return node.set_output(0, *x);
  auto y = node.add(OpId::Cast, {*x}, {}, &declared);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

Status cast(OnnxNode& node) {
  std::optional<DType> to = onnx_dtype(node.attr_int("to", 0));
  if (!to) return node.unsupported(fmt::format("cast to element type {} is not implemented", node.attr_int("to", 0)));
  return cast_to(node, *to);
}

// CastLike: input 0 as input 1's element type (its values unread).
Status cast_like(OnnxNode& node) {
  auto like = node.input(1);
  if (!like) return like.error();
  return cast_to(node, node.type(*like).dtype);
}

NamedTensor float_tensor(const std::vector<float>& values, Dims shape) {
  NamedTensor tensor{"", {DType::F32, std::move(shape)}, std::make_shared<Buffer>(values.size() * sizeof(float))};
  if (!values.empty()) std::memcpy(tensor.data->data(), values.data(), values.size() * sizeof(float));
  return tensor;
}

Status constant(OnnxNode& node) {
  for (const auto& a : node.proto().attribute()) {
    if (a.name() == "value") {
      auto tensor = tensor_from_proto(a.t(), "its value");
      if (!tensor) return node.unsupported(tensor.error().message);
      return node.set_known_output(0, std::move(*tensor));
    }
    if (a.name() == "value_float") return node.set_known_output(0, float_tensor({a.f()}, {}));
    if (a.name() == "value_floats")
      return node.set_known_output(
          0, float_tensor(std::vector<float>(a.floats().begin(), a.floats().end()), {a.floats_size()}));
    if (a.name() == "value_int") return node.set_known_output(0, make_int_tensor("", {a.i()}, {}));
    if (a.name() == "value_ints")
      return node.set_known_output(
          0, make_int_tensor("", std::vector<int64_t>(a.ints().begin(), a.ints().end()), {a.ints_size()}));
  }
  return node.unsupported("a Constant without value, value_float(s) or value_int(s) (sparse or strings)");
}

Status shape(OnnxNode& node) {
  auto in = input_type(node, 0);
  if (!in) return in.error();
  int64_t rank = in->rank();
  int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
  auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  start = clampi(start);
  end = clampi(end);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(in->shape[static_cast<size_t>(d)]);
  return node.set_known_output(0, make_int_tensor("", dims, {static_cast<int64_t>(dims.size())}));
}

// Slice with known starts, ends, axes and steps (positive steps).
Status slice(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  TensorType t = node.type(*x);
  auto starts = node.known_input(1), ends = node.known_input(2);
  if (!starts) return starts.error();
  if (!ends) return ends.error();
  std::vector<int64_t> begin = tensor_ints(*starts), finish = tensor_ints(*ends);
  std::vector<int64_t> axes(begin.size()), steps(begin.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  for (auto [index, target] : {std::pair{size_t{3}, &axes}, std::pair{size_t{4}, &steps}}) {
    if (!node.has_input(index)) continue;
    auto given = node.known_input(index);
    if (!given) return given.error();
    *target = tensor_ints(*given);
  }
  if (finish.size() != begin.size() || axes.size() != begin.size() || steps.size() != begin.size())
    return node.invalid("starts, ends, axes and steps differ in length");
  Attrs attrs;
  for (int64_t d : t.shape) {
    attrs[0].ints.push_back(0);
    attrs[1].ints.push_back(d);
    attrs[2].ints.push_back(1);
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    auto axis = node.normalize_axis(axes[k], t.rank());
    if (!axis) return axis.error();
    int64_t size = t.shape[static_cast<size_t>(*axis)];
    if (steps[k] <= 0) return node.unsupported("slices with a step below 1 are not implemented");
    auto bound = [&](int64_t v) { return std::clamp(v < 0 ? v + size : v, int64_t{0}, size); };
    int64_t lo = bound(begin[k]), hi = std::max(bound(finish[k]), lo);
    attrs[0].ints[static_cast<size_t>(*axis)] = lo;
    attrs[1].ints[static_cast<size_t>(*axis)] = hi;
    attrs[2].ints[static_cast<size_t>(*axis)] = steps[k];
  }
  auto y = node.add(OpId::Slice, {*x}, attrs);
  if (!y) return y.error();
  return node.set_output(0, *y);
}

}  // namespace

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = [] {
    std::map<std::string, Converter> ops = {
        {"Abs", unary(OpId::Abs)},
        {"Erf", unary(OpId::Erf)},
        {"Neg", unary(OpId::Neg)},
        {"Exp", unary(OpId::Exp)},
        {"Log", unary(OpId::Log)},
        {"Sqrt", unary(OpId::Sqrt)},
        {"Tanh", unary(OpId::Tanh)},
        {"Sigmoid", unary(OpId::Sigmoid)},
        {"Relu", unary(OpId::Relu)},
        {"Identity", identity},
        {"Reciprocal", reciprocal},
        {"LeakyRelu", leaky_relu},
        {"Clip", clip},
        {"Add", binary(OpId::Add)},
        {"Sub", binary(OpId::Sub)},
        {"Mul", binary(OpId::Mul)},
        {"Div", binary(OpId::Div)},
        {"Pow", power},
        {"Max", binary(OpId::Max)},
        {"Min", binary(OpId::Min)},
        {"Sum", binary(OpId::Add)},
        {"Equal", binary(OpId::Eq)},
        {"Less", binary(OpId::Lt)},
        {"LessOrEqual", binary(OpId::Le)},
        {"Greater", binary(OpId::Gt)},
        {"GreaterOrEqual", binary(OpId::Ge)},
        {"Where", where},
        {"MatMul", matmul},
        {"Gemm", gemm},
        {"Transpose", transpose},
        {"Reshape", reshape},
        {"Flatten", flatten},
        {"Squeeze", squeeze},
        {"Unsqueeze", unsqueeze},
        {"Concat", concat},
        {"Softmax", [](OnnxNode& node) { return softmax_like(node, false); }},
        {"LogSoftmax", [](OnnxNode& node) { return softmax_like(node, true); }},
        {"ReduceSum", reduction(OpId::ReduceSum, true)},
        {"ReduceMean", reduction(OpId::ReduceMean, false)},
        {"ReduceMax", reduction(OpId::ReduceMax, false)},
        {"ReduceMin", reduction(OpId::ReduceMin, false)},
        {"Cast", cast},
        {"CastLike", cast_like},
        {"Constant", constant},
        {"Shape", shape},
        {"Slice", slice},
    };
    add_network_converters(ops);
    return ops;
  }();
  return table;
}

}  // namespace lazylab::onnx_import_detail
