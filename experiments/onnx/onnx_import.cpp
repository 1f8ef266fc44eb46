#include "onnx_import.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/tensor_proto_util.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "core/source_file.h"
#include "core/tensor_ops.h"
#include "lazylab/reference/kernels.h"
#include "onnx_node.h"

namespace lazylab {

using namespace onnx_import_detail;

namespace {

std::string elem_type_name(int32_t elem_type) {
  return onnx::TensorProto_DataType_IsValid(elem_type)
             ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type))
             : fmt::format("type {}", elem_type);
}

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx") return entry.version();
  return 0;
}

// The type of a model input, its symbolic dimensions bound from `options`.
Expected<TensorType> input_type(const onnx::ValueInfoProto& input, const OnnxImportOptions& options,
                                const std::string& path, OnnxUnsupported* unsupported,
                                std::set<std::string>& symbolic_dims) {
  if (!input.type().has_tensor_type()) {
    if (unsupported) *unsupported = {"", "sequence, map and optional inputs", ""};
    return make_error(fmt::format("{}: input '{}' is not a tensor (sequences, maps and optionals are not implemented)",
                                  path, input.name()));
  }
  const auto& tensor = input.type().tensor_type();
  std::optional<DType> dtype = onnx_dtype(tensor.elem_type());
  if (!dtype) {
    if (unsupported) *unsupported = {"", "input element type " + elem_type_name(tensor.elem_type()), ""};
    return make_error(fmt::format("{}: input '{}' has element type {}, which lazylab does not implement", path,
                                  input.name(), elem_type_name(tensor.elem_type())));
  }
  TensorType type{*dtype, {}};
  if (!tensor.has_shape()) return make_error(fmt::format("{}: input '{}' has no shape", path, input.name()));
  for (int d = 0; d < tensor.shape().dim_size(); ++d) {
    const auto& dim = tensor.shape().dim(d);
    if (dim.has_dim_value()) {
      type.shape.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param()) symbolic_dims.insert(dim.dim_param());
    auto bound = dim.has_dim_param() ? options.dims.find(dim.dim_param()) : options.dims.end();
    if (bound == options.dims.end())
      return make_error(
          dim.has_dim_param()
              ? fmt::format("{}: input '{}': dimension {} is symbolic ('{}'); bind it (params: {{{}: N}})", path,
                            input.name(), d, dim.dim_param(), dim.dim_param())
              : fmt::format("{}: input '{}': dimension {} has no size", path, input.name(), d));
    type.shape.push_back(bound->second);
  }
  if (std::string problem = size_problem(type); !problem.empty())
    return make_error(fmt::format("{}: input '{}': {}", path, input.name(), problem));
  return type;
}

// libonnx's checker, conversion to an implemented opset, shape inference.
Status prepare(onnx::ModelProto& model, const std::string& path, OnnxUnsupported* unsupported) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: not a valid ONNX model: {}", path, e.what()));
  }
  int64_t opset = default_opset(model);
  if (opset == 0) {
    std::string domains;
    for (const auto& entry : model.opset_import()) domains += (domains.empty() ? "" : ", ") + entry.domain();
    if (unsupported) *unsupported = {"", "domains other than ONNX's default (" + domains + ")", ""};
    return make_error(
        fmt::format("{}: the model uses only the domains {}, which lazylab does not implement", path, domains));
  }
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset) {
    int64_t target = std::clamp(opset, kOnnxMinOpset, kOnnxMaxOpset);
    try {
      model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(target));
    } catch (const std::exception& e) {
      if (unsupported) *unsupported = {"", fmt::format("version conversion from opset {}", opset), ""};
      return make_error(
          fmt::format("{}: libonnx cannot convert the model from opset {} to {}: {}", path, opset, target, e.what()));
    }
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: shape inference failed: {}", path, e.what()));
  }
  return {};
}

// Where ONNX's shape inference gave a static type, lazylab's must agree: a
// check of every converter on every model imported.
Status check_inferred(const onnx::ModelProto& model, const ImportState& state, const std::string& path) {
  for (const auto& info : model.graph().value_info()) {
    auto found = state.values.find(info.name());
    if (found == state.values.end() || !info.type().has_tensor_type()) continue;
    const auto& tensor = info.type().tensor_type();
    if (!tensor.has_shape()) continue;
    Dims shape;
    for (const auto& dim : tensor.shape().dim()) {
      if (!dim.has_dim_value()) return {};
      shape.push_back(dim.dim_value());
    }
    const TensorType& got = state.builder.type(found->second);
    std::optional<DType> dtype = onnx_dtype(tensor.elem_type());
    if (got.shape != shape || (dtype && *dtype != got.dtype))
      return make_error(fmt::format("{}: value '{}': ONNX infers {}{}, the import gives {}", path, info.name(),
                                    elem_type_name(tensor.elem_type()), to_string(shape), to_string(got)));
  }
  return {};
}

// Shape arithmetic (Shape, then Gather, Unsqueeze, Concat, Mul ... into a
// Reshape's shape) is known at import: a node whose inputs are all known and
// small, and none of them a weight, is evaluated there by the reference
// kernels, so what reads its outputs sees them as known too.
constexpr int64_t kMaxFoldedElements = 1 << 16;

bool foldable(const onnx::NodeProto& node, const ImportState& state) {
  if (node.input_size() == 0) return false;  // Constant sets known outputs itself
  for (const std::string& input : node.input()) {
    if (input.empty()) continue;
    auto known = state.known.find(input);
    if (known == state.known.end() || state.initializers.count(input) ||
        known->second.type.num_elements() > kMaxFoldedElements)
      return false;
  }
  return true;
}

// Runs `convert` on the node in a scratch state holding its known inputs,
// then evaluates the little graph it built.
Status fold(const onnx::NodeProto& node, ImportState& state, int64_t opset, const Converter& convert) {
  ImportState scratch;
  for (const std::string& input : node.input())
    if (!input.empty()) scratch.known[input] = state.known.at(input);
  OnnxNode view(node, scratch, opset);
  LAZYLAB_TRY(convert(view));
  const Graph& graph = scratch.builder.graph();
  std::vector<NamedTensor> values(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& n = graph.node(id);
    if (n.type.num_elements() > kMaxFoldedElements) return make_error("a folded value is too large");
    if (n.op == OpId::Parameter) {
      values[id] = scratch.weights.at(static_cast<size_t>(n.attrs[0].i));
      continue;
    }
    values[id] = {"", n.type, std::make_shared<Buffer>(static_cast<size_t>(n.type.bytes()))};
    std::vector<reference::Array> operands;
    for (NodeId operand : n.operands)
      operands.push_back({static_cast<uint32_t>(values[operand].type.dtype),
                          {values[operand].type.shape.begin(), values[operand].type.shape.end()},
                          values[operand].data->data()});
    std::vector<const reference::Array*> pointers;
    for (const reference::Array& a : operands) pointers.push_back(&a);
    std::vector<reference::Attr> attrs;
    for (int a = 0; a < op_info(n.op).num_attrs; ++a) attrs.push_back({n.attrs[a].i, n.attrs[a].f, n.attrs[a].ints});
    reference::Array out{
        static_cast<uint32_t>(n.type.dtype), {n.type.shape.begin(), n.type.shape.end()}, values[id].data->data()};
    try {
      reference::evaluate(static_cast<uint32_t>(n.op), pointers, attrs, out);
    } catch (const std::exception& e) {
      return make_error(fmt::format("evaluating it at import: {}", e.what()));
    }
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    if (name.empty()) continue;
    if (auto known = scratch.known.find(name); known != scratch.known.end()) {
      state.known[name] = known->second;
    } else if (auto value = scratch.values.find(name); value != scratch.values.end()) {
      state.known[name] = values[value->second];
      state.known[name].name = name;
    }
  }
  return {};
}

Expected<OnnxModel> import_model(onnx::ModelProto& model, const std::string& path, const OnnxImportOptions& options,
                                 OnnxUnsupported* unsupported) {
  LAZYLAB_TRY(prepare(model, path, unsupported));
  int64_t opset = default_opset(model);
  const onnx::GraphProto& graph = model.graph();
  ImportState state;
  OnnxModel out;
  out.path = path;
  out.opset = opset;
  for (const auto& initializer : graph.initializer()) {
    auto tensor = tensor_from_proto(initializer, path);
    if (!tensor) return tensor.error();
    state.initializers.insert(initializer.name());
    state.known[initializer.name()] = std::move(*tensor);
  }
  for (const auto& input : graph.input()) {
    if (state.initializers.count(input.name())) continue;
    auto type = input_type(input, options, path, unsupported, out.symbolic_dims);
    if (!type) return type.error();
    if (auto fixed = options.static_inputs.find(input.name()); fixed != options.static_inputs.end()) {
      if (!(fixed->second.type == *type))
        return make_error(fmt::format("{}: static input '{}' is {}, the model declares {}", path, input.name(),
                                      to_string(fixed->second.type), to_string(*type)));
      state.known[input.name()] = fixed->second;
      continue;
    }
    state.model_inputs.insert(input.name());
    Attrs attrs;
    attrs[0].i = static_cast<int64_t>(out.inputs.size());
    auto id = state.builder.add(OpId::Parameter, {}, attrs, &*type);
    if (!id) return id.error();
    state.values[input.name()] = *id;
    out.inputs.push_back({input.name(), *type, nullptr});
  }
  state.num_inputs = out.inputs.size();
  for (int index = 0; index < graph.node_size(); ++index) {
    const onnx::NodeProto& node = graph.node(index);
    std::string shown = node.name().empty() ? fmt::format("#{}", index) : fmt::format("'{}'", node.name());
    std::string where = fmt::format("{}: node {} ({}, opset {})", path, shown, node.op_type(), opset);
    auto fail = [&](const std::string& message, bool gap) -> Error {
      if (gap && unsupported) *unsupported = {node.op_type(), message, ""};
      return make_error(where + ": " + message);
    };
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return fail(fmt::format("domain '{}' is not implemented", node.domain()), true);
    auto converter = converters().find(node.op_type());
    if (converter == converters().end()) return fail("lazylab does not implement this op", true);
    state.unsupported = false;
    if (foldable(node, state) && fold(node, state, opset, converter->second)) continue;
    OnnxNode view(node, state, opset);
    if (Status status = converter->second(view); !status) {
      Error error = fail(status.error().message, state.unsupported);
      if (unsupported && state.unsupported) unsupported->static_input_needed = state.static_input_needed;
      return error;
    }
  }
  std::vector<NodeId> roots;
  for (const auto& output : graph.output()) {
    auto id = state.node_of(output.name());
    if (!id) return make_error(fmt::format("{}: output '{}': {}", path, output.name(), id.error().message));
    roots.push_back(*id);
    out.outputs.push_back(output.name());
  }
  LAZYLAB_TRY(check_inferred(model, state, path));
  state.builder.graph().set_roots(std::move(roots));
  out.graph = std::move(state.builder.graph());
  out.weights = std::move(state.weights);
  return out;
}

}  // namespace

Expected<OnnxModel> import_onnx_bytes(const std::string& bytes, const std::string& path,
                                      const OnnxImportOptions& options, OnnxUnsupported* unsupported) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return make_error(fmt::format("{}: not an ONNX model (the protobuf does not parse; truncated?)", path));
  return import_model(model, path, options, unsupported);
}

Expected<OnnxModel> import_onnx_file(const std::string& path, const OnnxImportOptions& options,
                                     OnnxUnsupported* unsupported) {
  auto bytes = read_source_file(path, "an ONNX model");
  if (!bytes) return bytes.error();
  return import_onnx_bytes(*bytes, path, options, unsupported);
}

Expected<NamedTensor> read_onnx_tensor_file(const std::string& path, bool uint16_is_bf16) {
  auto bytes = read_source_file(path, "an ONNX tensor");
  if (!bytes) return bytes.error();
  onnx::TensorProto proto;
  if (!proto.ParseFromString(*bytes)) return make_error(fmt::format("{}: not a serialized ONNX TensorProto", path));
  if (uint16_is_bf16 && proto.data_type() == onnx::TensorProto::UINT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  return tensor_from_proto(proto, path);
}

namespace onnx_import_detail {

std::optional<DType> onnx_dtype(int64_t elem_type) {
  for (DType dtype : kAllDTypes)
    if (dtypes::row(dtype_id(dtype)).onnx_type == elem_type) return dtype;
  return std::nullopt;
}

template <class T>
static void copy_parsed(const onnx::TensorProto& proto, NamedTensor& out) {
  std::vector<T> values = onnx::ParseData<T>(&proto);
  if (values.size() * sizeof(T) != out.data->bytes())
    throw std::runtime_error(fmt::format("holds {} values for {}", values.size(), to_string(out.type)));
  if (!values.empty()) std::memcpy(out.data->data(), values.data(), out.data->bytes());
}

// ParseData has no types under four bytes: their raw bytes, or one int32 per
// element (a 16-bit float's bits; a bool's nonzero is true).
template <class T>
static void copy_narrow(const onnx::TensorProto& proto, NamedTensor& out) {
  size_t n = static_cast<size_t>(out.type.num_elements());
  T* to = reinterpret_cast<T*>(out.data->data());
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != n * sizeof(T)) throw std::runtime_error("raw data of the wrong size");
    const char* raw = proto.raw_data().data();
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        to[i] = raw[i] != 0;
      else
        std::memcpy(&to[i], raw + i * sizeof(T), sizeof(T));
    }
    return;
  }
  if (static_cast<size_t>(proto.int32_data_size()) != n) throw std::runtime_error("wrong number of values");
  for (size_t i = 0; i < n; ++i) {
    int32_t v = proto.int32_data(static_cast<int>(i));
    if constexpr (std::is_arithmetic_v<T>)
      to[i] = static_cast<T>(v);
    else
      to[i] = T::from_bits(static_cast<uint16_t>(v));
  }
}

Expected<NamedTensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& where) {
  std::optional<DType> dtype = onnx_dtype(proto.data_type());
  if (!dtype)
    return make_error(fmt::format("{}: tensor '{}' has element type {}, which lazylab does not implement", where,
                                  proto.name(), elem_type_name(proto.data_type())));
  if (proto.has_data_location() && proto.data_location() == onnx::TensorProto::EXTERNAL)
    return make_error(fmt::format("{}: tensor '{}' keeps its data in an external file, which lazylab does not read",
                                  where, proto.name()));
  NamedTensor tensor{proto.name(), {*dtype, {}}, nullptr};
  for (int64_t d : proto.dims()) tensor.type.shape.push_back(d);
  if (std::string problem = size_problem(tensor.type); !problem.empty())
    return make_error(fmt::format("{}: tensor '{}': {}", where, proto.name(), problem));
  tensor.data = std::make_shared<Buffer>(tensor.type.bytes());
  try {
    visit_dtype(*dtype, [&]<class T>(T) {
      if constexpr (sizeof(T) < 4)
        copy_narrow<T>(proto, tensor);
      else
        copy_parsed<T>(proto, tensor);
    });
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: tensor '{}' ({}): {}", where, proto.name(), to_string(tensor.type), e.what()));
  }
  return tensor;
}

namespace {

// A float that an integer cannot hold (NaN, out of range) reads as 0: such a
// tensor is no valid shape or axis list, and the op that reads it says so.
template <class T>
T from_float(double value) {
  if constexpr (std::is_integral_v<T>) {
    if (!(value >= -9.2e18 && value <= 9.2e18)) return 0;
  }
  return static_cast<T>(value);
}

template <class T>
std::vector<T> converted(const NamedTensor& tensor) {
  size_t n = static_cast<size_t>(tensor.type.num_elements());
  const std::byte* data = tensor.data->data();
  std::vector<T> out(n);
  visit_dtype(tensor.type.dtype, [&]<class S>(S) {
    const S* stored = reinterpret_cast<const S*>(data);
    for (size_t i = 0; i < n; ++i)
      if constexpr (std::is_integral_v<S>)  // a bool is 0 or 1
        out[i] = static_cast<T>(stored[i]);
      else
        out[i] = from_float<T>(static_cast<double>(stored[i]));
  });
  return out;
}

}  // namespace

std::vector<double> tensor_doubles(const NamedTensor& tensor) { return converted<double>(tensor); }
std::vector<int64_t> tensor_ints(const NamedTensor& tensor) { return converted<int64_t>(tensor); }

std::vector<AttrValue> tensor_scalars(const NamedTensor& tensor, DType dtype) {
  std::vector<AttrValue> scalars;
  if (is_float(tensor.type.dtype))
    for (double v : tensor_doubles(tensor)) scalars.push_back(scalar_attr(dtype, v));
  else
    for (int64_t v : tensor_ints(tensor)) scalars.push_back(integer_scalar_attr(dtype, v));
  return scalars;
}

NamedTensor make_int_tensor(std::string name, const std::vector<int64_t>& values, Dims shape) {
  NamedTensor tensor{std::move(name), {DType::I64, std::move(shape)}, nullptr};
  tensor.data = std::make_shared<Buffer>(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(tensor.data->data(), values.data(), values.size() * sizeof(int64_t));
  return tensor;
}

Expected<NodeId> ImportState::node_of(const std::string& name) {
  if (auto found = values.find(name); found != values.end()) return found->second;
  auto known_tensor = known.find(name);
  if (known_tensor == known.end()) return make_error(fmt::format("no value named '{}' precedes its use", name));
  const NamedTensor& tensor = known_tensor->second;
  // Equal as stored, bit for bit: [0, -0] is no splat, nor two int64s one
  // double apart.
  std::vector<AttrValue> elements = tensor_scalars(tensor, tensor.type.dtype);
  bool splat = !initializers.count(name) && !elements.empty() &&
               std::all_of(elements.begin(), elements.end(), [&](const AttrValue& v) { return v == elements[0]; });
  NodeId id;
  if (splat) {
    id = builder.constant(elements[0], tensor.type);
  } else {
    Attrs attrs;
    attrs[0].i = static_cast<int64_t>(num_inputs + weights.size());
    auto parameter = builder.add(OpId::Parameter, {}, attrs, &tensor.type);
    if (!parameter) return parameter.error();
    id = *parameter;
    weights.push_back(tensor);
  }
  values[name] = id;
  return id;
}

Expected<NodeId> OnnxNode::input(size_t i) {
  if (!has_input(i)) return invalid(fmt::format("input {} is missing", i));
  return state_.node_of(proto_.input(static_cast<int>(i)));
}

const NamedTensor* OnnxNode::find_known(size_t i) const {
  if (!has_input(i)) return nullptr;
  auto found = state_.known.find(proto_.input(static_cast<int>(i)));
  return found == state_.known.end() ? nullptr : &found->second;
}

Expected<NamedTensor> OnnxNode::known_input(size_t i) {
  if (!has_input(i)) return invalid(fmt::format("input {} is missing", i));
  if (const NamedTensor* tensor = find_known(i)) return *tensor;
  const std::string& name = proto_.input(static_cast<int>(i));
  if (state_.model_inputs.count(name)) {
    state_.static_input_needed = name;
    return unsupported(
        fmt::format("input {} is the model input '{}', which lazylab needs known at import (give it "
                    "as a static input)",
                    i, name));
  }
  return unsupported(fmt::format("input {} ('{}') is computed at run time; lazylab needs it known at import", i, name));
}

const onnx::AttributeProto* OnnxNode::attr(const std::string& name) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t OnnxNode::attr_int(const std::string& name, int64_t fallback) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? a->i() : fallback;
}

double OnnxNode::attr_float(const std::string& name, double fallback) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? a->f() : fallback;
}

std::optional<std::vector<int64_t>> OnnxNode::attr_ints(const std::string& name) const {
  const onnx::AttributeProto* a = attr(name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Status OnnxNode::set_output(size_t i, NodeId id) {
  if (static_cast<int>(i) >= proto_.output_size()) return invalid(fmt::format("has no output {}", i));
  const std::string& name = proto_.output(static_cast<int>(i));
  if (!name.empty()) state_.values[name] = id;
  return {};
}

Status OnnxNode::set_known_output(size_t i, NamedTensor tensor) {
  if (static_cast<int>(i) >= proto_.output_size()) return invalid(fmt::format("has no output {}", i));
  tensor.name = proto_.output(static_cast<int>(i));
  if (!tensor.name.empty()) state_.known[tensor.name] = std::move(tensor);
  return {};
}

Expected<NodeId> OnnxNode::add(OpId op, Operands operands, const Attrs& attrs, const TensorType* declared) {
  auto id = state_.builder.add(op, std::move(operands), attrs, declared);
  if (!id) return invalid(id.error().message);
  return id;
}

Expected<NodeId> OnnxNode::reshape(NodeId id, const Dims& shape) {
  if (type(id).shape == shape) return id;
  TensorType declared{type(id).dtype, shape};
  return add(OpId::Reshape, {id}, {}, &declared);
}

Expected<NodeId> OnnxNode::broadcast(NodeId id, const Dims& shape) {
  auto result = state_.builder.broadcast_to(id, shape);
  if (!result) return invalid(result.error().message);
  return result;
}

Expected<std::vector<NodeId>> OnnxNode::broadcast_together(std::vector<NodeId> ids) {
  Dims shape = type(ids[0]).shape;
  for (size_t k = 1; k < ids.size(); ++k) {
    auto joined = broadcast_shapes(shape, type(ids[k]).shape);
    if (!joined) return invalid(joined.error().message);
    shape = *joined;
  }
  for (NodeId& id : ids) {
    auto widened = broadcast(id, shape);
    if (!widened) return widened.error();
    id = *widened;
  }
  return ids;
}

Expected<int64_t> OnnxNode::normalize_axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= rank) return invalid(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Error OnnxNode::unsupported(const std::string& reason) {
  state_.unsupported = true;
  return make_error(reason);
}

Error OnnxNode::invalid(const std::string& reason) const { return make_error(reason); }

}  // namespace onnx_import_detail
}  // namespace lazylab
