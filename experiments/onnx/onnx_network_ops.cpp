// The ONNX ops of convolutional and transformer networks (opsets 13-17):
// convolution and pooling (2-D, NCHW), batch normalization (inference,
// decomposed into per-channel arithmetic), embedding lookups, padding,
// splits, expands and the shape ops that feed them.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "onnx_node.h"

namespace lazylab::onnx_import_detail {
namespace {

Status single(OnnxNode& node, Expected<NodeId> y) {
  if (!y) return y.error();
  return node.set_output(0, *y);
}

// A [C] vector laid along dim 1 of a [N, C, ...] value.
Expected<NodeId> per_channel(OnnxNode& node, NodeId vector, const Dims& shape) {
  Dims column(shape.size() - 1, 1);
  column[0] = node.type(vector).shape.empty() ? 1 : node.type(vector).num_elements();
  auto reshaped = node.reshape(vector, column);
  if (!reshaped) return reshaped;
  return node.broadcast(*reshaped, shape);
}

// kernel_shape, strides, pads, dilations of a 2-D Conv or pool, with
// auto_pad resolved into explicit pads.
struct Window {
  std::vector<int64_t> kernel{1, 1}, strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
};

// A 1-D window (an [N, C, L] input) is the 2-D one over [N, C, 1, L]: its
// attributes gain a leading 1 (pads: a 0 before each side).
std::vector<int64_t> lifted(const std::vector<int64_t>& values, bool pads) {
  if (pads) return {0, values[0], 0, values[1]};
  return {1, values[0]};
}

Expected<Window> window_of(OnnxNode& node, const TensorType& x, std::optional<std::vector<int64_t>> kernel) {
  if (x.rank() != 4 && x.rank() != 3)
    return node.unsupported(fmt::format("only 1-D and 2-D windows are implemented, got input {}", to_string(x)));
  size_t dims = static_cast<size_t>(x.rank() - 2);
  bool one_d = dims == 1;
  Window w;
  if (!kernel || kernel->size() != dims) return node.invalid(fmt::format("kernel_shape must have {} entries", dims));
  w.kernel = one_d ? lifted(*kernel, false) : *kernel;
  for (auto [name, target, size] : {std::tuple{"strides", &w.strides, dims}, std::tuple{"pads", &w.pads, 2 * dims},
                                    std::tuple{"dilations", &w.dilations, dims}}) {
    auto given = node.attr_ints(name);
    if (!given) continue;
    if (given->size() != size) return node.invalid(fmt::format("{} must have {} entries", name, size));
    *target = one_d ? lifted(*given, target == &w.pads) : *given;
  }
  std::string auto_pad = node.attr("auto_pad") ? node.attr("auto_pad")->s() : "NOTSET";
  if (auto_pad == "VALID") w.pads = {0, 0, 0, 0};
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int d = 0; d < 2; ++d) {
      int64_t in = one_d && d == 0 ? 1 : x.shape[x.rank() - 2 + d], out = (in + w.strides[d] - 1) / w.strides[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[d] + w.dilations[d] * (w.kernel[d] - 1) + 1 - in);
      int64_t small = total / 2, large = total - small;
      w.pads[d] = auto_pad == "SAME_UPPER" ? small : large;
      w.pads[d + 2] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return node.invalid(fmt::format("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad));
  }
  return w;
}

// [N, C, L] as [N, C, 1, L] (and an [O, C, K] weight as [O, C, 1, K]).
Expected<NodeId> as_2d(OnnxNode& node, NodeId id) {
  Dims shape = node.type(id).shape;
  if (shape.size() != 3) return id;
  return node.reshape(id, {shape[0], shape[1], 1, shape[2]});
}

// The result of a lifted 1-D window back to [N, C, L'].
Status set_window_output(OnnxNode& node, Expected<NodeId> y, bool one_d) {
  if (!y || !one_d) return single(node, y);
  Dims shape = node.type(*y).shape;
  return single(node, node.reshape(*y, {shape[0], shape[1], shape[3]}));
}

Status conv(OnnxNode& node) {
  auto x = node.input(0), w = node.input(1);
  if (!x) return x.error();
  if (!w) return w.error();
  TensorType wt = node.type(*w);
  if (wt.rank() != 4 && wt.rank() != 3)
    return node.unsupported(fmt::format("only 1-D and 2-D convolutions are implemented, weight {}", to_string(wt)));
  auto kernel = node.attr_ints("kernel_shape").value_or(std::vector<int64_t>(wt.shape.begin() + 2, wt.shape.end()));
  auto window = window_of(node, node.type(*x), kernel);
  if (!window) return window.error();
  bool one_d = node.type(*x).rank() == 3;
  x = as_2d(node, *x);
  if (!x) return x.error();
  w = as_2d(node, *w);
  if (!w) return w.error();
  Attrs attrs;
  attrs[0].ints = window->strides;
  attrs[1].ints = window->pads;
  attrs[2].ints = window->dilations;
  attrs[3].i = node.attr_int("group", 1);
  auto y = node.add(OpId::Conv2d, {*x, *w}, attrs);
  if (!y || !node.has_input(2)) return set_window_output(node, y, one_d);
  auto bias = node.input(2);
  if (!bias) return bias.error();
  Dims shape = node.type(*y).shape;
  auto widened = per_channel(node, *bias, shape);
  if (!widened) return widened.error();
  return set_window_output(node, node.add(OpId::Add, {*y, *widened}), one_d);
}

// ceil_mode: the extra window at the end of a dim, unless it would start in
// the padding, is the same as padding the end further (padded positions are
// never in a max or a count_include_pad=0 mean).
Status extend_for_ceil_mode(OnnxNode& node, const TensorType& x, Window& w, bool counts_padding) {
  for (int d = 0; d < 2; ++d) {
    int64_t in = x.shape[2 + d], padded = in + w.pads[d] + w.pads[d + 2], span = w.dilations[d] * (w.kernel[d] - 1) + 1;
    if (padded < span) return node.invalid("the window does not fit the padded input");
    int64_t floor_out = (padded - span) / w.strides[d] + 1;
    int64_t ceil_out = (padded - span + w.strides[d] - 1) / w.strides[d] + 1;
    if (ceil_out > floor_out && (ceil_out - 1) * w.strides[d] >= in + w.pads[d]) --ceil_out;
    int64_t extra = (ceil_out - 1) * w.strides[d] + span - padded;
    if (extra <= 0) continue;
    if (counts_padding)
      return node.unsupported("ceil_mode with count_include_pad, where a window reaches past the padding");
    w.pads[d + 2] += extra;
  }
  return {};
}

Converter pool(OpId op) {
  return [op](OnnxNode& node) -> Status {
    if (node.proto().output_size() > 1 && !node.proto().output(1).empty())
      return node.unsupported("MaxPool's Indices output is not implemented");
    auto x = node.input(0);
    if (!x) return x.error();
    TensorType t = node.type(*x);
    auto window = window_of(node, t, node.attr_ints("kernel_shape"));
    if (!window) return window.error();
    bool counts_padding = op == OpId::AvgPool2d && node.attr_int("count_include_pad", 0) != 0;
    if (op == OpId::AvgPool2d && (window->dilations[0] != 1 || window->dilations[1] != 1))
      return node.unsupported("dilated average pooling is not implemented");
    if (node.attr_int("storage_order", 0) != 0) return node.unsupported("column-major storage_order");
    bool one_d = t.rank() == 3;
    x = as_2d(node, *x);
    if (!x) return x.error();
    t = node.type(*x);
    // MaxPool also takes int8 and uint8: pooled in f32, which holds each exactly.
    DType stored = t.dtype;
    bool widened = op == OpId::MaxPool2d && !is_float(stored) && dtype_size(stored) == 1;
    if (widened) {
      TensorType wide{DType::F32, t.shape};
      x = node.add(OpId::Cast, {*x}, {}, &wide);
      if (!x) return x.error();
    }
    if (node.attr_int("ceil_mode", 0) != 0) LAZYLAB_TRY(extend_for_ceil_mode(node, t, *window, counts_padding));
    Attrs attrs;
    attrs[0].ints = window->kernel;
    attrs[1].ints = window->strides;
    attrs[2].ints = window->pads;
    if (op == OpId::MaxPool2d)
      attrs[3].ints = window->dilations;
    else
      attrs[3].i = counts_padding;
    Expected<NodeId> y = node.add(op, {*x}, attrs);
    if (y && widened) {
      TensorType narrow{stored, node.type(*y).shape};
      y = node.add(OpId::Cast, {*y}, {}, &narrow);
    }
    return set_window_output(node, y, one_d);
  };
}

// GlobalAveragePool and GlobalMaxPool: a reduction over every spatial dim.
Converter global_pool(OpId op) {
  return [op](OnnxNode& node) -> Status {
    auto x = node.input(0);
    if (!x) return x.error();
    int64_t rank = node.type(*x).rank();
    if (rank < 3) return node.invalid("needs [N, C, spatial...]");
    Attrs attrs;
    for (int64_t d = 2; d < rank; ++d) attrs[0].ints.push_back(d);
    attrs[1].i = 1;
    return single(node, node.add(op, {*x}, attrs));
  };
}

// Inference form: y = (x - mean) * (scale / sqrt(var + epsilon)) + bias,
// each [C] vector along dim 1.
Status batch_normalization(OnnxNode& node) {
  if (node.attr_int("training_mode", 0) != 0) return node.unsupported("training_mode batch normalization");
  std::vector<NodeId> in;
  for (size_t i = 0; i < 5; ++i) {
    auto v = node.input(i);
    if (!v) return v.error();
    in.push_back(*v);
  }
  TensorType channel = node.type(in[4]);
  auto shifted = node.add(OpId::Add, {in[4], node.splat(node.attr_float("epsilon", 1e-5), channel)});
  if (!shifted) return shifted.error();
  auto root = node.add(OpId::Sqrt, {*shifted});
  if (!root) return root.error();
  auto factor = node.add(OpId::Div, {in[1], *root});
  if (!factor) return factor.error();
  Dims shape = node.type(in[0]).shape;
  if (shape.size() < 2) return node.invalid("needs [N, C, ...]");
  std::vector<NodeId> wide;
  for (NodeId vector : {in[3], *factor, in[2]}) {
    auto widened = per_channel(node, vector, shape);
    if (!widened) return widened.error();
    wide.push_back(*widened);
  }
  auto centered = node.add(OpId::Sub, {in[0], wide[0]});
  if (!centered) return centered.error();
  auto scaled = node.add(OpId::Mul, {*centered, wide[1]});
  if (!scaled) return scaled.error();
  return single(node, node.add(OpId::Add, {*scaled, wide[2]}));
}

Status gather(OnnxNode& node) {
  auto data = node.input(0), indices = node.input(1);
  if (!data) return data.error();
  if (!indices) return indices.error();
  auto axis = node.normalize_axis(node.attr_int("axis", 0), node.type(*data).rank());
  if (!axis) return axis.error();
  Attrs attrs;
  attrs[0].i = *axis;
  return single(node, node.add(OpId::Gather, {*data, *indices}, attrs));
}

// Pad, constant mode, with known non-negative pads (and axes, opset 18).
Status pad(OnnxNode& node) {
  std::string mode = node.attr("mode") ? node.attr("mode")->s() : "constant";
  if (mode != "constant") return node.unsupported(fmt::format("Pad mode '{}' (only constant)", mode));
  auto x = node.input(0);
  if (!x) return x.error();
  int64_t rank = node.type(*x).rank();
  auto pads = node.known_input(1);
  if (!pads) return pads.error();
  std::vector<int64_t> amounts = tensor_ints(*pads);
  if (static_cast<int64_t>(amounts.size()) != 2 * rank) return node.invalid("pads must have 2 entries per dim");
  Attrs attrs;
  attrs[0].ints.assign(amounts.begin(), amounts.begin() + rank);
  attrs[1].ints.assign(amounts.begin() + rank, amounts.end());
  for (int64_t amount : amounts)
    if (amount < 0) return node.unsupported("negative pads (cropping)");
  if (node.has_input(2)) {
    auto value = node.known_input(2);
    if (!value) return value.error();
    std::vector<AttrValue> values = tensor_scalars(*value, node.type(*x).dtype);
    if (values.size() != 1) return node.invalid("constant_value must be one element");
    attrs[2] = values[0];
  }
  return single(node, node.add(OpId::Pad, {*x}, attrs));
}

// Split into slices along `axis`: sizes from the `split` input, else equal.
Status split(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  TensorType t = node.type(*x);
  auto axis = node.normalize_axis(node.attr_int("axis", 0), t.rank());
  if (!axis) return axis.error();
  int64_t length = t.shape[static_cast<size_t>(*axis)], parts = node.proto().output_size();
  std::vector<int64_t> sizes;
  if (node.has_input(1)) {
    auto given = node.known_input(1);
    if (!given) return given.error();
    sizes = tensor_ints(*given);
  } else if (auto attribute = node.attr_ints("split")) {
    sizes = *attribute;
  } else {
    int64_t each = (length + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t start = 0; start < length; start += each) sizes.push_back(std::min(each, length - start));
  }
  if (static_cast<int64_t>(sizes.size()) != parts || std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != length)
    return node.invalid(fmt::format("split sizes do not cover dim {} ({}) in {} outputs", *axis, length, parts));
  int64_t start = 0;
  for (int64_t i = 0; i < parts; ++i) {
    Attrs attrs;
    for (int64_t d = 0; d < t.rank(); ++d) {
      bool along = d == *axis;
      attrs[0].ints.push_back(along ? start : 0);
      attrs[1].ints.push_back(along ? start + sizes[static_cast<size_t>(i)] : t.shape[static_cast<size_t>(d)]);
      attrs[2].ints.push_back(1);
    }
    start += sizes[static_cast<size_t>(i)];
    auto part = node.add(OpId::Slice, {*x}, attrs);
    if (!part) return part.error();
    LAZYLAB_TRY(node.set_output(static_cast<size_t>(i), *part));
  }
  return {};
}

// ConstantOfShape: a splat of the value attribute (0.0f when absent).
Status constant_of_shape(OnnxNode& node) {
  auto shape = node.known_input(0);
  if (!shape) return shape.error();
  TensorType type{DType::F32, {}};
  for (int64_t d : tensor_ints(*shape)) type.shape.push_back(d);
  AttrValue value = scalar_attr(type.dtype, 0.0);
  if (const onnx::AttributeProto* a = node.attr("value")) {
    auto tensor = tensor_from_proto(a->t(), "its value");
    if (!tensor) return node.unsupported(tensor.error().message);
    std::vector<AttrValue> values = tensor_scalars(*tensor, tensor->type.dtype);
    if (values.size() != 1) return node.invalid("value must be one element");
    type.dtype = tensor->type.dtype;
    value = values[0];
  }
  if (std::string problem = size_problem(type); !problem.empty()) return node.invalid(problem);
  return node.set_output(0, node.splat(value, type));
}

// Expand: NumPy broadcasting of the input and the given shape.
Status expand(OnnxNode& node) {
  auto x = node.input(0);
  if (!x) return x.error();
  auto shape = node.known_input(1);
  if (!shape) return shape.error();
  Dims target = node.type(*x).shape, given;
  for (int64_t d : tensor_ints(*shape)) given.push_back(d);
  if (given.size() > target.size()) target.insert(target.begin(), given.size() - target.size(), 1);
  for (size_t k = 0; k < given.size(); ++k) {
    int64_t& out = target[target.size() - given.size() + k];
    if (out == 1)
      out = given[k];
    else if (given[k] != 1 && given[k] != out)
      return node.invalid(fmt::format("cannot expand {} to {}", to_string(node.type(*x)), to_string(given)));
  }
  return single(node, node.broadcast(*x, target));
}

// Range with known operands (shape arithmetic): computed at import.
Status range(OnnxNode& node) {
  std::vector<double> bounds;
  for (size_t i = 0; i < 3; ++i) {
    auto v = node.known_input(i);
    if (!v) return v.error();
    std::vector<double> values = tensor_doubles(*v);
    if (values.size() != 1) return node.invalid(fmt::format("input {} must be a scalar", i));
    bounds.push_back(values[0]);
  }
  auto start = node.known_input(0);
  double count = bounds[2] == 0 ? -1 : std::ceil((bounds[1] - bounds[0]) / bounds[2]);
  if (!(count >= 0 && count <= (1 << 24))) return node.invalid("the range's length is out of bounds");
  if (start->type.dtype != DType::I64 && start->type.dtype != DType::I32)
    return node.unsupported("a floating-point Range");
  std::vector<int64_t> values;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    values.push_back(static_cast<int64_t>(bounds[0] + static_cast<double>(i) * bounds[2]));
  NamedTensor out = make_int_tensor("", values, {static_cast<int64_t>(values.size())});
  if (start->type.dtype == DType::I32) {
    std::vector<int32_t> narrow(values.begin(), values.end());
    out.type.dtype = DType::I32;
    out.data = std::make_shared<Buffer>(narrow.size() * sizeof(int32_t));
    if (!narrow.empty()) std::memcpy(out.data->data(), narrow.data(), narrow.size() * sizeof(int32_t));
  }
  return node.set_known_output(0, std::move(out));
}

// LayerNormalization (opset 17) over the last axis, as lazylab's layernorm.
Status layer_normalization(OnnxNode& node) {
  if (node.proto().output_size() > 1) return node.unsupported("the Mean and InvStdDev outputs");
  auto x = node.input(0), scale = node.input(1);
  if (!x) return x.error();
  if (!scale) return scale.error();
  int64_t rank = node.type(*x).rank();
  auto axis = node.normalize_axis(node.attr_int("axis", -1), rank);
  if (!axis) return axis.error();
  if (*axis != rank - 1) return node.unsupported("normalization over more than the last axis");
  Expected<NodeId> bias = node.has_input(2) ? node.input(2) : node.splat(0.0, node.type(*scale));
  if (!bias) return bias.error();
  Attrs attrs;
  attrs[0].f = node.attr_float("epsilon", 1e-5);
  return single(node, node.add(OpId::Layernorm, {*x, *scale, *bias}, attrs));
}

}  // namespace

void add_network_converters(std::map<std::string, Converter>& table) {
  table["Conv"] = conv;
  table["MaxPool"] = pool(OpId::MaxPool2d);
  table["AveragePool"] = pool(OpId::AvgPool2d);
  table["GlobalAveragePool"] = global_pool(OpId::ReduceMean);
  table["GlobalMaxPool"] = global_pool(OpId::ReduceMax);
  table["BatchNormalization"] = batch_normalization;
  table["Gather"] = gather;
  table["Pad"] = pad;
  table["Split"] = split;
  table["ConstantOfShape"] = constant_of_shape;
  table["Expand"] = expand;
  table["Range"] = range;
  table["LayerNormalization"] = layer_normalization;
}

}  // namespace lazylab::onnx_import_detail
